package main

import (
	"context"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/qwenc/qwenc/cmd/internal/modelflags"
	"github.com/qwenc/qwenc/cmd/internal/report"
	"github.com/qwenc/qwenc/format/oci"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/qwen/serve"
	"github.com/urfave/cli/v2"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "answer OpenAI-, Ollama- and Anthropic-compatible HTTP requests, many conversations batched into each step; MODEL may be oci://REGISTRY/REPO:TAG, pulled on first use",
		ArgsUsage: "MODEL.qbin",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8080", Usage: "listen on `HOST:PORT` (port 0: any free port)"},
			&cli.IntFlag{Name: "parallel", Value: 4, Usage: "conversations that decode together"},
			&cli.IntFlag{Name: "queue", Usage: "requests that may wait for a free slot, beyond which the answer is 503", DefaultText: "4 x --parallel"},
			&cli.IntFlag{Name: "ctx", Usage: "context length of each conversation", DefaultText: "the model's maximum, lowered to what --parallel KV caches fit in memory"},
			&cli.StringFlag{Name: "api-key", EnvVars: []string{"QWEN_API_KEY"}, Usage: "require `KEY` on every request but /health (Authorization: Bearer KEY, or x-api-key: KEY)"},
			&cli.DurationFlag{Name: "grace", Value: 10 * time.Second, Usage: "on SIGINT or SIGTERM, how long running answers may go on before they are cut"},
			kvTypeFlag(),
			threadsFlag(),
			kernelsFlag(),
			insecureFlag(),
		}, append(draftFlags(), logFlags()...)...),
		Action: serveAction,
	}
}

func serveAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usagef(c, "serve: want one MODEL.qbin argument, got %d", c.NArg())
	}
	parallel := c.Int("parallel")
	if parallel < 1 {
		return cliutil.Usagef(c, "--parallel %d: at least 1 conversation", parallel)
	}
	if c.Int("queue") < 0 {
		return cliutil.Usagef(c, "--queue %d: not negative", c.Int("queue"))
	}
	log, err := modelflags.Logger(c, os.Stderr)
	if err != nil {
		return err
	}
	// A server's stderr is its log: what the commands print there as
	// lines becomes records too.
	notes := report.LogLines(log, "qwenrun")
	if err := modelflags.Check(c, notes); err != nil {
		return err
	}
	d, err := modelflags.ReadDrafts(c)
	if err != nil {
		return err
	}
	m, err := modelflags.Open(c, log, notes, parallel, append(d.Options(), qwen.WithQueue(c.Int("queue")))...)
	if err != nil {
		return err
	}
	defer m.Close()
	// A pulled model's file is named by its digest: the server names it
	// by its repository instead.
	var name string
	if oci.IsRef(c.Args().First()) {
		name = oci.ModelName(c.Args().First())
	}
	s := serve.NewServer(m, serve.ServerOptions{Name: name, APIKey: c.String("api-key"), Log: log,
		Draft: d.Text, DraftModel: d.Model, DraftMin: d.Min, DraftPMin: d.PMin})
	ln, err := net.Listen("tcp", c.String("addr"))
	if err != nil {
		return err
	}
	log.Info("serving", "model", s.Name(), "url", "http://"+ln.Addr().String(), "parallel", parallel, "context", m.Info().Context)
	if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() && c.String("api-key") == "" {
		log.Warn("the address is reachable beyond this machine and no --api-key is set", "addr", ln.Addr().String())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = s.Serve(ctx, ln, c.Duration("grace"))
	log.Info("stopped")
	return err
}
