package terminal

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// The terminal's bracketed paste (xterm's mode 2004): turned on, the
// terminal wraps what is pasted between pasteStart and pasteEnd, so that
// a pasted newline is told apart from Enter.
const (
	pasteOn    = "\x1b[?2004h"
	pasteOff   = "\x1b[?2004l"
	pasteStart = "\x1b[200~"
	pasteEnd   = "\x1b[201~"
)

// pasteMarkBase is the first of the runes that stand for a paste in the
// line editor's line: Supplementary Private Use Area-A, which no key
// types. Each paste gets its own, so that a mark the editor loses (one
// typed into a Ctrl-R search) cannot hand its paste to a later line.
const (
	pasteMarkBase = 0xF0000
	pasteMarks    = 0xFFFE
)

// pasteFilter stands between the terminal and the line editor, which
// knows no bracketed paste and would send each pasted line as it came.
// It passes keys through; a paste of one line of printable text it
// passes as typed; any other paste it keeps, and gives the editor in
// its place a mark and Enter, so that the editor returns the line with
// the mark where the cursor was, for editorInput.readLine to put the
// paste there.
type pasteFilter struct {
	mu     sync.Mutex
	pastes map[rune]string
	next   rune
}

func newPasteFilter() *pasteFilter { return &pasteFilter{pastes: map[rune]string{}} }

// isMark reports whether r stands for a paste.
func isMark(r rune) bool { return r >= pasteMarkBase && r < pasteMarkBase+pasteMarks }

// run copies the terminal's input from src to dst, the editor's, until
// src ends; then it closes dst, so that the editor sees the end too.
func (f *pasteFilter) run(src io.Reader, dst io.WriteCloser) error {
	defer dst.Close()
	var (
		buf     = make([]byte, 4096)
		pending []byte // read, not yet passed on: a paste, or what may begin pasteStart
		pasting bool
	)
	for {
		n, err := src.Read(buf)
		pending = append(pending, buf[:n]...)
		var out []byte
		for {
			if pasting {
				i := bytes.Index(pending, []byte(pasteEnd))
				if i < 0 {
					break
				}
				out = append(out, f.keep(string(pending[:i]))...)
				pending, pasting = pending[i+len(pasteEnd):], false
				continue
			}
			if i := bytes.Index(pending, []byte(pasteStart)); i >= 0 {
				out = append(out, pending[:i]...)
				pending, pasting = pending[i+len(pasteStart):], true
				continue
			}
			// Keep back an end that may be pasteStart cut by the read: the
			// terminal writes it at once, so the next read completes it.
			keep := partialSuffix(pending, pasteStart)
			out = append(out, pending[:len(pending)-keep]...)
			pending = pending[len(pending)-keep:]
			break
		}
		if len(out) > 0 {
			if _, werr := dst.Write(out); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			if !pasting {
				// No mark after all: the input ended.
				_, err = dst.Write(pending)
				return err
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// printable reports whether the editor shows s as it is: no newline,
// tab or other control, on whose width it would misplace its cursor.
func printable(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) })
}

// partialSuffix is the length of the longest end of b that begins seq
// without being all of it.
func partialSuffix(b []byte, seq string) int {
	for n := min(len(b), len(seq)-1); n > 0; n-- {
		if bytes.HasPrefix([]byte(seq), b[len(b)-n:]) {
			return n
		}
	}
	return 0
}

// keep takes a paste and returns the keys that the editor gets for it:
// a mark and Enter, which ends the editor's line at once.
// A terminal pastes a newline as CR (or CRLF, from some programs); the
// message gets newlines.
func (f *pasteFilter) keep(p string) []byte {
	p = strings.ReplaceAll(p, "\r\n", "\n")
	p = strings.ReplaceAll(p, "\r", "\n")
	if printable(p) {
		return []byte(p)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	mark := pasteMarkBase + f.next
	f.next = (f.next + 1) % pasteMarks
	f.pastes[mark] = p
	return append(utf8.AppendRune(nil, mark), '\r')
}

// take returns the paste that mark stands for, and forgets it with any
// older one whose mark the editor lost.
func (f *pasteFilter) take(mark rune) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pastes[mark]
	for m := range f.pastes {
		if (mark-m+pasteMarks)%pasteMarks < pasteMarks/2 {
			delete(f.pastes, m)
		}
	}
	return p
}
