package modelflags

import (
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/qwen"
	"github.com/urfave/cli/v2"
)

// StateCacheFlags are the state cache's flags, --state-cache's Usage
// given, as the commands that serve or measure it word it.
func StateCacheFlags(usage, defaultText string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "state-cache", Usage: usage, DefaultText: defaultText},
		&cli.StringFlag{Name: "state-cache-dir", Usage: "write the states --state-cache has no room for to files in `DIR`, for later requests to read back; they outlive the process (one process per DIR)"},
		&cli.StringFlag{Name: "state-cache-disk", DefaultText: "a quarter of the free disk, at most 64GiB", Usage: "keep at most `SIZE` of files in --state-cache-dir, the least recently used going first"},
	}
}

// StateCache maps the flags of StateCacheFlags onto options.
func StateCache(c *cli.Context) ([]qwen.Option, error) {
	var opts []qwen.Option
	if c.IsSet("state-cache") {
		size, err := cliutil.Bytes(c.String("state-cache"))
		if err != nil {
			return nil, cliutil.Usagef(c, "--state-cache: %v", err)
		}
		opts = append(opts, qwen.WithStateCache(size))
	}
	if c.IsSet("state-cache-disk") && c.String("state-cache-dir") == "" {
		// It bounds the directory's files: without one it would be
		// taken and do nothing.
		return nil, cliutil.Usagef(c, "--state-cache-disk needs --state-cache-dir DIR")
	}
	if dir := c.String("state-cache-dir"); dir != "" {
		var size int64 // the library's default
		if c.IsSet("state-cache-disk") {
			n, err := cliutil.Bytes(c.String("state-cache-disk"))
			if err != nil || n <= 0 {
				return nil, cliutil.Usagef(c, "--state-cache-disk %q: want a size above 0 (%v)", c.String("state-cache-disk"), err)
			}
			size = n
		}
		opts = append(opts, qwen.WithStateCacheDir(dir, size))
	}
	return opts, nil
}
