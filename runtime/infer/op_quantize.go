package infer

import "github.com/qwenc/qwenc/kernels"

// QuantizeRows quantizes the rows of an activation into int8 blocks
// (kernels.QuantizeActs), the input of the products with quantized
// weights that follow; one copy serves every product of the same input.

func runQuantizeRows(s *step, i int) int {
	op := s.op(i)
	r := s.r
	rows := s.rowsOf(op.In[0])
	qt := &r.tasks.quant
	qt.k, qt.x, qt.dst, qt.cols = r.k, s.f.view(op.In[0], rows), s.f.quantView(op.Out, rows), s.cols(op.In[0])
	if rows == 1 {
		qt.Run(0, 1) // a few hundred nanoseconds: less than waking the pool
	} else {
		r.pool.Run(qt)
	}
	return i + 1
}

// quantizeTask quantizes the rows of an activation, split across workers.
type quantizeTask struct {
	k    kernels.Path
	x    []float32
	dst  []byte
	cols int
}

func (t *quantizeTask) Run(w, nw int) {
	rows := len(t.x) / t.cols
	r0, r1 := kernels.Split(rows, nw, w)
	rb := kernels.QActRowBytes(t.cols)
	t.k.QuantizeActs(t.dst[r0*rb:r1*rb], t.x[r0*t.cols:r1*t.cols], t.cols, r1-r0, t.cols)
}
