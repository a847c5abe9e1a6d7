package arch

import (
	"fmt"
	"slices"
	"strings"

	"github.com/qwenc/qwenc/format"
)

// Blobs are the byte sections a file may carry beside the architecture's
// tensors, in file order; the tokenizer is required and always last.
var Blobs = []string{format.SecChatTemplate, format.SecTokenizer}

// Validate checks that a file has every section its architecture (found in
// r) needs, each of the kind, role and shape the architecture lists and
// with a dtype and layout its kind admits (format.Kind.Admits): the
// embedding may be absent in a quantized file of a tied model, the lookup
// then reading the head. format.Validate has already checked that every
// section lies inside the file.
//
// A file of format version 1 to 4 does not store kinds and roles:
// Validate first sets them from the architecture's tensor list (and
// Blobs), so that past it every header looks the same whatever the
// version of its file.
func (r Registry) Validate(h *format.Header) error {
	a, err := r.For(h.Config.ModelType)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := checkFeatures(a, &h.Config); err != nil {
		return err
	}
	// A map, not h.Section: the directory can hold many thousands of
	// sections, and a linear lookup for each would be quadratic.
	byName := make(map[string]*format.Section, len(h.Sections))
	for i := range h.Sections {
		byName[h.Sections[i].Name] = &h.Sections[i]
	}
	if err := setLegacyKinds(h, a, byName); err != nil {
		return err
	}
	for t := range Tensors(a, &h.Config) {
		s, ok := byName[t.Section]
		if !ok {
			if t.Section == format.SecEmbed && embeddingOptional(h) {
				continue
			}
			return fmt.Errorf("section %q: missing", t.Section)
		}
		if s.Kind != t.Kind || s.Role != t.Role {
			return fmt.Errorf("section %q: kind %s, role %q; the architecture has %s, %q", t.Section, s.Kind, s.Role, t.Kind, t.Role)
		}
		if !t.Kind.Admits(s.DType, s.Layout, len(s.Shape)) || !slices.Equal(s.Shape, t.Shape) {
			return fmt.Errorf("section %q: %s %s %v, the config needs %s %v", t.Section, s.DType, s.Layout, s.Shape, t.Kind.Want(), t.Shape)
		}
	}
	for _, name := range Blobs {
		s, ok := byName[name]
		switch {
		case !ok && name == format.SecTokenizer:
			return fmt.Errorf("section %q: missing", name)
		case ok && (s.Kind != format.KindBytes || !s.Kind.Admits(s.DType, s.Layout, len(s.Shape))):
			return fmt.Errorf("section %q: kind %s, %s %s; want bytes", name, s.Kind, s.DType, s.Layout)
		}
	}
	return nil
}

// checkFeatures refuses a config that needs a feature a's units do not
// run, naming the key that asks for it: a qwen3 file with
// config.attn_output_gate would otherwise fail on its arena plans, and
// one with hybrid.linear_layers run as if the key were absent.
func checkFeatures(a Arch, c *format.Config) error {
	runs := a.Features()
	has := format.Features(c)
	for _, f := range has {
		if !slices.Contains(runs, f.Name) {
			return fmt.Errorf("config: key %q is set, but a %s model has no %s (it runs %s)", format.FeatureKey(f.Name), c.ModelType, f.Name, strings.Join(runs, ", "))
		}
	}
	if r, ok := a.(requirer); ok {
		for _, name := range r.Requires() {
			if !slices.ContainsFunc(has, func(f format.Feature) bool { return f.Name == name }) {
				return fmt.Errorf("config: key %q is not set, but a %s model always has %s (without it, it would run without that part)", format.FeatureKey(name), c.ModelType, name)
			}
		}
	}
	return nil
}

// requirer is an architecture with features every model of it has
// (Qwen3.5's output gate and q/k norms): a file without one is damaged,
// and would run without that part, computing another model's outputs.
type requirer interface {
	Requires() []string
}

// setLegacyKinds gives the sections of a header read from a version 1 to
// 4 file (none of which has a kind; a version 5 file has one for every
// section) the kind and role of the tensor or blob of that name. A
// section that is neither is refused: nothing says what it holds.
func setLegacyKinds(h *format.Header, a Arch, byName map[string]*format.Section) error {
	if len(h.Sections) == 0 || h.Sections[0].Kind != format.KindNone {
		return nil
	}
	for t := range Tensors(a, &h.Config) {
		s, ok := byName[t.Section]
		if !ok && !(t.Section == format.SecEmbed && embeddingOptional(h)) {
			// Validate reports it missing (and a num_hidden_layers far
			// beyond the file's layers is not walked to its end).
			return nil
		}
		if ok {
			s.Kind, s.Role = t.Kind, t.Role
		}
	}
	for _, name := range Blobs {
		if s, ok := byName[name]; ok {
			s.Kind, s.Role = format.KindBytes, name
		}
	}
	for _, s := range h.Sections {
		if s.Kind == format.KindNone {
			return fmt.Errorf("section %q: not a section of a %s model", s.Name, h.Config.ModelType)
		}
	}
	return nil
}

// embeddingOptional reports whether the embedding may be absent: in a
// quantized file of a tied model the lookup reads the LM head.
func embeddingOptional(h *format.Header) bool {
	head, ok := h.Section(format.SecLMHead)
	return h.Config.TieEmbeddings && ok && head.DType.Quantized()
}
