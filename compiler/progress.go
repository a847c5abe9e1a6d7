package compiler

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress reports on stderr: a redrawn bar on a terminal, otherwise a line
// per tenth of the bytes, which reads well in CI logs. It counts the
// sections whose size is known before writing starts; the tokenizer,
// encoded while the weights are written and last in the file, is
// reported apart, so the first line, the bar and the last line give the
// same total.
type progress struct {
	w              io.Writer
	tty            bool
	sections       int
	total, written int64
	tokenizerBytes int64
	count          int
	start, redraw  time.Time
	lastTenth      int64
}

func newProgress(w io.Writer, sections int, total int64) *progress {
	p := &progress{w: w, sections: sections, total: total, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	if w != nil {
		fmt.Fprintf(w, "writing %d sections, %s, then the tokenizer\n", sections, mb(total))
	}
	return p
}

func (p *progress) section(name string, bytes int64) {
	p.written += bytes
	p.count++
	if p.w == nil {
		return
	}
	if p.tty {
		if time.Since(p.redraw) < 50*time.Millisecond && p.count < p.sections {
			return
		}
		p.redraw = time.Now()
		const width = 30
		fill := int(int64(width) * p.written / max(p.total, 1))
		fmt.Fprintf(p.w, "\r[%s%s] %3d/%d sections  %s / %s  %-40.40s", strings.Repeat("#", fill), strings.Repeat(".", width-fill),
			p.count, p.sections, mb(p.written), mb(p.total), name)
		return
	}
	if tenth := 10 * p.written / max(p.total, 1); tenth > p.lastTenth {
		p.lastTenth = tenth
		fmt.Fprintf(p.w, "%3d%%  %d/%d sections  %s / %s\n", 10*tenth, p.count, p.sections, mb(p.written), mb(p.total))
	}
}

// tokenizer records the tokenizer's section once written.
func (p *progress) tokenizer(bytes int64) { p.tokenizerBytes = bytes }

func (p *progress) done() {
	if p.w == nil {
		return
	}
	if p.tty {
		fmt.Fprintln(p.w)
	}
	el := time.Since(p.start).Seconds()
	all := p.total + p.tokenizerBytes
	fmt.Fprintf(p.w, "done: %d sections, %s, and the tokenizer, %s, in %.2f s (%.0f MB/s written)\n",
		p.count, mb(p.total), mb(p.tokenizerBytes), el, float64(all)/1e6/max(el, 1e-9))
}

// mb formats bytes in decimal megabytes (10^6), the unit it names.
func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
