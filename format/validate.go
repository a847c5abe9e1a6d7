package format

import "fmt"

// Validate checks a decoded header against the file's real size: every
// section aligned, inside the file, sized as its dtype, layout and shape
// imply, not overlapping another; the arena plans in bounds. After
// Validate succeeds, every byte range the directory names can be read
// safely. Which sections the model needs is the architecture's business
// (package arch).
func Validate(h *Header, headerSize int, fileSize uint64) error {
	if err := h.Config.Validate(); err != nil {
		return err
	}
	if err := checkRanges(h, otherKeys); err != nil {
		return err
	}
	c := &h.Config
	for _, id := range h.Generation.EOS {
		if id < 0 || int(id) >= c.Vocab {
			return fmt.Errorf("generation: eos id %d outside the vocabulary [0, %d)", id, c.Vocab)
		}
	}
	for _, id := range c.Append {
		switch {
		case !c.Embedding:
			return fmt.Errorf("config.append: %v, but only an embedding model's inputs take appended tokens", c.Append)
		case id < 0 || int(id) >= c.Vocab:
			return fmt.Errorf("config.append: id %d outside the vocabulary [0, %d)", id, c.Vocab)
		}
	}
	if err := validateSections(h.Sections, DataStart(headerSize), fileSize); err != nil {
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
		// A kind this build does not know is a newer writer's, for a
		// section no architecture here reads (one that needs it is refused
		// for its feature first); only its size is checked.
		if s.Kind.Known() && !s.Kind.Admits(s.DType, s.Layout, len(s.Shape)) {
			return fmt.Errorf("section %q: a %s section of %s %s %v; a %s is %s of rank %d", s.Name, s.Kind, s.DType, s.Layout, s.Shape, s.Kind, s.Kind.Want(), s.Kind.Rank())
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
		var end uint64
		for _, t := range p.Tensors {
			if t.Offset%ArenaAlign != 0 || t.Offset > p.Size || t.Size > p.Size-t.Offset {
				return fmt.Errorf("arena plan %q: tensor %q at [%d, +%d) outside the %d-byte arena or misaligned", p.Mode, t.Name, t.Offset, t.Size, p.Size)
			}
			end += AlignUp(t.Size, ArenaAlign)
		}
		// The runtime allocates the size the plan gives, and no placement
		// needs more than the tensors side by side.
		if p.Size > end {
			return fmt.Errorf("arena plan %q: size %d, more than the %d bytes its tensors take laid end to end", p.Mode, p.Size, end)
		}
	}
	return nil
}
