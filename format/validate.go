package format

import (
	"fmt"
	"iter"
	"slices"
)

// Validate checks a decoded header against the file's real size: every
// section aligned, inside the file, sized as its dtype, layout and shape
// imply, not overlapping another; the sections the config requires present
// with their shapes; the arena plans in bounds. After Validate succeeds,
// every byte range the directory names can be read safely.
func Validate(h *Header, headerSize int, fileSize uint64) error {
	if err := h.Config.Validate(); err != nil {
		return err
	}
	c := &h.Config
	for _, id := range h.Generation.EOS {
		if id < 0 || int(id) >= c.Vocab {
			return fmt.Errorf("generation: eos id %d outside the vocabulary [0, %d)", id, c.Vocab)
		}
	}
	if err := validateSections(h.Sections, DataStart(headerSize), fileSize); err != nil {
		return err
	}
	if err := validateRequired(h); err != nil {
		return err
	}
	return validatePlans(h.Plans)
}

func validateSections(secs []Section, dataStart, fileSize uint64) error {
	seen := make(map[string]bool, len(secs))
	end := dataStart
	for i := range secs {
		s := &secs[i]
		if seen[s.Name] {
			return fmt.Errorf("section %q: listed twice", s.Name)
		}
		seen[s.Name] = true
		if !s.DType.Known() {
			return fmt.Errorf("section %q: dtype %d is unknown to this build (was the file written by a newer qwenc?)", s.Name, uint8(s.DType))
		}
		want, ok := ExpectedSize(s.DType, s.Layout, s.Shape)
		if !ok {
			return fmt.Errorf("section %q: %s %s with shape %v is not a valid combination", s.Name, s.DType, s.Layout, s.Shape)
		}
		if s.Size != want {
			return fmt.Errorf("section %q: size %d, but %s %s %v needs %d", s.Name, s.Size, s.DType, s.Layout, s.Shape, want)
		}
		if s.Offset%Alignment != 0 {
			return fmt.Errorf("section %q: offset %d is not %d-aligned", s.Name, s.Offset, Alignment)
		}
		if s.Offset < end {
			return fmt.Errorf("section %q: offset %d overlaps the header or the previous section (which ends at %d)", s.Name, s.Offset, end)
		}
		if s.Offset > fileSize || s.Size > fileSize-s.Offset {
			return fmt.Errorf("section %q: bytes [%d, %d) run past the end of the file (%d bytes)", s.Name, s.Offset, s.Offset+s.Size, fileSize)
		}
		end = s.Offset + s.Size
	}
	return nil
}

// RequiredSections lists what the config needs: name, dtype, layout,
// shape. A matrix is listed as f16; a file may store it quantized instead
// (MatrixTypeOK), and a quantized file of a tied model has no
// embed_tokens (EmbeddingOptional).
func RequiredSections(c *Config) []Section {
	return slices.Collect(requiredSections(c))
}

// MatrixTypeOK reports whether a section of dtype d and layout l may hold a
// matrix the config lists as f16 tile-major: f16, q8 or q4, tile-major.
func MatrixTypeOK(d DType, l Layout) bool {
	return l == TileMajor && (d == F16 || d.Quantized())
}

// EmbeddingOptional reports whether the embedding may be absent: in a
// quantized file of a tied model the lookup reads the LM head.
func EmbeddingOptional(h *Header) bool {
	head, ok := h.Section(SecLMHead)
	return h.Config.TieEmbeddings && ok && head.DType.Quantized()
}

// requiredSections yields the sections the config needs, in file order.
// Validate walks it instead of building the list: num_hidden_layers comes
// from the file, and a hostile value (up to 2^24) would otherwise build
// hundreds of millions of entries, minutes and gigabytes, before the first
// missing section is noticed.
func requiredSections(c *Config) iter.Seq[Section] {
	return func(yield func(Section) bool) {
		h, v := uint64(c.Hidden), uint64(c.Vocab)
		if !yield(Section{Name: SecEmbed, DType: F16, Layout: RowMajor, Shape: []uint64{v, h}}) {
			return
		}
		specs := LayerSections(c)
		for l := 0; l < c.Layers; l++ {
			for _, s := range specs {
				if !yield(Section{Name: LayerSection(l, s.What), DType: s.DType, Layout: s.Layout, Shape: s.Shape}) {
					return
				}
			}
		}
		for _, s := range []Section{
			{Name: SecNorm, DType: F32, Layout: RowMajor, Shape: []uint64{h}},
			{Name: SecLMHead, DType: F16, Layout: TileMajor, Shape: []uint64{v, h}},
			{Name: SecTokenizer, DType: Bytes, Layout: Raw},
		} {
			if !yield(s) {
				return
			}
		}
	}
}

func validateRequired(h *Header) error {
	// A map, not h.Section: the directory can hold many thousands of
	// sections, and a linear lookup for each would be quadratic.
	byName := make(map[string]*Section, len(h.Sections))
	for i := range h.Sections {
		byName[h.Sections[i].Name] = &h.Sections[i]
	}
	for r := range requiredSections(&h.Config) {
		s, ok := byName[r.Name]
		if !ok {
			if r.Name == SecEmbed && EmbeddingOptional(h) {
				continue
			}
			return fmt.Errorf("section %q: missing", r.Name)
		}
		typeOK := s.DType == r.DType && s.Layout == r.Layout
		switch {
		case r.Layout == TileMajor && r.DType == F16:
			typeOK = MatrixTypeOK(s.DType, s.Layout)
		case r.Name == SecEmbed:
			// f16 row-major, or (a quantized file's) quantized tile-major.
			typeOK = typeOK || (s.DType.Quantized() && s.Layout == TileMajor)
		}
		if !typeOK || (r.Shape != nil && !slices.Equal(s.Shape, r.Shape)) {
			return fmt.Errorf("section %q: %s %s %v, the config needs %s %s %v", r.Name, s.DType, s.Layout, s.Shape, r.DType, r.Layout, r.Shape)
		}
	}
	return nil
}

func validatePlans(plans []ArenaPlan) error {
	for _, mode := range []string{"decode", "prefill"} {
		n := 0
		for _, p := range plans {
			if p.Mode == mode {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("arena plan %q: found %d, want exactly one", mode, n)
		}
	}
	for _, p := range plans {
		if p.Tokens < 1 || p.Tokens > 1<<20 {
			return fmt.Errorf("arena plan %q: %d tokens per step", p.Mode, p.Tokens)
		}
		if p.Size%ArenaAlign != 0 || p.Size > 1<<40 {
			return fmt.Errorf("arena plan %q: size %d", p.Mode, p.Size)
		}
		for _, t := range p.Tensors {
			if t.Offset%ArenaAlign != 0 || t.Offset > p.Size || t.Size > p.Size-t.Offset {
				return fmt.Errorf("arena plan %q: tensor %q at [%d, +%d) outside the %d-byte arena or misaligned", p.Mode, t.Name, t.Offset, t.Size, p.Size)
			}
		}
	}
	return nil
}
