package grammar

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The pattern subset (ECMA-262 syntax, as JSON Schema's): literals and
// escaped metacharacters; . \d \w \s \D \W \S; classes [...] and [^...]
// with ASCII ranges and single non-ASCII members; groups (...), (?:...)
// and (?<name>...); alternation; the quantifiers * + ? {n} {n,} {n,m},
// greedy or lazy; ^ at the start and $ at the end. A pattern is searched
// for, as JSON Schema says: one without ^ may have anything before it,
// one without $ anything after. Refused: lookaround, backreferences, \b,
// \p{...}, ranges of non-ASCII characters, anchors elsewhere.

// charSet is a set of characters: ASCII ones, and non-ASCII ones listed
// (runes) or all of them but a list (nonASCII, except).
type charSet struct {
	ascii    [2]uint64
	nonASCII bool
	except   []rune // with nonASCII: the non-ASCII characters left out
	runes    []rune // without nonASCII: the non-ASCII characters in
}

// unicodeSpaces are the non-ASCII characters ECMAScript's \s matches.
var unicodeSpaces = []rune{0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a,
	0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff}

// lineTerminators are the non-ASCII characters . does not match.
var lineTerminators = []rune{0x2028, 0x2029}

// has reports whether the set holds r.
func (s *charSet) has(r rune) bool {
	if r < 0x80 {
		return s.hasASCII(byte(r))
	}
	if s.nonASCII {
		return !slices.Contains(s.except, r)
	}
	return slices.Contains(s.runes, r)
}

// complement is every character s does not hold.
func (s *charSet) complement() *charSet {
	out := &charSet{ascii: [2]uint64{^s.ascii[0], ^s.ascii[1]}}
	if s.nonASCII {
		out.runes = slices.Clone(s.except)
	} else {
		out.nonASCII, out.except = true, slices.Clone(s.runes)
	}
	return out
}

func (s *charSet) addASCII(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s.ascii[c>>6] |= 1 << (c & 63)
	}
}

func (s *charSet) hasASCII(c byte) bool { return s.ascii[c>>6]&(1<<(c&63)) != 0 }

// reNode is a parsed pattern: an alternation of concatenations of
// quantified atoms.
type reNode struct {
	alts [][]rePiece
}

type rePiece struct {
	set      *charSet
	group    *reNode
	min, max int // max < 0: no bound
}

type reParser struct {
	s   string
	pos int
}

// maxRepeat bounds a pattern's {n,m}.
const maxRepeat = 10000

func (p *reParser) errf(format string, args ...any) error {
	return fmt.Errorf("at %d of %q: %s", p.pos, p.s, fmt.Sprintf(format, args...))
}

func (p *reParser) more() bool { return p.pos < len(p.s) }
func (p *reParser) peek() byte { return p.s[p.pos] }

func (p *reParser) alternation(depth int) (*reNode, error) {
	if depth > 50 {
		return nil, p.errf("groups nested too deep")
	}
	n := &reNode{}
	var cur []rePiece
	for {
		if !p.more() || p.peek() == ')' {
			n.alts = append(n.alts, cur)
			return n, nil
		}
		if p.peek() == '|' {
			p.pos++
			n.alts = append(n.alts, cur)
			cur = nil
			continue
		}
		piece, err := p.atom(depth)
		if err != nil {
			return nil, err
		}
		if err := p.quantifier(&piece); err != nil {
			return nil, err
		}
		cur = append(cur, piece)
	}
}

func (p *reParser) atom(depth int) (rePiece, error) {
	c := p.peek()
	switch c {
	case '(':
		p.pos++
		if p.more() && p.peek() == '?' {
			switch {
			case hasPrefixAt(p.s, p.pos, "?:"):
				p.pos += 2
			case hasPrefixAt(p.s, p.pos, "?<") && !hasPrefixAt(p.s, p.pos, "?<=") && !hasPrefixAt(p.s, p.pos, "?<!"):
				for p.more() && p.peek() != '>' {
					p.pos++
				}
				p.pos++
			default:
				return rePiece{}, p.errf("lookaround is not supported")
			}
		}
		g, err := p.alternation(depth + 1)
		if err != nil {
			return rePiece{}, err
		}
		if !p.more() || p.peek() != ')' {
			return rePiece{}, p.errf("a group is not closed")
		}
		p.pos++
		return rePiece{group: g, min: 1, max: 1}, nil
	case '[':
		s, err := p.class()
		return rePiece{set: s, min: 1, max: 1}, err
	case '.':
		p.pos++
		s := &charSet{nonASCII: true, except: lineTerminators}
		s.addASCII(0, 0x7f)
		s.ascii[0] &^= 1<<'\n' | 1<<'\r'
		return rePiece{set: s, min: 1, max: 1}, nil
	case '\\':
		s, err := p.escape(false)
		return rePiece{set: s, min: 1, max: 1}, err
	case '^', '$':
		return rePiece{}, p.errf("%c is supported only at the start (^) or the end ($) of the pattern", c)
	case '*', '+', '?', '{':
		return rePiece{}, p.errf("%c has nothing to repeat", c)
	}
	r, size := utf8.DecodeRuneInString(p.s[p.pos:])
	p.pos += size
	return rePiece{set: single(r), min: 1, max: 1}, nil
}

func single(r rune) *charSet {
	s := &charSet{}
	if r < 0x80 {
		s.addASCII(byte(r), byte(r))
	} else {
		s.runes = []rune{r}
	}
	return s
}

func hasPrefixAt(s string, i int, prefix string) bool {
	return len(s)-i >= len(prefix) && s[i:i+len(prefix)] == prefix
}

// escape reads \x.
func (p *reParser) escape(inClass bool) (*charSet, error) {
	p.pos++
	if !p.more() {
		return nil, p.errf("the pattern ends with \\")
	}
	c := p.peek()
	p.pos++
	s := &charSet{}
	switch c {
	case 'd':
		s.addASCII('0', '9')
	case 'w':
		s.addASCII('0', '9')
		s.addASCII('a', 'z')
		s.addASCII('A', 'Z')
		s.addASCII('_', '_')
	case 's':
		for _, w := range " \t\n\r\f\v" {
			s.addASCII(byte(w), byte(w))
		}
		s.runes = slices.Clone(unicodeSpaces)
	case 'D', 'W', 'S':
		inner, _ := (&reParser{s: `\` + string(c+'a'-'A')}).escape(false)
		return inner.complement(), nil
	case 'n':
		s.addASCII('\n', '\n')
	case 't':
		s.addASCII('\t', '\t')
	case 'r':
		s.addASCII('\r', '\r')
	case 'f':
		s.addASCII('\f', '\f')
	case 'v':
		s.addASCII('\v', '\v')
	case 'u':
		if len(p.s)-p.pos < 4 {
			return nil, p.errf("\\u wants four hex digits")
		}
		v, err := strconv.ParseUint(p.s[p.pos:p.pos+4], 16, 32)
		if err != nil || (v >= 0xd800 && v <= 0xdfff) {
			return nil, p.errf("\\u wants four hex digits, not a surrogate")
		}
		p.pos += 4
		return single(rune(v)), nil
	case 'b', 'B':
		return nil, p.errf("\\%c (a word boundary) is not supported", c)
	case 'p', 'P', 'k', 'c', 'x', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return nil, p.errf("\\%c is not supported", c)
	default:
		if c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') {
			return nil, p.errf("\\%c is not supported", c)
		}
		s.addASCII(c, c)
	}
	return s, nil
}

// class reads [...].
func (p *reParser) class() (*charSet, error) {
	p.pos++
	negate := p.more() && p.peek() == '^'
	if negate {
		p.pos++
	}
	s := &charSet{}
	first := true
	for {
		if !p.more() {
			return nil, p.errf("a class is not closed")
		}
		c := p.peek()
		if c == ']' && !first {
			p.pos++
			break
		}
		first = false
		var lo rune
		if c == '\\' {
			e, err := p.escape(true)
			if err != nil {
				return nil, err
			}
			if n, r := e.only(); n {
				lo = r
			} else {
				s.union(e)
				continue
			}
		} else {
			r, size := utf8.DecodeRuneInString(p.s[p.pos:])
			p.pos += size
			lo = r
		}
		hi := lo
		if p.more() && p.peek() == '-' && p.pos+1 < len(p.s) && p.s[p.pos+1] != ']' {
			p.pos++
			if p.peek() == '\\' {
				e, err := p.escape(true)
				if err != nil {
					return nil, err
				}
				n, r := e.only()
				if !n {
					return nil, p.errf("a range ends with a class")
				}
				hi = r
			} else {
				r, size := utf8.DecodeRuneInString(p.s[p.pos:])
				p.pos += size
				hi = r
			}
		}
		switch {
		case hi < lo:
			return nil, p.errf("a range runs backwards")
		case hi < 0x80:
			s.addASCII(byte(lo), byte(hi))
		case lo == hi:
			s.union(single(lo))
		default:
			return nil, p.errf("ranges of non-ASCII characters are not supported")
		}
	}
	if negate {
		s = s.complement()
	}
	return s, nil
}

// only reports whether the set is one character, and which.
func (s *charSet) only() (bool, rune) {
	if s.nonASCII {
		return false, 0
	}
	n, r := len(s.runes), rune(0)
	if n == 1 {
		r = s.runes[0]
	}
	for c := range 128 {
		if s.hasASCII(byte(c)) {
			n++
			r = rune(c)
		}
	}
	return n == 1, r
}

func (s *charSet) union(o *charSet) {
	s.ascii[0] |= o.ascii[0]
	s.ascii[1] |= o.ascii[1]
	switch {
	case s.nonASCII && o.nonASCII:
		s.except = slices.DeleteFunc(s.except, func(r rune) bool { return !slices.Contains(o.except, r) })
	case s.nonASCII:
		s.except = slices.DeleteFunc(s.except, func(r rune) bool { return slices.Contains(o.runes, r) })
	case o.nonASCII:
		s.nonASCII = true
		s.except = slices.DeleteFunc(slices.Clone(o.except), func(r rune) bool { return slices.Contains(s.runes, r) })
		s.runes = nil
	default:
		for _, r := range o.runes {
			if !slices.Contains(s.runes, r) {
				s.runes = append(s.runes, r)
			}
		}
	}
}

func (p *reParser) quantifier(piece *rePiece) error {
	if !p.more() {
		return nil
	}
	switch p.peek() {
	case '*':
		piece.min, piece.max = 0, -1
	case '+':
		piece.min, piece.max = 1, -1
	case '?':
		piece.min, piece.max = 0, 1
	case '{':
		end := p.pos + 1
		for end < len(p.s) && p.s[end] != '}' {
			end++
		}
		if end == len(p.s) {
			return p.errf("{ is not closed")
		}
		body := p.s[p.pos+1 : end]
		lo, hi, err := parseCount(body)
		if err != nil {
			return p.errf("{%s}: %v", body, err)
		}
		piece.min, piece.max = lo, hi
		p.pos = end
	default:
		return nil
	}
	p.pos++
	if p.more() && p.peek() == '?' {
		p.pos++ // lazy: the same language
	}
	if p.more() && (p.peek() == '*' || p.peek() == '+' || p.peek() == '{') {
		return p.errf("a quantifier after a quantifier")
	}
	return nil
}

func parseCount(body string) (lo, hi int, err error) {
	var los, his string
	comma := false
	for i := range len(body) {
		if body[i] == ',' {
			los, his, comma = body[:i], body[i+1:], true
			break
		}
	}
	if !comma {
		los, his = body, body
	}
	if lo, err = strconv.Atoi(los); err != nil {
		return 0, 0, errors.New("want {n}, {n,} or {n,m}")
	}
	hi = -1
	if his != "" {
		if hi, err = strconv.Atoi(his); err != nil {
			return 0, 0, errors.New("want {n}, {n,} or {n,m}")
		}
	}
	switch {
	case lo < 0 || (hi >= 0 && hi < lo):
		return 0, 0, errors.New("the counts are out of order")
	case lo > maxRepeat || hi > maxRepeat:
		return 0, 0, fmt.Errorf("counts above %d are not supported", maxRepeat)
	}
	return lo, hi, nil
}
