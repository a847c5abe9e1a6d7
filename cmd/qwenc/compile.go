package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/qwenc/qwenc/compiler"
	"github.com/urfave/cli/v2"
)

func compileCommand() *cli.Command {
	return &cli.Command{
		Name:      "compile",
		Usage:     "compile a Hugging Face checkpoint (directory, .safetensors or .safetensors.index.json)",
		ArgsUsage: "MODEL",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "o", Aliases: []string{"output"}, Usage: "output `FILE` (default: the model directory's name + .qbin, here)"},
			&cli.IntFlag{Name: "max-prefill", Value: 512, Usage: "tokens per prefill step; sizes the prefill arena"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress on stderr"},
			&cli.BoolFlag{Name: "no-sync", Usage: "skip the fsync before the final rename (faster; not crash-safe)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("compile: want one MODEL argument, got %d", c.NArg())
			}
			model := c.Args().First()
			out := c.String("o")
			if out == "" {
				out = defaultOutput(model)
			}
			opts := compiler.Options{Output: out, MaxPrefill: c.Int("max-prefill"), NoSync: c.Bool("no-sync")}
			if !c.Bool("quiet") {
				opts.Progress = os.Stderr
			}
			res, err := compiler.Compile(c.Context, model, opts)
			if err != nil {
				return err
			}
			if !c.Bool("quiet") {
				fmt.Fprintf(os.Stderr, "wrote %s (%d bytes)\n", res.Output, res.Bytes)
			}
			return nil
		},
	}
}

// defaultOutput names the output after the model directory.
func defaultOutput(model string) string {
	dir := model
	if st, err := os.Stat(model); err == nil && !st.IsDir() {
		dir = filepath.Dir(model)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return filepath.Base(dir) + ".qbin"
}
