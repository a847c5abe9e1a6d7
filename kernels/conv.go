package kernels

import (
	"fmt"
	"math"
)

// CausalConv runs a depthwise causal convolution followed by SiLU over
// n = len(in)/c rows of c channels (a Gated DeltaNet layer's q | k | v
// before the delta rule): out[t][ch] = silu(Σ_j w[j][ch] · x[t-taps+1+j][ch])
// with x the rows of prev (the taps-1 inputs before in, oldest first) and
// then of in. w is tap-major, [taps][c]: a tap's weights over the
// channels are one vector. prev then becomes the last taps-1 inputs.
//
// A single token (decode) reads and writes each row of the window once:
// the sum, the window's shift and the new row are one pass over the
// channels. The first taps-1 tokens of a longer run go the same way, the
// rest read their window from in alone. out must not overlap in, prev or w.
func (p Path) CausalConv(out, in, prev, w []float32, c int) {
	if c <= 0 || len(w) < c || len(w)%c != 0 {
		panic(fmt.Sprintf("kernels: CausalConv: %d taps' weights for %d channels", len(w), c))
	}
	taps := len(w) / c
	n := len(in) / c
	opCheckLen("CausalConv", "in", len(in), n*c)
	opCheckLen("CausalConv", "out", len(out), n*c)
	opCheckLen("CausalConv", "prev", len(prev), (taps-1)*c)
	first := min(n, taps-1)
	for t := range first {
		p.convStep(out[t*c:(t+1)*c], prev, in[t*c:(t+1)*c], w, c, taps)
	}
	if n <= first {
		return
	}
	p.convRows(out[first*c:], in, w, c, taps, n-first)
	copy(prev, in[(n-first)*c:])
}

// convStep is one token of CausalConv with a window of taps-1 >= 1 rows.
func (p Path) convStep(out, prev, x, w []float32, c, taps int) {
	k := 0
	if p != Generic {
		k = convStepAsm(p, out, prev, x, w, c, taps)
	}
	for ch := k; ch < c; ch++ {
		var sum float32
		for j := range taps - 1 {
			sum += w[j*c+ch] * prev[j*c+ch]
		}
		sum += w[(taps-1)*c+ch] * x[ch]
		for j := range taps - 2 {
			prev[j*c+ch] = prev[(j+1)*c+ch]
		}
		prev[(taps-2)*c+ch] = x[ch]
		out[ch] = silu(sum)
	}
}

// convRows is rows [0, n) of a convolution whose windows lie in x: out row
// t from x rows t .. t+taps-1.
func (p Path) convRows(out, x, w []float32, c, taps, n int) {
	k := 0
	if p != Generic {
		k = convRowsAsm(p, out, x, w, c, taps, n)
	}
	if k == c {
		return
	}
	for t := range n {
		for ch := k; ch < c; ch++ {
			var sum float32
			for j := range taps {
				sum += w[j*c+ch] * x[(t+j)*c+ch]
			}
			out[t*c+ch] = silu(sum)
		}
	}
}

// silu is g / (1 + exp(-g)), in float64 as SiLUMul's Go remainder.
func silu(g float32) float32 {
	x := float64(g)
	return float32(x / (1 + math.Exp(-x)))
}
