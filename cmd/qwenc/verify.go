package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/arch"
	"github.com/qwenc/qwenc/format/tokenizer"
	"github.com/qwenc/qwenc/internal/cliutil"
)

func verifyCommand() *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "check a .qbin file's directory and every section's checksum",
		ArgsUsage: "FILE",
		Action: func(c *cli.Context) error {
			return toStdout(func(stdout io.Writer) error { return verify(c, stdout) })
		},
	}
}

func verify(c *cli.Context, stdout io.Writer) error {
	if c.NArg() != 1 {
		return cliutil.Usagef(c, "verify: want one FILE argument, got %d", c.NArg())
	}
	f, err := format.Open(c.Args().First())
	if err != nil {
		return err
	}
	defer f.Close()
	if err := arch.Builtin().Validate(f.Header); err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	if err := f.Verify(); err != nil {
		return err
	}
	// The checksums prove the bytes are what the compiler wrote; loading
	// the tokenizer as qwenrun does also proves they are what it will
	// accept.
	tb, err := f.Bytes(format.SecTokenizer)
	if err != nil {
		return err
	}
	if _, err := tokenizer.LoadFor(tb, f.Header.Config.Vocab); err != nil {
		return fmt.Errorf("%s: section %q: %w", f.Path, format.SecTokenizer, err)
	}
	fmt.Fprintf(stdout, "%s: ok (%d sections, %d bytes)\n", f.Path, len(f.Header.Sections), f.Size)
	return nil
}
