package main

import (
	"fmt"
	"os"

	"github.com/qwenc/qwenc/cmd/internal/modelflags"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/qwen/bench"
	"github.com/urfave/cli/v2"
)

func benchServeCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench-serve",
		Usage:     "measure the server's engine with concurrent streams: throughput, time to first token, inter-token latency",
		ArgsUsage: "MODEL.qbin",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "streams", Value: "1,4,8,16", Usage: "concurrent streams to measure"},
			&cli.IntFlag{Name: "pp", Value: 64, Usage: "prompt tokens of each request"},
			&cli.IntFlag{Name: "tg", Value: 64, Usage: "tokens each request generates"},
			&cli.IntFlag{Name: "requests", Value: 3, Usage: "requests each client sends one after another in the back-to-back measurement"},
			&cli.IntFlag{Name: "reps", Value: 3, Usage: "rounds over the stream counts; the table has medians, and each multiple of one stream is taken within a round (the host's bandwidth drifts between rounds)"},
			kvTypeFlag(),
			threadsFlag(),
			kernelsFlag(),
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the run to `PATH` (for development)"},
		}, logFlags()...),
		Action: benchServe,
	}
}

func benchServe(c *cli.Context) error {
	log, err := modelflags.One(c, "bench-serve")
	if err != nil {
		return err
	}
	if err := cliutil.AtLeast(c, 1, "pp", "tg"); err != nil {
		return err
	}
	streams, err := cliutil.Ints(c.String("streams"), 1, "a positive number")
	if err != nil {
		return fmt.Errorf("--streams: %w", err)
	}
	cfg := bench.ServeConfig{Model: c.Args().First(), Streams: streams, PP: c.Int("pp"), TG: c.Int("tg"),
		Requests: c.Int("requests"), Reps: c.Int("reps"), Log: os.Stderr,
		Options: modelflags.Options(c, log)}
	if err := cfg.WriteHeader(os.Stdout); err != nil {
		return err
	}
	stop, err := cliutil.StartProfile(c.String("cpuprofile"))
	if err != nil {
		return err
	}
	defer stop()
	res, err := bench.Serve(cfg)
	if err != nil {
		return err
	}
	res.WriteTables(os.Stdout)
	return nil
}
