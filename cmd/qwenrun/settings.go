package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/qwenc/qwenc/sampling"
)

// samplingOption is a sampling setting, named as the flag that sets it:
// the flags (checkFlags) and the chat's /set take the same values.
type samplingOption struct {
	name string
	// parse checks a value and returns the change it makes.
	parse func(v string) (func(*sampling.Params), error)
	get   func(sampling.Params) string
}

func samplingOptions() []samplingOption {
	return []samplingOption{
		floatOption("temp", func(p *sampling.Params) *float32 { return &p.Temperature },
			func(v float64) bool { return v >= 0 }, "must not be negative (0 is greedy)"),
		{name: "top-k", parse: func(v string) (func(*sampling.Params), error) {
			k, err := strconv.Atoi(v)
			if err != nil || k < 0 {
				return nil, errors.New("must be a whole number, 0 or more (0 is off)")
			}
			return func(p *sampling.Params) { p.TopK = k }, nil
		}, get: func(p sampling.Params) string { return strconv.Itoa(p.TopK) }},
		floatOption("top-p", func(p *sampling.Params) *float32 { return &p.TopP },
			func(v float64) bool { return v > 0 && v <= 1 }, "must be in (0, 1] (1 is off)"),
		floatOption("min-p", func(p *sampling.Params) *float32 { return &p.MinP },
			func(v float64) bool { return v >= 0 && v <= 1 }, "must be in [0, 1] (0 is off)"),
		floatOption("repeat-penalty", func(p *sampling.Params) *float32 { return &p.RepeatPenalty },
			func(v float64) bool { return v > 0 }, "must be above 0 (1 is off)"),
		floatOption("presence-penalty", func(p *sampling.Params) *float32 { return &p.PresencePenalty },
			func(v float64) bool { return v >= 0 }, "must not be negative (0 is off)"),
		{name: "seed", parse: func(v string) (func(*sampling.Params), error) {
			seed, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return nil, errors.New("must be a whole number from 0 to 2^64-1")
			}
			return func(p *sampling.Params) { p.Seed = seed }, nil
		}, get: func(p sampling.Params) string { return strconv.FormatUint(p.Seed, 10) }},
	}
}

// floatOption is a setting held as a float32: values that are not finite
// as a float32 are refused with the rest that ok refuses.
func floatOption(name string, field func(*sampling.Params) *float32, ok func(float64) bool, rule string) samplingOption {
	return samplingOption{
		name: name,
		parse: func(v string) (func(*sampling.Params), error) {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(f) || math.Abs(f) > math.MaxFloat32 {
				return nil, errors.New("must be a finite number")
			}
			if !ok(f) {
				return nil, errors.New(rule)
			}
			return func(p *sampling.Params) { *field(p) = float32(f) }, nil
		},
		get: func(p sampling.Params) string { return strconv.FormatFloat(float64(*field(&p)), 'g', -1, 32) },
	}
}

// parseSetting parses /set's "NAME VALUE". Names may also be written as
// ollama writes them (top_k, temperature).
func parseSetting(arg string) (samplingOption, func(*sampling.Params), error) {
	opts := samplingOptions()
	fields := strings.Fields(arg)
	if len(fields) != 2 {
		names := make([]string, len(opts))
		for i, o := range opts {
			names[i] = o.name
		}
		return samplingOption{}, nil, fmt.Errorf("usage: /set NAME VALUE, where NAME is %s", strings.Join(names, ", "))
	}
	name := strings.ReplaceAll(strings.ToLower(fields[0]), "_", "-")
	if name == "temperature" {
		name = "temp"
	}
	for _, o := range opts {
		if o.name == name {
			change, err := o.parse(fields[1])
			if err != nil {
				return o, nil, fmt.Errorf("/set %s %s: %s %v", fields[0], fields[1], name, err)
			}
			return o, change, nil
		}
	}
	return samplingOption{}, nil, fmt.Errorf("/set: no setting %q; /? lists them", fields[0])
}

// describeSampling is the settings in /set's words: "temp 0.6, top-k 20, ...".
func describeSampling(p sampling.Params) string {
	var parts []string
	for _, o := range samplingOptions() {
		parts = append(parts, o.name+" "+o.get(p))
	}
	return strings.Join(parts, ", ")
}
