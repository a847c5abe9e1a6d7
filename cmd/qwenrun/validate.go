package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/fsutil"
	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/runtime/sampling"
	"github.com/urfave/cli/v2"
)

// checkFlags refuses flag values that mean nothing, before the model is
// loaded: a run should not spend seconds mapping and checking a model to
// fail on a typo. --ctx is checked as the model opens, where the model's
// maximum completes the range the message gives.
func checkFlags(c *cli.Context) error {
	if err := checkPromptFlags(c); err != nil {
		return err
	}
	if n := c.Int("max-tokens"); n < -1 {
		return fmt.Errorf("-n %d: want -1 (until the end of sequence or context), 0 (evaluate the prompt only) or a number of tokens", n)
	}
	// The same rules as the chat's /set, in the flags' words.
	for _, s := range sampling.Settings() {
		if !c.IsSet(s.Flag) {
			continue
		}
		v := flagValue(c, s)
		if _, err := s.Parse(v); err != nil {
			return fmt.Errorf("--%s %s: %v", s.Flag, v, err)
		}
	}
	if err := checkModelFlags(c, os.Stderr); err != nil {
		return err
	}
	if path := c.String("logits"); path != "" {
		if err := fsutil.CheckOutput(path); err != nil {
			return fmt.Errorf("--logits %s: %w", path, err)
		}
	}
	return nil
}

// checkModelFlags checks what every command that runs a model takes:
// --threads, --kernels (or $QWEN_KERNELS) and --kv-type. A warning goes
// to notes.
func checkModelFlags(c *cli.Context, notes io.Writer) error {
	if c.IsSet("threads") {
		if err := checkThreads(notes, "--threads", c.Int("threads")); err != nil {
			return err
		}
	}
	if _, err := kernelPath(c); err != nil {
		return err
	}
	if _, err := format.ParseKVType(c.String("kv-type")); err != nil {
		return fmt.Errorf("--kv-type: %w", err)
	}
	return nil
}

// oneModel checks the argument and the flags of a command that measures
// one model, and returns the logger its log flags ask for.
func oneModel(c *cli.Context, name string) (*slog.Logger, error) {
	if c.NArg() != 1 {
		return nil, fmt.Errorf("%s: want one MODEL.qbin argument", name)
	}
	if err := checkModelFlags(c, os.Stderr); err != nil {
		return nil, err
	}
	return newLogger(c, os.Stderr)
}

// modelOptions are the options --threads, --kernels (or $QWEN_KERNELS)
// and --kv-type ask for, and the engine's logger; a command without one
// of these flags gets the default.
func modelOptions(c *cli.Context, log *slog.Logger) []qwen.Option {
	kernels, _ := kernelsName(c)
	return []qwen.Option{qwen.WithThreads(c.Int("threads")), qwen.WithKernels(kernels), qwen.WithKVType(c.String("kv-type")), qwen.WithLogger(log)}
}

// checkPromptFlags refuses two ways of giving the prompt at once: which
// one would win is a guess.
func checkPromptFlags(c *cli.Context) error {
	var given []string
	for _, f := range []struct{ name, flag string }{{"prompt", "-p"}, {"file", "-f"}, {"tokens", "--tokens"}} {
		if c.IsSet(f.name) {
			given = append(given, f.flag)
		}
	}
	switch len(given) {
	case 2:
		return fmt.Errorf("%s and %s both give the prompt; use one", given[0], given[1])
	case 3:
		return fmt.Errorf("%s, %s and %s all give the prompt; use one", given[0], given[1], given[2])
	}
	return nil
}

// checkThreads refuses fewer than one thread and warns on w about more
// than the CPUs this process may use: the pool's workers then wait for
// each other's time slices, which ran 40 times slower with no word.
func checkThreads(w io.Writer, flag string, n int) error {
	if n < 1 {
		return fmt.Errorf("%s %d: want 1 or more", flag, n)
	}
	if cpus := runtime.GOMAXPROCS(0); n > cpus {
		fmt.Fprintf(w, "qwenrun: warning: %s %d is more than the %d CPUs this process may use; the threads will wait for each other (slower, not faster)\n",
			flag, n, cpus)
	}
	return nil
}
