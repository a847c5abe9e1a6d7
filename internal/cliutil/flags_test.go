package cliutil

import (
	"testing"

	"github.com/urfave/cli/v2"
)

// TestFlagChecks: AtMostOne names the flags given together as the user
// wrote them, AtLeast the flag below its least.
func TestFlagChecks(t *testing.T) {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "prompt", Aliases: []string{"p"}},
		&cli.StringFlag{Name: "file", Aliases: []string{"f"}},
		&cli.StringFlag{Name: "tokens"},
		&cli.IntFlag{Name: "n", Value: 5},
	}
	for _, tc := range []struct {
		args       []string
		one, least string
	}{
		{[]string{"-p", "x"}, "", ""},
		{[]string{"-p", "x", "--tokens", "1"}, "-p and --tokens both give the prompt; use one", ""},
		{[]string{"--prompt", "x", "-f", "a", "--tokens", "1"}, "-p, -f and --tokens all give the prompt; use one", ""},
		{[]string{"-n", "0"}, "", "--n 0: want 1 or more"},
	} {
		var one, least error
		app := &cli.App{Flags: flags, Action: func(c *cli.Context) error {
			one, least = AtMostOne(c, "give the prompt", "-p", "-f", "--tokens"), AtLeast(c, 1, "n")
			return nil
		}}
		if err := app.Run(append([]string{"x"}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		if got := errText(one); got != tc.one {
			t.Errorf("%q: AtMostOne %q, want %q", tc.args, got, tc.one)
		}
		if got := errText(least); got != tc.least {
			t.Errorf("%q: AtLeast %q, want %q", tc.args, got, tc.least)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
