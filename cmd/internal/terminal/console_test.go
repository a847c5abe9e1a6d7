package terminal

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/qwenc/qwenc/internal/cliutil"
)

// A script's lines: one message a line, a """ block one message, and the
// end of the input inside a block an error.
func TestConsoleRead(t *testing.T) {
	c := &console{in: newPlainInput(strings.NewReader("hi\n\"\"\"\none\n  two\n  \"\"\"  \n/show\n\"\"\"\nlost\n"), false), sig: make(chan os.Signal, 1)}
	for _, want := range []struct {
		text  string
		block bool
	}{{"hi", false}, {"one\n  two", true}, {"/show", false}} {
		text, block, err := c.read()
		if err != nil || text != want.text || block != want.block {
			t.Fatalf("%q, %v, %v; want %q, %v", text, block, err, want.text, want.block)
		}
	}
	if _, _, err := c.read(); err != errOpenBlock {
		t.Errorf("the input ended in a block: %v", err)
	}
	if _, _, err := c.read(); err != io.EOF {
		t.Errorf("after the end: %v", err)
	}
}

// A signal during work: SIGTERM always ends the session; without a
// terminal a SIGINT ends it unless it stopped the work (a reply), which
// is what it was meant for; with no signal the session goes on.
func TestConsoleRun(t *testing.T) {
	for _, tc := range []struct {
		sig     os.Signal
		term    bool
		stopped bool
		ends    bool
	}{
		{nil, false, false, false},
		{syscall.SIGTERM, true, true, true},
		{os.Interrupt, false, true, false},
		{os.Interrupt, false, false, true},
		{os.Interrupt, true, false, false},
	} {
		c := &console{sig: make(chan os.Signal, 1), term: tc.term}
		err := c.run(func(ctx context.Context) bool {
			if tc.sig != nil {
				c.sig <- tc.sig
				<-ctx.Done() // the signal cancels the work
			}
			return tc.stopped
		})
		var in cliutil.Interrupted
		if ends := errors.As(err, &in); ends != tc.ends || ends && in.Signal != tc.sig {
			t.Errorf("%v, terminal %v, stopped %v: %v; want the session ended %v", tc.sig, tc.term, tc.stopped, err, tc.ends)
		}
	}
}

// The paste filter passes keys on, a paste of one printable line as
// typed and any other as a mark and Enter, even when the terminal's
// bytes come one read at a time.
func TestPasteFilter(t *testing.T) {
	f := newPasteFilter()
	var got bytes.Buffer
	src := iotest.OneByteReader(strings.NewReader("a\x1b[A\x1b[200~b c\x1b[201~\x1b[200~d\r\te\r\n\x1b[201~f\x1b[20"))
	if err := f.run(src, nopCloser{&got}); err != nil {
		t.Fatal(err)
	}
	mark := string(rune(pasteMarkBase))
	if want := "a\x1b[Ab c" + mark + "\rf\x1b[20"; got.String() != want {
		t.Errorf("the editor got %q, want %q", got.String(), want)
	}
	if p := f.take(pasteMarkBase); p != "d\n\te\n" {
		t.Errorf("the paste kept %q", p)
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
