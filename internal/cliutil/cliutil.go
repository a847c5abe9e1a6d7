// Package cliutil holds what both commands need from the command line.
package cliutil

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// FlagsFirst moves flags that follow positional arguments in front of them,
// so `qwenrun model.qbin -p hi` works like `qwenrun -p hi model.qbin`
// (urfave/cli stops parsing flags at the first positional argument).
// Everything after "--" stays positional.
func FlagsFirst(args []string, flags []cli.Flag) []string {
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
		if strings.Contains(name, "=") {
			continue
		}
		if takesValue[name] && i+1 < len(args) {
			i++
			fl = append(fl, args[i])
		}
	}
	if len(pos) == 0 {
		return fl
	}
	return append(append(fl, "--"), pos...)
}
