package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/qwenc/qwenc/runtime/sampling"
	"github.com/urfave/cli/v2"
)

// samplingOption is a sampling setting by the name of the flag that sets
// it: the flags (checkFlags) and the chat's /set take the same values,
// held to the ranges of the parameter table every front end shares.
type samplingOption struct {
	name    string
	setting sampling.Setting // none for the seed
}

// samplingOptions are the settings the command line offers, by flag name,
// in the order the table applies them.
func samplingOptions() []samplingOption {
	var opts []samplingOption
	for _, s := range sampling.Settings() {
		opts = append(opts, samplingOption{name: s.Flag, setting: s})
	}
	return append(opts, samplingOption{name: "seed"})
}

// samplingNames are the options' names, as /set takes them.
func samplingNames() []string {
	var names []string
	for _, o := range samplingOptions() {
		names = append(names, o.name)
	}
	return names
}

// parse checks a value and returns the change it makes.
func (o samplingOption) parse(v string) (func(*sampling.Params), error) {
	if o.name == "seed" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, errors.New("must be a whole number from 0 to 2^64-1")
		}
		return func(p *sampling.Params) { p.Seed = seed }, nil
	}
	f, err := o.setting.Parse(v)
	if err != nil {
		return nil, err
	}
	return func(p *sampling.Params) { o.setting.Apply(p, f) }, nil
}

// get is the setting's value in p, as /set takes it.
func (o samplingOption) get(p sampling.Params) string {
	if o.name == "seed" {
		return strconv.FormatUint(p.Seed, 10)
	}
	return strconv.FormatFloat(o.setting.Value(p), 'g', -1, 32)
}

// flagValue is the value of o's flag as text, for parse.
func flagValue(c *cli.Context, o samplingOption) string {
	if o.setting.Integer {
		return strconv.Itoa(c.Int(o.name))
	}
	return strconv.FormatFloat(c.Float64(o.name), 'g', -1, 64)
}

// parseSetting parses /set's "NAME VALUE". Names may also be written as
// ollama writes them (top_k, temperature).
func parseSetting(arg string) (samplingOption, func(*sampling.Params), error) {
	fields := strings.Fields(arg)
	if len(fields) != 2 {
		return samplingOption{}, nil, fmt.Errorf("usage: /set NAME VALUE, where NAME is %s", strings.Join(samplingNames(), ", "))
	}
	name := strings.ReplaceAll(strings.ToLower(fields[0]), "_", "-")
	if name == "temperature" {
		name = "temp"
	}
	for _, o := range samplingOptions() {
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
