package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/qwenc/qwenc/cmd/internal/modelflags"
	"github.com/qwenc/qwenc/cmd/internal/terminal"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/runtime/infer"
	"github.com/qwenc/qwenc/runtime/perplexity"
	"github.com/urfave/cli/v2"
)

func perplexityCommand() *cli.Command {
	return &cli.Command{
		Name:      "perplexity",
		Usage:     "measure the perplexity of a text, as llama.cpp's llama-perplexity does",
		ArgsUsage: "MODEL.qbin",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "the text to score (`PATH`, - for stdin; required)"},
			&cli.IntFlag{Name: "ctx", Value: 512, Usage: "tokens per chunk; the second half of each chunk is scored"},
			&cli.StringFlag{Name: "base", Usage: "also compare with this model (`PATH` of a .qbin): mean KL divergence and top-1 agreement"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object at the end"},
			kvTypeFlag(),
			threadsFlag(),
			kernelsFlag(),
		},
		Action:       perplexityAction,
		OnUsageError: cliutil.OnUsageError,
	}
}

func perplexityAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usagef(c, "perplexity: want one MODEL.qbin argument, got %d", c.NArg())
	}
	// Not a Required flag: the flag library would print the whole help
	// to stdout with the error.
	if !c.IsSet("file") {
		return cliutil.Usagef(c, "perplexity: give the text to score with -f PATH")
	}
	if err := modelflags.Check(c, os.Stderr); err != nil {
		return err
	}
	kp, err := modelflags.KernelPath(c)
	if err != nil {
		return err
	}
	po := perplexity.Options{Ctx: c.Int("ctx")}
	po.KV, _ = modelflags.KVType(c) // checked above
	text, err := cliutil.ReadInput(c.String("file"))
	if err != nil {
		return err
	}
	ctx, stop := cliutil.SignalContext(context.Background())
	defer stop()
	progress := perplexity.NewProgress(os.Stderr, terminal.IsTerminal(os.Stderr))
	po.Progress = progress.Chunk
	ro := infer.Options{Threads: c.Int("threads"), Kernels: kp}
	res, tokens, err := perplexity.Measure(ctx, c.Args().First(), c.String("base"), string(text), ro, po)
	progress.End()
	switch {
	case errors.Is(err, context.Canceled):
		return context.Cause(ctx) // the signal, for the exit status
	case errors.Is(err, perplexity.ErrTooShort):
		return fmt.Errorf("%s: %w", c.String("file"), err)
	case err != nil:
		return err
	}
	if c.Bool("json") {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	// Write's errors stay in the buffer, for the exit status: a figure
	// lost to a full disk is a failure.
	w := bufio.NewWriter(os.Stdout)
	res.Write(w, tokens)
	if err := w.Flush(); err != nil {
		return fmt.Errorf("writing the result: %w", err)
	}
	return nil
}
