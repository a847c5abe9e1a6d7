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

	"github.com/qwenc/qwenc/runtime"
)

// Prompts of the interactive chat: a message, and the lines of a """ block.
const (
	promptMessage = ">>> "
	promptBlock   = "... "
	blockMark     = `"""`
)

var (
	// errSignalled ends the chat: a signal came while it was waiting for
	// input or as a reply ended, or SIGTERM came.
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
}

// interactive chats until the input ends or the user leaves. Ctrl-C
// during an answer stops that answer. A message that finds no room in the
// context is refused with a note and the chat goes on; leaving then gives
// an error, so scripts notice.
func (conv *conversation) interactive() error {
	l := &chatLoop{conv: conv, sig: make(chan os.Signal, 1), in: newPlainInput(os.Stdin, isTerminal(os.Stdin))}
	signal.Notify(l.sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(l.sig)
	return l.leave(l.run())
}

func (l *chatLoop) run() error {
	for {
		text, block, err := l.read()
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
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
// whole chat.
func (l *chatLoop) leave(err error) error {
	if errors.Is(err, errBye) {
		err = nil
	}
	if err == nil || errors.Is(err, errSignalled) {
		l.conv.finalStats()
	}
	switch {
	case errors.Is(err, errSignalled):
		return errInterrupted
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
	type result struct {
		line string
		err  error
	}
	got := make(chan result, 1)
	// The goroutine outlives a signal, but then the process is leaving.
	go func() {
		line, err := l.in.readLine(prompt)
		got <- result{line, err}
	}()
	select {
	case r := <-got:
		return r.line, r.err
	case <-l.sig:
		fmt.Fprintln(os.Stderr)
		return "", errSignalled
	}
}

// interruptible runs f with a context that a signal cancels, and returns
// the signal too, if one came.
func (l *chatLoop) interruptible(f func(context.Context) (runtime.Result, error)) (runtime.Result, os.Signal, error) {
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
// chat. SIGTERM asks the program to end; a signal that came after the work
// was done was meant for the prompt, as it always was.
func (l *chatLoop) ends(sig os.Signal, res runtime.Result) bool {
	return sig == syscall.SIGTERM || sig != nil && res.Stop != runtime.StopInterrupt
}

// send sends a message and shows the reply.
func (l *chatLoop) send(text string) error {
	conv := l.conv
	if conv.full {
		conv.unanswered++
		conv.fullNote()
		return nil
	}
	res, sig, err := l.interruptible(func(ctx context.Context) (runtime.Result, error) { return conv.turn(ctx, text) })
	var tooLong *tooLongError
	switch {
	case errors.As(err, &tooLong):
		conv.unanswered++
		conv.note("no answer: %v; /clear starts a new conversation", err)
	case err != nil:
		return err
	case conv.jsonOut:
		// One line per turn (JSON Lines), so a script can read the
		// answers of piped messages as they come.
		if err := printJSON(os.Stdout, conv.s, conv.lastPrompt, res); err != nil {
			return fmt.Errorf("writing the JSON of a turn: %w", err)
		}
	}
	if l.ends(sig, res) {
		return errSignalled
	}
	if err == nil && conv.verbose {
		conv.stats(res)
	}
	if res.Stop == runtime.StopCtx {
		// The statistics come at the end of the chat (or above, with
		// --verbose), not a second time here.
		printCtxStop(conv.info, conv.s)
		conv.full = true
		conv.fullNote()
	}
	return nil
}
