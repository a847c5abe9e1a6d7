package chat

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Python's readings of text, for the templates and the tool-call parsers
// that were written in it: what str.strip, int(), float() and
// ast.literal_eval make of a string, and how json.dumps then prints it.

// pyIsSpace is str.isspace: Unicode's white space and the four
// separators \x1c to \x1f.
func pyIsSpace(r rune) bool { return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f }

// pyStrip is str.strip() (Jinja's trim filter).
func pyStrip(s string) string { return strings.TrimFunc(s, pyIsSpace) }

// pyDigits maps a string of decimal digits (Unicode's Nd: int() and
// float() read "١٢" and "１２" as 12) with single underscores between
// them to ASCII digits; ok is false for anything else.
func pyDigits(s string) (string, bool) {
	var b strings.Builder
	prevDigit := false
	for _, r := range s {
		switch {
		case r == '_' && prevDigit:
			prevDigit = false
			continue
		case !unicode.IsDigit(r):
			return "", false
		}
		b.WriteByte(byte('0' + digitValue(r)))
		prevDigit = true
	}
	return b.String(), prevDigit
}

// digitValue is the value of a decimal digit: Unicode puts each script's
// ten digits in a row, 0 first, and rows of them next to each other.
func digitValue(r rune) int {
	start := r
	for unicode.IsDigit(start - 1) {
		start--
	}
	return int(r-start) % 10
}

// pyInt is Python's int(s): an optional sign and decimal digits, white
// space around them. ok is false where int() raises.
func pyInt(s string) (*big.Int, bool) {
	s = strings.TrimFunc(s, unicode.IsSpace)
	sign := ""
	if s != "" && (s[0] == '+' || s[0] == '-') {
		sign, s = s[:1], s[1:]
	}
	digits, ok := pyDigits(s)
	if !ok {
		return nil, false
	}
	n, ok := new(big.Int).SetString(sign+digits, 10)
	return n, ok
}

// pyFloat is Python's float(s): a decimal number with an optional
// fraction and exponent, or inf, infinity or nan, white space around it.
// ok is false where float() raises (Go's hexadecimal floats among them).
func pyFloat(s string) (float64, bool) {
	s = strings.TrimFunc(s, unicode.IsSpace)
	sign := ""
	if s != "" && (s[0] == '+' || s[0] == '-') {
		sign, s = s[:1], s[1:]
	}
	switch strings.ToLower(s) {
	case "inf", "infinity":
		f := math.Inf(1)
		if sign == "-" {
			f = -f
		}
		return f, true
	case "nan":
		return math.NaN(), true
	}
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	whole, frac, _ := strings.Cut(mant, ".")
	if whole == "" && frac == "" {
		return 0, false
	}
	lit := sign
	for _, part := range []string{whole, frac} {
		d, ok := "0", true
		if part != "" {
			d, ok = pyDigits(part)
		}
		if !ok {
			return 0, false
		}
		lit += d + "."
	}
	lit = strings.TrimSuffix(lit, ".")
	if hasExp {
		esign := ""
		if exp != "" && (exp[0] == '+' || exp[0] == '-') {
			esign, exp = exp[:1], exp[1:]
		}
		d, ok := pyDigits(exp)
		if !ok {
			return 0, false
		}
		lit += "e" + esign + d
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	return f, true // out of range is ±Inf or 0, as Python's
}

// literalEval is ast.literal_eval(s) printed by json.dumps
// (ensure_ascii=False): strings (quoted either way, triple-quoted, raw,
// escaped, concatenated), integers in any base, floats, True, False and
// None, one sign before a number, and lists, tuples and dicts of them.
// ok is false for what literal_eval refuses, for what json.dumps cannot
// print (sets, bytes, complex numbers, dict keys that are tuples), and
// for two things Python reads that are not read here: named escapes
// ("\N{BULLET}") and a sign before parentheses ("-(1)").
func literalEval(s string) (string, bool) {
	p := &pyParser{s: strings.TrimLeft(s, " \t")}
	v, ok := p.value()
	if !ok {
		return "", false
	}
	if p.peek() == ',' {
		// eval reads a tuple without its parentheses ("a", "b") where
		// a model writes an array's items bare.
		items := []string{v.json}
		for p.peek() == ',' {
			p.i++
			if p.peek() == 0 {
				break
			}
			w, ok := p.value()
			if !ok {
				return "", false
			}
			items = append(items, w.json)
		}
		v = pyLit{json: "[" + strings.Join(items, ", ") + "]"}
	}
	p.space()
	if p.i != len(p.s) {
		return "", false
	}
	return v.json, true
}

// pyLit is a literal read: its JSON text, and for a dict key what Python
// compares keys by (1, 1.0 and True are one key) and how json.dumps
// prints it as a key.
type pyLit struct {
	json  string
	key   string // "" when the value cannot be a key json.dumps prints
	ktext string
}

type pyParser struct {
	s string
	i int
}

// space skips white space and comments.
func (p *pyParser) space() {
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			p.i++
		case c == '\\' && strings.HasPrefix(p.s[p.i:], "\\\n"):
			p.i += 2
		case c == '#':
			for p.i < len(p.s) && p.s[p.i] != '\n' {
				p.i++
			}
		default:
			return
		}
	}
}

func (p *pyParser) peek() byte {
	p.space()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *pyParser) value() (pyLit, bool) {
	switch c := p.peek(); {
	case c == '[':
		p.i++
		items, ok := p.list(']')
		return pyLit{json: "[" + strings.Join(items, ", ") + "]"}, ok
	case c == '(':
		p.i++
		if p.peek() == ')' {
			p.i++
			return pyLit{json: "[]"}, true
		}
		first, ok := p.value()
		if !ok {
			return pyLit{}, false
		}
		switch p.peek() {
		case ')': // parentheses around a value
			p.i++
			return first, true
		case ',':
			p.i++
			rest, ok := p.list(')')
			return pyLit{json: "[" + strings.Join(append([]string{first.json}, rest...), ", ") + "]"}, ok
		}
		return pyLit{}, false
	case c == '{':
		p.i++
		return p.dict()
	case c == '+' || c == '-':
		p.i++
		p.space()
		if p.i >= len(p.s) || !(isDigit(p.s[p.i]) || p.s[p.i] == '.') {
			return pyLit{}, false // a sign applies to a number only
		}
		v, ok := p.number()
		if ok && c == '-' {
			v = negate(v)
		}
		return v, ok
	case isDigit(c) || c == '.':
		return p.number()
	case c == '"' || c == '\'':
		return p.strings()
	case isNameStart(c):
		start := p.i
		for p.i < len(p.s) && (isNameStart(p.s[p.i]) || isDigit(p.s[p.i])) {
			p.i++
		}
		name := p.s[start:p.i]
		switch name {
		case "True":
			return pyLit{json: "true", key: "n:1", ktext: "true"}, true
		case "False":
			return pyLit{json: "false", key: "n:0", ktext: "false"}, true
		case "None":
			return pyLit{json: "null", key: "none", ktext: "null"}, true
		}
		if (name == "r" || name == "R" || name == "u" || name == "U") && p.i < len(p.s) && (p.s[p.i] == '"' || p.s[p.i] == '\'') {
			p.i = start
			return p.strings()
		}
	}
	return pyLit{}, false
}

// list reads comma-separated values up to end, a trailing comma allowed.
func (p *pyParser) list(end byte) ([]string, bool) {
	var items []string
	for {
		if p.peek() == end {
			p.i++
			return items, true
		}
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		items = append(items, v.json)
		switch p.peek() {
		case ',':
			p.i++
		case end:
		default:
			return nil, false
		}
	}
}

// dict reads a dict's items up to }: a repeated key keeps its first
// place and its last value, as in Python.
func (p *pyParser) dict() (pyLit, bool) {
	var keys []string
	texts := map[string]string{}
	vals := map[string]string{}
	for {
		if p.peek() == '}' {
			p.i++
			break
		}
		k, ok := p.value()
		if !ok || k.key == "" || p.peek() != ':' {
			return pyLit{}, false // a set, or a key json.dumps refuses
		}
		p.i++
		v, ok := p.value()
		if !ok {
			return pyLit{}, false
		}
		if _, seen := vals[k.key]; !seen {
			keys = append(keys, k.key)
			texts[k.key] = k.ktext
		}
		vals[k.key] = v.json
		switch p.peek() {
		case ',':
			p.i++
		case '}':
		default:
			return pyLit{}, false
		}
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		pyString(&b, texts[k])
		b.WriteString(": ")
		b.WriteString(vals[k])
	}
	b.WriteByte('}')
	return pyLit{json: b.String()}, true
}

// number reads an unsigned int or float literal.
func (p *pyParser) number() (pyLit, bool) {
	start := p.i
	scan := func(set string) {
		for p.i < len(p.s) && strings.IndexByte(set, p.s[p.i]) >= 0 {
			p.i++
		}
	}
	const dec = "0123456789_"
	prefixed := strings.HasPrefix(strings.ToLower(p.s[p.i:]), "0x") || strings.HasPrefix(strings.ToLower(p.s[p.i:]), "0o") || strings.HasPrefix(strings.ToLower(p.s[p.i:]), "0b")
	if prefixed {
		p.i += 2
		scan(dec + "abcdefABCDEF")
	} else {
		scan(dec)
		if p.i < len(p.s) && p.s[p.i] == '.' {
			p.i++
			scan(dec)
		}
		if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
			p.i++
			if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
				p.i++
			}
			scan(dec)
		}
	}
	lit := p.s[start:p.i]
	if p.i < len(p.s) && (isNameStart(p.s[p.i]) || isDigit(p.s[p.i])) {
		return pyLit{}, false // complex (1j), or a name glued on
	}
	switch {
	case prefixed:
		digits := lit[2:]
		if strings.HasPrefix(digits, "_") {
			digits = digits[1:] // 0x_ff is allowed
		}
		if d, ok := pyDigitsIn(digits); ok {
			n, ok := new(big.Int).SetString(d, map[byte]int{'x': 16, 'o': 8, 'b': 2}[lit[1]|0x20])
			if ok {
				return intLit(n), true
			}
		}
		return pyLit{}, false
	case !strings.ContainsAny(lit, ".eE"):
		// A decimal integer has no leading zero, but for 0 itself.
		if lit[0] == '0' && strings.Trim(lit, "0_") != "" {
			return pyLit{}, false
		}
		n, ok := pyInt(lit)
		if !ok {
			return pyLit{}, false
		}
		return intLit(n), true
	}
	f, ok := pyFloat(lit)
	if !ok {
		return pyLit{}, false
	}
	return floatLit(f), true
}

// pyDigitsIn checks the underscores of a prefixed literal's digits
// (single, between digits) and drops them; the base checks the digits.
func pyDigitsIn(s string) (string, bool) {
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return "", false
	}
	return strings.ReplaceAll(s, "_", ""), true
}

func intLit(n *big.Int) pyLit {
	s := n.String()
	return pyLit{json: s, key: "n:" + s, ktext: s}
}

func floatLit(f float64) pyLit {
	s := PyFloat(f)
	key := "f:" + s
	if !math.IsInf(f, 0) && !math.IsNaN(f) && f == math.Trunc(f) {
		n, _ := big.NewFloat(f).Int(nil)
		key = "n:" + n.String() // 1.0 is the key 1
	}
	return pyLit{json: s, key: key, ktext: s}
}

func negate(v pyLit) pyLit {
	if n, ok := new(big.Int).SetString(v.json, 10); ok {
		return intLit(n.Neg(n))
	}
	f, _ := strconv.ParseFloat(v.json, 64)
	switch v.json {
	case "Infinity":
		f = math.Inf(1)
	case "NaN":
		f = math.NaN()
	}
	return floatLit(-f)
}

// strings reads one or more adjacent string literals, joined.
func (p *pyParser) strings() (pyLit, bool) {
	var b strings.Builder
	n := 0
	for {
		p.space()
		save := p.i
		raw := false
		if p.i < len(p.s) && strings.IndexByte("rRuU", p.s[p.i]) >= 0 {
			raw = p.s[p.i] == 'r' || p.s[p.i] == 'R'
			p.i++
		}
		if p.i >= len(p.s) || (p.s[p.i] != '"' && p.s[p.i] != '\'') {
			p.i = save
			break
		}
		s, ok := p.str(raw)
		if !ok {
			return pyLit{}, false
		}
		b.WriteString(s)
		n++
	}
	if n == 0 {
		return pyLit{}, false
	}
	var j strings.Builder
	pyString(&j, b.String())
	return pyLit{json: j.String(), key: "s:" + b.String(), ktext: b.String()}, true
}

// str reads one quoted string at p.i.
func (p *pyParser) str(raw bool) (string, bool) {
	q := p.s[p.i : p.i+1]
	if strings.HasPrefix(p.s[p.i:], q+q+q) {
		q = q + q + q
	}
	p.i += len(q)
	var b strings.Builder
	for p.i < len(p.s) {
		if strings.HasPrefix(p.s[p.i:], q) {
			p.i += len(q)
			return b.String(), true
		}
		c := p.s[p.i]
		switch {
		case c == '\n' && len(q) == 1:
			return "", false
		case c == '\\' && p.i+1 < len(p.s):
			if raw {
				b.WriteString(p.s[p.i : p.i+2])
				p.i += 2
				continue
			}
			if !p.escape(&b) {
				return "", false
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(p.s[p.i:])
		b.WriteRune(r)
		p.i += size
	}
	return "", false
}

// escape reads the escape sequence at p.i into b.
func (p *pyParser) escape(b *strings.Builder) bool {
	c := p.s[p.i+1]
	p.i += 2
	simple := map[byte]string{'\n': "", '\\': "\\", '\'': "'", '"': "\"", 'a': "\a", 'b': "\b", 'f': "\f", 'n': "\n", 'r': "\r", 't': "\t", 'v': "\v"}
	if s, ok := simple[c]; ok {
		b.WriteString(s)
		return true
	}
	hex := map[byte]int{'x': 2, 'u': 4, 'U': 8}
	switch {
	case hex[c] > 0:
		n := hex[c]
		if p.i+n > len(p.s) {
			return false
		}
		v, err := strconv.ParseUint(p.s[p.i:p.i+n], 16, 32)
		if err != nil || v > unicode.MaxRune {
			return false
		}
		b.WriteRune(rune(v))
		p.i += n
		return true
	case c >= '0' && c <= '7':
		v := int(c - '0')
		for k := 0; k < 2 && p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '7'; k++ {
			v = v*8 + int(p.s[p.i]-'0')
			p.i++
		}
		b.WriteRune(rune(v))
		return true
	case c == 'N':
		return false // named characters: not read here
	}
	b.WriteByte('\\') // an unknown escape keeps its backslash, and the character is read as any
	p.i--
	return true
}

func isDigit(c byte) bool     { return c >= '0' && c <= '9' }
func isNameStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
