package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The hybrid layers' kernels at Qwen3.5-0.8B's sizes, on every path: the
// convolution over 2·Dk+Dv = 6144 channels (a decode token, a prefill
// step of 512), the gated norm of its 16 value heads of 128, gated
// attention's output gate over 8 heads of 256, and one value head of
// 128 x 128 of the delta rule by either form (its state in cache: the
// runtime's BenchmarkGatedDeltaRule runs a layer's heads on the workers,
// a decode step's state from memory).

func BenchmarkCausalConv(b *testing.B) {
	const c, taps = 6144, 4
	for _, n := range []int{1, 512} {
		r := rand.New(rand.NewPCG(1, 1))
		w, in, prev, out := opRandF32(r, taps*c, 0.5), opRandF32(r, n*c, 1), opRandF32(r, (taps-1)*c, 1), make([]float32, n*c)
		for _, p := range SupportedPaths() {
			b.Run(fmt.Sprintf("tokens=%d/%s", n, p), func(b *testing.B) {
				b.SetBytes(int64(4 * (2*n*c + 2*(taps-1)*c)))
				for b.Loop() {
					p.CausalConv(out, in, prev, w, c)
				}
			})
		}
	}
}

func BenchmarkRMSNormGated(b *testing.B) {
	const heads, dv = 16, 128
	r := rand.New(rand.NewPCG(1, 1))
	o, z, w := opRandF32(r, heads*dv, 1), opRandF32(r, heads*dv, 4), opRandF32(r, dv, 1)
	for _, p := range SupportedPaths() {
		b.Run(p.String(), func(b *testing.B) {
			b.SetBytes(4 * 3 * heads * dv)
			for b.Loop() {
				for h := 0; h < len(o); h += dv {
					p.RMSNormGated(o[h:h+dv], o[h:h+dv], z[h:h+dv], w, 1e-6)
				}
			}
		})
	}
}

func BenchmarkSigmoidMul(b *testing.B) {
	opBench(b, []int{2048, 512 * 2048}, 12, func(n int) func(Path) {
		r := rand.New(rand.NewPCG(1, 1))
		x, g := opRandF32(r, n, 1), opRandF32(r, n, 4)
		return func(p Path) { p.SigmoidMul(x, x, g) }
	})
}

func BenchmarkDeltaRule(b *testing.B) {
	const dk, dv = 128, 128
	for _, n := range []int{1, 64, 512} {
		for _, chunked := range []bool{false, true} {
			if chunked && n == 1 {
				continue
			}
			form := "recurrent"
			if chunked {
				form = "chunked"
			}
			for _, p := range SupportedPaths() {
				b.Run(fmt.Sprintf("tokens=%d/%s/%s", n, form, p), func(b *testing.B) {
					c := newDeltaCase(rand.New(rand.NewPCG(1, 2)), dk, dv, n, -1, 0.5)
					h := &DeltaHead{DK: dk, DV: dv, State: make([]float32, dk*dv), Pending: make([]float32, dk+dv), A: -1, DtBias: 0.5}
					ws := NewDeltaScratch(dk, dv)
					for b.Loop() {
						if chunked {
							p.DeltaChunked(h, &c.x, ws)
						} else {
							p.DeltaRecurrent(h, &c.x)
						}
					}
					b.ReportMetric(float64(n)/(b.Elapsed().Seconds()/float64(b.N)), "tok/s")
				})
			}
		}
	}
}
