package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/urfave/cli/v2"
)

// version is set at link time: go build -ldflags "-X main.version=v1.2.3".
// Empty, --version gives the module's version.
var version string

func main() {
	app := newApp()
	args, err := reorder(app, os.Args)
	ctx, stop := context.Background(), context.CancelFunc(func() {})
	if watchesSignals(args) {
		ctx, stop = cliutil.SignalContext(ctx)
	}
	if err == nil {
		err = app.RunContext(ctx, args)
	}
	stop()
	if errors.Is(err, context.Canceled) {
		// The compiler removed its temporary file before returning.
		fmt.Fprintln(os.Stderr, "qwenc: interrupted; no output written")
		err = context.Cause(ctx) // the signal, for the exit status
	}
	os.Exit(cliutil.ExitStatus(os.Stderr, "qwenc", err))
}

func newApp() *cli.App {
	app := &cli.App{
		Name:            "qwenc",
		Usage:           "compile Qwen checkpoints into .qbin files for qwenrun",
		HideHelpCommand: true,
		Commands:        []*cli.Command{compileCommand(), inspectCommand(), verifyCommand(), pushCommand(), pullCommand(), cacheCommand()},
		Flags:           []cli.Flag{cliutil.VersionFlag()},
		Action:          noCommand,
		OnUsageError:    cliutil.OnUsageError,
		ExitErrHandler:  func(*cli.Context, error) {}, // main prints the one-line error
	}
	for _, c := range app.Commands {
		c.OnUsageError = cliutil.OnUsageError
	}
	return app
}

// noCommand runs when no command is named: --version, the help, or for a
// word that is no command, a usage error (the flag library would say "No
// help topic").
func noCommand(c *cli.Context) error {
	if c.Bool("version") {
		fmt.Print(cliutil.Version("qwenc", version))
		return nil
	}
	if c.NArg() > 0 {
		return cliutil.Usagef(c, "unknown command %q (want compile, inspect, verify, push or pull)", c.Args().First())
	}
	return cli.ShowAppHelp(c)
}

// reorder lets a command's flags follow its arguments.
func reorder(app *cli.App, args []string) ([]string, error) {
	if len(args) < 2 {
		return args, nil
	}
	for _, c := range app.Commands {
		if c.HasName(args[1]) {
			rest, err := cliutil.FlagsFirst(args[2:], c.Flags)
			if err != nil {
				return nil, &cliutil.UsageError{Cmd: app.Name + " " + c.Name, Err: err}
			}
			return append([]string{args[0], args[1]}, rest...), nil
		}
	}
	return args, nil
}

// watchesSignals reports whether the command args name stops at SIGINT or
// SIGTERM by itself, removing what it was writing. The others are left to
// the signals' default, which ends them at once: caught, a signal was
// lost, and qwenc verify ran on to the end and exited 0.
func watchesSignals(args []string) bool {
	return len(args) > 1 && slices.Contains([]string{"compile", "inspect", "push", "pull"}, args[1])
}

// toStdout runs f with a buffered standard output and returns f's error,
// or else the first error writing: a listing lost to a full disk, or an
// "ok" that never reached the script reading it, is a failure.
func toStdout(f func(stdout io.Writer) error) error {
	w := bufio.NewWriter(os.Stdout)
	err := f(w)
	if ferr := w.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("writing the output: %w", ferr)
	}
	return err
}
