package main

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/qwenc/qwenc/cmd/internal/terminal"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/runtime/sampling"
	"github.com/urfave/cli/v2"
)

// runChat chats in the terminal, or answers one message (-p or -f).
func runChat(c *cli.Context, s *setup) error {
	if s.info.ChatTemplate == "" {
		return errors.New("this model has no chat template; use raw completion (-p without --chat)")
	}
	qc, err := s.m.NewConversation(c.String("system"))
	if err != nil {
		return err
	}
	// The sampling as the flags give it, which /set changes: each turn
	// gets its own seed from it, so that a chat with --seed is
	// reproducible whatever it says.
	req := qwen.Request{NoThinking: c.Bool("no-think"), Sampling: &s.params, JSONSchema: s.schema, JSONObject: s.object}
	s.drafts.Apply(&req)
	maxTokens(&req, c.Int("max-tokens"))
	if err := qc.SetSettings(req); err != nil {
		return requestError(err) // it checks the schema now, not the first turn
	}
	ch := terminal.NewChat(s.m, qc, terminal.ChatOptions{JSON: c.Bool("json"), Verbose: c.Bool("verbose"),
		HideThinking: c.Bool("hide-think"), NoAnswer: c.Int("max-tokens") == 0, Load: s.loadTime,
		PenaltiesOff: c.IsSet(sampling.RepeatLastNFlag) && c.Int(sampling.RepeatLastNFlag) == 0})
	text, oneShot, err := promptText(c)
	if err != nil {
		return err
	}
	if !oneShot {
		return requestError(ch.Interactive())
	}
	if strings.TrimSpace(text) == "" { // as a piped chat skips a blank line
		return errors.New("the prompt is empty")
	}
	ctx, stop := cliutil.SignalContext(context.Background())
	defer stop()
	res, err := ch.Turn(ctx, text)
	if err != nil {
		return requestError(err)
	}
	if c.Bool("json") {
		if err := printJSON(s, res); err != nil {
			return err
		}
	}
	printStats(os.Stderr, s, res)
	if res.Stop == qwen.StopInterrupt {
		return context.Cause(ctx) // the signal, for the exit status
	}
	return nil
}
