package terminal

import (
	"os"

	"golang.org/x/term"
)

// IsTerminal asks the terminal driver: a character device such as
// /dev/null is no terminal.
func IsTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
