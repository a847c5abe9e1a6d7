package main

import (
	"fmt"
	"os"

	"github.com/qwenc/qwenc/bench"
	"github.com/qwenc/qwenc/kernels"
	"github.com/urfave/cli/v2"
)

func benchDraftCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench-draft",
		Usage:     "measure a decode step checking k tokens (speculative decoding) against a one-token step, and the acceptance rate above which each k pays",
		ArgsUsage: "MODEL.qbin",
		Flags: []cli.Flag{
			&cli.IntSliceFlag{Name: "rows", Value: cli.NewIntSlice(2, 4, 8, 16), Usage: "the k to measure"},
			&cli.IntFlag{Name: "depth", Value: 256, Usage: "tokens in the KV cache before each step"},
			&cli.IntFlag{Name: "reps", Value: 20, Usage: "steps of each k; the table shows medians"},
			threadsFlag(),
			kernelsFlag(),
		},
		Action: benchDraft,
	}
}

func benchDraft(c *cli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("bench-draft: want one MODEL.qbin argument")
	}
	if err := checkModelFlags(c); err != nil {
		return err
	}
	p, err := kernelPath(c)
	if err != nil {
		return err
	}
	if p == kernels.Auto {
		p = kernels.Detect()
	}
	cfg := bench.DraftConfig{Model: c.Args().First(), Threads: c.Int("threads"), Kernels: p, Rows: c.IntSlice("rows"), Depth: c.Int("depth"), Reps: c.Int("reps")}
	rows, err := bench.DraftCost(cfg)
	if err != nil {
		return err
	}
	bench.WriteDraftTable(os.Stdout, cfg, rows)
	return nil
}
