package sampling

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// seedFlag is the seed's name on the command line. The seed is no
// Setting: it has no range to hold it to, and a request without one
// draws it at random.
const seedFlag = "seed"

// Flags are the names the command line gives the parameters: each
// Setting's Flag, in the table's order (the order SetFlag should apply
// them in), and "seed" last. qwenrun's flags and its chat's /set take
// the same names and values.
func Flags() []string {
	var names []string
	for _, s := range Settings() {
		names = append(names, s.Flag)
	}
	return append(names, seedFlag)
}

// FlagName is the flag a parameter's name means: the flag's own name, or
// the name OpenAI and Ollama give the setting (top_k, temperature), in
// any case and with "_" or "-" between words.
func FlagName(name string) (string, bool) {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "_", "-") }
	name = norm(name)
	if name == seedFlag {
		return seedFlag, true
	}
	for _, s := range Settings() {
		if name == s.Flag || name == norm(s.Name) {
			return s.Flag, true
		}
	}
	return "", false
}

// IsPenalty reports whether flag is one of the penalties that
// repeat-last-n 0 turns off.
func IsPenalty(flag string) bool {
	s, ok := setting(flag)
	return ok && s.Penalty
}

// setting is the Setting of a flag other than the seed.
func setting(flag string) (Setting, bool) {
	for _, s := range Settings() {
		if s.Flag == flag {
			return s, true
		}
	}
	return Setting{}, false
}

// SetFlag reads text as the value of the flag named flag (one of Flags)
// and sets it in p; a value its setting refuses leaves p as it was. The
// error says what the setting takes ("must be in [0, 1] (0 is off)"),
// for a message that names the flag and the value as its caller wrote
// them.
func (p *Params) SetFlag(flag, text string) error {
	if flag == seedFlag {
		seed, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			return errors.New("must be a whole number from 0 to 2^64-1")
		}
		p.Seed = seed
		return nil
	}
	s, ok := setting(flag)
	if !ok {
		return fmt.Errorf("no setting %q", flag)
	}
	v, err := s.Parse(text)
	if err != nil {
		return err
	}
	return s.Apply(p, v)
}

// Flag is p's value of the flag named flag, as SetFlag takes it; "" for
// a name that is none of Flags.
func (p Params) Flag(flag string) string {
	if flag == seedFlag {
		return strconv.FormatUint(p.Seed, 10)
	}
	s, ok := setting(flag)
	if !ok {
		return ""
	}
	return strconv.FormatFloat(s.Value(p), 'g', -1, 32)
}

// Describe is p in the command line's words, every flag with its value:
// "temp 0.6, top-k 20, ..., seed 7".
func (p Params) Describe() string {
	var parts []string
	for _, f := range Flags() {
		parts = append(parts, f+" "+p.Flag(f))
	}
	return strings.Join(parts, ", ")
}
