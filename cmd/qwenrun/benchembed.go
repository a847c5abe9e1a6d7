package main

import (
	"fmt"
	"os"

	"github.com/qwenc/qwenc/cmd/internal/modelflags"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/qwen/bench"
	"github.com/urfave/cli/v2"
)

func benchEmbedCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench-embed",
		Usage:     "measure embedding many short inputs together against one input of a prefill batch's length, on an embedding model",
		ArgsUsage: "MODEL.qbin",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "inputs", Value: 64, Usage: "inputs embedded together"},
			&cli.IntFlag{Name: "tokens", Value: 64, Usage: "tokens of each of them"},
			&cli.IntFlag{Name: "long", Value: 512, Usage: "tokens of the one input they are compared with"},
			&cli.IntFlag{Name: "reps", Value: 3, Usage: "rounds; the ratio is the median of the rounds'"},
			threadsFlag(),
			kernelsFlag(),
		}, logFlags()...),
		Action: benchEmbed,
	}
}

func benchEmbed(c *cli.Context) error {
	log, err := modelflags.One(c, "bench-embed")
	if err != nil {
		return err
	}
	if err := cliutil.AtLeast(c, 1, "inputs", "reps"); err != nil {
		return err
	}
	if err := cliutil.AtLeast(c, 2, "tokens", "long"); err != nil {
		return err
	}
	cfg := bench.EmbedConfig{Model: c.Args().First(), Inputs: c.Int("inputs"), Tokens: c.Int("tokens"), Long: c.Int("long"), Reps: c.Int("reps"),
		Options: modelflags.Options(c, log)}
	res, err := bench.Embed(cfg)
	if err != nil {
		return err
	}
	fmt.Printf("model %s\n", cfg.Model)
	res.Write(os.Stdout, cfg)
	return nil
}
