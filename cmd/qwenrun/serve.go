package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
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
			&cli.StringFlag{Name: "api-key", EnvVars: []string{"QWEN_API_KEY"}, Usage: "require `KEY` on every request but /health and / (Authorization: Bearer KEY, or x-api-key: KEY)"},
			&cli.DurationFlag{Name: "grace", Value: 10 * time.Second, Usage: "on SIGINT or SIGTERM, how long running answers may go on before they are cut"},
			&cli.StringSliceFlag{Name: "alias", Usage: "let requests name the model in `NAME=FILE` (a .qbin file: MODEL's, or another's) NAME, as clients that hard-code a model id (gpt-5-codex, claude-sonnet-4-5) do; repeatable"},
			&cli.StringSliceFlag{Name: "allow-origin", Usage: "let browser pages of `ORIGIN` (scheme://host[:port], * for any part; * alone: every origin) call the server, besides this machine's and apps' (localhost, 127.0.0.1, app://, vscode-webview://, ...); requests from other pages are refused; repeatable"},
			&cli.StringFlag{Name: "model-dir", Usage: "let requests name every .qbin file in `DIR` by its base name; one model is loaded at a time, another loaded when a request names it"},
			kvTypeFlag(),
			threadsFlag(),
			kernelsFlag(),
			modelflags.InsecureFlag(),
		}, slices.Concat(draftFlags(), logFlags(), modelflags.StateCacheFlags("keep at most `SIZE` (4GiB, 512MB, ...; 0: none) of finished conversations' states, for later requests that share their prefix to compute only what is new",
			"a quarter of the available memory, 256 MiB to 16 GiB"))...),
		Action: serveAction,
	}
}

func serveAction(c *cli.Context) error {
	parallel := c.Int("parallel")
	switch {
	case c.NArg() != 1:
		return cliutil.Usagef(c, "serve: want one MODEL.qbin argument, got %d", c.NArg())
	case parallel < 1:
		return cliutil.Usagef(c, "--parallel %d: at least 1 conversation", parallel)
	// 0 is the engine's default queue, 4 x --parallel, not none.
	case c.IsSet("queue") && c.Int("queue") < 1:
		return cliutil.Usagef(c, "--queue %d: want 1 or more (without the flag, 4 x --parallel)", c.Int("queue"))
	case c.Duration("grace") < 0:
		return cliutil.Usagef(c, "--grace %s: want 0 or more", c.Duration("grace"))
	}
	if err := serve.CheckOrigins(c.StringSlice("allow-origin")); err != nil {
		return fmt.Errorf("--allow-origin: %w", err)
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
	d.AutoMTP(c)
	// A pulled model's file is named by its digest: the server names it
	// by its repository instead.
	arg, name := c.Args().First(), ""
	if oci.IsRef(arg) {
		name = oci.ModelName(arg)
	}
	models, err := modelNames(c, cmp.Or(name, strings.TrimSuffix(filepath.Base(arg), filepath.Ext(arg))))
	if err != nil {
		return err
	}
	// What every model served takes; MODEL also its draft model.
	opts, err := modelflags.StateCache(c)
	if err != nil {
		return err
	}
	opts = append(opts, qwen.WithQueue(c.Int("queue")))
	m, err := modelflags.Open(c, log, notes, parallel, append(d.Options(), opts...)...)
	if err != nil {
		return err
	}
	defer m.Close()
	d.Opened(m)
	if d.Auto && d.MTP > 0 {
		log.Info("drafting with the model's MTP block (--draft none turns it off)", "guess_cost", m.Info().MTPCost)
	}
	// The models loaded in MODEL's place share its flags, but not its
	// draft model, whose vocabulary need not be theirs.
	open := func(path string) (*qwen.Model, error) {
		return modelflags.OpenFile(c, log, notes, path, parallel, opts...)
	}
	s := serve.NewServer(m, serve.ServerOptions{Name: name, APIKey: c.String("api-key"), Log: log, AllowOrigins: c.StringSlice("allow-origin"),
		Draft: d.Text, DraftModel: d.Model, DraftMTP: d.MTP, DraftMin: d.Min, DraftPMin: d.PMin, Models: models, Open: open})
	defer s.Close()
	ln, err := net.Listen("tcp", c.String("addr"))
	if err != nil {
		return err
	}
	log.Info("serving", "model", s.Name(), "url", "http://"+ln.Addr().String(), "parallel", parallel, "context", m.Info().Context)
	if len(models) > 0 {
		log.Info("requests may also name", "models", strings.Join(slices.Sorted(maps.Keys(models)), ", "))
	}
	if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() && c.String("api-key") == "" {
		log.Warn("the address is reachable beyond this machine and no --api-key is set", "addr", ln.Addr().String())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = s.Serve(ctx, ln, c.Duration("grace"))
	log.Info("stopped")
	return err
}

// modelNames reads --model-dir and --alias: the names requests may give
// besides served, MODEL's, and their files. An alias wins over a file of
// the directory of the same name, and MODEL over both (the directory may
// hold it); an alias of MODEL's own name is refused.
func modelNames(c *cli.Context, served string) (map[string]string, error) {
	models := map[string]string{}
	if dir := c.String("model-dir"); dir != "" {
		var err error
		if models, err = serve.ModelDir(dir); err != nil {
			return nil, fmt.Errorf("--model-dir: %w", err)
		}
		delete(models, served)
	}
	seen := map[string]bool{}
	for _, a := range c.StringSlice("alias") {
		name, file, ok := strings.Cut(a, "=")
		switch {
		case !ok || name == "" || file == "":
			return nil, cliutil.Usagef(c, "--alias %q: want NAME=FILE", a)
		case seen[name]:
			return nil, cliutil.Usagef(c, "--alias %q: the name %q is given twice", a, name)
		case name == served:
			return nil, cliutil.Usagef(c, "--alias %q: %q is MODEL's own name", a, name)
		}
		if st, err := os.Stat(file); err != nil || !st.Mode().IsRegular() {
			return nil, cliutil.Usagef(c, "--alias %q: %s is not a .qbin file", a, file)
		}
		seen[name], models[name] = true, file
	}
	return models, nil
}
