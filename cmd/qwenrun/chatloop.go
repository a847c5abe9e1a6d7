package main

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
	"github.com/qwenc/qwenc/qwen"
)

// Prompts of the interactive chat: a message, and the lines of a """ block.
const (
	promptMessage = ">>> "
	promptBlock   = "... "
	blockMark     = `"""`
)

var (
	// errAborted is Ctrl-C pressed at the line editor's prompt.
	errAborted = errors.New("aborted at the prompt")
	// errSignalled ends the chat: a signal came while it was waiting for
	// input (or, without a terminal, as a reply ended), or SIGTERM came.
	errSignalled = errors.New("signalled")
	// errBye is /bye.
	errBye = errors.New("bye")
	// errOpenBlock is the end of the input inside a """ block.
	errOpenBlock = errors.New(`the input ended inside a """ block, which was not sent`)
)

// chatLoop is an interactive chat: it reads what the user types, runs the
// slash commands and sends the messages.
type chatLoop struct {
	conv *conversation
	in   lineSource
	sig  chan os.Signal
	// term is a person at a terminal: the line editor reads the input, a
	// banner greets them, and Ctrl-C at the prompt asks before leaving.
	// Otherwise messages come one a line from a script, as they always did.
	term bool
	// signalled is the signal that ended the chat, for the exit status.
	signalled os.Signal
}

// interactive chats until the input ends or the user leaves. Ctrl-C
// during an answer stops that answer. A message that finds no room in the
// context is refused with a note and the chat goes on; leaving then gives
// an error, so scripts notice.
func (conv *conversation) interactive() error {
	l := &chatLoop{conv: conv, sig: make(chan os.Signal, 1),
		term: isTerminal(os.Stdin) && isTerminal(os.Stdout) && liner.TerminalSupported()}
	signal.Notify(l.sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(l.sig)
	if l.term {
		e := newEditorInput(conv.info)
		defer e.close()
		l.in = e
		fmt.Fprintf(conv.info, "%s, context %d tokens. /? for help, /bye or Ctrl-D to leave.\n", conv.s.info.Name, conv.s.info.Context)
	} else {
		l.in = newPlainInput(os.Stdin, isTerminal(os.Stdin))
	}
	return l.leave(l.run())
}

func (l *chatLoop) run() error {
	// aborted is set by Ctrl-C at the prompt and cleared by any line, so
	// that only a second Ctrl-C in a row leaves.
	aborted := false
	for {
		text, block, err := l.read()
		switch {
		case errors.Is(err, errAborted):
			if aborted {
				l.signalled = os.Interrupt
				return errSignalled
			}
			aborted = true
			l.conv.note("use /bye or Ctrl-D to leave; Ctrl-C again to quit")
			continue
		case err == io.EOF:
			if l.term {
				fmt.Println() // the shell's prompt goes on a line of its own
			}
			return nil
		case err != nil:
			return err
		}
		aborted = false
		msg := text
		if !block {
			var cmd *command
			if msg, cmd, err = parseLine(text); err != nil {
				l.conv.note("%v", err)
				continue
			}
			if cmd != nil {
				if err := l.do(cmd); err != nil {
					return err
				}
				continue
			}
		}
		if strings.TrimSpace(msg) == "" {
			continue
		}
		if err := l.send(msg); err != nil {
			return err
		}
	}
}

// leave ends the chat that run ended with err, with the statistics of the
// whole chat for scripts (and for a person who asked with --verbose).
func (l *chatLoop) leave(err error) error {
	if errors.Is(err, errBye) {
		err = nil
	}
	if err == nil || errors.Is(err, errSignalled) {
		if !l.term || l.conv.verbose {
			l.conv.finalStats()
		}
	}
	switch {
	case errors.Is(err, errSignalled):
		return cliutil.InterruptedBy(l.signalled)
	case err == nil && l.conv.unanswered > 0:
		return fmt.Errorf("%d of the messages got no answer: the conversation was full (--ctx)", l.conv.unanswered)
	}
	return err
}

// read returns the next line, or the lines of a """ block joined as one
// message.
func (l *chatLoop) read() (text string, block bool, err error) {
	line, err := l.readLine(promptMessage)
	if err != nil || strings.TrimSpace(line) != blockMark {
		return line, false, err
	}
	var lines []string
	for {
		line, err := l.readLine(promptBlock)
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

// readLine reads one line while watching for signals, which end the chat.
func (l *chatLoop) readLine(prompt string) (string, error) {
	if l.term {
		// Ctrl-C pressed while no prompt was up, as a command ran or a
		// reply ended, is taken as pressed at the prompt.
		select {
		case sig := <-l.sig:
			if sig != syscall.SIGTERM {
				fmt.Println("^C")
				return "", errAborted
			}
			l.signalled = sig
			return "", errSignalled
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
		line, err := l.in.readLine(prompt)
		got <- reply{line, err}
	}()
	select {
	case r := <-got:
		if r.err == nil {
			l.in.remember(r.line)
		}
		return r.line, r.err
	case sig := <-l.sig:
		if l.term {
			fmt.Println()
		} else {
			fmt.Fprintln(os.Stderr)
		}
		l.signalled = sig
		return "", errSignalled
	}
}

// interruptible runs f with a context that a signal cancels, and returns
// the signal too, if one came.
func (l *chatLoop) interruptible(f func(context.Context) (qwen.Result, error)) (qwen.Result, os.Signal, error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	got := make(chan os.Signal, 1)
	go func() {
		select {
		case s := <-l.sig:
			cancel()
			got <- s
		case <-done:
			got <- nil
		}
	}()
	res, err := f(ctx)
	close(done)
	cancel()
	return res, <-got, err
}

// ends tells whether sig, which came while res was computed, ends the
// chat. SIGTERM asks the program to end. Without a terminal, a signal that
// came after the work was done was meant for the prompt, as it always was;
// a person pressing Ctrl-C as a reply ends meant that reply.
func (l *chatLoop) ends(sig os.Signal, res qwen.Result) bool {
	return sig == syscall.SIGTERM || sig != nil && res.Stop != qwen.StopInterrupt && !l.term
}

// send sends a message and shows the reply.
func (l *chatLoop) send(text string) error {
	conv := l.conv
	if conv.c.Full() {
		conv.unanswered++
		conv.fullNote()
		return nil
	}
	res, sig, err := l.interruptible(func(ctx context.Context) (qwen.Result, error) { return conv.turn(ctx, text) })
	var tooLong *qwen.PromptTooLongError
	switch {
	case errors.As(err, &tooLong):
		conv.unanswered++
		conv.note("no answer: the conversation has %d tokens, more than the context of %d (--ctx); /clear starts a new conversation", tooLong.Tokens, tooLong.Context)
	case err != nil:
		return err
	case conv.jsonOut:
		// One line per turn (JSON Lines), so a script can read the
		// answers of piped messages as they come.
		if err := printJSON(os.Stdout, conv.s, res); err != nil {
			return fmt.Errorf("writing the JSON of a turn: %w", err)
		}
	case l.term:
		fmt.Println() // a blank line between the reply and the next prompt
	}
	if l.ends(sig, res) {
		l.signalled = sig
		return errSignalled
	}
	if err == nil && conv.verbose {
		conv.stats(res)
	}
	if res.Stop == qwen.StopContext {
		// The statistics come at the end of the chat (or above, with
		// --verbose), not a second time here.
		printCtxStop(conv.info, conv.s)
		conv.fullNote()
	}
	return nil
}
