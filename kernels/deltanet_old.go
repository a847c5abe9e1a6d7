package kernels

import "math"

// Deprecated forms, until the runtime moves to DeltaRecurrent. The Gated DeltaNet's per-head arithmetic (design note qwen35.md,
// section 4.4), one token at a time: a head's state S is dk rows of dv
// values, S[i][j] the weight from key dimension i to value dimension j.

// DeltaRule advances one head's state S ([dk][dv] row-major) by one token
// and writes its output to o (dv): S decays by decay = exp(g), then takes
// the delta rule's write k ⊗ beta·(v - Sᵀk), and o = Sᵀq, in that order.
// q and k (dk each) are already normalised, q scaled. scratch holds 2·dv
// values.
//
// Reading S once for both products and writing it once: with S' = decay·S,
// Sᵀk and Sᵀq are decay times the old state's, and the new state's
// Sᵀq is S'ᵀq + (q·k)·delta.
func (p Path) DeltaRule(s, q, k, v, o []float32, decay, beta float32, scratch []float32) {
	dk, dv := len(q), len(v)
	opCheckLen("DeltaRule", "k", len(k), dk)
	opCheckLen("DeltaRule", "o", len(o), dv)
	opCheckLen("DeltaRule", "s", len(s), dk*dv)
	sk, sq := scratch[:dv], scratch[dv:2*dv]
	clear(sk)
	clear(sq)
	var qk float64
	for i := range dk {
		row := s[i*dv : (i+1)*dv]
		p.AXPY(sk, k[i], row)
		p.AXPY(sq, q[i], row)
		qk += float64(q[i]) * float64(k[i])
	}
	// delta = beta (v - decay Sᵀk); o = decay Sᵀq + (q·k) delta.
	for j := range dv {
		d := beta * (v[j] - decay*sk[j])
		o[j] = decay*sq[j] + float32(qk)*d
		sk[j] = d
	}
	for i := range dk {
		row := s[i*dv : (i+1)*dv]
		p.Scale(row, decay)
		p.AXPY(row, k[i], sk)
	}
}

// L2Normalize scales x to unit length, x / sqrt(Σx² + eps) (Gated
// DeltaNet's q and k, with eps 1e-6 inside the root), then by s.
func (p Path) L2Normalize(x []float32, eps, s float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	p.Scale(x, float32(float64(s)/math.Sqrt(ss+float64(eps))))
}
