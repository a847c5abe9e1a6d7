package qwen

import (
	"strings"
	"testing"
)

func TestStopMatcher(t *testing.T) {
	for _, c := range []struct {
		stops  []string
		pieces []string
		want   []string // released after each piece; "|" marks a match, the stop string that came after it
		rest   string   // flushed at the end, without a match
	}{
		{nil, []string{"ab", "c"}, []string{"ab", "c"}, ""},
		{[]string{"STOP"}, []string{"abc", "ST", "OP", "x"}, []string{"abc", "", "|STOP"}, ""},
		{[]string{"STOP"}, []string{"aS", "Tx", "STO"}, []string{"a", "STx", ""}, "STO"},
		// The earliest of two matches wins, and a prefix of one that is
		// not the start of another is released.
		{[]string{"cd", "bcde"}, []string{"abcd"}, []string{"ab|cd"}, ""},
		{[]string{"xyz", "yq"}, []string{"axy", "q"}, []string{"a", "x|yq"}, ""},
		// Repeated prefixes: "aab" in "aaab".
		{[]string{"aab"}, []string{"aa", "a", "b"}, []string{"", "a", "|aab"}, ""},
		// Multi-byte characters are never split.
		{[]string{"日本"}, []string{"x日", "は"}, []string{"x", "日は"}, ""},
		{[]string{"日本"}, []string{"x日", "本y"}, []string{"x", "|日本"}, ""},
	} {
		m := stopMatcher{stops: c.stops}
		for i, p := range c.pieces {
			if i >= len(c.want) {
				t.Fatalf("%q %q: more pieces than answers", c.stops, c.pieces)
			}
			out, matched := m.add(p)
			want, stop, wantMatch := strings.Cut(c.want[i], "|")
			if out != want || matched != wantMatch || m.matched != stop {
				t.Errorf("%q %q, piece %d: %q, %v (%q); want %q, %v (%q)", c.stops, c.pieces, i, out, matched, m.matched, want, wantMatch, stop)
			}
			if matched {
				break
			}
		}
		if rest := m.flush(); rest != c.rest {
			t.Errorf("%q %q: flushed %q, want %q", c.stops, c.pieces, rest, c.rest)
		}
	}
}
