package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// opTestLens mixes multiples of the register widths with ragged lengths so
// both the assembly and the Go remainder run, alone and together. The
// assembly loops over four registers (two for exp) while it can, then one
// at a time: on both widths (16 floats a register on AVX-512, 8 on AVX2)
// the lengths give the one-register loop each count it can have, 0 to 3,
// after none, one and many unrolled iterations; e.g. 80 = 64+16 and 4095
// = 63*64+3*16+15 on AVX-512, 48 = 32+2*8 and 1040 = 32*32+2*8 on AVX2.
var opTestLens = []int{1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 80, 95, 100, 127, 1000, 1040, 3072, 3079, 4095}

// guard is written after every output region; a kernel that stores past its
// end changes it.
const opGuardBits = 0x7fbadbad // a NaN payload no kernel produces

const opGuardLen = 64

// opOutF32 returns a slice of length n followed by guard values.
func opOutF32(n int) []float32 {
	b := make([]float32, n+opGuardLen)
	for i := n; i < len(b); i++ {
		b[i] = math.Float32frombits(opGuardBits)
	}
	return b[:n]
}

func opCheckGuardF32(t *testing.T, s []float32) {
	t.Helper()
	g := s[len(s):cap(s)]
	for i, v := range g {
		if math.Float32bits(v) != opGuardBits {
			t.Fatalf("stray write %d elements past the end (len %d): %x", i, len(s), math.Float32bits(v))
		}
	}
}

func opOutU16(n int) []uint16 {
	b := make([]uint16, n+opGuardLen)
	for i := n; i < len(b); i++ {
		b[i] = 0xbeef
	}
	return b[:n]
}

func opCheckGuardU16(t *testing.T, s []uint16) {
	t.Helper()
	for i, v := range s[len(s):cap(s)] {
		if v != 0xbeef {
			t.Fatalf("stray write %d elements past the end (len %d)", i, len(s))
		}
	}
}

func opRandF32(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32((r.Float64()*2 - 1) * scale)
	}
	return x
}

func opRandF16(r *rand.Rand, n int, scale float64) []uint16 {
	y := make([]uint16, n)
	for i := range y {
		y[i] = F32ToF16(float32((r.Float64()*2 - 1) * scale))
	}
	return y
}

// opForPaths runs f for every supported path and length.
func opForPaths(t *testing.T, f func(t *testing.T, p Path, n int)) {
	for _, p := range SupportedPaths() {
		for _, n := range opTestLens {
			t.Run(fmt.Sprintf("%s/%d", p, n), func(t *testing.T) { f(t, p, n) })
		}
	}
}

func opCloseTo(got, want, rel, abs float64) bool {
	return got == want || math.Abs(got-want) <= rel*math.Abs(want)+abs
}

func TestRMSNorm(t *testing.T) {
	opForPaths(t, func(t *testing.T, p Path, n int) {
		r := rand.New(rand.NewPCG(1, uint64(n)))
		x := opRandF32(r, n, 3)
		w := opRandF32(r, n, 2)
		const eps = 1e-6
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(n)+eps)
		dst := opOutF32(n)
		p.RMSNorm(dst, x, w, eps)
		opCheckGuardF32(t, dst)
		for i := range dst {
			want := float64(x[i]) * inv * float64(w[i])
			if !opCloseTo(float64(dst[i]), want, 2e-6, 1e-30) {
				t.Fatalf("dst[%d] = %v, want %v", i, dst[i], want)
			}
		}
		// In place must give the same bits.
		p.RMSNorm(x, x, w, eps)
		for i := range x {
			if x[i] != dst[i] {
				t.Fatalf("in place: x[%d] = %v, want %v", i, x[i], dst[i])
			}
		}
	})
}

// AXPY is a fused multiply-add on the vector paths: each element is within
// one rounding of the float64 value.
func TestAXPY(t *testing.T) {
	opForPaths(t, func(t *testing.T, p Path, n int) {
		r := rand.New(rand.NewPCG(5, uint64(n)))
		x := opRandF32(r, n, 10)
		d0 := opRandF32(r, n, 10)
		dst := opOutF32(n)
		copy(dst, d0)
		const a = -0.731
		p.AXPY(dst, a, x)
		opCheckGuardF32(t, dst)
		for i := range dst {
			want := float64(d0[i]) + float64(float32(a))*float64(x[i])
			if d := math.Abs(float64(dst[i]) - want); d > 1e-6*(math.Abs(want)+10) {
				t.Fatalf("AXPY: dst[%d] = %v, want %v", i, dst[i], want)
			}
		}
	})
}

// MulScale rounds as float32 does, (x*s)*w, on every path: exact.
func TestMulScale(t *testing.T) {
	opForPaths(t, func(t *testing.T, p Path, n int) {
		r := rand.New(rand.NewPCG(6, uint64(n)))
		x := opRandF32(r, n, 10)
		w := opRandF32(r, n, 3)
		dst := opOutF32(n)
		const s = float32(-0.413)
		p.MulScale(dst, x, w, s)
		opCheckGuardF32(t, dst)
		for i := range dst {
			if want := x[i] * s * w[i]; dst[i] != want {
				t.Fatalf("MulScale: dst[%d] = %v, want %v", i, dst[i], want)
			}
		}
		p.MulScale(x, x, w, s) // in place
		for i := range x {
			if x[i] != dst[i] {
				t.Fatalf("MulScale in place: x[%d] = %v, want %v", i, x[i], dst[i])
			}
		}
	})
}

func TestAddScale(t *testing.T) {
	opForPaths(t, func(t *testing.T, p Path, n int) {
		r := rand.New(rand.NewPCG(2, uint64(n)))
		a := opRandF32(r, n, 10)
		b := opRandF32(r, n, 10)
		dst := opOutF32(n)
		p.Add(dst, a, b)
		opCheckGuardF32(t, dst)
		for i := range dst {
			if dst[i] != a[i]+b[i] {
				t.Fatalf("Add: dst[%d] = %v, want %v", i, dst[i], a[i]+b[i])
			}
		}
		acc := opOutF32(n)
		copy(acc, a)
		p.AddBias(acc, b)
		opCheckGuardF32(t, acc)
		for i := range acc {
			if acc[i] != a[i]+b[i] {
				t.Fatalf("AddBias: acc[%d] = %v, want %v", i, acc[i], a[i]+b[i])
			}
		}
		const s = 0.37
		p.Scale(acc, s)
		opCheckGuardF32(t, acc)
		for i := range acc {
			if want := (a[i] + b[i]) * s; acc[i] != want {
				t.Fatalf("Scale: acc[%d] = %v, want %v", i, acc[i], want)
			}
		}
	})
}

func opSiluRef(g float64) float64 { return g / (1 + math.Exp(-g)) }

func TestSiLUMul(t *testing.T) {
	special := []float32{0, -0, 1, -1, 100, -100, 88, -88, 87.5, -87.5, 90, -90, 1e30, -1e30,
		1e-30, -1e-30, 20, -20, 0.5, -0.5, 15, -15, 40, -40, 3.4e38, -3.4e38}
	opForPaths(t, func(t *testing.T, p Path, n int) {
		r := rand.New(rand.NewPCG(3, uint64(n)))
		g := opRandF32(r, n, 12)
		for i := range g {
			if r.IntN(4) == 0 {
				g[i] = special[r.IntN(len(special))]
			}
		}
		u := opRandF32(r, n, 2)
		dst := opOutF32(n)
		p.SiLUMul(dst, g, u)
		opCheckGuardF32(t, dst)
		for i := range dst {
			want := opSiluRef(float64(g[i])) * float64(u[i])
			if math.Abs(want) > math.MaxFloat32 {
				want = math.Inf(int(math.Copysign(1, want)))
			}
			if !opCloseTo(float64(dst[i]), want, 1e-6, 1e-35) {
				t.Fatalf("silu(%v)*%v = %v, want %v", g[i], u[i], dst[i], want)
			}
		}
		// dst aliasing gate.
		p.SiLUMul(g, g, u)
		for i := range g {
			if g[i] != dst[i] {
				t.Fatalf("in place: %v, want %v", g[i], dst[i])
			}
		}
	})
}

// TestSiLUSweep checks the polynomial exp over the whole useful range: the
// maximum relative error of silu must stay near 1e-6.
func TestSiLUSweep(t *testing.T) {
	const n = 1 << 16
	g := make([]float32, n)
	one := make([]float32, n)
	for i := range g {
		g[i] = float32(-100 + 200*float64(i)/n)
		one[i] = 1
	}
	for _, p := range SupportedPaths() {
		dst := make([]float32, n)
		p.SiLUMul(dst, g, one)
		var worst float64
		for i := range dst {
			want := opSiluRef(float64(g[i]))
			if want == 0 || math.Abs(want) < 1e-36 {
				continue
			}
			if e := math.Abs(float64(dst[i])-want) / math.Abs(want); e > worst {
				worst = e
			}
		}
		t.Logf("%s: max relative error %.3g", p, worst)
		if worst > 1e-6 {
			t.Errorf("%s: max relative error %.3g > 1e-6", p, worst)
		}
		for _, c := range []struct{ g, lo, hi float32 }{{-100, -1e-35, 0}, {100, 100, 100}, {-1e30, -1e-20, 0}, {1e30, 1e30, 1e30}} {
			d := []float32{0}
			p.SiLUMul(d, []float32{c.g}, []float32{1})
			if !(d[0] >= c.lo && d[0] <= c.hi) {
				t.Errorf("%s: silu(%v) = %v, want in [%v, %v]", p, c.g, d[0], c.lo, c.hi)
			}
			// The same value inside a full register, through the assembly.
			v := make([]float32, 32)
			for i := range v {
				v[i] = c.g
			}
			p.SiLUMul(v, v, one[:32])
			for _, x := range v {
				if !(x >= c.lo && x <= c.hi) {
					t.Fatalf("%s: vector silu(%v) = %v, want in [%v, %v]", p, c.g, x, c.lo, c.hi)
				}
			}
		}
	}
}

func TestSoftmax(t *testing.T) {
	for _, scale := range []float64{1, 30, 300} {
		opForPaths(t, func(t *testing.T, p Path, n int) {
			r := rand.New(rand.NewPCG(4, uint64(n)))
			x := opRandF32(r, n, scale)
			m := math.Inf(-1)
			for _, v := range x {
				m = math.Max(m, float64(v))
			}
			want := make([]float64, n)
			var sum float64
			for i, v := range x {
				want[i] = math.Exp(float64(v) - m)
				sum += want[i]
			}
			y := opOutF32(n)
			copy(y, x)
			p.Softmax(y)
			opCheckGuardF32(t, y)
			for i := range y {
				if w := want[i] / sum; !opCloseTo(float64(y[i]), w, 2e-6, 1e-12) {
					t.Fatalf("scale %v: y[%d] = %v, want %v", scale, i, y[i], w)
				}
			}
		})
	}
}

func TestLogSumExp(t *testing.T) {
	for _, scale := range []float64{1, 30, 300} {
		opForPaths(t, func(t *testing.T, p Path, n int) {
			r := rand.New(rand.NewPCG(5, uint64(n)))
			x := opRandF32(r, n, scale)
			m := math.Inf(-1)
			for _, v := range x {
				m = math.Max(m, float64(v))
			}
			var sum float64
			for _, v := range x {
				sum += math.Exp(float64(v) - m)
			}
			scratch := opOutF32(n)
			lse, gotMax := p.LogSumExp(x, scratch)
			opCheckGuardF32(t, scratch)
			if want := m + math.Log(sum); math.Abs(lse-want) > 1e-6*math.Max(1, math.Abs(want)) || float64(gotMax) != m {
				t.Fatalf("scale %v: LogSumExp = %v (max %v), want %v (max %v)", scale, lse, gotMax, want, m)
			}
			for i, v := range x {
				if w := math.Exp(float64(v) - m); !opCloseTo(float64(scratch[i]), w, 2e-6, 1e-30) {
					t.Fatalf("scale %v: scratch[%d] = %v, want %v", scale, i, scratch[i], w)
				}
			}
		})
	}
}

func TestRoPE(t *testing.T) {
	for _, p := range SupportedPaths() {
		// Half lengths of one register or part of one, several, and
		// several plus a remainder (d = 200: 96+4 or 96 and 4 in Go).
		for _, d := range []int{2, 14, 16, 32, 34, 48, 64, 66, 80, 128, 200, 256} {
			r := rand.New(rand.NewPCG(5, uint64(d)))
			h := d / 2
			x := opOutF32(d)
			copy(x, opRandF32(r, d, 2))
			orig := append([]float32(nil), x...)
			cos, sin := make([]float32, h), make([]float32, h)
			for i := range cos {
				a := r.Float64() * 100
				cos[i], sin[i] = float32(math.Cos(a)), float32(math.Sin(a))
			}
			p.RoPE(x, cos, sin)
			opCheckGuardF32(t, x)
			for i := 0; i < h; i++ {
				a, b := float64(orig[i]), float64(orig[i+h])
				c, s := float64(cos[i]), float64(sin[i])
				w0, w1 := a*c-b*s, b*c+a*s
				tol := 1e-6 * (math.Abs(a) + math.Abs(b))
				if math.Abs(float64(x[i])-w0) > tol || math.Abs(float64(x[i+h])-w1) > tol {
					t.Fatalf("%s d=%d i=%d: got %v,%v want %v,%v", p, d, i, x[i], x[i+h], w0, w1)
				}
			}
		}
	}
}

// opF16Value decodes binary16 bits with float64 arithmetic, independently of
// the bit manipulation in F16ToF32.
func opF16Value(h uint16) float64 {
	s := 1.0
	if h&0x8000 != 0 {
		s = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	switch e {
	case 0:
		return s * m * math.Ldexp(1, -24)
	case 31:
		if m == 0 {
			return s * math.Inf(1)
		}
		return math.NaN()
	}
	return s * (1 + m/1024) * math.Ldexp(1, e-15)
}

func TestF16ToF32All(t *testing.T) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	want := make([]float32, len(src))
	Generic.F16ToF32(want, src)
	for i, h := range src {
		v := opF16Value(h)
		g := want[i]
		if math.IsNaN(v) {
			b := math.Float32bits(g)
			if !math.IsNaN(float64(g)) || b>>31 != uint32(h>>15) || b&0x3fffff != uint32(h&0x1ff)<<13 || b&0x400000 == 0 {
				t.Fatalf("%#04x: NaN came out as %#08x", h, b)
			}
			continue
		}
		if float64(g) != v || math.Signbit(float64(g)) != (h&0x8000 != 0) {
			t.Fatalf("%#04x: generic %v, want %v", h, g, v)
		}
	}
	for _, p := range SupportedPaths() {
		check := func(src []uint16, want []float32) {
			t.Helper()
			dst := opOutF32(len(src))
			p.F16ToF32(dst, src)
			opCheckGuardF32(t, dst)
			for i := range dst {
				if math.Float32bits(dst[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s, n %d: %#04x -> %#08x, want %#08x", p, len(src), src[i], math.Float32bits(dst[i]), math.Float32bits(want[i]))
				}
			}
		}
		// Offsets 0 and 3 put the ragged remainder at both alignments.
		for _, off := range []int{0, 3} {
			check(src[off:], want[off:])
		}
		// Every tail of the loops, on the values with the most structure:
		// around +Inf (the largest normals, the NaNs) and around -0 (NaNs,
		// zero and the subnormals of the other sign).
		for _, n := range opTestLens {
			for _, mid := range []int{0x7c00, 0x8000} {
				check(src[mid-n/2:mid-n/2+n], want[mid-n/2:])
			}
		}
	}
}

// opF16Nearest rounds a finite float32 to binary16 bits with float64
// arithmetic: the reference F32ToF16 is checked against.
func opF16Nearest(f float32) uint16 {
	v := float64(f)
	var sign uint16
	if math.Signbit(v) {
		sign = 0x8000
		v = -v
	}
	ulp := math.Ldexp(1, -24)
	if v >= math.Ldexp(1, -14) {
		_, e := math.Frexp(v) // v = frac·2^e, frac in [0.5, 1)
		ulp = math.Ldexp(1, e-1-10)
	}
	q := math.RoundToEven(v / ulp)
	r := q * ulp
	if r >= 65520 {
		return sign | 0x7c00
	}
	if r < math.Ldexp(1, -14) {
		return sign | uint16(q)
	}
	_, e := math.Frexp(r)
	man := uint16(math.Round((r/math.Ldexp(1, e-1) - 1) * 1024))
	return sign | uint16(e-1+15)<<10 | man
}

func TestF32ToF16(t *testing.T) {
	var src []float32
	// Every binary16 value, the midpoints between neighbours (exact in
	// float32) and their float32 neighbours: the round-to-even cases.
	for h := 0; h < 0x7c00; h++ {
		v := opF16Value(uint16(h))
		next := opF16Value(uint16(h + 1))
		mid := float32((v + next) / 2)
		for _, f := range []float32{float32(v), mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1e9)} {
			src = append(src, f, -f)
		}
	}
	edge := []float32{0, 65504, 65519.996, 65520, 65536, 1e10, math.MaxFloat32,
		math.SmallestNonzeroFloat32, 1e-40, 1e-38, float32(math.Ldexp(1, -25)),
		math.Nextafter32(float32(math.Ldexp(1, -25)), 1), math.Nextafter32(float32(math.Ldexp(1, -25)), 0),
		float32(math.Ldexp(1.5, -25)), float32(math.Ldexp(1, -26)), float32(math.Inf(1))}
	for _, f := range edge {
		src = append(src, f, -f)
	}
	for _, b := range []uint32{0x7fc00000, 0x7f800001, 0x7fbfffff, 0x7fffffff, 0x7f802000, 0x7fc02000} {
		src = append(src, math.Float32frombits(b), math.Float32frombits(b|0x80000000))
	}
	r := rand.New(rand.NewPCG(6, 6))
	for range 1 << 20 {
		src = append(src, math.Float32frombits(r.Uint32()))
	}
	for range 1 << 18 {
		// Concentrated on the binary16 range, where rounding matters.
		src = append(src, math.Float32frombits(0x33000000+r.Uint32N(0x47800000-0x33000000)|r.Uint32()&0x80000000))
	}

	want := make([]uint16, len(src))
	Generic.F32ToF16(want, src)
	for i, f := range src {
		if math.IsNaN(float64(f)) {
			b := math.Float32bits(f)
			if w := uint16(b>>16)&0x8000 | 0x7e00 | uint16(b>>13)&0x1ff; want[i] != w {
				t.Fatalf("NaN %#08x -> %#04x, want %#04x", b, want[i], w)
			}
			continue
		}
		if w := opF16Nearest(f); want[i] != w {
			t.Fatalf("%v (%#08x) -> %#04x, want %#04x", f, math.Float32bits(f), want[i], w)
		}
	}
	for _, p := range SupportedPaths() {
		for _, off := range []int{0, 5} {
			dst := opOutU16(len(src) - off)
			p.F32ToF16(dst, src[off:])
			opCheckGuardU16(t, dst)
			for i := range dst {
				if dst[i] != want[i+off] {
					f := src[i+off]
					t.Fatalf("%s: %v (%#08x) -> %#04x, want %#04x", p, f, math.Float32bits(f), dst[i], want[i+off])
				}
			}
		}
		for _, n := range opTestLens {
			dst := opOutU16(n)
			p.F32ToF16(dst, src[:n])
			opCheckGuardU16(t, dst)
		}
	}
}

func opArgmaxRef(x []float32) int {
	best := -1
	for i, v := range x {
		if v == v && (best < 0 || v > x[best]) {
			best = i
		}
	}
	if best < 0 && len(x) > 0 {
		return 0
	}
	return best
}

func TestArgmax(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	for _, p := range SupportedPaths() {
		if got := p.Argmax(nil); got != -1 {
			t.Errorf("%s: Argmax(nil) = %d", p, got)
		}
		for _, n := range append(opTestLens, 151936) {
			r := rand.New(rand.NewPCG(8, uint64(n)))
			x := opRandF32(r, n, 10)
			check := func(what string) {
				t.Helper()
				if got, want := p.Argmax(x), opArgmaxRef(x); got != want {
					t.Fatalf("%s n=%d %s: Argmax = %d, want %d", p, n, what, got, want)
				}
			}
			check("random")
			// Ties: the maximum repeated, the first copy anywhere.
			for range 5 {
				i, j := r.IntN(n), r.IntN(n)
				x[i], x[j] = 20, 20
				check("tie")
			}
			x[n-1] = 30 // in the Go remainder, if there is one
			check("last")
			x[0] = 30
			check("first")
			for i := range x {
				if r.IntN(3) == 0 {
					x[i] = nan
				}
			}
			check("some NaN")
			for i := range x {
				x[i] = nan
			}
			check("all NaN")
			x[n/2] = float32(math.Inf(-1))
			check("NaN and -Inf")
			x[n-1] = inf
			check("+Inf")
		}
	}
}

// TestPathsAgree runs every op on every path over the same data and checks
// the Generic path against the others element by element, loosely: a
// gross mistake in one path shows even where float64 truth is awkward.
func TestPathsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	const n = 1003
	x := opRandF32(r, n, 5)
	want := make([]float32, n)
	Generic.Softmax(append(want[:0], x...))
	for _, p := range SupportedPaths() {
		got := append([]float32(nil), x...)
		p.Softmax(got)
		var s float64
		for _, v := range got {
			s += float64(v)
		}
		if math.Abs(s-1) > 1e-5 {
			t.Errorf("%s: softmax sums to %v", p, s)
		}
	}
}

var (
	opSinkF64 float64
	opSinkInt int
	opSinkF32 float32
)

// opBench runs f on every supported path for each row width n of sizes
// (sub-benchmarks n/path), with the vectors it needs set up by setup(n)
// outside the timing. bytes is what one call reads and writes per element.
func opBench(b *testing.B, sizes []int, bytes int, setup func(n int) func(p Path)) {
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			f := setup(n)
			for _, p := range SupportedPaths() {
				b.Run(p.String(), func(b *testing.B) {
					b.SetBytes(int64(n * bytes))
					for b.Loop() {
						f(p)
					}
				})
			}
		})
	}
}

// opRows are the row widths of the op benchmarks: a small and a large
// model's hidden state, where the vectors sit in L1 and L2.
var opRows = []int{1024, 4096}

func BenchmarkRMSNorm(b *testing.B) {
	opBench(b, opRows, 12, func(n int) func(Path) {
		r := rand.New(rand.NewPCG(1, 1))
		x, w, d := opRandF32(r, n, 1), opRandF32(r, n, 1), make([]float32, n)
		return func(p Path) { p.RMSNorm(d, x, w, 1e-6) }
	})
}

func BenchmarkAdd(b *testing.B) {
	opBench(b, opRows, 12, func(n int) func(Path) {
		r := rand.New(rand.NewPCG(1, 1))
		x, y := opRandF32(r, n, 1), opRandF32(r, n, 1)
		return func(p Path) { p.Add(x, x, y) }
	})
}

func BenchmarkAXPY(b *testing.B) {
	opBench(b, opRows, 12, func(n int) func(Path) {
		r := rand.New(rand.NewPCG(1, 1))
		x, y := opRandF32(r, n, 1), opRandF32(r, n, 1)
		return func(p Path) { p.AXPY(y, 1e-3, x) }
	})
}

func BenchmarkScale(b *testing.B) {
	opBench(b, opRows, 8, func(n int) func(Path) {
		x := opRandF32(rand.New(rand.NewPCG(1, 1)), n, 1)
		// -1: repeated in place, the values neither grow nor shrink.
		return func(p Path) { p.Scale(x, -1) }
	})
}

// BenchmarkSiLUMul's largest size is a 512-token prompt's MLP, from
// memory.
func BenchmarkSiLUMul(b *testing.B) {
	opBench(b, []int{1024, 4096, 512 * 3072}, 12, func(n int) func(Path) {
		r := rand.New(rand.NewPCG(1, 1))
		g, u, d := opRandF32(r, n, 8), opRandF32(r, n, 1), make([]float32, n)
		return func(p Path) { p.SiLUMul(d, g, u) }
	})
}

func BenchmarkSoftmax(b *testing.B) {
	opBench(b, opRows, 8, func(n int) func(Path) {
		x := opRandF32(rand.New(rand.NewPCG(1, 1)), n, 5)
		y := make([]float32, n)
		return func(p Path) {
			copy(y, x)
			p.Softmax(y)
		}
	})
}

func BenchmarkLogSumExp(b *testing.B) {
	opBench(b, opRows, 8, func(n int) func(Path) {
		x := opRandF32(rand.New(rand.NewPCG(1, 1)), n, 5)
		y := make([]float32, n)
		return func(p Path) { opSinkF64, opSinkF32 = p.LogSumExp(x, y) }
	})
}

// BenchmarkArgmax's largest size is Qwen's vocabulary: greedy sampling.
func BenchmarkArgmax(b *testing.B) {
	opBench(b, []int{1024, 4096, 151936}, 4, func(n int) func(Path) {
		x := opRandF32(rand.New(rand.NewPCG(1, 1)), n, 5)
		return func(p Path) { opSinkInt = p.Argmax(x) }
	})
}

func BenchmarkF32ToF16(b *testing.B) {
	opBench(b, opRows, 6, func(n int) func(Path) {
		x, d := opRandF32(rand.New(rand.NewPCG(1, 1)), n, 5), make([]uint16, n)
		return func(p Path) { p.F32ToF16(d, x) }
	})
}

func BenchmarkF16ToF32(b *testing.B) {
	opBench(b, opRows, 6, func(n int) func(Path) {
		y, d := opRandF16(rand.New(rand.NewPCG(1, 1)), n, 5), make([]float32, n)
		return func(p Path) { p.F16ToF32(d, y) }
	})
}

// BenchmarkRoPE rotates one head of 128 (the head dimension of Qwen3) and
// rows of 1024 and 4096 (8 and 32 heads' worth in one call).
func BenchmarkRoPE(b *testing.B) {
	opBench(b, []int{128, 1024, 4096}, 12, func(n int) func(Path) {
		r := rand.New(rand.NewPCG(1, 1))
		x, c, s := opRandF32(r, n, 1), make([]float32, n/2), make([]float32, n/2)
		for i := range c {
			// Unit rotations: repeated in place, anything else would drift
			// into subnormals and time the microcode assists instead.
			a := r.Float64() * 6
			c[i], s[i] = float32(math.Cos(a)), float32(math.Sin(a))
		}
		return func(p Path) { p.RoPE(x, c, s) }
	})
}
