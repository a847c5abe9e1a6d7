package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// LogLines: each whole line written, in as many writes as it takes, is a
// record; "qwenrun: " is left out, and "warning: " makes a warning.
func TestLogLines(t *testing.T) {
	var buf bytes.Buffer
	w := LogLines(slog.New(slog.NewJSONHandler(&buf, nil)), "qwenrun")
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
