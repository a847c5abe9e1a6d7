package tokenizer

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Pretokenizer is the split pattern that cuts text into the pieces BPE
// runs on, one of the patterns Qwen's tokenizers use. tokenizer.json
// names it by its regular expression, which LoadHF reads; the binary
// form stores its number.
type Pretokenizer uint8

const (
	// Qwen2 is the pattern of Qwen2, Qwen2.5 and Qwen3:
	//
	//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
	Qwen2 Pretokenizer = iota
	// Qwen35 is Qwen3.5's and Qwen3.6's, Qwen2's with combining marks
	// (\p{M}) counted with letters, so that a letter keeps its accents,
	// vowel signs and viramas in one piece:
	//
	//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
	Qwen35
	numPretokenizers
)

// pretokenizers are the patterns' names and regular expressions, by
// number.
var pretokenizers = [numPretokenizers]struct{ name, regex string }{
	Qwen2:  {"qwen2", `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	Qwen35: {"qwen3.5", `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
}

// String names the pattern: "qwen2" or "qwen3.5".
func (p Pretokenizer) String() string {
	if p < numPretokenizers {
		return pretokenizers[p].name
	}
	return fmt.Sprintf("Pretokenizer(%d)", int(p))
}

// Regex is the pattern's regular expression as tokenizer.json writes it.
func (p Pretokenizer) Regex() string {
	if p < numPretokenizers {
		return pretokenizers[p].regex
	}
	return ""
}

// pretokenizerOf finds the pattern whose regular expression is regex.
func pretokenizerOf(regex string) (Pretokenizer, bool) {
	for p, x := range pretokenizers {
		if x.regex == regex {
			return Pretokenizer(p), true
		}
	}
	return 0, false
}

// Both patterns are run by Oniguruma in HF tokenizers: leftmost-first
// alternation, greedy quantifiers with backtracking. Go's regexp has no
// look-ahead, so nextPretoken below decides, alternative by alternative,
// what the regex matches at a position. Every character starts some
// alternative, so the matches tile the text and the scanner never needs
// to search.
//
// Character classes, as Oniguruma defines them for UTF-8: \p{L} is general
// category L, \p{M} is M (Mn, Mc, Me), \p{N} is N (Nd, Nl, No), \s is the
// White_Space property (which is what Go's unicode.IsSpace tests). Bytes
// of invalid UTF-8 (only reachable from Go strings) count as "other",
// like punctuation.

type charClass uint8

const (
	clsOther   charClass = iota
	clsLetter            // \p{L}
	clsNumber            // \p{N}
	clsSpace             // \s except \r and \n
	clsNewline           // \r or \n
	clsMark              // \p{M}; "other" to the Qwen2 pattern
)

func classOf(r rune) charClass {
	if r < utf8.RuneSelf {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
			return clsLetter
		case '0' <= r && r <= '9':
			return clsNumber
		case r == '\r' || r == '\n':
			return clsNewline
		case r == ' ' || ('\t' <= r && r <= '\r'):
			return clsSpace
		}
		return clsOther
	}
	switch {
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsMark(r):
		return clsMark
	case unicode.IsNumber(r):
		return clsNumber
	case unicode.IsSpace(r):
		return clsSpace
	}
	return clsOther
}

// classAt returns the class and byte length of the character at s[i]
// under the pattern (marks are other unless marks is set).
func classAt(s string, i int, marks bool) (charClass, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return classOf(rune(c)), 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	c := classOf(r) // RuneError (invalid byte) is "other"
	if c == clsMark && !marks {
		c = clsOther
	}
	return c, n
}

// scanClass returns the end of the run of characters of class c from i.
func scanClass(s string, i int, c charClass, marks bool) int {
	for i < len(s) {
		ci, n := classAt(s, i, marks)
		if ci != c {
			break
		}
		i += n
	}
	return i
}

// scanLetters returns the end of the run of letters from i, marks
// among them when marks is set: \p{L}+ or [\p{L}\p{M}]+.
func scanLetters(s string, i int, marks bool) int {
	for i < len(s) {
		c, n := classAt(s, i, marks)
		if c != clsLetter && c != clsMark {
			break
		}
		i += n
	}
	return i
}

// contraction returns the length of the case-insensitive 's 't 're 've 'm
// 'll 'd after an apostrophe, or 0. Under Unicode simple case folding the
// only non-ASCII character that folds into these letters is U+017F LATIN
// SMALL LETTER LONG S (to s), which Oniguruma's (?i) therefore matches.
func contraction(s string) int {
	if len(s) == 0 {
		return 0
	}
	switch s[0] | 0x20 {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if len(s) > 1 && s[1]|0x20 == 'e' {
			return 2
		}
	case 'l':
		if len(s) > 1 && s[1]|0x20 == 'l' {
			return 2
		}
	}
	if len(s) >= 2 && s[0] == 0xC5 && s[1] == 0xBF { // ſ
		return 2
	}
	return 0
}

// nextPretoken returns the end of the pre-token starting at i < len(s),
// under the Qwen2 pattern, or with marks the Qwen3.5 one. The two differ
// only in where a mark goes: with letters in the second alternative,
// never in the fourth.
func nextPretoken(s string, i int, marks bool) int {
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if s[i] == '\'' {
		if n := contraction(s[i+1:]); n > 0 {
			return i + 1 + n
		}
	}
	c0, n0 := classAt(s, i, marks)
	// [^\r\n\p{L}\p{N}]?\p{L}+, or [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+: a
	// letter (or mark) starts the run itself (a mark also fits the
	// optional character, and the run from it is the same); other and
	// space characters only before a letter (or mark).
	switch c0 {
	case clsLetter, clsMark:
		return scanLetters(s, i+n0, marks)
	case clsOther, clsSpace:
		if i+n0 < len(s) {
			if c1, n1 := classAt(s, i+n0, marks); c1 == clsLetter || c1 == clsMark {
				return scanLetters(s, i+n0+n1, marks)
			}
		}
	case clsNumber: // \p{N}
		return i + n0
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*', or with \p{M} in the negated class: a
	// run of "other" characters, which then stops at a mark.
	j := -1
	if c0 == clsOther {
		j = scanClass(s, i+n0, clsOther, marks)
	} else if s[i] == ' ' && i+1 < len(s) {
		if c1, n1 := classAt(s, i+1, marks); c1 == clsOther {
			j = scanClass(s, i+1+n1, clsOther, marks)
		}
	}
	if j >= 0 {
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	// Only whitespace is left. Scan the whole run once: \s*[\r\n]+ ends
	// after the run's last \r or \n (\s* backtracks to it); failing that
	// \s+(?!\S) takes the run, minus its last character unless the run ends
	// the text; failing that (one character before non-space) \s+ takes it.
	end, lastNL, lastStart, count := i, -1, i, 0
	for end < len(s) {
		c, n := classAt(s, end, marks)
		if c != clsSpace && c != clsNewline {
			break
		}
		if c == clsNewline {
			lastNL = end + n
		}
		lastStart = end
		end += n
		count++
	}
	switch {
	case lastNL >= 0:
		return lastNL
	case end == len(s) || count == 1:
		return end
	default:
		return lastStart
	}
}
