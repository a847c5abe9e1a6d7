package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/qwenc/qwenc/infer"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/perplexity"
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
	if err := checkModelFlags(c); err != nil {
		return err
	}
	kp, err := kernelPath(c)
	if err != nil {
		return err
	}
	po := perplexity.Options{Ctx: c.Int("ctx")}
	po.KV, _ = kvType(c) // checked above
	var text []byte
	if f := c.String("file"); f == "-" {
		text, err = io.ReadAll(os.Stdin)
	} else {
		text, err = os.ReadFile(f)
	}
	if err != nil {
		return err
	}
	opts := infer.Options{Threads: c.Int("threads"), Kernels: kp}
	m, err := infer.Open(c.Args().First(), opts)
	if err != nil {
		return err
	}
	defer m.Close()
	if path := c.String("base"); path != "" {
		if po.Base, err = infer.Open(path, opts); err != nil {
			return err
		}
		defer po.Base.Close()
	}
	tokens := perplexity.Tokens(m, string(text))
	ctx, stop := cliutil.SignalContext(context.Background())
	defer stop()
	tty := isTerminal(os.Stderr)
	t0 := time.Now()
	po.Progress = func(done, total int, r perplexity.Result) {
		el := time.Since(t0)
		left := time.Duration(float64(el) / float64(done) * float64(total-done))
		line := fmt.Sprintf("chunk %d/%d: PPL %.4f ± %.4f, %.1f s, about %.0f s left", done, total, r.PPL, r.PPLStderr, el.Seconds(), left.Seconds())
		if tty {
			fmt.Fprintf(os.Stderr, "\r\x1b[K%s", line)
			if done == total {
				fmt.Fprintln(os.Stderr)
			}
		} else if done == total || done%10 == 0 {
			fmt.Fprintln(os.Stderr, line)
		}
	}
	res, err := perplexity.Run(ctx, m, tokens, po)
	if tty && err != nil {
		fmt.Fprintln(os.Stderr)
	}
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
	res.Write(os.Stdout, len(tokens))
	return nil
}
