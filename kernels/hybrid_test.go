package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// The vector operations of the hybrid layers against plain float64
// references, on every path and the lengths of opTestLens.

func TestDot(t *testing.T) {
	opForPaths(t, func(t *testing.T, p Path, n int) {
		r := rand.New(rand.NewPCG(21, uint64(n)))
		a, b := opRandF32(r, n, 3), opRandF32(r, n, 2)
		var want, mag float64
		for i := range a {
			want += float64(a[i]) * float64(b[i])
			mag += math.Abs(float64(a[i]) * float64(b[i]))
		}
		if got := p.Dot(a, b); math.Abs(float64(got)-want) > 1e-6*mag+1e-30 {
			t.Fatalf("Dot = %v, want %v", got, want)
		}
	})
}

func TestSigmoidMul(t *testing.T) {
	special := []float32{0, -0, 100, -100, 88, -88, 90, -90, 1e30, -1e30, 20, -20, 3.4e38, -3.4e38}
	opForPaths(t, func(t *testing.T, p Path, n int) {
		r := rand.New(rand.NewPCG(22, uint64(n)))
		g := opRandF32(r, n, 12)
		for i := range g {
			if r.IntN(4) == 0 {
				g[i] = special[r.IntN(len(special))]
			}
		}
		x := opRandF32(r, n, 2)
		dst := opOutF32(n)
		p.SigmoidMul(dst, x, g)
		opCheckGuardF32(t, dst)
		for i := range dst {
			want := float64(x[i]) / (1 + math.Exp(-float64(g[i])))
			if !opCloseTo(float64(dst[i]), want, 1e-6, 1e-37) {
				t.Fatalf("%v * sigmoid(%v) = %v, want %v", x[i], g[i], dst[i], want)
			}
		}
		p.SigmoidMul(x, x, g)
		for i := range x {
			if x[i] != dst[i] {
				t.Fatalf("in place: %v, want %v", x[i], dst[i])
			}
		}
	})
}

func TestRMSNormGated(t *testing.T) {
	opForPaths(t, func(t *testing.T, p Path, n int) {
		r := rand.New(rand.NewPCG(23, uint64(n)))
		x, z, w := opRandF32(r, n, 3), opRandF32(r, n, 8), opRandF32(r, n, 2)
		const eps = 1e-6
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(n)+eps)
		dst := opOutF32(n)
		p.RMSNormGated(dst, x, z, w, eps)
		opCheckGuardF32(t, dst)
		for i := range dst {
			want := float64(x[i]) * inv * float64(w[i]) * opSiluRef(float64(z[i]))
			if !opCloseTo(float64(dst[i]), want, 3e-6, 1e-30) {
				t.Fatalf("dst[%d] = %v, want %v", i, dst[i], want)
			}
		}
		p.RMSNormGated(x, x, z, w, eps)
		for i := range x {
			if x[i] != dst[i] {
				t.Fatalf("in place: x[%d] = %v, want %v", i, x[i], dst[i])
			}
		}
	})
}

// TestCausalConv runs sequences through CausalConv in steps of every kind
// (one token at a time as decode, whole, shorter and longer than the
// window) and checks every output and the window left behind against a
// float64 convolution of the whole sequence with zeros before it, for 1 to
// 5 taps and channel counts around the register widths.
func TestCausalConv(t *testing.T) {
	const n = 23
	for _, p := range SupportedPaths() {
		for _, c := range []int{1, 3, 8, 15, 16, 17, 31, 32, 33, 48, 49, 100, 1000} {
			for taps := 1; taps <= 5; taps++ {
				t.Run(fmt.Sprintf("%s/c%d/taps%d", p, c, taps), func(t *testing.T) {
					checkCausalConv(t, p, c, taps, n)
				})
			}
		}
	}
}

func checkCausalConv(t *testing.T, p Path, c, taps, n int) {
	r := rand.New(rand.NewPCG(uint64(c), uint64(taps)))
	w := opRandF32(r, taps*c, 1)
	in := opRandF32(r, n*c, 2)
	x := func(t, ch int) float64 {
		if t < 0 {
			return 0
		}
		return float64(in[t*c+ch])
	}
	want := make([]float64, n*c)
	for tk := range n {
		for ch := range c {
			var sum float64
			for j := range taps {
				sum += float64(w[j*c+ch]) * x(tk-taps+1+j, ch)
			}
			want[tk*c+ch] = opSiluRef(sum)
		}
	}
	for _, steps := range [][]int{{n}, {1, 1, 1, 1, 1, 1, 17}, {2, 3, 5, 13}, {7, 1, 15}, {1, 22}} {
		prev := opOutF32((taps - 1) * c)
		clear(prev)
		out := opOutF32(n * c)
		at := 0
		for _, k := range steps {
			o := out[at*c : (at+k)*c : (at+k)*c]
			p.CausalConv(o, in[at*c:(at+k)*c], prev, w, c)
			at += k
			opCheckGuardF32(t, prev)
			// The window is the last taps-1 inputs, zeros before the first.
			for j := range taps - 1 {
				for ch := range c {
					if got, want := float64(prev[j*c+ch]), x(at-taps+1+j, ch); got != want {
						t.Fatalf("steps %v, after %d: window row %d channel %d = %v, want %v", steps, at, j, ch, got, want)
					}
				}
			}
		}
		opCheckGuardF32(t, out)
		for i := range out {
			if !opCloseTo(float64(out[i]), want[i], 1e-5, 1e-6) {
				t.Fatalf("steps %v: out[%d] (token %d, channel %d) = %g, want %g", steps, i, i/c, i%c, out[i], want[i])
			}
		}
	}
}
