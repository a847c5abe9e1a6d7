package main

import (
	"bufio"
	"io"

	"github.com/qwenc/qwenc/chat"
)

// thinkFilter streams an answer: Qwen3's reasoning (between <think> and
// </think>, the markers not shown) dimmed on a terminal, or not at all with
// --hide-think, then the answer.
type thinkFilter struct {
	w         *bufio.Writer
	s         *setup
	hide, dim bool
	sp        *chat.Splitter
	dimmed    bool // the terminal is in dim mode
}

func newThinkFilter(s *setup, w io.Writer, hide, tty bool) *thinkFilter {
	return &thinkFilter{w: bufio.NewWriter(w), s: s, hide: hide, dim: tty}
}

// start begins an answer.
func (f *thinkFilter) start() {
	f.sp = chat.NewSplitter(f.s.m.Tokenizer, false)
	f.dimmed = false
}

func (f *thinkFilter) token(id int32) {
	f.write(f.sp.Add(id))
	f.w.Flush()
}

func (f *thinkFilter) write(reasoning, content string) {
	if reasoning != "" && !f.hide {
		if f.dim && !f.dimmed {
			f.w.WriteString("\x1b[2m")
			f.dimmed = true
		}
		f.w.WriteString(reasoning)
	}
	if content != "" {
		f.undim()
		f.w.WriteString(content)
	}
}

func (f *thinkFilter) undim() {
	if f.dimmed {
		f.w.WriteString("\x1b[0m")
		f.dimmed = false
	}
}

func (f *thinkFilter) end() {
	f.write(f.sp.Flush())
	f.undim()
	f.w.WriteString("\n")
	f.w.Flush()
}
