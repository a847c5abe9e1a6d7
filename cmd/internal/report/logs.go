package report

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// LogLines is an io.Writer that makes each line written to it a record
// of log: what a command prints on stderr as lines (a pull's progress,
// the context a model got, a warning) joins a server's log in its format
// rather than breaking it. The "PROG: " a line starts with is left out;
// a line that then says "warning: " is a warning, the others info.
func LogLines(log *slog.Logger, prog string) io.Writer {
	return &logLines{log: log, prefix: prog + ": "}
}

type logLines struct {
	log    *slog.Logger
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (w *logLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := strings.TrimPrefix(string(w.buf[:i]), w.prefix)
		w.buf = w.buf[i+1:]
		level := slog.LevelInfo
		if rest, ok := strings.CutPrefix(line, "warning: "); ok {
			line, level = rest, slog.LevelWarn
		}
		w.log.Log(context.Background(), level, line)
	}
}
