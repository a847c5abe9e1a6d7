package main

import (
	"fmt"
	"os"

	"github.com/qwenc/qwenc/compiler"
	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/wtype"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/urfave/cli/v2"
)

func compileCommand() *cli.Command {
	return &cli.Command{
		Name:      "compile",
		Usage:     "compile a Hugging Face checkpoint (directory, .safetensors or .safetensors.index.json)",
		ArgsUsage: "MODEL",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "o", Aliases: []string{"output"}, Usage: "output `FILE`", DefaultText: "the model directory's name + .qbin, in the current directory"},
			&cli.StringFlag{Name: "type", Value: "f16", Usage: "weight type: f16, q8 (8.5 bits per weight) or q4 (4.6 bits, with the LM head, the embedding and some value and down projections at q8)"},
			&cli.IntFlag{Name: "max-prefill", Value: 512, Usage: "tokens per prefill step; sizes the prefill arena"},
			&cli.StringFlag{Name: "rope-scaling", Usage: "RoPE scaling over config.json's: `SPEC` none, linear:FACTOR or yarn:FACTOR[:ORIGINAL_CONTEXT] (Qwen3's model cards: yarn:4:32768)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress on stderr"},
			&cli.BoolFlag{Name: "no-sync", Usage: "skip the fsync before the final rename (faster; not crash-safe)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cliutil.Usagef(c, "compile: want one MODEL argument, got %d", c.NArg())
			}
			wt, err := weightType(c.String("type"))
			if err != nil {
				return err
			}
			opts := compiler.Options{Output: c.String("o"), MaxPrefill: c.Int("max-prefill"), NoSync: c.Bool("no-sync"), Type: wt, RopeScaling: c.String("rope-scaling")}
			if !c.Bool("quiet") {
				opts.Progress = os.Stderr
			}
			res, err := compiler.Compile(c.Context, c.Args().First(), opts)
			if err != nil {
				return err
			}
			for _, n := range res.Notes {
				fmt.Fprintf(os.Stderr, "qwenc: note: %s\n", n)
			}
			if !c.Bool("quiet") {
				fmt.Fprintf(os.Stderr, "wrote %s (%d bytes)\n", res.Output, res.Bytes)
			}
			return nil
		},
	}
}

// weightType parses --type.
func weightType(s string) (format.DType, error) {
	if t, ok := wtype.Parse(s); ok {
		return format.DType(t), nil
	}
	return 0, fmt.Errorf("compile: unknown --type %q (want %s)", s, wtype.Names())
}
