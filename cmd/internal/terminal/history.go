package terminal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/peterh/liner"
	"github.com/qwenc/qwenc/internal/fsutil"
)

// history keeps the lines typed at the terminal in a file, one a line.
// Each line is appended as it is entered, so chats running side by side
// all keep theirs and a chat that is killed loses nothing.
type history struct {
	path string
	info io.Writer
	// broken is set once the file could not be used: the chat goes on
	// without it, having said so once.
	broken bool
	last   string
}

// historyPath is $XDG_STATE_HOME/qwenrun/history, or
// ~/.local/state/qwenrun/history where XDG_STATE_HOME is unset or, against
// the XDG specification, not absolute.
func historyPath(getenv func(string) string, home func() (string, error)) (string, error) {
	if dir := getenv("XDG_STATE_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, prog, "history"), nil
	}
	dir, err := home()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, ".local", "state", prog, "history"), nil
}

// openHistory finds the history file and creates its directory.
func openHistory(info io.Writer) *history {
	h := &history{info: info}
	path, err := historyPath(os.Getenv, os.UserHomeDir)
	if err == nil {
		h.path = path
		err = os.MkdirAll(filepath.Dir(path), 0o700)
	}
	if err != nil {
		h.fail(err)
	}
	return h
}

func (h *history) fail(err error) {
	switch {
	case h.broken:
	case h.path == "":
		fmt.Fprintf(h.info, "%s: the history is not kept: %v\n", prog, err)
	default:
		fmt.Fprintf(h.info, "%s: the history is not kept in %s: %v\n", prog, h.path, fsutil.Pathless(err))
	}
	h.broken = true
}

// load returns the lines kept so far, oldest first, as many as the line
// editor holds. A longer file is cut to that many.
func (h *history) load() []string {
	if h.broken {
		return nil
	}
	b, err := os.ReadFile(h.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		h.fail(err)
		return nil
	}
	var lines []string
	for line := range strings.Lines(string(b)) {
		// The editor refuses a file with a line that is not UTF-8; one bad
		// line should not cost the others.
		if line = strings.TrimRight(line, "\r\n"); line != "" && utf8.ValidString(line) {
			lines = append(lines, line)
		}
	}
	if len(lines) > liner.HistoryLimit {
		lines = lines[len(lines)-liner.HistoryLimit:]
		if err := fsutil.WriteAtomic(h.path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			h.fail(err)
		}
	}
	if len(lines) > 0 {
		h.last = lines[len(lines)-1]
	}
	return lines
}

// add appends a line, unless it repeats the one before.
func (h *history) add(line string) {
	if h.broken || line == h.last {
		return
	}
	h.last = line
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		h.fail(err)
		return
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		h.fail(err)
	}
}
