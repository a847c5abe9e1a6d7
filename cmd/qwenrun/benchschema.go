package main

import (
	"fmt"
	"os"

	"github.com/qwenc/qwenc/cmd/internal/modelflags"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/qwen/bench"
	"github.com/urfave/cli/v2"
)

func benchSchemaCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench-schema",
		Usage:     "measure decoding held to a JSON Schema against decoding free, and the grammar's mask time per token",
		ArgsUsage: "MODEL.qbin",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "json-schema", Usage: "the schema, from `PATH`", DefaultText: "objects of a name and a quantity in an array"},
			&cli.IntFlag{Name: "tg", Value: 128, Usage: "tokens to generate, at most (a schema can end the answer sooner)"},
			&cli.IntFlag{Name: "reps", Value: 3, Usage: "rounds, each a free and a held generation; the ratio is the median of the rounds'"},
			kvTypeFlag(),
			threadsFlag(),
			kernelsFlag(),
		}, logFlags()...),
		Action: benchSchema,
	}
}

func benchSchema(c *cli.Context) error {
	log, err := modelflags.One(c, "bench-schema")
	if err != nil {
		return err
	}
	// --tg 0 would be a request without a limit.
	if err := cliutil.AtLeast(c, 1, "tg"); err != nil {
		return err
	}
	schema := bench.DefaultSchema
	if c.IsSet("json-schema") {
		var err error
		if schema, err = readSchema(c); err != nil {
			return err
		}
	}
	cfg := bench.SchemaConfig{Model: c.Args().First(), Schema: schema, TG: c.Int("tg"), Reps: c.Int("reps"),
		Options: modelflags.Options(c, log)}
	res, err := bench.Schema(cfg)
	if err != nil {
		return requestError(err)
	}
	fmt.Printf("model %s; up to %d tokens per generation\n", cfg.Model, cfg.TG)
	res.Write(os.Stdout)
	return nil
}
