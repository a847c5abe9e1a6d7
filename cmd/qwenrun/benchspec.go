package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/qwenc/qwenc/bench"
	"github.com/qwenc/qwenc/qwen"
	"github.com/urfave/cli/v2"
)

func benchSpecCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench-spec",
		Usage:     "measure greedy decoding with drafts (--draft, or --prediction of the answer) against without, per prompt: acceptance, speedup, same text",
		ArgsUsage: "MODEL.qbin",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "prompts", Value: "testdata/spec-prompts", Usage: "a `DIR` of raw prompts, one per file, or one file"},
			&cli.IntFlag{Name: "tokens", Value: 200, Usage: "tokens generated per request"},
			&cli.IntFlag{Name: "rounds", Value: 3, Usage: "rounds of each prompt, alternating without and with drafts; the table shows medians"},
			&cli.BoolFlag{Name: "prediction", Usage: "predict each answer as given without drafts (OpenAI's prediction of an unchanged file)"},
			threadsFlag(),
			kernelsFlag(),
		}, draftFlags()...),
		Action: benchSpec,
	}
}

func benchSpec(c *cli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("bench-spec: want one MODEL.qbin argument")
	}
	if err := checkModelFlags(c); err != nil {
		return err
	}
	d, err := draftFlagValues(c)
	if err != nil {
		return err
	}
	if c.Bool("prediction") && d.text == 0 {
		d.text = qwen.DefaultDraft
	}
	if d.text == 0 && d.model == 0 {
		return errors.New("bench-spec: want --draft or --prediction")
	}
	prompts, err := readPrompts(c.String("prompts"))
	if err != nil {
		return err
	}
	kp, err := kernelPath(c)
	if err != nil {
		return err
	}
	cfg := bench.SpecConfig{Model: c.Args().First(), Prompts: prompts, Tokens: c.Int("tokens"), Rounds: c.Int("rounds"),
		Options: append(d.options(), qwen.WithThreads(c.Int("threads")), qwen.WithKernels(kp.String())),
		Draft:   d.text, DraftModel: d.model, DraftPMin: d.pMin, Prediction: c.Bool("prediction")}
	rows, err := bench.Spec(cfg)
	if err != nil {
		return err
	}
	what := "--draft " + c.String("draft")
	if c.Bool("prediction") {
		what = "--prediction (the answer itself)"
	}
	bench.WriteSpecTable(os.Stdout, fmt.Sprintf("%s, %s, greedy, %d tokens, %d threads: decode with %s against without",
		cfg.Model, kp, cfg.Tokens, c.Int("threads"), what), rows)
	return nil
}

// readPrompts reads a file, or every file of a directory in name order.
func readPrompts(dir string) ([]bench.SpecPrompt, error) {
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		b, err := os.ReadFile(dir)
		name := filepath.Base(dir)
		return []bench.SpecPrompt{{Name: strings.TrimSuffix(name, filepath.Ext(name)), Text: string(b)}}, err
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--prompts: %w", err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name() < files[j].Name() })
	var out []bench.SpecPrompt
	for _, f := range files {
		if f.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, bench.SpecPrompt{Name: strings.TrimSuffix(f.Name(), filepath.Ext(f.Name())), Text: string(b)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--prompts %s: no prompt files", dir)
	}
	return out, nil
}
