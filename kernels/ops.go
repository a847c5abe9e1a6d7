package kernels

import (
	"fmt"
	"math"
)

// The vector operations of a transformer step. Each method checks its
// arguments, lets the assembly of p (if any) do the bulk of the vector, and
// finishes the remainder — fewer elements than one register holds — in Go.
// Keeping the ragged tail in Go keeps the assembly to whole registers; the
// cost is a few scalar iterations per call.
//
// Lengths must match exactly (a mismatch panics): silently using the
// shorter length would hide indexing bugs in the caller.

func opCheckLen(op, name string, got, want int) {
	if got != want {
		panic(fmt.Sprintf("kernels: %s: len(%s) = %d, want %d", op, name, got, want))
	}
}

// RMSNorm sets dst[i] = x[i] / sqrt(mean(x²) + eps) * w[i]. dst may alias x.
// The sum of squares is taken in float64 on the Generic path and in several
// float32 partial sums on the vector paths, which keeps the relative error
// of the mean well below 1e-6 for the lengths of a hidden state.
func (p Path) RMSNorm(dst, x, w []float32, eps float32) {
	n := len(x)
	opCheckLen("RMSNorm", "dst", len(dst), n)
	opCheckLen("RMSNorm", "w", len(w), n)
	if n == 0 {
		return
	}
	// (x*r)*w in float32, the order of the reference implementation
	// (normalise, then apply the weight).
	p.MulScale(dst, x, w, p.rmsScale(x, eps))
}

// rmsScale is RMSNorm's 1 / sqrt(mean(x²) + eps) for a non-empty x.
func (p Path) rmsScale(x []float32, eps float32) float32 {
	k := 0
	var ss float64
	if p != Generic {
		var s float32
		k, s = sumSqAsm(p, x)
		ss = float64(s)
	}
	for _, v := range x[k:] {
		ss += float64(v) * float64(v)
	}
	return float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
}

// RMSNormGated sets dst = RMSNorm(x, w) * silu(z), element by element (a
// Gated DeltaNet head's output norm, gated by its z): (x*r)*w as RMSNorm
// rounds it, then times silu(z). dst may alias x or z.
func (p Path) RMSNormGated(dst, x, z, w []float32, eps float32) {
	n := len(x)
	opCheckLen("RMSNormGated", "dst", len(dst), n)
	opCheckLen("RMSNormGated", "z", len(z), n)
	opCheckLen("RMSNormGated", "w", len(w), n)
	if n == 0 {
		return
	}
	r := p.rmsScale(x, eps)
	k := 0
	if p != Generic {
		k = mulScaleSiLUAsm(p, dst, x, w, z, r)
	}
	dst, x, w, z = dst[k:], x[k:n], w[k:n], z[k:n]
	for i := range dst {
		dst[i] = silu(z[i]) * (x[i] * r * w[i])
	}
}

// MulScale sets dst = (x * s) * w, element by element, in float32 (the
// order RMSNorm applies its weight in). dst may alias x.
func (p Path) MulScale(dst, x, w []float32, s float32) {
	n := len(dst)
	opCheckLen("MulScale", "x", len(x), n)
	opCheckLen("MulScale", "w", len(w), n)
	k := 0
	if p != Generic {
		k = mulScaleAsm(p, dst, x, w, s)
	}
	dst, x, w = dst[k:], x[k:n], w[k:n]
	for i := range x {
		dst[i] = x[i] * s * w[i]
	}
}

// Add sets dst = a + b. dst may alias a or b.
func (p Path) Add(dst, a, b []float32) {
	n := len(dst)
	opCheckLen("Add", "a", len(a), n)
	opCheckLen("Add", "b", len(b), n)
	k := 0
	if p != Generic {
		k = addAsm(p, dst, a, b)
	}
	dst, a, b = dst[k:], a[k:len(dst)], b[k:len(dst)]
	for i := range dst {
		dst[i] = a[i] + b[i]
	}
}

// AXPY adds a*x to dst (a MoE layer's routing-weighted sum of its
// experts' outputs).
func (p Path) AXPY(dst []float32, a float32, x []float32) {
	n := len(dst)
	opCheckLen("AXPY", "x", len(x), n)
	k := 0
	if p != Generic {
		k = axpyAsm(p, dst, a, x)
	}
	dst, x = dst[k:], x[k:len(dst)]
	for i := range dst {
		dst[i] += a * x[i]
	}
}

// AddBias adds b to dst.
func (p Path) AddBias(dst, b []float32) { p.Add(dst, dst, b) }

// Scale multiplies x by s in place.
func (p Path) Scale(x []float32, s float32) {
	k := 0
	if p != Generic {
		k = scaleAsm(p, x, s)
	}
	for i := k; i < len(x); i++ {
		x[i] *= s
	}
}

// SiLUMul sets dst = silu(gate) * up, silu(g) = g / (1 + exp(-g)). dst may
// alias gate or up. The vector paths use a polynomial exp with a relative
// error of a few ulp and clamp its argument, so silu(-100) is a tiny
// negative number (not NaN) and silu(100) is 100.
func (p Path) SiLUMul(dst, gate, up []float32) {
	n := len(dst)
	opCheckLen("SiLUMul", "gate", len(gate), n)
	opCheckLen("SiLUMul", "up", len(up), n)
	k := 0
	if p != Generic {
		k = siluMulAsm(p, dst, gate, up)
	}
	dst, gate, up = dst[k:], gate[k:len(dst)], up[k:len(dst)]
	for i := range dst {
		dst[i] = silu(gate[i]) * up[i]
	}
}

// SigmoidMul sets dst = x * sigmoid(gate), sigmoid(g) = 1 / (1 + exp(-g)):
// gated attention's output gate. dst may alias x or gate. The vector paths
// compute x / (1 + exp(-g)) with SiLUMul's exp.
func (p Path) SigmoidMul(dst, x, gate []float32) {
	n := len(dst)
	opCheckLen("SigmoidMul", "x", len(x), n)
	opCheckLen("SigmoidMul", "gate", len(gate), n)
	k := 0
	if p != Generic {
		k = sigmoidMulAsm(p, dst, x, gate)
	}
	dst, x, gate = dst[k:], x[k:n], gate[k:n]
	for i := range dst {
		dst[i] = float32(float64(x[i]) / (1 + math.Exp(-float64(gate[i]))))
	}
}

// Dot returns the sum of a[i]*b[i]: in float64 on the Generic path, in
// several float32 partial sums on the vector paths.
func (p Path) Dot(a, b []float32) float32 {
	n := len(a)
	opCheckLen("Dot", "b", len(b), n)
	k := 0
	var s float64
	if p != Generic {
		var v float32
		k, v = dotAsm(p, a, b)
		s = float64(v)
	}
	for i := k; i < n; i++ {
		s += float64(a[i]) * float64(b[i])
	}
	return float32(s)
}

// Softmax replaces x by softmax(x), subtracting the maximum first so no
// exponent overflows. A NaN in x makes the result NaN; an x of all -Inf
// gives NaN too (there is no distribution to return).
func (p Path) Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	lse, m := p.LogSumExp(x, x)
	p.Scale(x, float32(math.Exp(float64(m)-lse)))
}

// LogSumExp returns log(sum(exp(x))) for a non-empty x, computed stably
// (the maximum subtracted first), and leaves exp(x[i] - max(x)) in scratch
// (which needs len(x) elements), so a caller can form the probabilities
// scratch[i] / exp(lse - max) without exponentiating again. It returns the
// maximum too.
func (p Path) LogSumExp(x, scratch []float32) (lse float64, max float32) {
	if len(x) == 0 || len(scratch) < len(x) {
		panic(fmt.Sprintf("kernels: LogSumExp: len(x) = %d, len(scratch) = %d", len(x), len(scratch)))
	}
	scratch = scratch[:len(x)]
	copy(scratch, x) // Softmax passes x itself

	m := p.max(scratch)
	k := 0
	var sum float64
	if p != Generic {
		var s float32
		k, s = expSubAsm(p, scratch, m)
		sum = float64(s)
	}
	for i := k; i < len(scratch); i++ {
		e := math.Exp(float64(scratch[i] - m))
		scratch[i] = float32(e)
		sum += e
	}
	return float64(m) + math.Log(sum), m
}

// max returns the largest element of a non-empty x, ignoring NaNs; it is
// -Inf when every element is NaN.
func (p Path) max(x []float32) float32 {
	k := 0
	m := opNegInf()
	if p != Generic {
		k, m = maxAsm(p, x)
	}
	for _, v := range x[k:] {
		if v > m {
			m = v
		}
	}
	return m
}

// Argmax returns the index of the first largest element of x, or -1 if x
// is empty. NaNs never win: they are skipped, and only if every element is
// NaN is the answer 0. +Inf and -Inf compare as usual.
func (p Path) Argmax(x []float32) int {
	if len(x) == 0 {
		return -1
	}
	m := p.max(x)
	k := 0
	if p != Generic {
		var i int
		k, i = indexAsm(p, x, m)
		if i >= 0 {
			return i
		}
	}
	for i := k; i < len(x); i++ {
		if x[i] == m {
			return i
		}
	}
	return 0 // all NaN
}

// RoPE rotates one head vector x of even length d by the angles whose
// cosines and sines (length d/2, for this position) are given, in the
// half-split ("rotate_half") layout of Hugging Face transformers: element i
// pairs with element i+d/2.
func (p Path) RoPE(x, cos, sin []float32) {
	if len(x)%2 != 0 {
		panic(fmt.Sprintf("kernels: RoPE: odd head length %d", len(x)))
	}
	h := len(x) / 2
	opCheckLen("RoPE", "cos", len(cos), h)
	opCheckLen("RoPE", "sin", len(sin), h)
	x0, x1 := x[:h], x[h:]
	k := 0
	if p != Generic {
		k = ropeAsm(p, x0, x1, cos, sin)
	}
	x0, x1, cos, sin = x0[k:], x1[k:len(x0)], cos[k:len(x0)], sin[k:len(x0)]
	for i := range x0 {
		a, b := x0[i], x1[i]
		x0[i] = a*cos[i] - b*sin[i]
		x1[i] = b*cos[i] + a*sin[i]
	}
}

// F32ToF16 converts src to IEEE binary16 bits, rounding to nearest even
// exactly as VCVTPS2PH with immediate 0: overflow gives ±Inf, values below
// half the smallest subnormal give ±0, and a NaN keeps its sign and top
// payload bits and becomes quiet.
func (p Path) F32ToF16(dst []uint16, src []float32) {
	opCheckLen("F32ToF16", "dst", len(dst), len(src))
	k := 0
	if p != Generic {
		k = f32ToF16Asm(p, dst, src)
	}
	dst, src = dst[k:], src[k:len(dst)]
	for i := range dst {
		dst[i] = F32ToF16(src[i])
	}
}

// F16ToF32 widens binary16 bits to float32; it is exact, and NaNs become
// quiet NaNs with the same sign and payload.
func (p Path) F16ToF32(dst []float32, src []uint16) {
	opCheckLen("F16ToF32", "dst", len(dst), len(src))
	k := 0
	if p != Generic {
		k = f16ToF32Asm(p, dst, src)
	}
	dst, src = dst[k:], src[k:len(dst)]
	for i := range dst {
		dst[i] = F16ToF32(src[i])
	}
}

// F32ToF16 converts one float32 to binary16 bits, rounding to nearest
// even; see Path.F32ToF16.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man == 0 {
			return sign | 0x7c00
		}
		// x86 keeps the top ten payload bits and sets the quiet bit.
		return sign | 0x7e00 | uint16(man>>13)
	}
	e := exp - 127 + 15 // biased binary16 exponent
	if e >= 31 {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Subnormal (or zero) result: the implicit bit joins the mantissa
		// and 14-e bits are shifted out. Below 2^-25 everything rounds to
		// zero, including float32 subnormals (exp == 0).
		if e < -10 {
			return sign
		}
		m := man | 0x800000
		shift := uint(14 - e)
		r := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && r&1 == 1 {
			r++ // may carry into the exponent: 0x400 is the smallest normal
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && r&1 == 1 {
		r++ // a carry out of the mantissa bumps the exponent, up to Inf
	}
	return sign | uint16(r)
}

// F16ToF32 widens one binary16 value; see Path.F16ToF32.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch exp {
	case 0x1f:
		if man != 0 {
			man |= 0x200 // quiet, as VCVTPH2PS does
		}
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: normalise; binary16 subnormals are float32 normals.
		e := uint32(127 - 15 + 1)
		for man&0x400 == 0 {
			man <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

func opNegInf() float32 { return math.Float32frombits(0xff800000) }
