package grammar

// format is a string of a supported format, quotes included. The texts
// are narrower than their RFCs allow (upper-case T and Z, February up to
// the 28th, no leap second), so that every one is valid to any
// validator.
func (c *schemaCompiler) format(name string) (Elem, bool) {
	b := c.b
	d := b.Range('0', '9')
	two := func(lo, hi int) Elem { // a two-digit number from lo to hi
		return c.digits(pad2(lo), pad2(hi))
	}
	date := func() []Elem {
		days31 := b.Alt("month31", Seq(b.Alt("m31", b.Lit("01"), b.Lit("03"), b.Lit("05"), b.Lit("07"), b.Lit("08"), b.Lit("10"), b.Lit("12")), b.Byte('-'), two(1, 31)))
		days30 := b.Alt("month30", Seq(b.Alt("m30", b.Lit("04"), b.Lit("06"), b.Lit("09"), b.Lit("11")), b.Byte('-'), two(1, 30)))
		feb := Ref(b.New("february", Seq(b.Lit("02-"), two(1, 28))))
		return Seq(d, d, d, d, b.Byte('-'), b.Alt("month-day", []Elem{days31}, []Elem{days30}, []Elem{feb}))
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
	default:
		return Elem{}, false
	}
	return Ref(b.New(name, Seq(b.Byte('"'), body, b.Byte('"')))), true
}

func pad2(n int) string { return string([]byte{byte('0' + n/10), byte('0' + n%10)}) }
