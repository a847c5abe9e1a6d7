package sampling

import (
	"slices"
	"testing"
)

// The flags are the table's, in its order, and the seed; a parameter's
// name as a flag or as the protocols write it finds its flag.
func TestFlagNames(t *testing.T) {
	want := []string{"temp", "top-k", "top-p", "min-p", "repeat-penalty", "presence-penalty", "frequency-penalty", "repeat-last-n", "seed"}
	if got := Flags(); !slices.Equal(got, want) {
		t.Errorf("Flags: %q, want %q", got, want)
	}
	for name, want := range map[string]string{
		"temp": "temp", "temperature": "temp", "Temperature": "temp", "top_k": "top-k", "TOP-K": "top-k",
		"repeat_last_n": "repeat-last-n", "frequency_penalty": "frequency-penalty", "SEED": "seed",
	} {
		if got, ok := FlagName(name); !ok || got != want {
			t.Errorf("FlagName(%q): %q, %v; want %q", name, got, ok, want)
		}
	}
	for _, name := range []string{"colour", "repetition_penalty", "temp_erature", ""} {
		if got, ok := FlagName(name); ok {
			t.Errorf("FlagName(%q): %q, want none", name, got)
		}
	}
}

// SetFlag takes a value as the command line gives it, holds it to the
// table's range, and changes only its parameter; Flag reads it back.
func TestSetFlag(t *testing.T) {
	base := Params{Temperature: 0.6, TopK: 20, TopP: 0.95, RepeatPenalty: 1, Seed: 7}
	for _, tc := range []struct {
		flag, text string
		want       func(p *Params)
	}{
		{"temp", "0.7", func(p *Params) { p.Temperature = 0.7 }},
		{"top-k", "-1", func(p *Params) { p.TopK = 0 }},
		{"top-p", "0", func(p *Params) { p.TopP = topPKeepOne }},
		{"repeat-last-n", "0", func(p *Params) { p.RepeatLastN, p.RepeatPenalty = 0, 1 }},
		{"seed", "18446744073709551615", func(p *Params) { p.Seed = 1<<64 - 1 }},
	} {
		got, want := base, base
		if err := got.SetFlag(tc.flag, tc.text); err != nil {
			t.Errorf("%s %s: %v", tc.flag, tc.text, err)
			continue
		}
		tc.want(&want)
		if got != want {
			t.Errorf("%s %s: %+v, want %+v", tc.flag, tc.text, got, want)
		}
	}
	for _, tc := range []struct{ flag, text, err string }{
		{"temp", "-0.1", "must not be negative (0 is greedy)"},
		{"temp", "warm", "must be a finite number"},
		{"top-k", "2.5", "must be a whole number, -1 or more (0 and -1 are off)"},
		{"seed", "-1", "must be a whole number from 0 to 2^64-1"},
		{"temperature", "1", `no setting "temperature"`}, // a flag's name, not an alias
	} {
		p := base
		if err := p.SetFlag(tc.flag, tc.text); err == nil || err.Error() != tc.err || p != base {
			t.Errorf("%s %s: %v, %+v; want the error %q and no change", tc.flag, tc.text, err, p, tc.err)
		}
	}
	// What Flag reads, SetFlag takes back (a zero RepeatLastN, the
	// default window, becomes that window's 64).
	p := base
	for _, f := range Flags() {
		v := p.Flag(f)
		if err := p.SetFlag(f, v); err != nil || p.Flag(f) != v {
			t.Errorf("%s %s read back: %v, %s", f, v, err, p.Flag(f))
		}
	}
	if got, want := base.Describe(), "temp 0.6, top-k 20, top-p 0.95, min-p 0, repeat-penalty 1, presence-penalty 0, frequency-penalty 0, repeat-last-n 64, seed 7"; got != want {
		t.Errorf("Describe: %q, want %q", got, want)
	}
	if p.Flag("colour") != "" {
		t.Errorf("Flag of no flag: %q", p.Flag("colour"))
	}
}
