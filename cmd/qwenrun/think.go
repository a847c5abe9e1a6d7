package main

import (
	"bufio"
	"io"
	"strings"

	"github.com/qwenc/qwenc/chat"
	"github.com/qwenc/qwenc/tokenizer"
)

// thinkFilter streams an answer, showing the text between <think> and
// </think> dimmed on a terminal, or not at all with --hide-think.
type thinkFilter struct {
	w           *bufio.Writer
	s           *setup
	hide, dim   bool
	open, close int
	inThink     bool
	dec         *tokenizer.StreamDecoder
	// skipNewlines drops the blank lines that follow a hidden thinking block.
	skipNewlines bool
}

func newThinkFilter(s *setup, w io.Writer, hide, tty bool) *thinkFilter {
	f := &thinkFilter{w: bufio.NewWriter(w), s: s, hide: hide, dim: tty, open: -1, close: -1}
	if id, ok := s.m.Tokenizer.TokenID(chat.ThinkOpen); ok {
		f.open = id
	}
	if id, ok := s.m.Tokenizer.TokenID(chat.ThinkClose); ok {
		f.close = id
	}
	return f
}

// start begins an answer.
func (f *thinkFilter) start() {
	f.dec = f.s.m.Tokenizer.NewStreamDecoder()
	f.inThink, f.skipNewlines = false, false
}

func (f *thinkFilter) token(id int32) {
	text := f.dec.Add(int(id))
	switch {
	case int(id) == f.open:
		f.inThink = true
		if !f.hide && f.dim {
			f.w.WriteString("\x1b[2m")
		}
	case int(id) == f.close:
		if !f.hide {
			f.w.WriteString(text)
			if f.dim {
				f.w.WriteString("\x1b[0m")
			}
		}
		f.inThink = false
		f.skipNewlines = f.hide
		f.w.Flush()
		return
	}
	if f.skipNewlines {
		text = strings.TrimLeft(text, "\n")
		f.skipNewlines = text == ""
	}
	if !(f.inThink && f.hide) {
		f.w.WriteString(text)
	}
	f.w.Flush()
}

func (f *thinkFilter) end() {
	rest := f.dec.Flush()
	if !(f.inThink && f.hide) {
		f.w.WriteString(rest)
	}
	if f.inThink && f.dim && !f.hide {
		f.w.WriteString("\x1b[0m")
	}
	f.w.WriteString("\n")
	f.w.Flush()
}
