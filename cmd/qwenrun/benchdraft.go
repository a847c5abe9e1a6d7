package main

import (
	"os"

	"github.com/qwenc/qwenc/cmd/internal/modelflags"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/qwen/bench"
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
			&cli.Float64Flag{Name: "draft-ratio", Usage: "with a draft model whose step costs `R` of this model's (about the ratio of the bytes each reads per decode step, qwenc inspect), project its speedups"},
			&cli.BoolFlag{Name: "mtp", Usage: "time the model's MTP block guessing a token (as --draft mtp does), and project the speedups of its drafts"},
			&cli.Float64SliceFlag{Name: "acceptance", Value: cli.NewFloat64Slice(0.5, 0.6, 0.7, 0.8, 0.9), Usage: "the per-token acceptance rates of the projection"},
			threadsFlag(),
			kernelsFlag(),
		},
		Action: benchDraft,
	}
}

func benchDraft(c *cli.Context) error {
	if _, err := modelflags.One(c, "bench-draft"); err != nil {
		return err
	}
	p, err := modelflags.KernelPath(c)
	if err != nil {
		return err
	}
	cfg := bench.DraftConfig{Model: c.Args().First(), Threads: c.Int("threads"), Kernels: p, Rows: c.IntSlice("rows"), Depth: c.Int("depth"), Reps: c.Int("reps"),
		MTP: c.Bool("mtp"), MTPVocab: qwen.DefaultMTPVocab}
	if c.Bool("mtp") && c.IsSet("draft-ratio") {
		return cliutil.Usagef(c, "--mtp measures the draft's cost: --draft-ratio is for a draft model")
	}
	rows, mc, err := bench.DraftCost(cfg)
	if err != nil {
		return err
	}
	bench.WriteDraftTable(os.Stdout, cfg, rows)
	a := c.Float64Slice("acceptance")
	if cfg.MTP {
		bench.WriteMTPCost(os.Stdout, cfg, mc)
		bench.WriteProjection(os.Stdout, mc.Ratio, a, bench.Project(rows, mc.Ratio, a))
	}
	if r := c.Float64("draft-ratio"); r > 0 {
		bench.WriteProjection(os.Stdout, r, a, bench.Project(rows, r, a))
	}
	return nil
}
