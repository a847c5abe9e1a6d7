package modelflags

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"

	"github.com/urfave/cli/v2"
)

// Logger is the logger --log-level and --log-format ask for, writing to
// w; a command without the flags gets their defaults.
func Logger(c *cli.Context, w io.Writer) (*slog.Logger, error) {
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
