package kernels

import (
	"fmt"
	"math"
)

// The Gated DeltaNet's delta rule (design note qwen35.md, section 4.4),
// one value head of one sequence at a time, in its two forms: the
// recurrence, token by token, and the chunked form, which does a chunk
// of tokens with matrix products (the caller picks by the run's length;
// they agree to rounding). Both take the head's raw q, k, v, a and b and do everything
// per head and token themselves: q and k L2-normalised (eps 1e-6 inside
// the root) and q scaled by dk^-0.5, beta = sigmoid(b), the decay
// exp(g) with g = A·softplus(a + dt_bias).
//
// Per token, with S the state (dk rows of dv: S[i][j] is the weight from
// key dimension i to value dimension j):
//
//	S ← decay·S;  delta = beta·(v − Sᵀk);  S ← S + k ⊗ delta;  o = Sᵀq
//
// The recurrence reads and writes each head's state once per token. Done
// as written it needs two passes (Sᵀk, then the write that depends on
// it), so the state is kept as P plus a pending rank-1 term kp ⊗ dp that
// the next token's pass adds as it reads: with x_i = P_i + kp_i·dp the
// true row i, one pass accumulates Sᵀk and Sᵀq from x and writes
// P_i = decay·x_i; the token's own write k ⊗ delta becomes the new
// pending term. Its output is decay·Sᵀq + (q·k)·delta. The pending term
// holds the raw k (kp) and delta over k's norm (dp), so the pass reads q
// and k where the convolution wrote them and folds the norms into its
// scalars.

// DeltaChunkTokens is the chunked form's chunk, transformers' 64.
const DeltaChunkTokens = 64

// DeltaHead is one value head of one sequence: its state and parameters.
type DeltaHead struct {
	DK, DV int
	// State is P, [DK][DV] row-major, and Pending kp (DK) then dp (DV):
	// the head's state is P + kp ⊗ dp. All zeros before the first token.
	State, Pending []float32
	// A (= -exp(A_log)) and DtBias make the head's decay.
	A, DtBias float32
}

// DeltaHeadFloats is what DeltaHead holds for a head of dk x dv: the
// matrix and the pending term.
func DeltaHeadFloats(dk, dv int) int { return dk*dv + dk + dv }

// DeltaTokens is N tokens of one sequence for one head: token t's raw q
// and k (DK each) and v (DV) at Q[t*LD:], K[t*LD:] and V[t*LD:], its a and
// b at Alpha[t*LDG] and Beta[t*LDG], and its output (DV) at O[t*LDO:].
type DeltaTokens struct {
	N           int
	Q, K, V     []float32
	LD          int
	Alpha, Beta []float32
	LDG         int
	O           []float32
	LDO         int
}

func (h *DeltaHead) check(fn string, x *DeltaTokens) {
	opCheckLen(fn, "State", len(h.State), h.DK*h.DV)
	opCheckLen(fn, "Pending", len(h.Pending), h.DK+h.DV)
	if x.N == 0 {
		return
	}
	last := x.N - 1
	if h.DK < 1 || h.DV < 1 || len(x.Q) < last*x.LD+h.DK || len(x.K) < last*x.LD+h.DK || len(x.V) < last*x.LD+h.DV ||
		len(x.Alpha) <= last*x.LDG || len(x.Beta) <= last*x.LDG || len(x.O) < last*x.LDO+h.DV {
		panic(fmt.Sprintf("kernels: %s: %d tokens of a %d x %d head do not fit their slices", fn, x.N, h.DK, h.DV))
	}
}

// deltaGates is a token's log-decay g = A·softplus(a + dt_bias) (<= 0)
// and its beta = sigmoid(b), in float64.
func deltaGates(a, b, A, dtBias float32) (g, beta float64) {
	return float64(A) * softplus(float64(a)+float64(dtBias)), 1 / (1 + math.Exp(-float64(b)))
}

// softplus is log(1 + e^x), as torch computes it: x itself above 20.
func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

// l2Scale is 1 / sqrt(ss + 1e-6), the L2 norm's factor of a vector whose
// squares sum to ss.
func l2Scale(ss float32) float64 { return 1 / math.Sqrt(float64(ss)+1e-6) }

// DeltaRecurrent runs x's tokens through the head one at a time, one pass
// over the state each.
func (p Path) DeltaRecurrent(h *DeltaHead, x *DeltaTokens) {
	h.check("DeltaRecurrent", x)
	dk, dv := h.DK, h.DV
	kp, dp := h.Pending[:dk], h.Pending[dk:]
	for t := range x.N {
		r, ro := t*x.LD, t*x.LDO
		q, k := x.Q[r:r+dk], x.K[r:r+dk]
		sc := p.deltaScalars(h, q, k, x.Alpha[t*x.LDG], x.Beta[t*x.LDG])
		p.deltaPass(h.State, kp, dp, k, q, x.V[r:r+dv], x.O[ro:ro+dv], dv, &sc)
		copy(kp, k)
	}
}

// deltaScalars is what a token's pass needs beside the vectors: its
// decay and the four factors the pass's epilogue folds (see the
// generator, kernels/_gen/deltanet).
type deltaScalars struct {
	decay float32
	c     [4]float32
}

// deltaScalars computes a token's scalars from its raw q, k, a and b.
func (p Path) deltaScalars(h *DeltaHead, q, k []float32, a, b float32) deltaScalars {
	g, beta := deltaGates(a, b, h.A, h.DtBias)
	decay := math.Exp(g)
	rk := l2Scale(p.Dot(k, k))
	rq := l2Scale(p.Dot(q, q)) / math.Sqrt(float64(h.DK))
	qk := rq * rk * float64(p.Dot(q, k))
	return deltaScalars{float32(decay), [4]float32{float32(decay * rk), float32(rk * beta), float32(rq * decay), float32(qk * beta)}}
}

// deltaPass is one token's pass over the columns [0, len(v)) of a state
// whose rows (len(q) of them) are ld apart, with the pending term kp ⊗ dp:
// it reads and writes each element once, and writes the token's output
// o and its delta into dp.
func (p Path) deltaPass(s, kp, dp, k, q, v, o []float32, ld int, sc *deltaScalars) {
	j0 := 0
	if p != Generic {
		j0 = deltaPassAsm(p, s, kp, dp, k, q, v, o, ld, sc.decay, sc.c)
	}
	// The columns left, one at a time down the rows: the same pass.
	c := &sc.c
	for j := j0; j < len(v); j++ {
		var sk, sq float32
		for i := range q {
			x := s[i*ld+j] + kp[i]*dp[j]
			sk += k[i] * x
			sq += q[i] * x
			s[i*ld+j] = sc.decay * x
		}
		t := v[j] - c[0]*sk
		o[j] = c[2]*sq + c[3]*t
		dp[j] = c[1] * t
	}
}

// foldPending adds the pending term into P and clears it: the chunked
// form works on the state itself.
func (p Path) foldPending(h *DeltaHead) {
	kp, dp := h.Pending[:h.DK], h.Pending[h.DK:]
	pending := false
	for _, v := range dp {
		if v != 0 {
			pending = true
			break
		}
	}
	if pending {
		for i, ki := range kp {
			p.AXPY(h.State[i*h.DV:(i+1)*h.DV], ki, dp)
		}
	}
	clear(h.Pending)
}

// DeltaScratch is the chunked form's working memory for one worker, sized
// for a head of dk x dv.
type DeltaScratch struct {
	dk, dv int
	qk     []float32 // [2C][dk]: the chunk's normalised q (scaled), then its normalised k
	kt     []float32 // [dk][C]: k transposed, columns past the chunk zero
	gram   []float32 // [2C][C]: q·kᵀ then k·kᵀ, made into P and -L
	x      []float32 // [C][dv+dk]: beta·v | -beta·exp(γ)·k, solved into U | -W, then v' | -W
	row    []float32 // [C]: one row of decays
	negCum []float32 // [C]: -γ, the chunk's cumulative log-decay negated
	cum    []float64 // [C]: γ
	beta   []float64 // [C]
}

// NewDeltaScratch returns the chunked form's scratch for a head of dk x dv.
func NewDeltaScratch(dk, dv int) *DeltaScratch {
	const c = DeltaChunkTokens
	return &DeltaScratch{dk: dk, dv: dv,
		qk: make([]float32, 2*c*dk), kt: make([]float32, dk*c), gram: make([]float32, 2*c*c),
		x: make([]float32, c*(dv+dk)), row: make([]float32, c), negCum: make([]float32, c),
		cum: make([]float64, c), beta: make([]float64, c)}
}

// deltaSolveBlock is the rows of the forward substitution done as one
// product from the rows solved before them; within a block the rows are
// solved one by one.
const deltaSolveBlock = 16

// DeltaChunked runs x's tokens through the head DeltaChunkTokens at a
// time (transformers' torch_chunk_gated_delta_rule). Within a chunk of n
// tokens, with γ the running sum of g from the chunk's start and
// D(i, j) = exp(γ_i − γ_j) for j <= i:
//
//   - the chunk's writes solve one unit lower triangular system,
//     (I + L)[U | W] = [beta·v | beta·exp(γ)·k] with
//     L(i, j) = beta_i (k_i·k_j) D(i, j) for j < i, by forward substitution;
//   - v'_i = U_i − W_i S is what the state before the chunk misses;
//   - o_i = exp(γ_i) Sᵀq_i + Σ_{j<=i} (q_i·k_j) D(i, j) v'_j;
//   - S becomes exp(γ_last) S + Σ_j exp(γ_last − γ_j) k_j ⊗ v'_j.
//
// Every factor is an exp of a sum of g's, all <= 0, so none overflows.
func (p Path) DeltaChunked(h *DeltaHead, x *DeltaTokens, ws *DeltaScratch) {
	h.check("DeltaChunked", x)
	if ws.dk != h.DK || ws.dv != h.DV {
		panic(fmt.Sprintf("kernels: DeltaChunked: scratch for %d x %d, head %d x %d", ws.dk, ws.dv, h.DK, h.DV))
	}
	if x.N == 0 {
		return
	}
	p.foldPending(h)
	for t0 := 0; t0 < x.N; t0 += DeltaChunkTokens {
		c := *x
		c.N = min(DeltaChunkTokens, x.N-t0)
		c.Q, c.K, c.V = x.Q[t0*x.LD:], x.K[t0*x.LD:], x.V[t0*x.LD:]
		c.Alpha, c.Beta, c.O = x.Alpha[t0*x.LDG:], x.Beta[t0*x.LDG:], x.O[t0*x.LDO:]
		p.deltaChunk(h, &c, ws)
	}
}

// deltaChunk is one chunk of DeltaChunked, x.N <= DeltaChunkTokens.
func (p Path) deltaChunk(h *DeltaHead, x *DeltaTokens, ws *DeltaScratch) {
	const C = DeltaChunkTokens
	n, dk, dv, S := x.N, h.DK, h.DV, h.State
	ldx := dv + dk
	// The gates, γ, and the normalised q (with dk^-0.5) and k.
	var cum float64
	qScale := 1 / math.Sqrt(float64(dk))
	for t := range n {
		g, beta := deltaGates(x.Alpha[t*x.LDG], x.Beta[t*x.LDG], h.A, h.DtBias)
		cum += g
		ws.cum[t], ws.negCum[t], ws.beta[t] = cum, float32(-cum), beta
		q, k := x.Q[t*x.LD:t*x.LD+dk], x.K[t*x.LD:t*x.LD+dk]
		qn, kn := ws.qk[t*dk:(t+1)*dk], ws.qk[(n+t)*dk:(n+t+1)*dk]
		copy(qn, q)
		p.Scale(qn, float32(l2Scale(p.Dot(q, q))*qScale))
		copy(kn, k)
		p.Scale(kn, float32(l2Scale(p.Dot(k, k))))
	}
	// kᵀ, for q·kᵀ and k·kᵀ in one product, its columns padded to whole
	// registers (zeros) so the product has no ragged edge.
	cols := min(C, (n+15)&^15)
	if n < C {
		clear(ws.kt)
	}
	for t := range n {
		for d, v := range ws.qk[(n+t)*dk : (n+t+1)*dk] {
			ws.kt[d*C+t] = v
		}
	}
	p.sgemm(ws.gram, C, ws.qk, dk, ws.kt, C, 2*n, cols, dk, 0, false)
	// P(i, j) = (q_i·k_j) D(i, j) for j <= i, and -L(i, j) =
	// -beta_i (k_i·k_j) D(i, j) for j < i; zeros above.
	for i := range n {
		d := ws.row[:i+1]
		copy(d, ws.negCum[:i+1])
		p.expShift(d, ws.negCum[i])
		pr, lr := ws.gram[i*C:i*C+n], ws.gram[(n+i)*C:(n+i)*C+n]
		p.MulScale(pr[:i+1], pr[:i+1], d, 1)
		clear(pr[i+1:])
		p.MulScale(lr[:i], lr[:i], d[:i], float32(-ws.beta[i]))
		clear(lr[i:])
	}
	// [beta·v | -beta·exp(γ)·k], then the forward substitution: row i
	// plus -L(i, j) times the solved row j, for every j < i.
	for t := range n {
		xr := ws.x[t*ldx : (t+1)*ldx]
		copy(xr[:dv], x.V[t*x.LD:t*x.LD+dv])
		p.Scale(xr[:dv], float32(ws.beta[t]))
		copy(xr[dv:], ws.qk[(n+t)*dk:(n+t+1)*dk])
		p.Scale(xr[dv:], float32(-ws.beta[t]*math.Exp(ws.cum[t])))
	}
	negL := ws.gram[n*C:]
	for b0 := 0; b0 < n; b0 += deltaSolveBlock {
		b1 := min(n, b0+deltaSolveBlock)
		if b0 > 0 {
			p.sgemm(ws.x[b0*ldx:], ldx, negL[b0*C:], C, ws.x, ldx, b1-b0, ldx, b0, 1, false)
		}
		for i := b0 + 1; i < b1; i++ {
			p.sgemm(ws.x[i*ldx:], ldx, negL[i*C+b0:], C, ws.x[b0*ldx:], ldx, 1, ldx, i-b0, 1, false)
		}
	}
	// v' = U + (-W)·S, in place of U.
	p.sgemm(ws.x, ldx, ws.x[dv:], ldx, S, dv, n, dv, dk, 1, false)
	// o = (exp(γ)·q)·S + P·v'.
	for t := range n {
		p.Scale(ws.qk[t*dk:(t+1)*dk], float32(math.Exp(ws.cum[t])))
	}
	p.sgemm(x.O, x.LDO, ws.qk, dk, S, dv, n, dv, dk, 0, false)
	p.sgemm(x.O, x.LDO, ws.gram, C, ws.x, ldx, n, dv, n, 1, true)
	// S = exp(γ_last)·S + (kᵀ·exp(γ_last − γ))·v'.
	d := ws.row[:n]
	copy(d, ws.negCum[:n])
	p.expShift(d, ws.negCum[n-1])
	for r := range dk {
		kr := ws.kt[r*C : r*C+n]
		p.MulScale(kr, kr, d, 1)
	}
	p.sgemm(S, dv, ws.kt, C, ws.x, ldx, dk, dv, n, float32(math.Exp(ws.cum[n-1])), false)
}

// expShift sets x[i] = exp(x[i] - m).
func (p Path) expShift(x []float32, m float32) {
	k := 0
	if p != Generic {
		k, _ = expSubAsm(p, x, m)
	}
	for i := k; i < len(x); i++ {
		x[i] = float32(math.Exp(float64(x[i] - m)))
	}
}
