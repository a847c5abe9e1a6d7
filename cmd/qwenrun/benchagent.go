package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/qwenc/qwenc/cmd/internal/modelflags"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/qwen/agentbench"
	"github.com/qwenc/qwenc/qwen/serve"
	"github.com/urfave/cli/v2"
)

func benchAgentCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench-agent",
		Usage:     "play a coding agent's session (a long system prompt, turns, an edited message, a retried answer) against the model served here and against other servers, and report the prompt tokens each computes and its time to first token",
		ArgsUsage: "MODEL.qbin",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "prefix", Value: 16384, Usage: "the system prompt's tokens"},
			&cli.IntFlag{Name: "turns", Value: 10, Usage: "the session's turns"},
			&cli.IntFlag{Name: "turn-tokens", Value: 300, Usage: "the tokens each turn's message adds"},
			&cli.IntFlag{Name: "answer", Value: 32, Usage: "the most tokens of each answer"},
			&cli.IntFlag{Name: "edit", Value: 6, Usage: "the turn that edits an earlier message (0: none)"},
			&cli.IntFlag{Name: "edit-of", Value: 3, Usage: "the turn whose message is edited"},
			&cli.IntFlag{Name: "retry", Value: 8, Usage: "the turn that retries the answer before it (0: none)"},
			&cli.StringSliceFlag{Name: "peer", Usage: "`NAME=URL` of another OpenAI-compatible server (llama-server) serving the same weights, to run the same session against after ours"},
			threadsFlag(),
			kernelsFlag(),
		}, modelflags.StateCacheFlags("the state cache's bound (serve's --state-cache)", "")...),
		Action: benchAgent,
	}
}

func benchAgent(c *cli.Context) error {
	log, err := modelflags.One(c, "bench-agent")
	if err != nil {
		return err
	}
	cache, err := modelflags.StateCache(c)
	if err != nil {
		return err
	}
	opts := append(modelflags.Options(c, log), cache...)
	m, err := qwen.Open(c.Args().First(), opts...)
	if err != nil {
		return err
	}
	defer m.Close()
	s := serve.NewServer(m, serve.ServerOptions{}) // its request log would drown the table
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: s.Handler()}
	go hs.Serve(ln)
	defer hs.Close()
	cfg := agentbench.Config{Model: m.Info().Name, Prefix: c.Int("prefix"), Turns: c.Int("turns"), TurnTokens: c.Int("turn-tokens"), Answer: c.Int("answer"),
		Edit: c.Int("edit"), EditOf: c.Int("edit-of"), Retry: c.Int("retry"), Seed: 1}
	names, urls := []string{"qwenrun"}, []string{"http://" + ln.Addr().String()}
	for _, p := range c.StringSlice("peer") {
		name, url, ok := strings.Cut(p, "=")
		if !ok {
			return cliutil.Usagef(c, "--peer %q: want NAME=URL", p)
		}
		names, urls = append(names, name), append(urls, url)
	}
	tok := agentbench.ModelTokenizer(m)
	// A peer that fails keeps the turns it answered; the table shows them
	// and the error follows it.
	var runs [][]agentbench.Turn
	var failed error
	for i, url := range urls {
		fmt.Fprintf(os.Stderr, "qwenrun: the session against %s (%s)\n", names[i], url)
		// A connection each request: llama-server closes idle ones while
		// a turn's answer is read, and a POST is not sent again.
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		turns, err := agentbench.Run(c.Context, client, url, cfg, tok)
		if err != nil {
			failed = errors.Join(failed, fmt.Errorf("%s: %w", names[i], err))
		}
		runs = append(runs, turns)
	}
	agentbench.Write(os.Stdout, names, runs)
	return failed
}
