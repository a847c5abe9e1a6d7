package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The Qwen2 pre-tokenizer splits text with
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// run by Oniguruma in HF tokenizers: leftmost-first alternation, greedy
// quantifiers with backtracking. Go's regexp has no look-ahead, so
// nextPretoken below decides, alternative by alternative, what that regex
// matches at a position. Every character starts some alternative, so the
// matches tile the text and the scanner never needs to search.
//
// Character classes, as Oniguruma defines them for UTF-8: \p{L} is general
// category L, \p{N} is N (Nd, Nl, No), \s is the White_Space property
// (which is what Go's unicode.IsSpace tests). Bytes of invalid UTF-8 (only
// reachable from Go strings) count as "other", like punctuation.

type charClass uint8

const (
	clsOther   charClass = iota
	clsLetter            // \p{L}
	clsNumber            // \p{N}
	clsSpace             // \s except \r and \n
	clsNewline           // \r or \n
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
	case unicode.IsNumber(r):
		return clsNumber
	case unicode.IsSpace(r):
		return clsSpace
	}
	return clsOther
}

// classAt returns the class and byte length of the character at s[i].
func classAt(s string, i int) (charClass, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return classOf(rune(c)), 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return classOf(r), n // RuneError (invalid byte) is "other"
}

// scanClass returns the end of the run of characters of class c from i.
func scanClass(s string, i int, c charClass) int {
	for i < len(s) {
		ci, n := classAt(s, i)
		if ci != c {
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

// nextPretoken returns the end of the pre-token starting at i < len(s).
func nextPretoken(s string, i int) int {
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if s[i] == '\'' {
		if n := contraction(s[i+1:]); n > 0 {
			return i + 1 + n
		}
	}
	c0, n0 := classAt(s, i)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	switch c0 {
	case clsLetter:
		return scanClass(s, i+n0, clsLetter)
	case clsOther, clsSpace:
		if i+n0 < len(s) {
			if c1, n1 := classAt(s, i+n0); c1 == clsLetter {
				return scanClass(s, i+n0+n1, clsLetter)
			}
		}
	case clsNumber: // \p{N}
		return i + n0
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	j := -1
	if c0 == clsOther {
		j = scanClass(s, i+n0, clsOther)
	} else if s[i] == ' ' && i+1 < len(s) {
		if c1, n1 := classAt(s, i+1); c1 == clsOther {
			j = scanClass(s, i+1+n1, clsOther)
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
		c, n := classAt(s, end)
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
