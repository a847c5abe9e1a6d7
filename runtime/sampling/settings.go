package sampling

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Setting is one sampling parameter as the front ends take it by name.
// The command line, the Go API and both HTTP protocols check a value
// against the same range: the widest any of those protocols documents,
// so that OpenAI's presence penalty of -2 works in a terminal chat too.
type Setting struct {
	// Name is the parameter's name in OpenAI's and Ollama's requests
	// where they agree, and the one this package's errors use.
	Name string
	// Flag is its name on the command line, llama.cpp's: --temp sets
	// temperature.
	Flag string
	// Lo and Hi bound the value; LoOpen leaves Lo itself out. Hi may be
	// +Inf; values must also be finite as float32.
	Lo, Hi  float64
	LoOpen  bool
	Integer bool
	// Note says what the special values do, for messages: "1 is off".
	Note string
	// Penalty: a penalty over the repeat_last_n window, which that
	// window's 0 turns off.
	Penalty bool
	apply   func(*Params, float64)
	value   func(Params) float64
}

// RepeatLastNFlag is the penalty window's flag, whose 0 turns the
// penalties off.
const RepeatLastNFlag = "repeat-last-n"

// topPKeepOne is what top_p 0 sets: as in llama.cpp and OpenAI, it keeps
// the most likely token alone. A zero Params.TopP is off instead, so that
// a partly filled Params literal samples as it reads.
const topPKeepOne = math.SmallestNonzeroFloat32

// Settings are the sampling parameters in the order a request's values
// are applied: repeat_last_n after the penalties, as its 0 turns them off.
func Settings() []Setting {
	return []Setting{
		{Name: "temperature", Flag: "temp", Lo: 0, Hi: math.Inf(1), Note: "0 is greedy",
			apply: func(p *Params, v float64) { p.Temperature = float32(v) },
			value: func(p Params) float64 { return float64(p.Temperature) }},
		{Name: "top_k", Flag: "top-k", Lo: -1, Hi: math.MaxInt32, Integer: true, Note: "0 and -1 are off",
			apply: func(p *Params, v float64) { p.TopK = max(int(v), 0) },
			value: func(p Params) float64 { return float64(p.TopK) }},
		{Name: "top_p", Flag: "top-p", Lo: 0, Hi: 1, Note: "1 is off, 0 keeps only the most likely token",
			apply: func(p *Params, v float64) {
				p.TopP = float32(v)
				// Whatever rounds to 0 as stored, as Check takes it: a
				// TopP of 0 would turn top-p off instead.
				if p.TopP == 0 {
					p.TopP = topPKeepOne
				}
			},
			value: func(p Params) float64 {
				if p.TopP == topPKeepOne {
					return 0
				}
				return float64(p.TopP)
			}},
		{Name: "min_p", Flag: "min-p", Lo: 0, Hi: 1, Note: "0 is off",
			apply: func(p *Params, v float64) { p.MinP = float32(v) },
			value: func(p Params) float64 { return float64(p.MinP) }},
		{Name: "repeat_penalty", Flag: "repeat-penalty", Lo: 0, LoOpen: true, Hi: math.Inf(1), Note: "1 is off", Penalty: true,
			apply: func(p *Params, v float64) { p.RepeatPenalty = float32(v) },
			value: func(p Params) float64 {
				if p.RepeatPenalty == 0 { // a Params' zero is off
					return 1
				}
				return float64(p.RepeatPenalty)
			}},
		{Name: "presence_penalty", Flag: "presence-penalty", Lo: -2, Hi: 2, Note: "0 is off", Penalty: true,
			apply: func(p *Params, v float64) { p.PresencePenalty = float32(v) },
			value: func(p Params) float64 { return float64(p.PresencePenalty) }},
		{Name: "frequency_penalty", Flag: "frequency-penalty", Lo: -2, Hi: 2, Note: "0 is off", Penalty: true,
			apply: func(p *Params, v float64) { p.FrequencyPenalty = float32(v) },
			value: func(p Params) float64 { return float64(p.FrequencyPenalty) }},
		// Ollama's semantics: 0 turns the penalties off, -1 is the whole
		// context. A Params' own 0 is the default window instead.
		{Name: "repeat_last_n", Flag: RepeatLastNFlag, Lo: -1, Hi: math.MaxInt32, Integer: true, Note: "-1 is the whole context, 0 turns the penalties off",
			apply: func(p *Params, v float64) {
				p.RepeatLastN = int(v)
				if v == 0 {
					p.RepeatLastN, p.RepeatPenalty, p.PresencePenalty, p.FrequencyPenalty = 0, 1, 0, 0
				}
			},
			value: func(p Params) float64 {
				if p.RepeatLastN == 0 {
					return DefaultRepeatLastN
				}
				return float64(p.RepeatLastN)
			}},
	}
}

// Lookup returns the setting named name.
func Lookup(name string) (Setting, bool) {
	for _, s := range Settings() {
		if s.Name == name {
			return s, true
		}
	}
	return Setting{}, false
}

// RangeError is a value outside its setting's range.
type RangeError struct {
	Setting Setting
	Value   float64
}

func (e *RangeError) Error() string {
	s := e.Setting
	if s.Integer && e.Value < s.Lo && e.Value == math.Trunc(e.Value) {
		return fmt.Sprintf("%s %v is less than %v", s.Name, e.Value, s.Lo)
	}
	if !finite32(e.Value) {
		return fmt.Sprintf("%s %v is not a finite number", s.Name, e.Value)
	}
	return fmt.Sprintf("%s %v is outside %s", s.Name, e.Value, s.Range())
}

// Check reports whether v is in the setting's range, as a *RangeError.
func (s Setting) Check(v float64) error {
	// Compared as stored: a value that rounds to the float32 0 is 0.
	x := float64(float32(v))
	if s.Integer {
		x = v
	}
	ok := finite32(v) && x <= s.Hi && (x > s.Lo || x == s.Lo && !s.LoOpen)
	if s.Integer {
		ok = ok && v == math.Trunc(v)
	}
	if !ok {
		return &RangeError{Setting: s, Value: v}
	}
	return nil
}

// Apply checks v and sets it in p.
func (s Setting) Apply(p *Params, v float64) error {
	if err := s.Check(v); err != nil {
		return err
	}
	s.apply(p, v)
	return nil
}

// Parse reads a value given as text, a flag's or a chat command's, and
// checks it. The error says what the setting takes, for a message that
// names the setting as its caller does.
func (s Setting) Parse(text string) (float64, error) {
	v, err := strconv.ParseFloat(text, 64)
	switch {
	case s.Integer && (err != nil || v != math.Trunc(v)):
		return 0, errors.New(s.Rule())
	case err != nil || !finite32(v):
		return 0, errors.New("must be a finite number")
	case s.Check(v) != nil:
		return 0, errors.New(s.Rule())
	}
	return v, nil
}

// Value is the setting's value in p, as Apply would have been given it.
func (s Setting) Value(p Params) float64 { return s.value(p) }

// Range is the range in interval notation: "[0, 1]", "(0, +inf)".
func (s Setting) Range() string {
	open := "["
	if s.LoOpen {
		open = "("
	}
	hi := strconv.FormatFloat(s.Hi, 'g', -1, 64) + "]"
	if math.IsInf(s.Hi, 1) || s.Hi == math.MaxInt32 {
		hi = "+inf)"
	}
	return open + strconv.FormatFloat(s.Lo, 'g', -1, 64) + ", " + hi
}

// Rule says what the setting takes, for a message after its name and
// value: "must be in [0, 1] (0 is off)".
func (s Setting) Rule() string {
	lo := strconv.FormatFloat(s.Lo, 'g', -1, 64)
	var r string
	switch {
	case s.Integer:
		r = "must be a whole number, " + lo + " or more"
	case !math.IsInf(s.Hi, 1):
		r = "must be in " + s.Range()
	case s.Lo == 0 && s.LoOpen:
		r = "must be above 0"
	case s.Lo == 0:
		r = "must not be negative"
	default:
		r = "must be in " + s.Range()
	}
	return r + " (" + s.Note + ")"
}

// Check checks every setting of p against its range: what a Go program
// builds by hand is held to the ranges the protocols are. The zeros that
// mean off or the default in a Params (TopP, RepeatPenalty, RepeatLastN)
// pass.
func (p Params) Check() error {
	for _, s := range Settings() {
		if err := s.Check(s.Value(p)); err != nil {
			return err
		}
	}
	return nil
}

// finite32 reports whether v is finite as a float32.
func finite32(v float64) bool { return !math.IsNaN(v) && math.Abs(v) <= math.MaxFloat32 }
