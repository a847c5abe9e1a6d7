package main

import (
	"fmt"
	"os"

	"github.com/qwenc/qwenc/cmd/internal/modelflags"
	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/kernels"
	"github.com/qwenc/qwenc/qwen/bench"
	"github.com/urfave/cli/v2"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench",
		Usage:     "measure prefill and decode speed against the machine's read bandwidth",
		ArgsUsage: "MODEL.qbin [MODEL.qbin ...]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "threads", Value: "1,2", Usage: "thread counts to measure"},
			&cli.StringFlag{Name: "kernels", Usage: "kernel paths to measure: all, or a list of auto, generic, avx2, avxvnni, avx512, avx512vnni",
				DefaultText: "$" + modelflags.KernelsEnv + ", or this CPU's fastest"},
			&cli.IntFlag{Name: "pp", Value: 512, Usage: "prompt tokens for the prefill measurement"},
			&cli.IntFlag{Name: "tg", Value: 128, Usage: "tokens for the decode measurement"},
			&cli.IntFlag{Name: "reps", Value: 5, Usage: "repetitions (the table shows medians: the machine is shared)"},
			&cli.StringFlag{Name: "kv-type", Value: "f16", Usage: "KV cache types to measure (a list: f16,q8)"},
			&cli.StringFlag{Name: "depth", Value: "0", Usage: "tokens already in the KV cache before each measurement, as llama-bench -d (a list: 0,4096,16384)"},
			&cli.StringFlag{Name: "fill", Value: "prefill", Usage: "how the depth gets into the cache: prefill (as llama-bench), or random keys and values (for depths whose prefill takes hours: decode and memory are measured the same)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object per measurement instead of the table"},
		},
		Action:       benchAction,
		OnUsageError: cliutil.OnUsageError,
	}
}

func benchAction(c *cli.Context) error {
	if c.NArg() < 1 {
		return cliutil.Usagef(c, "bench: want one or more MODEL.qbin arguments")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg := bench.Config{Models: c.Args().Slice(), PP: c.Int("pp"), TG: c.Int("tg"), Reps: c.Int("reps"),
		RandomFill: c.String("fill") == "random", FirstToken: bench.ProcessFirstToken(exe), Log: os.Stdout}
	if cfg.Threads, err = cliutil.Ints(c.String("threads"), 1, "a positive number"); err != nil {
		return fmt.Errorf("--threads: %w", err)
	}
	for _, t := range cfg.Threads {
		if err := modelflags.CheckThreads(os.Stderr, "--threads", t); err != nil {
			return err
		}
	}
	if cfg.KV, err = cliutil.List(c.String("kv-type"), format.ParseKVType); err != nil {
		return fmt.Errorf("--kv-type: %w", err)
	}
	if f := c.String("fill"); f != "prefill" && f != "random" {
		return fmt.Errorf("--fill %q: want prefill or random", f)
	}
	if cfg.Depths, err = cliutil.Ints(c.String("depth"), 0, "a number of tokens"); err != nil {
		return fmt.Errorf("--depth: %w", err)
	}
	if c.IsSet("kernels") {
		if cfg.Kernels, err = bench.ParseKernels(c.String("kernels")); err != nil {
			return fmt.Errorf("--kernels: %w", err)
		}
	} else {
		p, err := modelflags.KernelPath(c)
		if err != nil {
			return err
		}
		cfg.Kernels = []kernels.Path{p}
	}
	if c.Bool("json") {
		cfg.Log = os.Stderr // stdout has the JSON objects only
	}
	rows, err := bench.Run(cfg)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return bench.WriteJSON(os.Stdout, rows)
	}
	bench.WriteTable(os.Stdout, rows)
	return nil
}
