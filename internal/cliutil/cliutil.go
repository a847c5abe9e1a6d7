package cliutil

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// FlagsFirst moves flags that follow positional arguments in front of them,
// so `qwenrun model.qbin -p hi` works like `qwenrun -p hi model.qbin`
// (urfave/cli stops parsing flags at the first positional argument).
// Everything after "--" stays positional.
//
// A flag that takes a value but ends the command line is an error: the
// reordered line puts "--" after the flags, which the flag would otherwise
// take as its value. The message is the flag library's own for a value-taking
// flag with nothing after it.
func FlagsFirst(args []string, flags []cli.Flag) ([]string, error) {
	takesValue := map[string]bool{}
	for _, f := range flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	var fl, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		fl = append(fl, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") || !takesValue[name] {
			continue
		}
		if i+1 == len(args) {
			return nil, fmt.Errorf("flag needs an argument: %s", a)
		}
		i++
		fl = append(fl, args[i])
	}
	if len(pos) == 0 {
		return fl, nil
	}
	return append(append(fl, "--"), pos...), nil
}
