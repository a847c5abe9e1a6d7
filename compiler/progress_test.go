package compiler

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The progress gives the same number of sections and the same total in
// its first line, every progress line and its last line; the tokenizer,
// whose size is known only once it is encoded, is reported apart. (The
// total once grew by the tokenizer's size between the first line and the
// last.)
func TestProgressAgreesWithItself(t *testing.T) {
	model := writeModel(t, smallShape())
	var log strings.Builder
	res, err := Compile(context.Background(), model, Options{Output: filepath.Join(t.TempDir(), "out.qbin"), MaxPrefill: 16, NoSync: true, Progress: &log})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
	first := regexp.MustCompile(`^writing (\d+) sections, ([\d.]+ MB), then the tokenizer$`).FindStringSubmatch(lines[0])
	last := regexp.MustCompile(`^done: (\d+) sections, ([\d.]+ MB), and the tokenizer, ([\d.]+ MB), in [\d.]+ s \(\d+ MB/s written\)$`).FindStringSubmatch(lines[len(lines)-1])
	if first == nil || last == nil || len(lines) < 3 {
		t.Fatalf("progress:\n%s", log.String())
	}
	sections, total := first[1], first[2]
	if last[1] != sections || last[2] != total {
		t.Errorf("first line: %s sections, %s; last line: %s, %s", sections, total, last[1], last[2])
	}
	step := regexp.MustCompile(`^ *(\d+)%  (\d+)/(\d+) sections  ([\d.]+ MB) / ([\d.]+ MB)$`)
	for _, l := range lines[1 : len(lines)-1] {
		m := step.FindStringSubmatch(l)
		if m == nil || m[3] != sections || m[5] != total {
			t.Errorf("progress line %q does not count %s sections of %s", l, sections, total)
		}
	}
	if want := fmt.Sprintf("100%%  %s/%s sections  %s / %s", sections, sections, total, total); strings.TrimSpace(lines[len(lines)-2]) != want {
		t.Errorf("last progress line %q, want %q", lines[len(lines)-2], want)
	}
	// The counts are the file's: every section but the tokenizer, whose
	// bytes make up the rest.
	var weights, tok uint64
	for _, s := range res.Header.Sections {
		if s.Name == "tokenizer" {
			tok = s.Size
		} else {
			weights += s.Size
		}
	}
	if want := fmt.Sprint(len(res.Header.Sections) - 1); sections != want || total != mb(int64(weights)) || last[3] != mb(int64(tok)) {
		t.Errorf("reported %s sections, %s and a %s tokenizer; the file has %s, %s and %s", sections, total, last[3], want, mb(int64(weights)), mb(int64(tok)))
	}
}

// On a terminal the bar redraws with the same total as the first line.
func TestProgressBarTotal(t *testing.T) {
	var w strings.Builder
	p := newProgress(&w, 3, 3_000_000)
	p.tty = true
	for i := range 3 {
		p.section(fmt.Sprint("s", i), 1_000_000)
	}
	p.tokenizer(500_000)
	p.done()
	out := w.String()
	for _, want := range []string{"writing 3 sections, 3.0 MB, then the tokenizer\n", "]   3/3 sections  3.0 MB / 3.0 MB  s2",
		"\ndone: 3 sections, 3.0 MB, and the tokenizer, 0.5 MB, in "} {
		if !strings.Contains(out, want) {
			t.Errorf("progress %q lacks %q", out, want)
		}
	}
	if n := strings.Count(out, " / "); n != strings.Count(out, " / 3.0 MB") {
		t.Errorf("a bar with another total: %q", out)
	}
}
