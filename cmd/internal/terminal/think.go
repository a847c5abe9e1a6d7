package terminal

import (
	"bufio"
	"io"
)

// thinkFilter streams an answer: Qwen3's reasoning dimmed on a terminal,
// or not at all with --hide-think, then the answer.
type thinkFilter struct {
	w         *bufio.Writer
	hide, dim bool
	dimmed    bool // the terminal is in dim mode
}

func newThinkFilter(w io.Writer, hide, tty bool) *thinkFilter {
	return &thinkFilter{w: bufio.NewWriter(w), hide: hide, dim: tty}
}

// start begins an answer.
func (f *thinkFilter) start() { f.dimmed = false }

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
	f.w.Flush()
}

func (f *thinkFilter) undim() {
	if f.dimmed {
		f.w.WriteString("\x1b[0m")
		f.dimmed = false
	}
}

// end ends an answer, and returns the first error writing it met: a
// bufio.Writer keeps it.
func (f *thinkFilter) end() error {
	f.undim()
	f.w.WriteString("\n")
	return f.w.Flush()
}
