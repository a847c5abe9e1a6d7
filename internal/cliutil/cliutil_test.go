package cliutil

import (
	"slices"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestFlagsFirst(t *testing.T) {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "prompt", Aliases: []string{"p"}},
		&cli.IntFlag{Name: "n"},
		&cli.BoolFlag{Name: "json"},
	}
	for _, tc := range []struct {
		args, want []string
		err        string
	}{
		{args: []string{"m.qbin", "-p", "hi", "--json"}, want: []string{"-p", "hi", "--json", "--", "m.qbin"}},
		{args: []string{"-p", "hi", "m.qbin"}, want: []string{"-p", "hi", "--", "m.qbin"}},
		{args: []string{"--json", "-n", "3"}, want: []string{"--json", "-n", "3"}},
		// A value that looks like a flag is still the value, as for the flag library.
		{args: []string{"m.qbin", "-p", "--json"}, want: []string{"-p", "--json", "--", "m.qbin"}},
		// An empty value given with = is a value: nothing more is taken.
		{args: []string{"m.qbin", "--prompt="}, want: []string{"--prompt=", "--", "m.qbin"}},
		{args: []string{"m.qbin", "--prompt=", "x"}, want: []string{"--prompt=", "--", "m.qbin", "x"}},
		{args: []string{"m.qbin", "--", "-p"}, want: []string{"--", "m.qbin", "-p"}},
		{args: []string{"m.qbin", "--json"}, want: []string{"--json", "--", "m.qbin"}},
		{args: []string{"m.qbin", "-"}, want: []string{"--", "m.qbin", "-"}},
		// A value-taking flag with nothing after it, by any of its names.
		{args: []string{"m.qbin", "-p"}, err: "flag needs an argument: -p"},
		{args: []string{"m.qbin", "--prompt"}, err: "flag needs an argument: --prompt"},
		{args: []string{"m.qbin", "--json", "-n"}, err: "flag needs an argument: -n"},
		{args: []string{"-p"}, err: "flag needs an argument: -p"},
	} {
		got, err := FlagsFirst(tc.args, flags)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("FlagsFirst(%q): %q, %v; want error %q", tc.args, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("FlagsFirst(%q) = %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
}
