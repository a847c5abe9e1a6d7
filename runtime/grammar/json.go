package grammar

import (
	"fmt"
	"strconv"
)

// jsonRules are the pieces of JSON text every schema grammar shares.
type jsonRules struct {
	b       *Builder
	ws      Elem // whitespace between tokens, bounded so it cannot go on forever
	char    Elem // a character of a string: printable, escaped, or UTF-8
	plain   Elem // a character that needs no escape (keys, patterns)
	utf8    Elem // a non-ASCII character, as valid UTF-8
	str     Elem // a whole string
	number  Elem
	integer Elem
	value   Elem // any JSON value, nested at most maxDepth deep
	object  Elem // any JSON object
}

// maxDepth bounds the nesting of a value the schema leaves free: any
// JSON value is valid there, and a bounded one is too.
const maxDepth = 6

func newJSONRules(b *Builder) *jsonRules {
	j := &jsonRules{b: b}
	var indent ByteSet
	indent.Add(' ', ' ')
	indent.Add('\t', '\t')
	// As llama.cpp's: a space, or a newline and an indentation, at most.
	j.ws = b.Alt("ws", nil, b.Lit(" "), Seq(b.Byte('\n'), b.Repeat("indent", []Elem{b.Set(indent)}, 0, 20)))

	var ascii, hex, hexNoD, hex07 ByteSet
	ascii.Add(0x20, 0x7e)
	ascii[0] &^= 1 << '"'
	ascii[1] &^= 1 << ('\\' - 64)
	hex.Add('0', '9')
	hex.Add('a', 'f')
	hex.Add('A', 'F')
	hexNoD = hex
	hexNoD[1] &^= 1<<('d'-64) | 1<<('D'-64)
	hex07.Add('0', '7')
	j.utf8 = utf8Rule(b, true)
	j.plain = b.Alt("plain", []Elem{b.Set(ascii)}, []Elem{j.utf8})
	var esc ByteSet
	for _, c := range `"\/bfnrt` {
		esc.Add(byte(c), byte(c))
	}
	h := b.Set(hex)
	// \u escapes of surrogates are left out: a pair counts as two
	// characters here and one in a validator's minLength.
	unicode := b.Alt("\\u", Seq(b.Set(hexNoD), h, h, h), Seq(b.Lit("d"), b.Set(hex07), h, h), Seq(b.Lit("D"), b.Set(hex07), h, h))
	j.char = b.Alt("char", []Elem{j.plain}, Seq(b.Byte('\\'), b.Set(esc)), Seq(b.Lit(`\u`), unicode))
	j.str = Ref(b.New("string", Seq(b.Byte('"'), b.Repeat("chars", []Elem{j.char}, 0, -1), b.Byte('"'))))

	var digit, nonzero, sign, e ByteSet
	digit.Add('0', '9')
	nonzero.Add('1', '9')
	sign.Add('+', '+')
	sign.Add('-', '-')
	e.Add('e', 'e')
	e.Add('E', 'E')
	d := b.Set(digit)
	// Up to 16 digits: every such integer is exact in a float64.
	natural := b.Alt("natural", b.Lit("0"), Seq(b.Set(nonzero), b.Repeat("digits", []Elem{d}, 0, 15)))
	j.integer = Ref(b.New("integer", Seq(b.Optional("minus", b.Lit("-")), natural)))
	frac := b.Optional("frac", Seq(b.Byte('.'), b.Repeat("fdigits", []Elem{d}, 1, 16)))
	exp := b.Optional("exp", Seq(b.Set(e), b.Optional("sign", []Elem{b.Set(sign)}), b.Repeat("edigits", []Elem{d}, 1, 2)))
	j.number = Ref(b.New("number", Seq(j.integer, frac, exp)))

	// Any value, its depth bounded: value(k) holds containers of value(k-1).
	leaf := b.Alt("scalar", []Elem{j.str}, []Elem{j.number}, b.Lit("true"), b.Lit("false"), b.Lit("null"))
	inner := leaf
	for k := 1; k <= maxDepth; k++ {
		obj := j.objectOf(fmt.Sprintf("object%d", k), inner)
		arr := j.arrayOf(fmt.Sprintf("array%d", k), inner, 0, -1)
		inner = b.Alt("value"+strconv.Itoa(k), []Elem{leaf}, []Elem{obj}, []Elem{arr})
		if k == maxDepth {
			j.object = obj
		}
	}
	j.value = inner
	return j
}

// utf8Rule is a non-ASCII character in valid UTF-8: no overlong forms,
// no surrogates, nothing past U+10FFFF; without lineSep, not U+2028 or
// U+2029 either (a pattern's . does not match them).
func utf8Rule(b *Builder, lineSep bool) Elem {
	c := b.Range(0x80, 0xbf)
	e1 := [][]Elem{Seq(b.Range(0xe1, 0xec), c, c)}
	if !lineSep {
		var notSep ByteSet
		notSep.Add(0x80, 0xbf)
		notSep[2] &^= 1<<(0xa8-128) | 1<<(0xa9-128)
		e1 = [][]Elem{Seq(b.Range(0xe1, 0xe1), c, c), Seq(b.Range(0xe2, 0xe2), b.Range(0x80, 0x80), b.Set(notSep)),
			Seq(b.Range(0xe2, 0xe2), b.Range(0x81, 0xbf), c), Seq(b.Range(0xe3, 0xec), c, c)}
	}
	alts := [][]Elem{Seq(b.Range(0xc2, 0xdf), c), Seq(b.Range(0xe0, 0xe0), b.Range(0xa0, 0xbf), c)}
	alts = append(alts, e1...)
	alts = append(alts,
		Seq(b.Range(0xed, 0xed), b.Range(0x80, 0x9f), c),
		Seq(b.Range(0xee, 0xef), c, c),
		Seq(b.Range(0xf0, 0xf0), b.Range(0x90, 0xbf), c, c),
		Seq(b.Range(0xf1, 0xf3), c, c, c),
		Seq(b.Range(0xf4, 0xf4), b.Range(0x80, 0x8f), c, c))
	return b.Alt("utf8", alts...)
}

// objectOf is an object whose keys are any strings and values value.
func (j *jsonRules) objectOf(name string, value Elem) Elem {
	b := j.b
	member := Seq(j.str, j.ws, b.Byte(':'), j.ws, value)
	more := b.Repeat(name+"-members", Seq(j.ws, b.Byte(','), j.ws, member), 0, -1)
	return b.Alt(name, Seq(b.Byte('{'), j.ws, b.Byte('}')), Seq(b.Byte('{'), j.ws, member, more, j.ws, b.Byte('}')))
}

// arrayOf is an array of lo to hi (< 0: any number of) items.
func (j *jsonRules) arrayOf(name string, item Elem, lo, hi int) Elem {
	b := j.b
	if hi == 0 {
		return Ref(b.New(name, Seq(b.Byte('['), j.ws, b.Byte(']'))))
	}
	moreMin, moreMax := max(lo-1, 0), hi-1
	if hi < 0 {
		moreMax = -1
	}
	more := b.Repeat(name+"-items", Seq(j.ws, b.Byte(','), j.ws, item), moreMin, moreMax)
	full := Seq(b.Byte('['), j.ws, item, more, j.ws, b.Byte(']'))
	if lo > 0 {
		return Ref(b.New(name, full))
	}
	return b.Alt(name, Seq(b.Byte('['), j.ws, b.Byte(']')), full)
}
