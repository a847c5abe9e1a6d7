package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/qwenc/qwenc/cmd/internal/modelflags"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/internal/fsutil"
	"github.com/urfave/cli/v2"
)

// checkFlags refuses flag values that mean nothing, before the model is
// loaded: a run should not spend seconds mapping and checking a model to
// fail on a typo. --ctx is checked as the model opens, where the model's
// maximum completes the range the message gives.
func checkFlags(c *cli.Context) error {
	if err := cliutil.AtMostOne(c, "give the prompt", "-p", "-f", "--tokens"); err != nil {
		return err
	}
	if err := checkModeFlags(c); err != nil {
		return err
	}
	if n := c.Int("max-tokens"); n < -1 {
		return fmt.Errorf("-n %d: want -1 (until the end of sequence or context), 0 (evaluate the prompt only) or a number of tokens", n)
	}
	if err := modelflags.CheckSampling(c); err != nil {
		return err
	}
	if err := modelflags.Check(c, os.Stderr); err != nil {
		return err
	}
	if path := c.String("logits"); path != "" {
		if err := fsutil.CheckOutput(path); err != nil {
			return fmt.Errorf("--logits %s: %w", path, err)
		}
	}
	return nil
}

// checkModeFlags refuses the flags of the other mode, chat or raw
// completion: the mode run would ignore them, and the user would not
// learn that the system message or the logits they asked for never came.
func checkModeFlags(c *cli.Context) error {
	if c.Bool("chat") {
		if c.IsSet("tokens") {
			return errors.New("--tokens gives raw token ids; it cannot be used with --chat")
		}
		if c.IsSet("logits") {
			return errors.New("--logits writes a raw completion's prompt logits; it cannot be used with --chat")
		}
		return nil
	}
	// --verbose is left alone: raw completion always prints its
	// statistics, and make bench-a3b-full asks for them so.
	for _, f := range []string{"system", "no-think", "hide-think"} {
		if c.IsSet(f) {
			return fmt.Errorf("--%s is for --chat; raw completion would ignore it", f)
		}
	}
	return nil
}
