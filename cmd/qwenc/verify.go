package main

import (
	"fmt"
	"os"

	"github.com/qwenc/qwenc/format"
	"github.com/urfave/cli/v2"
)

func verifyCommand() *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "check a .qbin file's directory and every section's checksum",
		ArgsUsage: "FILE",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("verify: want one FILE argument, got %d", c.NArg())
			}
			f, err := format.Open(c.Args().First())
			if err != nil {
				return err
			}
			defer f.Close()
			if err := f.Verify(); err != nil {
				return err
			}
			fmt.Fprintf(os.Stdout, "%s: ok (%d sections, %d bytes)\n", f.Path, len(f.Header.Sections), f.Size)
			return nil
		},
	}
}
