package arch

import (
	"fmt"
	"slices"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/wtype"
)

// Validate checks that a file has every section its architecture (found in
// r) needs,
// each with the dtype, layout and shape the config implies: vectors f32;
// matrices tile-major f16, q8 or q4; the embedding f16 row-major, or in a
// quantized file quantized tile-major or (tied) absent, the lookup then
// reading the head. format.Validate has already checked that every
// section lies inside the file.
func (r Registry) Validate(h *format.Header) error {
	a, err := r.For(h.Config.ModelType)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	// A map, not h.Section: the directory can hold many thousands of
	// sections, and a linear lookup for each would be quadratic.
	byName := make(map[string]*format.Section, len(h.Sections))
	for i := range h.Sections {
		byName[h.Sections[i].Name] = &h.Sections[i]
	}
	for t := range Tensors(a, &h.Config) {
		s, ok := byName[t.Section]
		if !ok {
			if t.Section == format.SecEmbed && embeddingOptional(h) {
				continue
			}
			return fmt.Errorf("section %q: missing", t.Section)
		}
		var typeOK bool
		switch {
		case !t.Matrix():
			typeOK = s.DType == format.F32 && s.Layout == format.RowMajor
		case t.Section == format.SecEmbed:
			typeOK = (s.DType == format.F16 && s.Layout == format.RowMajor) || (s.DType.Quantized() && s.Layout == format.TileMajor)
		default:
			_, weight := s.DType.Weight()
			typeOK = s.Layout == format.TileMajor && weight
		}
		if !typeOK || !slices.Equal(s.Shape, t.Shape) {
			return fmt.Errorf("section %q: %s %s %v, the config needs %s %v", t.Section, s.DType, s.Layout, s.Shape, want(&t), t.Shape)
		}
	}
	if _, ok := byName[format.SecTokenizer]; !ok {
		return fmt.Errorf("section %q: missing", format.SecTokenizer)
	}
	return nil
}

// want describes the types a tensor may be stored in.
func want(t *Tensor) string {
	switch {
	case !t.Matrix():
		return "f32 row-major"
	case t.Section == format.SecEmbed:
		return "f16 row-major or quantized tile-major"
	}
	return wtype.Names() + " tile-major"
}

// embeddingOptional reports whether the embedding may be absent: in a
// quantized file of a tied model the lookup reads the LM head.
func embeddingOptional(h *format.Header) bool {
	head, ok := h.Section(format.SecLMHead)
	return h.Config.TieEmbeddings && ok && head.DType.Quantized()
}
