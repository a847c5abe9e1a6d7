package infer

import "github.com/qwenc/qwenc/kernels"

// SiLUMul is SwiGLU's gate: gate = silu(gate) * up, in place, the rows
// split across the workers.

func runSiLUMul(s *step, i int) int {
	op := s.op(i)
	r := s.r
	rows := s.rowsOf(op.In[0])
	ew := &r.tasks.silu
	ew.k, ew.gate, ew.up, ew.width = r.k, s.f.view(op.InOut[0], rows), s.f.view(op.In[0], rows), s.cols(op.In[0])
	r.pool.Run(ew)
	return i + 1
}

// siluTask computes gate = silu(gate) * up, rows split across workers.
type siluTask struct {
	k        kernels.Path
	gate, up []float32
	width    int
}

func (t *siluTask) Run(w, nw int) {
	rows := len(t.gate) / t.width
	r0, r1 := kernels.Split(rows, nw, w)
	if r0 == r1 {
		return
	}
	g, u := t.gate[r0*t.width:r1*t.width], t.up[r0*t.width:r1*t.width]
	t.k.SiLUMul(g, g, u)
}
