package main

import (
	"strings"
	"testing"
)

// The log flags are checked before the model is opened, and their errors
// name them; every command that runs the engine takes them.
func TestLogFlags(t *testing.T) {
	m := tinyModel(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", m, "--log-level", "verbose"}, `qwenrun: --log-level "verbose": want debug, info, warn or error` + "\n"},
		{[]string{m, "-p", "hi", "--log-format", "xml"}, `qwenrun: --log-format "xml": want text or json` + "\n"},
		{[]string{"embed", m, "x", "--log-level", "WARN"}, `qwenrun: --log-level "WARN": want debug, info, warn or error` + "\n"},
		{[]string{"bench-serve", m, "--log-format", "logfmt"}, `qwenrun: --log-format "logfmt": want text or json` + "\n"},
	} {
		out, stderr, code := qwenrun(t, "", tc.args...)
		if code != 1 || out != "" || stderr != tc.want {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1 and %q", tc.args, code, out, stderr, tc.want)
		}
	}
	// A run logs nothing at info by itself: stdout the text, stderr
	// as before.
	out, stderr, code := qwenrun(t, "", m, "-p", "hi", "-n", "2", "--temp", "0", "--log-level", "debug", "--log-format", "json")
	if code != 0 || out == "" || strings.Contains(out, `"level"`) {
		t.Errorf("a run at debug: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}
