package modelflags

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"

	"github.com/qwenc/qwenc/cmd/internal/pullcache"
	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/oci"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/kernels"
	"github.com/qwenc/qwenc/qwen"
	"github.com/urfave/cli/v2"
)

// KernelsEnv names the environment variable that forces a kernel path
// ("generic", "avx2", "avxvnni", "avx512", "avx512vnni") where --kernels is absent;
// empty or "auto" is the fastest. The packages below read no environment:
// the command reads it and passes the path on.
const KernelsEnv = "QWEN_KERNELS"

// kernelsName is --kernels, or else $QWEN_KERNELS, and where it came
// from, for the errors.
func kernelsName(c *cli.Context) (name, from string) {
	if c.IsSet("kernels") {
		return c.String("kernels"), "--kernels"
	}
	return os.Getenv(KernelsEnv), "$" + KernelsEnv
}

// KernelPath reads --kernels, or else $QWEN_KERNELS.
func KernelPath(c *cli.Context) (kernels.Path, error) {
	name, from := kernelsName(c)
	p, err := kernels.ParsePath(name)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", from, err)
	}
	return p, nil
}

// KVType reads --kv-type.
func KVType(c *cli.Context) (format.KVType, error) {
	t, err := format.ParseKVType(c.String("kv-type"))
	if err != nil {
		return 0, fmt.Errorf("--kv-type: %w", err)
	}
	return t, nil
}

// Check checks what every command that runs a model takes: --threads,
// --kernels (or $QWEN_KERNELS) and --kv-type. A warning goes to notes.
func Check(c *cli.Context, notes io.Writer) error {
	if c.IsSet("threads") {
		if err := CheckThreads(notes, "--threads", c.Int("threads")); err != nil {
			return err
		}
	}
	if _, err := KernelPath(c); err != nil {
		return err
	}
	if _, err := KVType(c); err != nil {
		return err
	}
	return nil
}

// CheckThreads refuses fewer than one thread and warns on w about more
// than the CPUs this process may use: the pool's workers then wait for
// each other's time slices, which ran 40 times slower with no word.
func CheckThreads(w io.Writer, flag string, n int) error {
	if n < 1 {
		return fmt.Errorf("%s %d: want 1 or more", flag, n)
	}
	if cpus := runtime.GOMAXPROCS(0); n > cpus {
		fmt.Fprintf(w, "qwenrun: warning: %s %d is more than the %d CPUs this process may use; the threads will wait for each other (slower, not faster)\n",
			flag, n, cpus)
	}
	return nil
}

// One checks the argument and the flags of a command that measures one
// model, and returns the logger its log flags ask for.
func One(c *cli.Context, name string) (*slog.Logger, error) {
	if c.NArg() != 1 {
		return nil, cliutil.Usagef(c, "%s: want one MODEL.qbin argument, got %d", name, c.NArg())
	}
	if err := Check(c, os.Stderr); err != nil {
		return nil, err
	}
	return Logger(c, os.Stderr)
}

// Options are the options --threads, --kernels (or $QWEN_KERNELS) and
// --kv-type ask for, and the engine's logger; a command without one of
// these flags gets the default.
func Options(c *cli.Context, log *slog.Logger) []qwen.Option {
	kernels, _ := kernelsName(c)
	return []qwen.Option{qwen.WithThreads(c.Int("threads")), qwen.WithKernels(kernels), qwen.WithKVType(c.String("kv-type")), qwen.WithLogger(log)}
}

// Open opens the model with the flags every model-running command
// takes, for parallel conversations: --threads, --kernels, --kv-type and
// --ctx, whose errors name the flags. The engine logs to log; a pull's
// progress and the context the model got go to notes as lines.
func Open(c *cli.Context, log *slog.Logger, notes io.Writer, parallel int, more ...qwen.Option) (*qwen.Model, error) {
	path, err := modelPath(c, c.Args().First(), notes)
	if err != nil {
		return nil, err
	}
	return OpenFile(c, log, notes, path, parallel, more...)
}

// OpenFile opens the model in path as Open opens the argument's: a server
// loads the models requests name with it.
func OpenFile(c *cli.Context, log *slog.Logger, notes io.Writer, path string, parallel int, more ...qwen.Option) (*qwen.Model, error) {
	opts := append(append(Options(c, log), qwen.WithParallel(parallel)), more...)
	if c.IsSet("ctx") {
		opts = append(opts, qwen.WithContext(c.Int("ctx")))
	}
	m, err := qwen.Open(path, opts...)
	var ce *qwen.ContextError
	if errors.As(err, &ce) {
		return nil, contextError(ce)
	}
	if err != nil {
		return nil, err
	}
	if note := m.Info().ContextNote; note != "" {
		fmt.Fprintf(notes, "qwenrun: %s (--ctx to choose)\n", note)
	}
	return m, nil
}

// InsecureFlag is --insecure, for a MODEL given as oci://: every
// command that opens its model with Open takes it.
func InsecureFlag() cli.Flag {
	return &cli.BoolFlag{Name: "insecure", Usage: "with an oci:// MODEL: allow plain HTTP to a registry that is not localhost"}
}

func modelPath(c *cli.Context, arg string, progress io.Writer) (string, error) {
	if !oci.IsRef(arg) {
		return arg, nil
	}
	p, err := pullcache.Pull(c.Context, arg, oci.Options{Insecure: c.Bool("insecure"), Progress: progress})
	if err != nil {
		return "", err
	}
	return p.Path, nil
}

// contextError says what is wrong with --ctx in the flags' words.
func contextError(e *qwen.ContextError) error {
	forConv, orParallel := "", ""
	if e.Parallel > 1 {
		forConv, orParallel = fmt.Sprintf(" for %d conversations", e.Parallel), " or --parallel"
	}
	switch {
	case e.Need == 0:
		return fmt.Errorf("--ctx %d: want 1 to %d tokens (the model's maximum context)", e.Context, e.Max)
	case e.Context != 0:
		return fmt.Errorf("--ctx %d%s needs %d MB of sequence state, more than the %d MB of memory available; use a smaller --ctx%s",
			e.Context, forConv, e.Need/1e6, e.Available/1e6, orParallel)
	}
	return e
}
