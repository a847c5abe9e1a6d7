package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"
)

// logFlags are --log-level and --log-format, which every command that
// runs the engine takes: its records, and a server's, go to stderr;
// stdout keeps the model's output alone.
func logFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "log records of `LEVEL` and above to stderr: debug (request bodies too), info, warn or error"},
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "write the log records as `FORMAT`: text (key=value) or json, one a line"},
	}
}

// newLogger is the logger --log-level and --log-format ask for, writing
// to w; a command without the flags gets their defaults.
func newLogger(c *cli.Context, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	switch l := cmp.Or(c.String("log-level"), "info"); l {
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", l)
	}
	o := &slog.HandlerOptions{Level: level}
	switch f := cmp.Or(c.String("log-format"), "text"); f {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", f)
	}
}

// logLines is an io.Writer that makes each line written to it a record
// of log: what the commands print on stderr as lines (a pull's progress,
// the context a model got, a warning) joins a server's log in its format
// rather than breaking it. The "qwenrun: " a line starts with is left
// out; a line that then says "warning: " is a warning, the others info.
type logLines struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
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
		line := strings.TrimPrefix(string(w.buf[:i]), "qwenrun: ")
		w.buf = w.buf[i+1:]
		level := slog.LevelInfo
		if rest, ok := strings.CutPrefix(line, "warning: "); ok {
			line, level = rest, slog.LevelWarn
		}
		w.log.Log(context.Background(), level, line)
	}
}
