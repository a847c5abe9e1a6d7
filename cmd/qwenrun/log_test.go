package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// logLines: each whole line written, in as many writes as it takes, is a
// record; "qwenrun: " is left out, and "warning: " makes a warning.
func TestLogLines(t *testing.T) {
	var buf bytes.Buffer
	w := &logLines{log: slog.New(slog.NewJSONHandler(&buf, nil))}
	for _, s := range []string{"pulled sha256:ab", "c (3 bytes)\nqwenrun: the context is ", "lowered\nqwenrun: warning: --threads 9 is more\n", "half a line"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q): %d, %v", s, n, err)
		}
	}
	var got []string
	for line := range strings.Lines(buf.String()) {
		var r struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		got = append(got, r.Level+" "+r.Msg)
	}
	want := []string{"INFO pulled sha256:abc (3 bytes)", "INFO the context is lowered", "WARN --threads 9 is more"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("records %q, want %q", got, want)
	}
}

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
