package cliutil

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/urfave/cli/v2"
)

// AtLeast refuses an integer flag below least, in the flag's words: the
// measurements' own checks name their fields, or nothing at all.
func AtLeast(c *cli.Context, least int, flags ...string) error {
	for _, f := range flags {
		if n := c.Int(f); n < least {
			return fmt.Errorf("--%s %d: want %d or more", f, n, least)
		}
	}
	return nil
}

// AtMostOne refuses more than one of flags (written as the user would,
// "-p", "--tokens") set at once: which one would win is a guess. what
// says what each of them does ("give the prompt").
func AtMostOne(c *cli.Context, what string, flags ...string) error {
	var given []string
	for _, f := range flags {
		if c.IsSet(strings.TrimLeft(f, "-")) {
			given = append(given, f)
		}
	}
	switch n := len(given); {
	case n == 2:
		return fmt.Errorf("%s and %s both %s; use one", given[0], given[1], what)
	case n > 2:
		return fmt.Errorf("%s and %s all %s; use one", strings.Join(given[:n-1], ", "), given[n-1], what)
	}
	return nil
}

// ReadInput reads a file, or standard input for "-".
func ReadInput(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}

// StartProfile starts a CPU profile into path (none for ""); the
// function it returns stops it.
func StartProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
