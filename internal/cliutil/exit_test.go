package cliutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   int
		stderr string
	}{
		{nil, 0, ""},
		{errors.New("no such model"), 1, "prog: no such model\n"},
		{fmt.Errorf("wrapped: %w", &UsageError{Cmd: "prog sub", Err: errors.New("want one FILE")}), 1,
			"prog: wrapped: want one FILE\nRun 'prog sub --help' for usage.\n"},
		// The run reported its stop itself: only the status says which signal.
		{Interrupted{Signal: syscall.SIGINT}, 130, ""},
		{fmt.Errorf("compile: %w", Interrupted{Signal: syscall.SIGTERM}), 143, ""},
	} {
		var w strings.Builder
		if code := ExitStatus(&w, "prog", tc.err); code != tc.code || w.String() != tc.stderr {
			t.Errorf("%v: status %d, printed %q; want %d, %q", tc.err, code, w.String(), tc.code, tc.stderr)
		}
	}
}

// The context's cause names the signal that cancelled it.
func TestSignalContext(t *testing.T) {
	ctx, stop := SignalContext(context.Background())
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not cancel the context")
	}
	if got := context.Cause(ctx); got != (Interrupted{Signal: syscall.SIGTERM}) || ExitStatus(io.Discard, "p", got) != 143 {
		t.Fatalf("cause %v, want an Interrupted by SIGTERM, status 143", got)
	}
}
