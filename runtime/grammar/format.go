package grammar

// format is a string of a supported format, quotes included. The texts
// are narrower than their RFCs allow (years from 0001, upper-case T and
// Z, February up to the 28th, no leap second; URIs with an authority),
// so that every one is valid to any validator.
func (c *schemaCompiler) format(name string) (Elem, bool) {
	body, ok := c.formatText(name)
	if !ok {
		return Elem{}, false
	}
	return Ref(c.b.New(name, Seq(c.b.Byte('"'), body, c.b.Byte('"')))), true
}

// formatText is the text of a string of a supported format, which
// needs no JSON escape: it is the string's value as well as what is
// between its quotes.
func (c *schemaCompiler) formatText(name string) ([]Elem, bool) {
	b := c.b
	d := b.Range('0', '9')
	two := func(lo, hi int) Elem { // a two-digit number from lo to hi
		return c.digits(pad2(lo), pad2(hi))
	}
	date := func() []Elem {
		days31 := b.Alt("month31", Seq(b.Alt("m31", b.Lit("01"), b.Lit("03"), b.Lit("05"), b.Lit("07"), b.Lit("08"), b.Lit("10"), b.Lit("12")), b.Byte('-'), two(1, 31)))
		days30 := b.Alt("month30", Seq(b.Alt("m30", b.Lit("04"), b.Lit("06"), b.Lit("09"), b.Lit("11")), b.Byte('-'), two(1, 30)))
		feb := Ref(b.New("february", Seq(b.Lit("02-"), two(1, 28))))
		year := c.digits("0001", "9999") // validators refuse year 0 (Python's datetime has none)
		return Seq(year, b.Byte('-'), b.Alt("month-day", []Elem{days31}, []Elem{days30}, []Elem{feb}))
	}
	timeOf := func() []Elem {
		frac := b.Optional("secfrac", Seq(b.Byte('.'), b.Repeat("fdigits", []Elem{d}, 1, 9)))
		offset := b.Alt("offset", b.Lit("Z"), Seq(b.Alt("sign", b.Lit("+"), b.Lit("-")), two(0, 23), b.Byte(':'), two(0, 59)))
		return Seq(two(0, 23), b.Byte(':'), two(0, 59), b.Byte(':'), two(0, 59), frac, offset)
	}
	var body []Elem
	switch name {
	case "date":
		body = date()
	case "time":
		body = timeOf()
	case "date-time":
		body = Seq(date(), b.Byte('T'), timeOf())
	case "uuid":
		var hex ByteSet
		hex.Add('0', '9')
		hex.Add('a', 'f')
		h := b.Set(hex)
		group := func(n int) []Elem {
			out := make([]Elem, n)
			for i := range out {
				out[i] = h
			}
			return out
		}
		body = Seq(group(8), b.Byte('-'), group(4), b.Byte('-'), group(4), b.Byte('-'), group(4), b.Byte('-'), group(12))
	case "uri":
		body = c.uri()
	default:
		return nil, false
	}
	return body, true
}

func pad2(n int) string { return string([]byte{byte('0' + n/10), byte('0' + n%10)}) }

// uri is RFC 3986's absolute URI with an authority, the form tools are
// given (https://host:port/path?query#fragment): a scheme, "//", a host
// name of unreserved characters and an optional port, then a path, a
// query and a fragment of their RFC characters, percent-encoded bytes
// among them. Nothing in it needs a JSON escape.
func (c *schemaCompiler) uri() []Elem {
	b := c.b
	var alpha, schemeRest, host, digit, hex, pchar ByteSet
	alpha.Add('a', 'z')
	alpha.Add('A', 'Z')
	digit.Add('0', '9')
	hex = digit
	hex.Add('a', 'f')
	hex.Add('A', 'F')
	schemeRest = alpha
	schemeRest.Add('0', '9')
	for _, ch := range "+-." {
		schemeRest.Add(byte(ch), byte(ch))
	}
	host = alpha
	host.Add('0', '9')
	for _, ch := range "-._~" {
		host.Add(byte(ch), byte(ch))
	}
	pchar = host // unreserved, then sub-delims, ":" and "@"
	for _, ch := range "!$&'()*+,;=:@" {
		pchar.Add(byte(ch), byte(ch))
	}
	pct := Seq(b.Byte('%'), b.Set(hex), b.Set(hex))
	pathChar := b.Alt("pchar", []Elem{b.Set(pchar)}, pct)
	queryChar := b.Alt("qchar", []Elem{b.Set(pchar)}, pct, b.Lit("/"), b.Lit("?"))
	return Seq(
		b.Set(alpha), b.Repeat("scheme", []Elem{b.Set(schemeRest)}, 0, 15), b.Lit("://"),
		b.Repeat("host", []Elem{b.Set(host)}, 1, 253),
		b.Optional("port", Seq(b.Byte(':'), b.Repeat("port", []Elem{b.Set(digit)}, 1, 5))),
		b.Repeat("path", Seq(b.Byte('/'), b.Repeat("segment", []Elem{pathChar}, 0, -1)), 0, -1),
		b.Optional("query", Seq(b.Byte('?'), b.Repeat("query", []Elem{queryChar}, 0, -1))),
		b.Optional("fragment", Seq(b.Byte('#'), b.Repeat("fragment", []Elem{queryChar}, 0, -1))),
	)
}
