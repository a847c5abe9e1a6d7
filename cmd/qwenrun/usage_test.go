package main

import (
	"path/filepath"
	"testing"
)

// A command line that cannot run prints its error and where the help is,
// on stderr, and nothing on stdout (the help once went to stdout, with the
// error twice).
func TestUsageErrors(t *testing.T) {
	m := filepath.Join(t.TempDir(), "never-opened.qbin")
	for _, tc := range []struct {
		args      []string
		msg, help string
	}{
		{[]string{"--nonsense"}, "flag provided but not defined: -nonsense", "qwenrun"},
		{[]string{m, "--nonsense"}, "flag provided but not defined: -nonsense", "qwenrun"},
		{nil, "want one MODEL.qbin argument, got 0", "qwenrun"},
		{[]string{m, m}, "want one MODEL.qbin argument, got 2", "qwenrun"},
		{[]string{m, "-p"}, "flag needs an argument: -p", "qwenrun"},
		{[]string{"--temp", "warm", m}, `invalid value "warm" for flag -temp: parse error`, "qwenrun"},
		{[]string{"bench"}, "bench: want one or more MODEL.qbin arguments", "qwenrun bench"},
		{[]string{"bench", m, "--bogus"}, "flag provided but not defined: -bogus", "qwenrun bench"},
		{[]string{"perplexity", m}, "perplexity: give the text to score with -f PATH", "qwenrun perplexity"},
		{[]string{"perplexity", "-f", m}, "perplexity: want one MODEL.qbin argument, got 0", "qwenrun perplexity"},
	} {
		out, stderr, code := qwenrun(t, "", tc.args...)
		want := "qwenrun: " + tc.msg + "\nRun '" + tc.help + " --help' for usage.\n"
		if code != 1 || stderr != want || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1, nothing on stdout and %q", tc.args, code, out, stderr, want)
		}
	}
}
