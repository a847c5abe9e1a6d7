package terminal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/peterh/liner"
)

func TestHistoryPath(t *testing.T) {
	env := func(state string) func(string) string {
		return func(k string) string {
			if k == "XDG_STATE_HOME" {
				return state
			}
			return ""
		}
	}
	home := func() (string, error) { return "/home/u", nil }
	noHome := func() (string, error) { return "", errors.New("$HOME is not defined") }
	for _, tc := range []struct {
		state string
		home  func() (string, error)
		want  string
	}{
		{"/var/state", home, "/var/state/qwenrun/history"},
		{"", home, "/home/u/.local/state/qwenrun/history"},
		{"relative/state", home, "/home/u/.local/state/qwenrun/history"}, // the XDG spec: ignore it
		{"/var/state", noHome, "/var/state/qwenrun/history"},
	} {
		if got, err := historyPath(env(tc.state), tc.home); err != nil || got != tc.want {
			t.Errorf("XDG_STATE_HOME=%q: %q, %v; want %q", tc.state, got, err, tc.want)
		}
	}
	if _, err := historyPath(env(""), noHome); err == nil {
		t.Errorf("no XDG_STATE_HOME and no home: no error")
	}
}

// The history file is appended to as lines are typed, read back without
// the lines the editor cannot take, and cut to the editor's limit.
func TestHistoryFile(t *testing.T) {
	var info bytes.Buffer
	path := filepath.Join(t.TempDir(), "qwenrun", "history")
	h := &history{path: path, info: &info}
	os.MkdirAll(filepath.Dir(path), 0o700)
	if got := h.load(); len(got) != 0 {
		t.Fatalf("no file: %q", got)
	}
	for _, line := range []string{"one", "two", "two", "/show"} {
		h.add(line)
	}
	if b, _ := os.ReadFile(path); string(b) != "one\ntwo\n/show\n" {
		t.Fatalf("history file %q", b)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("history file mode %v, want private", st.Mode().Perm())
	}
	var long []string
	for i := range liner.HistoryLimit + 10 {
		// Up to 5 kB: longer than a line the editor itself would read.
		long = append(long, strings.Repeat("x", 5*i+1))
	}
	os.WriteFile(path, []byte("bad \xff line\n"+strings.Join(long, "\n")+"\n"), 0o600)
	h = &history{path: path, info: &info}
	if got := h.load(); !slices.Equal(got, long[10:]) {
		t.Fatalf("loaded %d lines, want the last %d", len(got), liner.HistoryLimit)
	}
	if b, _ := os.ReadFile(path); string(b) != strings.Join(long[10:], "\n")+"\n" {
		t.Errorf("the file was not cut to the last %d lines", liner.HistoryLimit)
	}
	if info.Len() != 0 {
		t.Errorf("notes: %q", info.String())
	}

	// A file that cannot be written is said once, and the chat goes on.
	blocked := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocked, nil, 0o644)
	h = &history{path: filepath.Join(blocked, "history"), info: &info}
	h.add("a")
	h.add("b")
	if want := "qwenrun: the history is not kept in " + h.path + ": not a directory\n"; info.String() != want {
		t.Errorf("notes %q, want %q", info.String(), want)
	}
}
