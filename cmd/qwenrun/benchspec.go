package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/qwenc/qwenc/cmd/internal/modelflags"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/qwen/bench"
	"github.com/urfave/cli/v2"
)

func benchSpecCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench-spec",
		Usage:     "measure greedy decoding with drafts (--draft, or --prediction of the answer) against without, per prompt: acceptance, speedup, same text",
		ArgsUsage: "MODEL.qbin",
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "prompts", Value: "testdata/spec-prompts", Usage: "a `DIR` of raw prompts, one per file, or one file"},
			&cli.IntFlag{Name: "tokens", Value: 200, Usage: "tokens generated per request"},
			&cli.IntFlag{Name: "rounds", Value: 3, Usage: "rounds of each prompt, alternating without and with drafts; the table shows medians"},
			&cli.BoolFlag{Name: "prediction", Usage: "predict each answer as given without drafts (OpenAI's prediction of an unchanged file)"},
			threadsFlag(),
			kernelsFlag(),
		}, draftFlags()...), logFlags()...),
		Action: benchSpec,
	}
}

func benchSpec(c *cli.Context) error {
	log, err := modelflags.One(c, "bench-spec")
	if err != nil {
		return err
	}
	if err := cliutil.AtLeast(c, 1, "rounds"); err != nil {
		return err
	}
	if err := cliutil.AtLeast(c, 2, "tokens"); err != nil {
		return err
	}
	d, err := modelflags.ReadDrafts(c)
	if err != nil {
		return err
	}
	if c.Bool("prediction") && d.Text == 0 {
		d.Text = qwen.DefaultDraft
	}
	if d.Text == 0 && d.Model == 0 {
		return errors.New("bench-spec: want --draft or --prediction")
	}
	prompts, err := bench.ReadPrompts(c.String("prompts"))
	if err != nil {
		return fmt.Errorf("--prompts: %w", err)
	}
	kp, err := modelflags.KernelPath(c)
	if err != nil {
		return err
	}
	cfg := bench.SpecConfig{Model: c.Args().First(), Prompts: prompts, Tokens: c.Int("tokens"), Rounds: c.Int("rounds"),
		Options: append(d.Options(), modelflags.Options(c, log)...),
		Draft:   d.Text, DraftModel: d.Model, DraftPMin: d.PMin, Prediction: c.Bool("prediction")}
	rows, err := bench.Spec(cfg)
	if err != nil {
		return err
	}
	what := "--draft " + c.String("draft")
	if c.Bool("prediction") {
		what = "--prediction (the answer itself)"
	}
	bench.WriteSpecTable(os.Stdout, fmt.Sprintf("%s, %s, greedy, %d tokens, %d threads: decode with %s against without",
		cfg.Model, kp, cfg.Tokens, cmp.Or(c.Int("threads"), runtime.GOMAXPROCS(0)), what), rows)
	return nil
}
