package cliutil

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
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
