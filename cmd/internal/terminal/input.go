package terminal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/peterh/liner"
)

// lineSource gives the chat what the user types, one line at a time.
type lineSource interface {
	// readLine shows prompt and returns a line without its end: io.EOF
	// when the input ends (Ctrl-D), errAborted for Ctrl-C at the prompt.
	readLine(prompt string) (string, error)
	// remember adds an entered line to the history.
	remember(line string)
	// close gives the terminal back its mode.
	close()
}

// plainInput reads lines from a pipe or file, or from a terminal the line
// editor cannot drive.
type plainInput struct {
	sc *bufio.Scanner
	// prompted shows the prompt (on stderr, keeping stdout for replies):
	// the input is a terminal after all.
	prompted bool
}

func newPlainInput(r io.Reader, prompted bool) *plainInput {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	return &plainInput{sc: sc, prompted: prompted}
}

func (p *plainInput) readLine(prompt string) (string, error) {
	if p.prompted {
		fmt.Fprint(os.Stderr, prompt)
	}
	if p.sc.Scan() {
		return p.sc.Text(), nil
	}
	if err := p.sc.Err(); err != nil {
		return "", fmt.Errorf("reading the messages: %w", err)
	}
	return "", io.EOF
}

func (p *plainInput) remember(string) {}

func (p *plainInput) close() {}

// editorInput is the line editor on a terminal, with the history kept in
// a file.
type editorInput struct {
	ln   *liner.State
	hist *history
}

// newEditorInput puts the terminal into the editor's mode until close.
// Notes about the history file go to info.
func newEditorInput(info io.Writer) *editorInput {
	ln := liner.NewLiner()
	// Ctrl-C comes back from Prompt so that the chat can say how to leave.
	ln.SetCtrlCAborts(true)
	// Messages are often longer than the terminal is wide: wrap them
	// rather than scroll them sideways.
	ln.SetMultiLineMode(true)
	ln.SetCompleter(completeCommand)
	h := openHistory(info)
	for _, line := range h.load() {
		ln.AppendHistory(line)
	}
	return &editorInput{ln: ln, hist: h}
}

func (e *editorInput) readLine(prompt string) (string, error) {
	line, err := e.ln.Prompt(prompt)
	if errors.Is(err, liner.ErrPromptAborted) {
		return "", errAborted
	}
	return line, err
}

func (e *editorInput) remember(line string) {
	if strings.TrimSpace(line) == "" {
		return
	}
	e.ln.AppendHistory(line)
	e.hist.add(line)
}

// close gives the terminal back its mode.
func (e *editorInput) close() { e.ln.Close() }
