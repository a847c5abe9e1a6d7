package cliutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
)

// UsageError is a command line that cannot be run as written. It is
// printed with a pointer to the command's help rather than with the help
// itself: the help would bury the one line that matters, and on stdout it
// would pass for output.
type UsageError struct {
	Cmd string // the command whose --help to point to: "qwenrun", "qwenc compile"
	Err error
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError of the command c runs.
func Usagef(c *cli.Context, format string, args ...any) error {
	return &UsageError{Cmd: commandPath(c), Err: fmt.Errorf(format, args...)}
}

// OnUsageError is the flag library's hook for a flag it cannot parse; set
// on the app and on every command, it returns the error instead of
// printing the help to stdout and the error twice.
func OnUsageError(c *cli.Context, err error, _ bool) error {
	return &UsageError{Cmd: commandPath(c), Err: err}
}

// commandPath is the command line prefix that names c's command, such as
// "qwenc compile", taken from the names rather than from os.Args[0].
func commandPath(c *cli.Context) string {
	var names []string
	for _, p := range c.Lineage() {
		if p.Command != nil && p.Command.Name != "" {
			names = append([]string{p.Command.Name}, names...)
		}
	}
	path := c.App.Name
	for _, n := range names {
		if n != c.App.Name {
			path += " " + n
		}
	}
	return path
}

// Interrupted is the error of a run stopped by a signal. Its exit status
// is 128 + the signal's number, as a shell reports a process the signal
// killed: 130 for SIGINT, 143 for SIGTERM.
type Interrupted struct{ Signal syscall.Signal }

func (e Interrupted) Error() string { return "interrupted by " + e.Signal.String() }

// InterruptedBy returns the Interrupted error of a signal received from
// signal.Notify.
func InterruptedBy(s os.Signal) error {
	if n, ok := s.(syscall.Signal); ok {
		return Interrupted{Signal: n}
	}
	return Interrupted{Signal: syscall.SIGINT}
}

// SignalContext returns a context cancelled at the first SIGINT or
// SIGTERM, with an Interrupted error naming it as its cause
// (context.Cause), so the exit status can tell the two apart.
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sig:
			cancel(InterruptedBy(s))
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(sig)
		cancel(context.Canceled)
	}
}

// ExitStatus prints err, if any, as prog's one-line error on w and returns
// the process's exit status: 0 without an error, 128 + N after signal N
// (the run has said what it stopped), 1 otherwise. A usage error is
// followed by where its command's help is.
func ExitStatus(w io.Writer, prog string, err error) int {
	var in Interrupted
	var ue *UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &in):
		return 128 + int(in.Signal)
	case errors.As(err, &ue):
		fmt.Fprintf(w, "%s: %v\nRun '%s --help' for usage.\n", prog, err, ue.Cmd)
	default:
		fmt.Fprintf(w, "%s: %v\n", prog, err)
	}
	return 1
}
