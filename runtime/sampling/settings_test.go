package sampling

import (
	"math"
	"strings"
	"testing"
)

// Every setting at the edges of its range: the bounds themselves (but an
// open one), just past them, and values that are no numbers of the kind.
func TestSettingsEdges(t *testing.T) {
	// The next value as a float32 stores it: a float64 between two float32
	// values is either.
	next := func(v, dir float64) float64 { return float64(math.Nextafter32(float32(v), float32(dir))) }
	for _, s := range Settings() {
		ok := []float64{}
		bad := []float64{math.NaN(), math.Inf(-1), 1e39}
		if s.LoOpen {
			bad = append(bad, s.Lo)
			ok = append(ok, next(s.Lo, math.Inf(1)))
		} else {
			ok = append(ok, s.Lo)
		}
		if s.Integer {
			bad = append(bad, s.Lo-1, s.Lo+0.5)
		} else {
			bad = append(bad, next(s.Lo, math.Inf(-1)))
		}
		if !math.IsInf(s.Hi, 1) {
			ok = append(ok, s.Hi)
			if s.Integer {
				bad = append(bad, s.Hi+1)
			} else {
				bad = append(bad, next(s.Hi, math.Inf(1)))
			}
		}
		for _, v := range ok {
			var p Params
			if err := s.Apply(&p, v); err != nil {
				t.Errorf("%s %v refused: %v", s.Name, v, err)
			}
			if got := s.Value(p); got != v && !(s.Name == "top_k" && v == -1 && got == 0) &&
				!(s.Name == "repeat_last_n" && v == 0) {
				t.Errorf("%s %v applied reads back as %v", s.Name, v, got)
			}
			if err := p.Check(); err != nil {
				t.Errorf("%s %v applied: Params.Check: %v", s.Name, v, err)
			}
		}
		for _, v := range bad {
			p := Params{Temperature: 0.5}
			err := s.Apply(&p, v)
			if err == nil || !strings.HasPrefix(err.Error(), s.Name+" ") {
				t.Errorf("%s %v: error %v, want one naming the setting", s.Name, v, err)
			}
			if p != (Params{Temperature: 0.5}) {
				t.Errorf("%s %v refused but applied: %+v", s.Name, v, p)
			}
		}
	}
}

func TestSettingMessages(t *testing.T) {
	for _, c := range []struct {
		name string
		v    float64
		err  string
		rule string
	}{
		{"temperature", -1, "temperature -1 is outside [0, +inf)", "must not be negative (0 is greedy)"},
		{"temperature", 1e39, "temperature 1e+39 is not a finite number", ""},
		{"top_k", -3, "top_k -3 is less than -1", "must be a whole number, -1 or more (0 and -1 are off)"},
		{"top_p", 1.5, "top_p 1.5 is outside [0, 1]", "must be in [0, 1] (1 is off, 0 keeps only the most likely token)"},
		{"repeat_penalty", 0, "repeat_penalty 0 is outside (0, +inf)", "must be above 0 (1 is off)"},
		{"presence_penalty", -2.5, "presence_penalty -2.5 is outside [-2, 2]", "must be in [-2, 2] (0 is off)"},
	} {
		s, ok := Lookup(c.name)
		if !ok {
			t.Fatalf("no setting %s", c.name)
		}
		if err := s.Check(c.v); err == nil || err.Error() != c.err {
			t.Errorf("%s %v: %v, want %q", c.name, c.v, err, c.err)
		}
		if c.rule != "" && s.Rule() != c.rule {
			t.Errorf("%s rule %q, want %q", c.name, s.Rule(), c.rule)
		}
	}
}

// top_p 0 keeps the most likely token alone (the lowest id on a tie), as
// llama.cpp's sampler does; a zero TopP in a Params literal is off.
func TestTopPZeroKeepsOne(t *testing.T) {
	s, _ := Lookup("top_p")
	l := randLogits(2000, 3)
	l[1500] = l[argmax(l)] // a tie
	want := argmax(l)
	// 1e-50 is 0 as a float32, as the range check takes it: the same
	// cut, not top-p off.
	for _, topP := range []float64{0, 1e-50} {
		for _, topK := range []int{0, 40} {
			p := Params{Temperature: 1.5, TopK: topK, Seed: 9}
			if err := s.Apply(&p, topP); err != nil {
				t.Fatal(err)
			}
			smp := New(len(l), p)
			for range 20 {
				if got := smp.Sample(append([]float32(nil), l...), nil); int(got) != want {
					t.Fatalf("top_k %d, top_p %g: sampled %d, want %d", topK, topP, got, want)
				}
			}
		}
	}
	smp, varied := New(len(l), Params{Temperature: 1.5, Seed: 9}), false
	for range 20 {
		varied = varied || int(smp.Sample(append([]float32(nil), l...), nil)) != want
	}
	if !varied {
		t.Error("a zero TopP filtered: it should be off")
	}
}

// repeat_last_n 0 turns the penalties off, whatever was set before it.
func TestRepeatLastNZeroTurnsPenaltiesOff(t *testing.T) {
	p := Params{RepeatPenalty: 1.3, PresencePenalty: 1, FrequencyPenalty: 0.5}
	s, _ := Lookup("repeat_last_n")
	if err := s.Apply(&p, 0); err != nil {
		t.Fatal(err)
	}
	if p.RepeatPenalty != 1 || p.PresencePenalty != 0 || p.FrequencyPenalty != 0 {
		t.Errorf("repeat_last_n 0: %+v", p)
	}
	names := []string{}
	for _, s := range Settings() {
		names = append(names, s.Name)
	}
	if last := names[len(names)-1]; last != "repeat_last_n" {
		t.Errorf("settings are applied in the order %v: repeat_last_n must come after the penalties", names)
	}
}

// A zero Params, greedy, passes the ranges; a hand-made one out of them
// does not.
func TestParamsCheck(t *testing.T) {
	if err := (Params{}).Check(); err != nil {
		t.Errorf("zero Params: %v", err)
	}
	if err := (Params{Temperature: 0.7, TopP: 0.95, TopK: 20, RepeatLastN: -1}).Check(); err != nil {
		t.Errorf("Qwen's defaults: %v", err)
	}
	for _, p := range []Params{{Temperature: -1}, {TopP: 1.5}, {MinP: -0.1}, {PresencePenalty: 3}, {RepeatPenalty: -1}, {TopK: -2}, {RepeatLastN: -2}, {FrequencyPenalty: -2.5}} {
		if err := p.Check(); err == nil {
			t.Errorf("%+v passed", p)
		}
	}
}

// Parse takes text as the command line and the chat's /set give it: the
// table's range, whole numbers for the integer settings, finite numbers
// as float32 holds them.
func TestSettingParse(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       float64
		err        string
	}{
		{"temperature", "0.7", 0.7, ""},
		{"temperature", "-0.1", 0, "must not be negative (0 is greedy)"},
		{"temperature", "NaN", 0, "must be a finite number"},
		{"temperature", "inf", 0, "must be a finite number"},
		{"temperature", "1e39", 0, "must be a finite number"},
		{"temperature", "warm", 0, "must be a finite number"},
		{"top_k", "40", 40, ""},
		{"top_k", "2.5", 0, "must be a whole number, -1 or more (0 and -1 are off)"},
		{"top_k", "many", 0, "must be a whole number, -1 or more (0 and -1 are off)"},
		{"top_p", "1.01", 0, "must be in [0, 1] (1 is off, 0 keeps only the most likely token)"},
		{"frequency_penalty", "-2", -2, ""},
		{"frequency_penalty", "2.01", 0, "must be in [-2, 2] (0 is off)"},
		{"repeat_last_n", "-1", -1, ""},
		{"repeat_last_n", "-2", 0, "must be a whole number, -1 or more (-1 is the whole context, 0 turns the penalties off)"},
	} {
		s, _ := Lookup(c.name)
		v, err := s.Parse(c.text)
		if c.err == "" && (err != nil || v != c.want) || c.err != "" && (err == nil || err.Error() != c.err) {
			t.Errorf("%s %q: %v, %v; want %v, error %q", c.name, c.text, v, err, c.want, c.err)
		}
	}
	// Every setting has a flag of its own.
	flags := map[string]bool{}
	for _, s := range Settings() {
		if s.Flag == "" || flags[s.Flag] {
			t.Errorf("%s: flag %q missing or taken twice", s.Name, s.Flag)
		}
		flags[s.Flag] = true
	}
}
