package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// integer is an integer within the schema's bounds, a multiple of its
// multipleOf.
func (c *schemaCompiler) integer(n node, path string) (Elem, error) {
	return c.numeric(n, path, true)
}

// number is a number within the schema's bounds, a multiple of its
// multipleOf. A bounded number has no exponent and at most 6 decimals
// (a multipleOf's own decimals, up to 9, when it has one), so that a
// validator reading it as a float64 compares it as written; its whole
// part has at most 12 digits.
func (c *schemaCompiler) number(n node, path string) (Elem, error) {
	return c.numeric(n, path, false)
}

// maxMultiples bounds the multiples of a multipleOf within bounds
// written as literals.
const maxMultiples = 1000

// numeric is number or integer (integer: no decimals). The numbers are
// scaled by 10^decimals to integers: bounds are a range of those, and
// multipleOf a modulus.
func (c *schemaCompiler) numeric(n node, path string, integer bool) (Elem, error) {
	low, high, err := numberBounds(n, path)
	if err != nil {
		return Elem{}, err
	}
	var mult *big.Rat
	if raw := n["multipleOf"]; raw != nil {
		if mult = ratOf(json.Number(bytes.TrimSpace(raw))); mult == nil || mult.Sign() <= 0 {
			return Elem{}, &SchemaError{Path: path, Keyword: "multipleOf", Reason: "want a positive number"}
		}
	}
	if low == nil && high == nil && mult == nil {
		if integer {
			return c.j.integer, nil
		}
		return c.j.number, nil
	}
	// Integers have at most 15 digits: a bound past them (zod's 2^53-1)
	// would be a tree of digit ranges for the few numbers beyond.
	k, limit := 0, int64(1e15-1)
	if !integer {
		k, limit = 6, 1e18-1
		if mult != nil {
			if k = decimals(mult); k > 9 {
				return Elem{}, unsupported(path, "multipleOf", fmt.Sprintf("%s has more than 9 decimals", mult.FloatString(20)))
			}
			limit = int64(math.Pow10(12+k)) - 1
		}
	}
	scale := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(k)), nil))
	// The scaled bounds, inclusive.
	lo, hi := -limit, limit
	if low != nil {
		v := new(big.Rat).Mul(low.r, scale)
		b := new(big.Int).Neg(floorRat(new(big.Rat).Neg(v))) // ceil
		if low.excl {
			b = floorRat(v).Add(floorRat(v), big.NewInt(1))
		}
		lo = max(lo, clampInt(b, limit))
	}
	if high != nil {
		v := new(big.Rat).Mul(high.r, scale)
		b := floorRat(v)
		if high.excl {
			b = new(big.Int).Neg(floorRat(new(big.Rat).Neg(v)))
			b.Sub(b, big.NewInt(1))
		}
		hi = min(hi, clampInt(b, limit))
	}
	what := "number"
	if integer {
		what = "integer"
	}
	if lo > hi {
		return Elem{}, empty(path, boundKey(low, high), fmt.Sprintf("no %s is within the bounds", what))
	}
	m := int64(1)
	if mult != nil {
		// A scaled number is a multiple of mult·10^k, and an integer
		// anyway: of the numerator of mult·10^k in lowest terms.
		mm := new(big.Rat).Mul(mult, scale)
		if !mm.Num().IsInt64() || mm.Num().Int64() > limit {
			return Elem{}, empty(path, "multipleOf", fmt.Sprintf("no %s within the bounds is a multiple of it", what))
		}
		m = mm.Num().Int64()
	}
	if m == 1 {
		return c.scaledRange(lo, hi, k), nil
	}
	first, last := ceilDiv(lo, m), floorDiv(hi, m)
	switch {
	case first > last:
		return Elem{}, empty(path, "multipleOf", fmt.Sprintf("no %s within the bounds is a multiple of it", what))
	case last-first < maxMultiples:
		var alts [][]Elem
		for q := first; q <= last; q++ {
			alts = append(alts, c.b.Lit(scaledText(q*m, k)))
		}
		return c.b.Alt("multiples", alts...), nil
	}
	// Many multiples: an automaton of the remainder, for bounds no
	// narrower than a sign's.
	var positive, negative bool
	switch {
	case lo == -limit:
		negative = true
	case lo == 1:
		positive = true
	case lo != 0:
		return Elem{}, unsupported(path, "multipleOf", "with a lower bound other than 0")
	}
	if hi != limit {
		return Elem{}, unsupported(path, "multipleOf", "with an upper bound and more than 1000 multiples")
	}
	e, err := c.multiples(m, k, negative, positive)
	if err != nil {
		return Elem{}, unsupported(path, "multipleOf", err.Error())
	}
	return e, nil
}

// boundKey names the bound at fault when no number is within the bounds.
func boundKey(low, high *numBound) string {
	if low != nil {
		return "minimum"
	}
	return high.key
}

func floorRat(r *big.Rat) *big.Int {
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() < 0 {
		q.Sub(q, big.NewInt(1))
	}
	return q
}

// clampInt is v within ±limit (well within int64).
func clampInt(v *big.Int, limit int64) int64 {
	switch {
	case v.Cmp(big.NewInt(limit)) > 0:
		return limit
	case v.Cmp(big.NewInt(-limit)) < 0:
		return -limit
	}
	return v.Int64()
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

// scaledText is the text of v / 10^k, its fraction's trailing zeros left
// out.
func scaledText(v int64, k int) string {
	neg := v < 0
	if neg {
		v = -v
	}
	s := strconv.FormatInt(v, 10)
	if k > 0 {
		for len(s) <= k {
			s = "0" + s
		}
		whole, frac := s[:len(s)-k], strings.TrimRight(s[len(s)-k:], "0")
		s = whole
		if frac != "" {
			s += "." + frac
		}
	}
	if neg {
		s = "-" + s
	}
	return s
}

// scaledRange is the text of the numbers v / 10^k for lo <= v <= hi,
// with at most k decimals, their trailing zeros written or not.
func (c *schemaCompiler) scaledRange(lo, hi int64, k int) Elem {
	b := c.b
	var alts [][]Elem
	if lo < 0 {
		// Below zero, "-0" and "-0.0" left out: the negatives from 1 up.
		alts = append(alts, Seq(b.Byte('-'), c.scaledNat(max(-hi, 1), -lo, k)))
	}
	if hi >= 0 {
		alts = append(alts, []Elem{c.scaledNat(max(lo, 0), hi, k)})
	}
	return b.Alt(fmt.Sprintf("[%d,%d]/10^%d", lo, hi, k), alts...)
}

// scaledNat is scaledRange for 0 <= lo <= hi.
func (c *schemaCompiler) scaledNat(lo, hi int64, k int) Elem {
	b := c.b
	if k == 0 {
		return c.natRange(lo, hi)
	}
	p := int64(math.Pow10(k))
	wlo, flo, whi, fhi := lo/p, lo%p, hi/p, hi%p
	if wlo == whi {
		return Ref(b.New("scaled", Seq(c.natRange(wlo, wlo), c.fraction(flo, fhi, k))))
	}
	alts := [][]Elem{Seq(c.natRange(wlo, wlo), c.fraction(flo, p-1, k))}
	if wlo+1 <= whi-1 {
		alts = append(alts, Seq(c.natRange(wlo+1, whi-1), c.fraction(0, p-1, k)))
	}
	alts = append(alts, Seq(c.natRange(whi, whi), c.fraction(0, fhi, k)))
	return b.Alt("scaled", alts...)
}

// fraction is what follows a whole part for the fractions lo/10^k to
// hi/10^k: none for zero, or a point and 1 to k digits (the others
// zeros).
func (c *schemaCompiler) fraction(lo, hi int64, k int) Elem {
	b := c.b
	pad := func(v int64) string { return fmt.Sprintf("%0*d", k, v) }
	var alts [][]Elem
	if lo == 0 {
		alts = append(alts, nil)
	}
	if hi > 0 || lo == 0 {
		alts = append(alts, Seq(b.Byte('.'), c.fracDigits(pad(lo), pad(hi))))
	}
	return b.Alt("fraction", alts...)
}

// fracDigits is the digit strings t of 1 to len(lo) digits whose value,
// padded with zeros to len(lo), is from lo to hi (equal lengths).
func (c *schemaCompiler) fracDigits(lo, hi string) Elem {
	b := c.b
	key := [2]string{"." + lo, hi}
	if e, ok := c.ranges[key]; ok {
		return e
	}
	zeros, nines := strings.Repeat("0", len(lo)-1), strings.Repeat("9", len(lo)-1)
	var alts [][]Elem
	// Digits with the same bounds below them share an alternative.
	for d := lo[0]; d <= hi[0]; {
		sublo, subhi := zeros, nines
		e := d
		switch {
		case d == lo[0]:
			sublo = lo[1:]
			if d == hi[0] {
				subhi = hi[1:]
			}
		case d == hi[0]:
			subhi = hi[1:]
		default:
			e = hi[0] - 1
		}
		digit := b.Range(d, e)
		if strings.Trim(sublo, "0") == "" { // the digits after may all be zeros: stop here
			alts = append(alts, []Elem{digit})
		}
		if len(lo) > 1 {
			alts = append(alts, Seq(digit, c.fracDigits(sublo, subhi)))
		}
		d = e + 1
	}
	e := b.Alt("frac", alts...)
	c.ranges[key] = e
	return e
}

// multiples is the text of the numbers with at most k decimals whose
// value times 10^k is a multiple of m: a remainder automaton, numbers of
// at most 15 characters (so a validator's float64 holds them exactly);
// negative ones when negative, zero unless positive.
func (c *schemaCompiler) multiples(m int64, k int, negative, positive bool) (Elem, error) {
	if m*int64(k+2) > maxAutomaton {
		return Elem{}, fmt.Errorf("a modulus of %d: too large to enforce", m)
	}
	var sets []*charSet
	for _, ch := range "0123456789.-" {
		sets = append(sets, single(ch))
	}
	at := newAtoms(sets)
	digit := func(v int64) int { return int(at.class['0'+v]) }
	point, minus := int(at.class['.']), int(at.class['-'])
	// The states: the start, after "-", a whole part "0", a whole part
	// of remainder r, a point and j digits of remainder r, and "0." and
	// j zeros (the value still zero).
	const start, neg, zero = 0, 1, 2
	whole := func(r int64) int32 { return int32(3 + r) }
	frac := func(r int64, j int) int32 { return int32(3 + m + int64(j)*m + r) }
	zeros := func(j int) int32 { return int32(3 + m + int64(k+1)*m + int64(j)) }
	n := int(zeros(k)) + 1
	d := &dfa{next: make([][]int32, n), final: make([]bool, n)}
	for q := range d.next {
		d.next[q] = slices.Repeat([]int32{-1}, at.n)
	}
	pow := func(j int) int64 { // 10^j mod m
		p := int64(1) % m
		for range j {
			p = p * 10 % m
		}
		return p
	}
	for _, q := range []int32{start, neg} {
		d.next[q][digit(0)] = zero
		for v := int64(1); v <= 9; v++ {
			d.next[q][digit(v)] = whole(v % m)
		}
	}
	if negative {
		d.next[start][minus] = neg
	}
	d.final[zero] = !positive
	for r := range m {
		q := whole(r)
		d.final[q] = r*pow(k)%m == 0
		for v := range int64(10) {
			d.next[q][digit(v)] = whole((r*10 + v) % m)
		}
	}
	if k > 0 {
		d.next[zero][point] = zeros(0)
		for r := range m {
			d.next[whole(r)][point] = frac(r, 0)
			// After the point, j digits: the remainder times 10^(k-j)
			// decides, the digits left out being zeros.
			for j := 0; j <= k; j++ {
				q := frac(r, j)
				d.final[q] = j > 0 && r*pow(k-j)%m == 0
				if j < k {
					for v := range int64(10) {
						d.next[q][digit(v)] = frac((r*10+v)%m, j+1)
					}
				}
			}
		}
		for j := 0; j <= k; j++ {
			q := zeros(j)
			d.final[q] = j > 0 && !positive
			if j < k {
				d.next[q][digit(0)] = zeros(j + 1)
				for v := int64(1); v <= 9; v++ {
					d.next[q][digit(v)] = frac(v%m, j+1)
				}
			}
		}
	}
	return c.automaton(d.minimize(), at, 0, 15)
}

// numBound is a bound on numbers: the keyword that sets it, its value
// exactly and as a float64, and whether the value itself is excluded.
type numBound struct {
	key         string
	r           *big.Rat
	v           float64
	lower, excl bool
}

// admits reports whether r is within the bound.
func (b *numBound) admits(r *big.Rat) bool {
	d := r.Cmp(b.r)
	if !b.lower {
		d = -d
	}
	return d > 0 || d == 0 && !b.excl
}

// numberBounds reads minimum, maximum, exclusiveMinimum and
// exclusiveMaximum, draft 4's boolean exclusive forms included: the
// tightest bound below and the tightest above, nil where there is none.
func numberBounds(n node, path string) (lo, hi *numBound, err error) {
	for _, k := range []struct {
		key, flag string // flag: draft 4's exclusive form of the bound
		lower     bool
	}{{"minimum", "exclusiveMinimum", true}, {"exclusiveMinimum", "", true}, {"maximum", "exclusiveMaximum", false}, {"exclusiveMaximum", "", false}} {
		raw := bytes.TrimSpace(n[k.key])
		if len(raw) == 0 || string(raw) == "true" || string(raw) == "false" {
			continue // absent, or draft 4's flag, read with its bound
		}
		b := &numBound{key: k.key, r: ratOf(json.Number(raw)), lower: k.lower, excl: k.flag == ""}
		if json.Unmarshal(raw, &b.v) != nil || b.r == nil {
			return nil, nil, &SchemaError{Path: path, Keyword: k.key, Reason: "want a number"}
		}
		if k.flag != "" {
			b.excl = string(bytes.TrimSpace(n[k.flag])) == "true"
		}
		cur, sign := &hi, -1
		if k.lower {
			cur, sign = &lo, 1
		}
		if old := *cur; old == nil {
			*cur = b
		} else if d := b.r.Cmp(old.r) * sign; d > 0 || d == 0 && b.excl {
			*cur = b
		}
	}
	return lo, hi, nil
}

// natRange is the numbers lo to hi, 0 <= lo <= hi, without leading zeros.
func (c *schemaCompiler) natRange(lo, hi int64) Elem {
	var alts [][]Elem
	for l := len(strconv.FormatInt(lo, 10)); l <= len(strconv.FormatInt(hi, 10)); l++ {
		first, last := int64(math.Pow10(l-1)), int64(math.Pow10(l))-1
		if l == 1 {
			first = 0
		}
		a, z := max(lo, first), min(hi, last)
		if a > z {
			continue
		}
		alts = append(alts, []Elem{c.digits(strconv.FormatInt(a, 10), strconv.FormatInt(z, 10))})
	}
	return c.b.Alt("natural", alts...)
}

// digits is the digit strings from lo to hi, of equal length.
func (c *schemaCompiler) digits(lo, hi string) Elem {
	b := c.b
	key := [2]string{lo, hi}
	if e, ok := c.ranges[key]; ok {
		return e
	}
	var e Elem
	switch {
	case lo == "":
		e = b.Alt("", nil)
	case lo[0] == hi[0]:
		e = Ref(b.New(lo+".."+hi, Seq(b.Byte(lo[0]), c.digits(lo[1:], hi[1:]))))
	case strings.Trim(lo[1:], "0") == "" && strings.Trim(hi[1:], "9") == "":
		e = Ref(b.New(lo+".."+hi, Seq(b.Range(lo[0], hi[0]), c.any(len(lo)-1))))
	default:
		n := len(lo) - 1
		alts := [][]Elem{Seq(b.Byte(lo[0]), c.digits(lo[1:], strings.Repeat("9", n)))}
		if lo[0]+1 <= hi[0]-1 {
			alts = append(alts, Seq(b.Range(lo[0]+1, hi[0]-1), c.any(n)))
		}
		alts = append(alts, Seq(b.Byte(hi[0]), c.digits(strings.Repeat("0", n), hi[1:])))
		e = b.Alt(lo+".."+hi, alts...)
	}
	c.ranges[key] = e
	return e
}

// any is n digits.
func (c *schemaCompiler) any(n int) Elem {
	return c.digits(strings.Repeat("0", n), strings.Repeat("9", n))
}
