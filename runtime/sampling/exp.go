package sampling

import "math"

// expTable holds the bits of 2^(j/64), j = 0..63, for expTable.neg. It lives in each
// Sampler (512 bytes) rather than in a package variable.
type expTable [64]uint64

func (t *expTable) init() {
	for j := range t {
		t[j] = math.Float64bits(math.Exp2(float64(j) / 64))
	}
}

// neg returns e^x for x in (expUnderflow, 0] within a float32 ulp or so
// (relative error < 1e-7); callers check the range, which keeps neg small
// enough to inline. math.Exp was most of the cost of a top-p step over a
// 151936-entry row; this is about twice as fast. It is exact at x = 0, so
// the best token always weighs exactly 1, which min-p relies on.
func (t *expTable) neg(x float32) float32 {
	// x = (k/64)*ln2 + r with |r| <= ln2/128, so
	// e^x = 2^(k>>6) * 2^((k&63)/64) * e^r.
	const round = 0x1.8p52 // adding it rounds a float64 to an integer
	f := float64(x)*(64*math.Log2E) + round
	k := int32(math.Float64bits(f)) // the integer is in the low bits
	f -= round
	r := float64(x) - f*(math.Ln2/64)
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6))) // Taylor remainder < 4e-11
	scale := math.Float64frombits(t[k&63] + uint64(k>>6)<<52)
	return float32(p * scale)
}

// expUnderflow keeps the result a normal float32 (e^-87 ~ 1.6e-38).
const expUnderflow = -87
