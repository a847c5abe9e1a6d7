package infer

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/graph"
	"github.com/qwenc/qwenc/kernels"
)

// GatedDeltaRule is a Gated DeltaNet layer's recurrence, and GatedRMSNorm
// its output norm (design note qwen35.md, section 4.4). The recurrence
// runs each value head of each sequence over the sequence's tokens in
// order, the (sequence, head) items spread over the workers: one fused
// pass over the head's state a token (kernels.DeltaRecurrent), or for a
// run of deltaChunkMin tokens or more, chunks of matrix products
// (kernels.DeltaChunked). Its state is, per value head, the [key_dim,
// value_dim] f32 matrix and the pending term the recurrence keeps beside
// it (kernels.DeltaHead).

// deltaChunkMin is the fewest tokens of one sequence in a step that the
// chunked form takes; shorter runs go token by token. The recurrence is
// the faster at every length measured, so no step takes the chunked form
// by default: on a 2-core Zen 5 (best of 8 interleaved runs of
// kernels' BenchmarkDeltaRule, one 128 x 128 head), the recurrence runs
// 64 tokens in 43 µs and 512 in 350 µs on AVX-512 (73 and 587 on AVX2),
// the chunked form in 65 and 521 (105 and 837). The chunked form does
// about as many multiply-adds a token (the three dk x dv products of a
// chunk come to the recurrence's three per state element, and the chunk's
// own products and solve add a quarter), and its products, near the FMA
// peak, lose what they gain to the rest; the recurrence's single pass is
// bound by its loads and stores from the first-level cache. Both forms
// stay, tested against each other: a CPU whose products outrun its loads
// may measure otherwise.
const deltaChunkMin = math.MaxInt

func bindGatedDeltaRule(m *Model, g *graph.Graph, o *boundOp) error {
	hy := &m.Config.Hybrid
	if hy.KeyHeads == 0 {
		return fmt.Errorf("op %s: the config has no linear attention", o.Kind)
	}
	var err error
	if o.w32, err = m.File.F32(o.Weight); err != nil {
		return err
	}
	if o.w32b, err = m.File.F32(o.Weight2); err != nil {
		return err
	}
	if len(o.w32) != hy.ValueHeads || len(o.w32b) != hy.ValueHeads {
		return fmt.Errorf("op %s: A and dt_bias of %d and %d for %d value heads", o.Kind, len(o.w32), len(o.w32b), hy.ValueHeads)
	}
	for _, c := range []struct {
		t, want int
		what    string
	}{{o.In[0], 2*hy.KeyHeads*hy.KeyDim + hy.ValueHeads*hy.ValueDim, "q | k | v"}, {o.In[1], hy.ValueHeads, "value heads"},
		{o.In[2], hy.ValueHeads, "value heads"}, {o.Out, hy.ValueHeads * hy.ValueDim, "value heads x value_head_dim"}} {
		if err := checkWidth(g, o, c.t, c.want, c.what); err != nil {
			return err
		}
	}
	want := hy.ValueHeads * kernels.DeltaHeadFloats(hy.KeyDim, hy.ValueDim)
	if st := &g.States[o.State]; st.Kind != graph.Recurrent || st.Floats != want {
		return fmt.Errorf("op %s: state %s of %d values, want a recurrent state of %d (%d value heads of %d x %d and their pending terms)",
			o.Kind, st.Kind, st.Floats, want, hy.ValueHeads, hy.KeyDim, hy.ValueDim)
	}
	return nil
}

func runGatedDeltaRule(s *step, i int) int {
	op := s.op(i)
	t := &s.r.tasks.delta
	t.prepare(s.r, op, s.segs, s.view(op.In[0]), s.view(op.In[1]), s.view(op.In[2]), s.view(op.Out))
	s.r.pool.Run(t)
	return i + 1
}

// deltaTask runs the recurrence of (sequence, value head) items, claimed
// from a shared counter.
type deltaTask struct {
	r          *Runner
	op         *boundOp // A and dt_bias (w32, w32b), the state
	segs       []segment
	conv, a, b []float32 // the convolution's q | k | v, the raw a and b
	out        []float32
	next       atomic.Int64
	// chunkMin overrides deltaChunkMin when set (tests force either form).
	chunkMin int
}

func (t *deltaTask) prepare(r *Runner, op *boundOp, segs []segment, conv, a, b, out []float32) {
	t.r, t.op, t.segs, t.conv, t.a, t.b, t.out = r, op, segs, conv, a, b, out
	t.next.Store(0)
}

func (t *deltaTask) Run(w, _ int) {
	op := t.op
	hy := &t.r.m.Config.Hybrid
	nv, dk, dv := hy.ValueHeads, hy.KeyDim, hy.ValueDim
	group := nv / hy.KeyHeads
	keyDim := hy.KeyHeads * dk
	mixed := 2*keyDim + nv*dv
	per := kernels.DeltaHeadFloats(dk, dv)
	chunkMin := deltaChunkMin
	if t.chunkMin > 0 {
		chunkMin = t.chunkMin
	}
	for {
		item := int(t.next.Add(1)) - 1
		if item >= len(t.segs)*nv {
			return
		}
		sg := &t.segs[item/nv]
		h := item % nv
		kh := h / group
		st := sg.states[op.State].(*recurrentState).v[h*per : (h+1)*per]
		head := kernels.DeltaHead{DK: dk, DV: dv, State: st[:dk*dv], Pending: st[dk*dv:], A: op.w32[h], DtBias: op.w32b[h]}
		r0 := sg.row0
		x := kernels.DeltaTokens{N: sg.n, LD: mixed, LDG: nv, LDO: nv * dv,
			Q: t.conv[r0*mixed+kh*dk:], K: t.conv[r0*mixed+keyDim+kh*dk:], V: t.conv[r0*mixed+2*keyDim+h*dv:],
			Alpha: t.a[r0*nv+h:], Beta: t.b[r0*nv+h:], O: t.out[r0*nv*dv+h*dv:]}
		if sg.n >= chunkMin {
			t.r.k.DeltaChunked(&head, &x, t.r.work[w].delta.chunk)
		} else {
			t.r.k.DeltaRecurrent(&head, &x)
		}
	}
}

// deltaScratch is a worker's scratch of the chunked form; none for a
// model without linear attention.
type deltaScratch struct{ chunk *kernels.DeltaScratch }

func newDeltaScratch(hy *format.Hybrid) deltaScratch {
	if hy.KeyHeads == 0 {
		return deltaScratch{}
	}
	return deltaScratch{kernels.NewDeltaScratch(hy.KeyDim, hy.ValueDim)}
}

// sigmoid is 1 / (1 + e^-x), in float64.
func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

func bindGatedRMSNorm(m *Model, g *graph.Graph, o *boundOp) error {
	var err error
	if o.w32, err = m.File.F32(o.Weight); err != nil {
		return err
	}
	hy := &m.Config.Hybrid
	if len(o.w32) != hy.ValueDim {
		return fmt.Errorf("op %s: weight of %d for value_head_dim %d", o.Kind, len(o.w32), hy.ValueDim)
	}
	if err := checkWidth(g, o, o.InOut[0], hy.ValueHeads*hy.ValueDim, "value heads x value_head_dim"); err != nil {
		return err
	}
	return checkWidth(g, o, o.In[0], hy.ValueHeads*hy.ValueDim, "value heads x value_head_dim")
}

// runGatedRMSNorm normalises each value head of the output with the plain
// weight and gates it by silu of z's head.
func runGatedRMSNorm(s *step, i int) int { return runRows(s, i, gatedRMSNormRows) }

func gatedRMSNormRows(s *step, op *boundOp, r0, r1 int) {
	n, dv := s.cols(op.In[0]), len(op.w32)
	o, z := s.view(op.InOut[0])[r0*n:r1*n], s.view(op.In[0])[r0*n:r1*n]
	for h := 0; h < len(o); h += dv {
		s.r.k.RMSNormGated(o[h:h+dv], o[h:h+dv], z[h:h+dv], op.w32, s.r.m.eps)
	}
}

// runSigmoidMul multiplies attention's output by the sigmoid of its gate.
func runSigmoidMul(s *step, i int) int { return runRows(s, i, sigmoidMulRows) }

func sigmoidMulRows(s *step, op *boundOp, r0, r1 int) {
	n := s.cols(op.In[0])
	x, gate := s.view(op.InOut[0])[r0*n:r1*n], s.view(op.In[0])[r0*n:r1*n]
	s.r.k.SigmoidMul(x, x, gate)
}

// runRows runs an elementwise op over its rows: in the calling
// worker for a single row (decode, where handing work out costs more
// than it saves), else split across the workers.
func runRows(s *step, i int, fn func(s *step, op *boundOp, r0, r1 int)) int {
	op := s.op(i)
	rows := s.rowsOf(op.InOut[0])
	if rows == 1 {
		fn(s, op, 0, 1)
		return i + 1
	}
	t := &s.r.tasks.rows
	t.s, t.op, t.rows, t.fn = s, op, rows, fn
	s.r.pool.Run(t)
	return i + 1
}

// rowsTask splits an op's rows evenly across the workers for fn.
type rowsTask struct {
	s    *step
	op   *boundOp
	rows int
	fn   func(s *step, op *boundOp, r0, r1 int)
}

func (t *rowsTask) Run(w, nw int) {
	if r0, r1 := kernels.Split(t.rows, nw, w); r0 < r1 {
		t.fn(t.s, t.op, r0, r1)
	}
}

func bindSigmoidScaleAdd(m *Model, g *graph.Graph, o *boundOp) error {
	if err := checkWidth(g, o, o.In[1], 1, "one gate value per token"); err != nil {
		return err
	}
	return checkWidth(g, o, o.In[0], g.Tensors[o.InOut[0]].Cols, "the sum's")
}

// runSigmoidScaleAdd adds each token's row of In[0] times the sigmoid of
// its one gate value: the shared expert's output.
func runSigmoidScaleAdd(s *step, i int) int {
	op := s.op(i)
	x, y, gate := s.view(op.InOut[0]), s.view(op.In[0]), s.view(op.In[1])
	n := s.cols(op.InOut[0])
	for t := range s.T {
		s.r.k.AXPY(x[t*n:(t+1)*n], sigmoid(gate[t]), y[t*n:(t+1)*n])
	}
	return i + 1
}
