package terminal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/mattn/go-runewidth"
	"github.com/peterh/liner"
	"golang.org/x/term"
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
// a file, and bracketed paste.
type editorInput struct {
	ln    *liner.State
	hist  *history
	paste *pasteFilter
}

// newEditorInput puts the terminal into the editor's mode until close.
// Notes about the history file go to info.
func newEditorInput(info io.Writer) *editorInput {
	e := &editorInput{}
	if r, w, err := os.Pipe(); err == nil {
		// The editor reads os.Stdin, as it is when the editor is made, and
		// nothing else; the filter reads the terminal for it. Its
		// goroutine stays in its read when the chat ends, as the program
		// does.
		stdin := os.Stdin
		os.Stdin = r
		e.ln = liner.NewLiner()
		os.Stdin = stdin
		e.paste = newPasteFilter()
		go e.paste.run(stdin, w)
		fmt.Print(pasteOn)
	} else {
		e.ln = liner.NewLiner()
		fmt.Fprintf(info, "%s: pasting several lines sends each: %v\n", prog, err)
	}
	// Ctrl-C comes back from Prompt so that the chat can say how to leave.
	e.ln.SetCtrlCAborts(true)
	// Messages are often longer than the terminal is wide: wrap them
	// rather than scroll them sideways.
	e.ln.SetMultiLineMode(true)
	e.ln.SetCompleter(completeCommand)
	e.hist = openHistory(info)
	for _, line := range e.hist.load() {
		e.ln.AppendHistory(line)
	}
	return e
}

// readLine reads a line, with what is pasted in it: the lines of a
// paste show each after its prompt, and the last of them stays in the
// editor, which goes on after the paste until Enter.
func (e *editorInput) readLine(prompt string) (string, error) {
	var done strings.Builder
	text, pos := "", 0
	for {
		line, err := e.ln.PromptWithSuggestion(prompt, text, pos)
		if errors.Is(err, liner.ErrPromptAborted) {
			return "", errAborted
		}
		if err != nil {
			return "", err
		}
		i := strings.IndexFunc(line, isMark)
		if i < 0 {
			return done.String() + line, nil
		}
		e.erase(prompt + line)
		mark, size := utf8.DecodeRuneInString(line[i:])
		head := line[:i] + e.paste.take(mark)
		rest := line[i+size:]
		lines := strings.Split(head, "\n")
		last := lines[len(lines)-1]
		for _, l := range lines[:len(lines)-1] {
			fmt.Println(prompt + l)
			done.WriteString(l + "\n")
			prompt = promptBlock
		}
		if !printable(last + rest) {
			// The editor would misplace its cursor on a tab: the line
			// shows as it is, and what is typed next follows it.
			fmt.Println(prompt + last + rest)
			done.WriteString(last + rest)
			text, pos, prompt = "", 0, promptBlock
			continue
		}
		text, pos = last+rest, utf8.RuneCountInString(last)
	}
}

// erase takes off the screen what the editor showed of a line that
// ended in a paste's mark, so that the paste shows in its place. The
// cursor is at the start of the row below it.
func (e *editorInput) erase(shown string) {
	cols, _, err := term.GetSize(int(os.Stdout.Fd()))
	if err != nil || cols <= 0 {
		return
	}
	rows := max(1, (runewidth.StringWidth(shown)+cols-1)/cols)
	fmt.Printf("\x1b[%dA\r\x1b[J", rows)
}

// remember keeps a line in the history, which holds one line a message:
// a message of several lines, pasted, is left out.
func (e *editorInput) remember(line string) {
	if strings.TrimSpace(line) == "" || strings.Contains(line, "\n") {
		return
	}
	e.ln.AppendHistory(line)
	e.hist.add(line)
}

// close gives the terminal back its mode, and pastes their plain form.
func (e *editorInput) close() {
	if e.paste != nil {
		fmt.Print(pasteOff)
	}
	e.ln.Close()
}
