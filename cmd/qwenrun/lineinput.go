package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
)

// lineSource gives the chat what the user types, one line at a time.
type lineSource interface {
	// readLine shows prompt and returns a line without its end, or io.EOF
	// when the input ends.
	readLine(prompt string) (string, error)
}

// plainInput reads lines from a pipe, a file or a terminal.
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
