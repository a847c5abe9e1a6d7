package terminal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/peterh/liner"
	"github.com/qwenc/qwenc/internal/cliutil"
)

// Prompts of an interactive session: a message, and the lines of a """
// block.
const (
	promptMessage = ">>> "
	promptBlock   = "... "
	// blockMark, on a line of its own, begins a message of several lines;
	// another ends it.
	blockMark = `"""`
)

var (
	// errAborted is Ctrl-C pressed at the line editor's prompt.
	errAborted = errors.New("aborted at the prompt")
	// errOpenBlock is the end of the input inside a """ block.
	errOpenBlock = errors.New(`the input ended inside a """ block, which was not sent`)
)

// console is an interactive session's input: what a person types at a
// terminal, through the line editor with its history, or else a
// script's lines, one message a line, as they always were; and SIGINT
// and SIGTERM, which stop the work between them or end the session. A
// signal ends the session with a cliutil.Interrupted error, for the exit
// status.
type console struct {
	in  lineSource
	sig chan os.Signal
	// term is a person at a terminal: the line editor reads the input,
	// and Ctrl-C at the prompt is errAborted rather than the end.
	term bool
}

// newConsole starts a session on the standard input and catches the
// signals until close. Notes about the line editor's history file go to
// notes.
func newConsole(notes io.Writer) *console {
	c := &console{sig: make(chan os.Signal, 1),
		term: IsTerminal(os.Stdin) && IsTerminal(os.Stdout) && liner.TerminalSupported()}
	signal.Notify(c.sig, os.Interrupt, syscall.SIGTERM)
	if c.term {
		c.in = newEditorInput(notes)
	} else {
		c.in = newPlainInput(os.Stdin, IsTerminal(os.Stdin))
	}
	return c
}

// interactive reports whether a person is at a terminal, with the line
// editor.
func (c *console) interactive() bool { return c.term }

// close gives the terminal back its mode and the signals their default.
func (c *console) close() {
	c.in.close()
	signal.Stop(c.sig)
}

// read returns the next line, or the lines of a """ block joined as one
// message, or lines pasted (block is then true). It returns io.EOF at the end of the
// input, errAborted for Ctrl-C at the editor's prompt, and a
// cliutil.Interrupted error for a signal that ends the session.
func (c *console) read() (text string, block bool, err error) {
	line, err := c.readLine(promptMessage)
	if err == nil && strings.Contains(line, "\n") {
		// Pasted lines are text to send, as a block's are: not a command
		// nor a block's mark.
		return line, true, nil
	}
	if err != nil || strings.TrimSpace(line) != blockMark {
		return line, false, err
	}
	var lines []string
	for {
		line, err := c.readLine(promptBlock)
		switch {
		case err == io.EOF:
			return "", false, errOpenBlock
		case err != nil:
			return "", false, err
		case strings.TrimSpace(line) == blockMark:
			return strings.Join(lines, "\n"), true, nil
		}
		lines = append(lines, line)
	}
}

// readLine reads one line while watching for signals, which end the
// session.
func (c *console) readLine(prompt string) (string, error) {
	if c.term {
		// Ctrl-C pressed while no prompt was up, as a command ran or a
		// reply ended, is taken as pressed at the prompt.
		select {
		case sig := <-c.sig:
			if sig != syscall.SIGTERM {
				fmt.Println("^C")
				return "", errAborted
			}
			return "", cliutil.InterruptedBy(sig)
		default:
		}
	}
	type reply struct {
		line string
		err  error
	}
	got := make(chan reply, 1)
	// The goroutine outlives a signal, but then the process is leaving.
	go func() {
		line, err := c.in.readLine(prompt)
		got <- reply{line, err}
	}()
	select {
	case r := <-got:
		if r.err == nil {
			c.in.remember(r.line)
		}
		return r.line, r.err
	case sig := <-c.sig:
		if c.term {
			fmt.Println()
		} else {
			fmt.Fprintln(os.Stderr)
		}
		return "", cliutil.InterruptedBy(sig)
	}
}

// run runs f, a reply or a command's work, with a context that a signal
// cancels, and reports whether that signal ends the session, as a
// cliutil.Interrupted error; f says whether the signal stopped it.
// SIGTERM asks the program to end. Without a terminal, a signal that
// came after the work was done was meant for the prompt, as it always
// was; a person pressing Ctrl-C as a reply ends meant that reply.
func (c *console) run(f func(ctx context.Context) (stopped bool)) error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	got := make(chan os.Signal, 1)
	go func() {
		select {
		case s := <-c.sig:
			cancel()
			got <- s
		case <-done:
			got <- nil
		}
	}()
	stopped := f(ctx)
	close(done)
	cancel()
	if sig := <-got; sig == syscall.SIGTERM || sig != nil && !stopped && !c.term {
		return cliutil.InterruptedBy(sig)
	}
	return nil
}
