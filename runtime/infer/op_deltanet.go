package infer

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/graph"
)

// GatedDeltaRule is a Gated DeltaNet layer's recurrence, and GatedRMSNorm
// its output norm (design note qwen35.md, section 4.4). The recurrence
// runs each value head of each sequence over the sequence's tokens in
// order, the heads spread over the workers; its state is every value
// head's [key_dim, value_dim] matrix, in f32.

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
	if st := &g.States[o.State]; st.Kind != graph.Recurrent || st.Floats != hy.ValueHeads*hy.KeyDim*hy.ValueDim {
		return fmt.Errorf("op %s: state %s of %d values, want a recurrent state of %d", o.Kind, st.Kind, st.Floats, hy.ValueHeads*hy.KeyDim*hy.ValueDim)
	}
	return nil
}

func runGatedDeltaRule(s *step, i int) int {
	op := s.op(i)
	t := &s.r.tasks.delta
	t.s, t.op = s, op
	t.next.Store(0)
	s.r.pool.Run(t)
	return i + 1
}

// deltaTask runs the recurrence of (sequence, value head) items, claimed
// from a shared counter.
type deltaTask struct {
	s    *step
	op   *boundOp
	next atomic.Int64
}

func (t *deltaTask) Run(w, _ int) {
	s, op := t.s, t.op
	m := s.r.m
	hy := &m.Config.Hybrid
	nv, dk, dv := hy.ValueHeads, hy.KeyDim, hy.ValueDim
	group := nv / hy.KeyHeads
	keyDim := hy.KeyHeads * dk
	mixed := 2*keyDim + nv*dv
	conv, a, b, out := s.view(op.In[0]), s.view(op.In[1]), s.view(op.In[2]), s.view(op.Out)
	ws := &s.r.work[w].delta
	k := s.r.k
	scale := float32(1 / math.Sqrt(float64(dk)))
	for {
		item := int(t.next.Add(1)) - 1
		if item >= len(s.segs)*nv {
			return
		}
		sg := &s.segs[item/nv]
		h := item % nv
		kh := h / group
		state := sg.states[op.State].(*recurrentState).v[h*dk*dv : (h+1)*dk*dv]
		for r := sg.row0; r < sg.row0+sg.n; r++ {
			row := conv[r*mixed : (r+1)*mixed]
			q, key := ws.q[:dk], ws.k[:dk]
			copy(q, row[kh*dk:(kh+1)*dk])
			copy(key, row[keyDim+kh*dk:keyDim+(kh+1)*dk])
			k.L2Normalize(q, 1e-6, scale)
			k.L2Normalize(key, 1e-6, 1)
			beta := sigmoid(b[r*nv+h])
			decay := float32(math.Exp(float64(op.w32[h]) * softplus(float64(a[r*nv+h])+float64(op.w32b[h]))))
			k.DeltaRule(state, q, key, row[2*keyDim+h*dv:2*keyDim+(h+1)*dv], out[r*nv*dv+h*dv:r*nv*dv+(h+1)*dv], decay, beta, ws.scratch)
		}
	}
}

// deltaScratch is a worker's scratch of the recurrence: a head's q and k,
// normalised, and DeltaRule's.
type deltaScratch struct{ q, k, scratch []float32 }

func newDeltaScratch(hy *format.Hybrid) deltaScratch {
	return deltaScratch{make([]float32, hy.KeyDim), make([]float32, hy.KeyDim), make([]float32, 2*hy.ValueDim)}
}

// softplus is log(1 + e^x), as torch computes it: x itself above 20.
func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
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
// weight, then gates it by silu of z's head.
func runGatedRMSNorm(s *step, i int) int {
	op := s.op(i)
	k, eps := s.r.k, s.r.m.eps
	dv := len(op.w32)
	o, z := s.view(op.InOut[0]), s.view(op.In[0])
	for h := 0; h < len(o); h += dv {
		head := o[h : h+dv]
		k.RMSNorm(head, head, op.w32, eps)
		k.SiLUMul(head, z[h:h+dv], head)
	}
	return i + 1
}

// runSigmoidMul multiplies attention's output by the sigmoid of its gate.
func runSigmoidMul(s *step, i int) int {
	op := s.op(i)
	x, gate := s.view(op.InOut[0]), s.view(op.In[0])
	for j, v := range gate {
		x[j] *= sigmoid(v)
	}
	return i + 1
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
