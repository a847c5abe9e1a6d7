package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSgemm checks the f32 product against float64 on every path: row
// counts around the assembly's six, column counts around the register
// widths and its wide blocks, k from 0, row strides past the widths,
// beta 0 (C not read: it holds NaNs), 1 and another, lower triangular A.
// Nothing outside C's m x n may change.
func TestSgemm(t *testing.T) {
	const sentinel = -12345.5
	for _, p := range SupportedPaths() {
		for _, m := range []int{1, 2, 5, 6, 7, 13, 64} {
			for _, n := range []int{1, 7, 8, 15, 16, 17, 33, 64, 72, 130} {
				for _, k := range []int{0, 1, 5, 17, 64, 128} {
					for _, beta := range []float32{0, 1, 0.37} {
						for _, lower := range []bool{false, true} {
							if lower && k != m {
								continue
							}
							name := fmt.Sprintf("%s/m%d/n%d/k%d/beta%g/lower%v", p, m, n, k, beta, lower)
							r := rand.New(rand.NewPCG(uint64(m*1000+n), uint64(k)))
							lda, ldb, ldc := k+3, n+5, n+2
							a := opRandF32(r, m*lda, 1)
							if lower {
								for i := range m {
									clear(a[i*lda+i+1 : i*lda+k])
								}
							}
							b := opRandF32(r, max(k, 1)*ldb, 1)
							c := make([]float32, m*ldc)
							for i := range c {
								c[i] = sentinel
							}
							c0 := make([]float32, len(c))
							for i := range m {
								for j := range n {
									c[i*ldc+j] = float32(r.NormFloat64())
									if beta == 0 {
										c[i*ldc+j] = float32(math.NaN())
									}
								}
							}
							copy(c0, c)
							p.sgemm(c, ldc, a, lda, b, ldb, m, n, k, beta, lower)
							for i := range m {
								for j := range ldc {
									got := c[i*ldc+j]
									if j >= n {
										if got != sentinel {
											t.Fatalf("%s: C[%d][%d], past n, = %v", name, i, j, got)
										}
										continue
									}
									var want, mag float64
									for kk := range k {
										want += float64(a[i*lda+kk]) * float64(b[kk*ldb+j])
										mag += math.Abs(float64(a[i*lda+kk]) * float64(b[kk*ldb+j]))
									}
									if beta != 0 {
										want += float64(beta) * float64(c0[i*ldc+j])
										mag += math.Abs(float64(beta) * float64(c0[i*ldc+j]))
									}
									if math.Abs(float64(got)-want) > 1e-6*(mag+1) {
										t.Fatalf("%s: C[%d][%d] = %v, want %v", name, i, j, got, want)
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

// deltaRef is the delta rule as the design note writes it, in float64
// from the raw inputs: a head's state and its parameters.
type deltaRef struct {
	dk, dv    int
	s         []float64 // [dk][dv]
	A, dtBias float64
}

func (h *deltaRef) step(q, k, v []float32, a, b float32) []float64 {
	l2 := func(x []float32, scale float64) []float64 {
		var ss float64
		for _, e := range x {
			ss += float64(e) * float64(e)
		}
		out := make([]float64, len(x))
		for i, e := range x {
			out[i] = float64(e) / math.Sqrt(ss+1e-6) * scale
		}
		return out
	}
	qn, kn := l2(q, 1/math.Sqrt(float64(h.dk))), l2(k, 1)
	sp := float64(a) + h.dtBias
	if sp <= 20 {
		sp = math.Log1p(math.Exp(sp))
	}
	decay, beta := math.Exp(h.A*sp), 1/(1+math.Exp(-float64(b)))
	for i := range h.s {
		h.s[i] *= decay
	}
	delta := make([]float64, h.dv)
	for j := range delta {
		var sk float64
		for i := range h.dk {
			sk += h.s[i*h.dv+j] * kn[i]
		}
		delta[j] = beta * (float64(v[j]) - sk)
	}
	o := make([]float64, h.dv)
	for i := range h.dk {
		for j := range h.dv {
			h.s[i*h.dv+j] += kn[i] * delta[j]
			o[j] += h.s[i*h.dv+j] * qn[i]
		}
	}
	return o
}

// deltaCase is a run of random tokens of one head, laid out as a layer
// lays them out: q | k | v in one row with room after it, a and b among
// other heads', outputs with gaps between them.
type deltaCase struct {
	dk, dv, n int
	x         DeltaTokens
	A, dtBias float32
}

const deltaGapSentinel = 777.25

func newDeltaCase(r *rand.Rand, dk, dv, n int, A, dtBias float32) *deltaCase {
	c := &deltaCase{dk: dk, dv: dv, n: n, A: A, dtBias: dtBias}
	ld, ldg, ldo := 2*dk+dv+3, 3, dv+5
	row := opRandF32(r, n*ld, 2)
	for t := range n {
		if r.IntN(9) == 0 {
			clear(row[t*ld+dk : t*ld+2*dk]) // a zero k: the norm's eps alone
		}
	}
	o := make([]float32, n*ldo)
	for i := range o {
		o[i] = deltaGapSentinel
	}
	c.x = DeltaTokens{N: n, Q: row, K: row[dk:], V: row[2*dk:], LD: ld,
		Alpha: opRandF32(r, n*ldg, 4), Beta: opRandF32(r, n*ldg, 4), LDG: ldg, O: o, LDO: ldo}
	return c
}

// tokens returns the case's tokens [t0, t1).
func (c *deltaCase) tokens(t0, t1 int) *DeltaTokens {
	x := c.x
	x.N = t1 - t0
	x.Q, x.K, x.V = x.Q[t0*x.LD:], x.K[t0*x.LD:], x.V[t0*x.LD:]
	x.Alpha, x.Beta, x.O = x.Alpha[t0*x.LDG:], x.Beta[t0*x.LDG:], x.O[t0*x.LDO:]
	return &x
}

// TestDeltaRule runs random tokens through both forms on every path, the
// sequence cut into runs each taken by the recurrence or the chunked form
// (the state carried across them, the pending term across a chunked run),
// against the float64 rule: every output, the gaps between them
// untouched, and the state at the end. Head shapes include 1, odd sizes
// and sizes off the register widths; the heads' decays range from about 1
// to about e^-20 a token, and some k are zero.
func TestDeltaRule(t *testing.T) {
	type run struct {
		n       int
		chunked bool
	}
	R, Ch := func(n int) run { return run{n, false} }, func(n int) run { return run{n, true} }
	plans := [][]run{
		{R(1), R(1), R(1), R(1), R(1)},
		{Ch(150)},
		{R(3), Ch(64), R(2), Ch(1), Ch(70), R(10)},
		{Ch(5), Ch(65), R(80)},
	}
	shapes := [][2]int{{1, 1}, {3, 5}, {7, 16}, {16, 17}, {17, 33}, {33, 8}, {9, 130}, {128, 128}, {64, 144}}
	for _, p := range SupportedPaths() {
		for _, sh := range shapes {
			for pi, plan := range plans {
				for hi, par := range [][2]float32{{-0.05, 1}, {-2, 0.3}, {-7, 2.5}} {
					name := fmt.Sprintf("%s/%dx%d/plan%d/head%d", p, sh[0], sh[1], pi, hi)
					t.Run(name, func(t *testing.T) {
						checkDeltaPlan(t, p, sh[0], sh[1], par[0], par[1], plan, func(r run) (int, bool) { return r.n, r.chunked })
					})
				}
			}
		}
	}
}

func checkDeltaPlan[R any](t *testing.T, p Path, dk, dv int, A, dtBias float32, plan []R, of func(R) (int, bool)) {
	n := 0
	for _, r := range plan {
		k, _ := of(r)
		n += k
	}
	rng := rand.New(rand.NewPCG(uint64(dk*1000+dv), uint64(n)))
	c := newDeltaCase(rng, dk, dv, n, A, dtBias)
	h := &DeltaHead{DK: dk, DV: dv, State: make([]float32, dk*dv), Pending: make([]float32, dk+dv), A: A, DtBias: dtBias}
	ws := NewDeltaScratch(dk, dv)
	at := 0
	for _, r := range plan {
		k, chunked := of(r)
		if chunked {
			p.DeltaChunked(h, c.tokens(at, at+k), ws)
		} else {
			p.DeltaRecurrent(h, c.tokens(at, at+k))
		}
		at += k
	}
	ref := &deltaRef{dk: dk, dv: dv, s: make([]float64, dk*dv), A: float64(A), dtBias: float64(dtBias)}
	x := &c.x
	for tk := range n {
		want := ref.step(x.Q[tk*x.LD:tk*x.LD+dk], x.K[tk*x.LD:tk*x.LD+dk], x.V[tk*x.LD:tk*x.LD+dv], x.Alpha[tk*x.LDG], x.Beta[tk*x.LDG])
		var scale float64
		for _, v := range want {
			scale = max(scale, math.Abs(v))
		}
		row := x.O[tk*x.LDO : (tk+1)*x.LDO]
		for j, v := range row {
			if j >= dv {
				if v != deltaGapSentinel {
					t.Fatalf("token %d: output gap %d written: %v", tk, j-dv, v)
				}
				continue
			}
			if math.Abs(float64(v)-want[j]) > 2e-5*(scale+1) {
				t.Fatalf("token %d: o[%d] = %v, want %v (scale %g)", tk, j, v, want[j], scale)
			}
		}
	}
	var scale float64
	for _, v := range ref.s {
		scale = max(scale, math.Abs(v))
	}
	for i := range dk {
		for j := range dv {
			got := float64(h.State[i*dv+j]) + float64(h.Pending[i])*float64(h.Pending[dk+j])
			if math.Abs(got-ref.s[i*dv+j]) > 2e-5*(scale+1) {
				t.Fatalf("state[%d][%d] = %v, want %v", i, j, got, ref.s[i*dv+j])
			}
		}
	}
}

// TestDeltaRuleSnapshot: a copy of a head's state and pending term, put
// back, continues exactly as the head did from there, whichever form
// takes the tokens after it.
func TestDeltaRuleSnapshot(t *testing.T) {
	const dk, dv, n = 17, 40, 90
	for _, p := range SupportedPaths() {
		for _, chunked := range []bool{false, true} {
			rng := rand.New(rand.NewPCG(5, 6))
			c := newDeltaCase(rng, dk, dv, n, -1.5, 0.5)
			h := &DeltaHead{DK: dk, DV: dv, State: make([]float32, dk*dv), Pending: make([]float32, dk+dv), A: -1.5, DtBias: 0.5}
			ws := NewDeltaScratch(dk, dv)
			run := func(t0, t1 int) {
				if chunked {
					p.DeltaChunked(h, c.tokens(t0, t1), ws)
				} else {
					p.DeltaRecurrent(h, c.tokens(t0, t1))
				}
			}
			p.DeltaRecurrent(h, c.tokens(0, 20)) // a pending term to carry
			snap := append(append([]float32(nil), h.State...), h.Pending...)
			run(20, n)
			first := append([]float32(nil), c.x.O[20*c.x.LDO:]...)
			copy(h.State, snap)
			copy(h.Pending, snap[dk*dv:])
			clear(c.x.O[20*c.x.LDO:])
			run(20, n)
			for i, v := range c.x.O[20*c.x.LDO:] {
				if v != first[i] && i%c.x.LDO < dv {
					t.Fatalf("%s, chunked %v: restored run's output %d = %v, first run's %v", p, chunked, i, v, first[i])
				}
			}
		}
	}
}
