package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/qwenc/qwenc/cmd/internal/modelflags"
	"github.com/qwenc/qwenc/cmd/internal/report"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/qwen"
	"github.com/urfave/cli/v2"
)

// textsFlags say where embed's texts and rerank's documents come from,
// and take the flags of the model they are scored with.
func textsFlags(what string) []cli.Flag {
	return append([]cli.Flag{
		modelflags.InsecureFlag(),
		&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "the " + what + ", one per line, from `PATH` (- for standard input)"},
		&cli.BoolFlag{Name: "truncate", Usage: "cut an input longer than the context rather than refuse it"},
		&cli.IntFlag{Name: "ctx", Usage: "context length in `TOKENS`", DefaultText: "the model's"},
		threadsFlag(),
		kernelsFlag(),
	}, logFlags()...)
}

func embedCommand() *cli.Command {
	return &cli.Command{
		Name:  "embed",
		Usage: "embed texts with an embedding model (Qwen3-Embedding): one JSON line per text, {\"index\", \"embedding\"}, each of unit length",
		Description: "The texts are the arguments after the model, or the lines of --file, or else JSON lines on standard input\n" +
			"(each a string or {\"text\": ...}). Queries take Qwen3-Embedding's instruction form: --instruct TASK makes each\n" +
			"text \"Instruct: TASK\\nQuery:TEXT\"; embed the documents without it.",
		ArgsUsage: "MODEL.qbin [TEXT...]",
		Flags: append(textsFlags("texts"),
			&cli.StringFlag{Name: "instruct", Usage: "embed each text as a query for `TASK` (Qwen3-Embedding's instruction form)"},
			&cli.IntFlag{Name: "dimensions", Usage: "keep the first `D` values of each vector, renormalised (Matryoshka)", DefaultText: "all"},
		),
		Action: embedAction,
	}
}

func rerankCommand() *cli.Command {
	return &cli.Command{
		Name:  "rerank",
		Usage: "score documents against a query with a reranker (Qwen3-Reranker): one JSON line per document, {\"index\", \"score\", \"document\"}, the best first",
		Description: "The documents are the arguments after the model, or the lines of --file, or else JSON lines on standard input\n" +
			"(each a string or {\"text\": ...}). The score is the reranker's probability of \"yes\".",
		ArgsUsage: "MODEL.qbin [DOCUMENT...]",
		Flags: append(textsFlags("documents"),
			&cli.StringFlag{Name: "query", Aliases: []string{"q"}, Usage: "the `QUERY` (required)"},
			&cli.StringFlag{Name: "instruct", Usage: "the `TASK` the reranker judges by", DefaultText: qwen.DefaultRerankInstruct},
			&cli.IntFlag{Name: "top-n", Usage: "print the best `N` only", DefaultText: "all"},
		),
		Action: rerankAction,
	}
}

// scoring checks the flags, gathers the texts, opens the model and calls
// run with them; run writes its JSON lines to w.
func scoring(c *cli.Context, name string, run func(ctx context.Context, m *qwen.Model, texts []string, w io.Writer) error) error {
	if c.NArg() < 1 {
		return cliutil.Usagef(c, "%s: want MODEL.qbin", name)
	}
	if err := modelflags.Check(c, os.Stderr); err != nil {
		return err
	}
	log, err := modelflags.Logger(c, os.Stderr)
	if err != nil {
		return err
	}
	texts, err := report.ReadTexts(c.Args().Tail(), c.String("file"), os.Stdin)
	if err != nil {
		return err
	}
	if len(texts) == 0 {
		return fmt.Errorf("%s: no input: give texts after the model, --file PATH, or JSON lines on standard input", name)
	}
	ctx, stop := cliutil.SignalContext(context.Background())
	defer stop()
	m, err := modelflags.Open(c, log, os.Stderr, 1)
	if err != nil {
		return err
	}
	defer m.Close()
	w := bufio.NewWriter(os.Stdout)
	if err := run(ctx, m, texts, w); err != nil {
		if ctx.Err() != nil {
			// The signal, for the exit status: "context canceled" and
			// status 1 read as a failure of the model.
			return context.Cause(ctx)
		}
		return err
	}
	return w.Flush()
}

func embedAction(c *cli.Context) error {
	return scoring(c, "embed", func(ctx context.Context, m *qwen.Model, texts []string, w io.Writer) error {
		res, err := m.Embed(ctx, qwen.EmbedRequest{Inputs: texts, Instruct: c.String("instruct"), Dimensions: c.Int("dimensions"), Truncate: c.Bool("truncate")})
		if err != nil {
			return err
		}
		return report.WriteEmbeddings(w, res)
	})
}

func rerankAction(c *cli.Context) error {
	if !c.IsSet("query") {
		return fmt.Errorf("rerank: --query is required")
	}
	if c.IsSet("top-n") && c.Int("top-n") < 1 {
		return fmt.Errorf("--top-n %d: want 1 or more", c.Int("top-n"))
	}
	return scoring(c, "rerank", func(ctx context.Context, m *qwen.Model, docs []string, w io.Writer) error {
		res, err := m.Rerank(ctx, qwen.RerankRequest{Query: c.String("query"), Documents: docs, Instruct: c.String("instruct"), Truncate: c.Bool("truncate")})
		if err != nil {
			return err
		}
		return report.WriteReranking(w, res, docs, c.Int("top-n"))
	})
}
