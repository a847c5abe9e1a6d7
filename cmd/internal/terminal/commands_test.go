package terminal

import (
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/runtime/sampling"
)

func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		msg  string // the message, if the line is one
		cmd  string // the command's name, if the line is one
		arg  string
		on   bool
		err  string // the error, if the line is neither
	}{
		{line: "hello", msg: "hello"},
		{line: "  hello there ", msg: "  hello there "},
		{line: "a /slash inside", msg: "a /slash inside"},
		{line: "//etc/hosts is a file", msg: "/etc/hosts is a file"},
		{line: "  //x", msg: "/x"},
		{line: "/help", cmd: "help"},
		{line: "/?", cmd: "help"},
		{line: " /BYE ", cmd: "bye"},
		{line: "/exit", cmd: "bye"},
		{line: "/clear", cmd: "clear"},
		{line: "/clear now", err: "/clear takes no argument"},
		{line: "/system  Be brief.  Very. ", cmd: "system", arg: "Be brief.  Very."},
		{line: "/system", err: "usage: /system TEXT"},
		{line: "/think on", cmd: "think", arg: "on", on: true},
		{line: "/think OFF", cmd: "think", arg: "OFF"},
		{line: "/think", err: "usage: /think on|off"},
		{line: "/think maybe", err: "usage: /think on|off"},
		{line: "/show", cmd: "show"},
		{line: "/save my chat.json", cmd: "save", arg: "my chat.json"},
		{line: "/load\tchat.json", cmd: "load", arg: "chat.json"},
		{line: "/load", err: "usage: /load FILE"},
		{line: "/set temp 0.7", cmd: "set"},
		{line: "/set", err: "usage: /set NAME VALUE, where NAME is temp, top-k, top-p, min-p, repeat-penalty, presence-penalty, frequency-penalty, repeat-last-n, seed"},
		{line: "/foo", err: "unknown command /foo; /? for help"},
		{line: "/foo bar", err: "unknown command /foo; /? for help"},
		{line: "/", err: "unknown command /; /? for help"},
	} {
		msg, cmd, err := parseLine(tc.line)
		switch {
		case tc.err != "":
			if err == nil || err.Error() != tc.err || cmd != nil {
				t.Errorf("%q: command %+v, error %v; want the error %q", tc.line, cmd, err, tc.err)
			}
		case tc.cmd != "":
			if err != nil || cmd == nil || cmd.name != tc.cmd || cmd.arg != tc.arg && tc.cmd != "set" || cmd.on != tc.on {
				t.Errorf("%q: command %+v, error %v; want /%s %q (on %v)", tc.line, cmd, err, tc.cmd, tc.arg, tc.on)
			}
		default:
			if err != nil || cmd != nil || msg != tc.msg {
				t.Errorf("%q: message %q, command %+v, error %v; want the message %q", tc.line, msg, cmd, err, tc.msg)
			}
		}
	}
}

// /set takes what the flags take, checks it, and changes only its setting.
func TestSetSampling(t *testing.T) {
	base := sampling.Params{Temperature: 0.6, TopK: 20, TopP: 0.95, RepeatPenalty: 1, Seed: 7}
	for _, tc := range []struct {
		arg  string
		want func(p *sampling.Params)
	}{
		{"temp 0.7", func(p *sampling.Params) { p.Temperature = 0.7 }},
		{"temperature 0", func(p *sampling.Params) { p.Temperature = 0 }},
		{"top-k 0", func(p *sampling.Params) { p.TopK = 0 }},
		{"top_k 40", func(p *sampling.Params) { p.TopK = 40 }},
		{"top-p 1", func(p *sampling.Params) { p.TopP = 1 }},
		{"min-p 0.05", func(p *sampling.Params) { p.MinP = 0.05 }},
		{"repeat-penalty 1.1", func(p *sampling.Params) { p.RepeatPenalty = 1.1 }},
		{"presence-penalty 1.5", func(p *sampling.Params) { p.PresencePenalty = 1.5 }},
		{"frequency_penalty -2", func(p *sampling.Params) { p.FrequencyPenalty = -2 }},
		{"repeat-last-n -1", func(p *sampling.Params) { p.RepeatLastN = -1 }},
		// Ollama's repeat_last_n 0 turns the penalties off.
		{"repeat_last_n 0", func(p *sampling.Params) { p.RepeatLastN, p.RepeatPenalty = 0, 1 }},
		{"seed 18446744073709551615", func(p *sampling.Params) { p.Seed = 1<<64 - 1 }},
	} {
		_, cmd, err := parseLine("/set " + tc.arg)
		if err != nil {
			t.Errorf("/set %s: %v", tc.arg, err)
			continue
		}
		got, want := base, base
		cmd.change(&got)
		tc.want(&want)
		if got != want {
			t.Errorf("/set %s: %+v, want %+v", tc.arg, got, want)
		}
	}
	for _, tc := range []struct{ arg, err string }{
		{"temp -0.1", "/set temp -0.1: temp must not be negative (0 is greedy)"},
		{"temp NaN", "/set temp NaN: temp must be a finite number"},
		{"temp inf", "/set temp inf: temp must be a finite number"},
		{"temp 1e39", "/set temp 1e39: temp must be a finite number"},
		{"temp warm", "/set temp warm: temp must be a finite number"},
		{"top-k -2", "/set top-k -2: top-k must be a whole number, -1 or more (0 and -1 are off)"},
		{"top-k 2.5", "/set top-k 2.5: top-k must be a whole number, -1 or more (0 and -1 are off)"},
		{"top-p -0.1", "/set top-p -0.1: top-p must be in [0, 1] (1 is off, 0 keeps only the most likely token)"},
		{"top-p 1.01", "/set top-p 1.01: top-p must be in [0, 1] (1 is off, 0 keeps only the most likely token)"},
		{"min-p -0.01", "/set min-p -0.01: min-p must be in [0, 1] (0 is off)"},
		{"min-p 1.5", "/set min-p 1.5: min-p must be in [0, 1] (0 is off)"},
		{"repeat-penalty 0", "/set repeat-penalty 0: repeat-penalty must be above 0 (1 is off)"},
		{"presence-penalty -2.5", "/set presence-penalty -2.5: presence-penalty must be in [-2, 2] (0 is off)"},
		{"frequency-penalty 2.01", "/set frequency-penalty 2.01: frequency-penalty must be in [-2, 2] (0 is off)"},
		{"repeat-last-n -2", "/set repeat-last-n -2: repeat-last-n must be a whole number, -1 or more (-1 is the whole context, 0 turns the penalties off)"},
		{"seed -1", "/set seed -1: seed must be a whole number from 0 to 2^64-1"},
		{"colour red", `/set: no setting "colour"; /? lists them`},
		{"temp", "usage: /set NAME VALUE, where NAME is temp, top-k, top-p, min-p, repeat-penalty, presence-penalty, frequency-penalty, repeat-last-n, seed"},
		{"temp 0.7 0.8", "usage: /set NAME VALUE, where NAME is temp, top-k, top-p, min-p, repeat-penalty, presence-penalty, frequency-penalty, repeat-last-n, seed"},
	} {
		if _, _, err := parseLine("/set " + tc.arg); err == nil || err.Error() != tc.err {
			t.Errorf("/set %s: error %v, want %q", tc.arg, err, tc.err)
		}
	}
	if got, want := base.Describe(), "temp 0.6, top-k 20, top-p 0.95, min-p 0, repeat-penalty 1, presence-penalty 0, frequency-penalty 0, repeat-last-n 64, seed 7"; got != want {
		t.Errorf("Describe: %q, want %q", got, want)
	}
}

func TestCompleteCommand(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"/sh", []string{"/show"}},
		{"/s", []string{"/system ", "/set ", "/show", "/save "}},
		{"/set t", []string{"/set temp ", "/set top-k ", "/set top-p "}},
		{"/set temp 0", nil},
		{"hello", nil},
		{"//x", nil},
	} {
		if got := completeCommand(tc.line); !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, want %q", tc.line, got, tc.want)
		}
	}
	// Every command the help lists can be completed.
	for _, spec := range commandSpecs() {
		if !strings.Contains(helpText(), "/"+spec.names[0]) || len(completeCommand("/"+spec.names[0])) == 0 {
			t.Errorf("/%s is missing from the help or from Tab", spec.names[0])
		}
	}
}
