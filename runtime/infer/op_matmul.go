package infer

import (
	"fmt"
	"sync/atomic"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/graph"
	"github.com/qwenc/qwenc/kernels"
)

// MatMul multiplies its input by a tile-major weight (plus the bias of
// qwen2's q/k/v). The products of one input (q, k and v; gate and up)
// follow each other and run as one task: one hand-out and one join
// instead of three, and the workers balance across all of them. The
// experts' products (moe.go) join the same task.

func bindMatMul(m *Model, g *graph.Graph, o *boundOp) error {
	var err error
	if o.w, err = m.weight(o.Weight, false); err != nil {
		return err
	}
	if o.Bias != "" {
		if o.bias, err = m.File.F32(o.Bias); err != nil {
			return err
		}
		if len(o.bias) != o.w.n {
			return fmt.Errorf("op %s: bias %q of %d for %d outputs", o.Kind, o.Bias, len(o.bias), o.w.n)
		}
	}
	if err := checkWidth(g, o, o.In[0], o.w.k, "the weight's input"); err != nil {
		return err
	}
	return checkWidth(g, o, o.Out, o.w.n, "the weight's output")
}

// runMatMuls runs ops[i] and the products of the same kind and input that
// follow it as one task, and returns the index after them.
func runMatMuls(s *step, i int) int {
	r := s.r
	ops := s.f.ops
	first := &ops[i]
	mm := &r.tasks.mm
	mm.reset(r.k)
	for ; i < len(ops) && ops[i].Kind == first.Kind && ops[i].In[0] == first.In[0]; i++ {
		o := &ops[i]
		if o.Kind == graph.ExpertMatMul {
			r.addExpertMatmuls(s.f, o, s.T)
			continue
		}
		rows := s.rowsOf(o.In[0])
		if s.f.g.Tensors[o.In[0]].Quantized {
			mm.add(o, &o.w, rows, s.f.view(o.Out, rows), nil, s.f.quantView(o.In[0], rows))
		} else {
			mm.add(o, &o.w, rows, s.f.view(o.Out, rows), s.f.view(o.In[0], rows), nil)
		}
	}
	r.runMatmuls()
	return i
}

// matmul computes dst = x·Wᵀ (+ bias) for rows rows of x with the op's
// weight: x is f32, or quantized (xq) for a quantized weight.
func (r *Runner) matmul(op *boundOp, dst, x []float32, xq []byte, rows int) {
	r.tasks.mm.reset(r.k)
	r.tasks.mm.add(op, &op.w, rows, dst, x, xq)
	r.runMatmuls()
}

// runMatmuls runs the products gathered in the matmul task, the tiles
// split across the workers, then adds the biases.
func (r *Runner) runMatmuls() {
	mm := &r.tasks.mm
	mm.start(r.pool.Threads())
	r.pool.Run(mm)
	for j := range mm.jobs {
		job := &mm.jobs[j]
		if b := job.op.bias; b != nil {
			n := job.w.n
			for row := range job.rows {
				r.k.AddBias(job.dst[row*n:(row+1)*n], b)
			}
		}
	}
}

// tasks are the pool tasks of a step, preallocated so that a step does not
// allocate: the executor fills their fields and hands a pointer to the pool.
type tasks struct {
	delta   deltaTask
	mm      matmulTask
	attn    attentionTask
	kvStore kvStoreTask
	silu    siluTask
	quant   quantizeTask
	rows    rowsTask
}

// matmulTask splits the tiles of one or more matrix products of the same
// input across the workers. Workers claim units (a run of tiles of one
// product) from a shared counter rather than taking fixed shares: on a
// machine shared with other work, a worker the OS has descheduled then
// delays the step by one unit, not by half of it.
type matmulTask struct {
	k     kernels.Path
	jobs  []matJob
	units []matUnit // preallocated: a decode step must not allocate
	next  atomic.Int64
}

// matJob is one product: the op (bias), the weight (the op's, or one
// expert's), and rows rows of output and input.
type matJob struct {
	op   *boundOp
	w    *weight
	rows int
	dst  []float32
	x    []float32
	xq   []byte
}

// matUnit is tiles [t0, t1) of job j.
type matUnit struct{ j, t0, t1 int32 }

func (t *matmulTask) reset(k kernels.Path) {
	t.k, t.jobs = k, t.jobs[:0]
}

func (t *matmulTask) add(op *boundOp, w *weight, rows int, dst, x []float32, xq []byte) {
	t.jobs = append(t.jobs, matJob{op: op, w: w, rows: rows, dst: dst, x: x, xq: xq})
}

// matmulChunkBytes is the weight bytes of one unit in a matrix-vector
// product: large enough that the hardware prefetcher streams, small enough
// to balance the workers.
const matmulChunkBytes = 256 << 10

// matmulFewRows is the most rows a product may have and still take the
// units of a matrix-vector product: a server's decode step, one row per
// conversation. Their activations are a few KiB, so re-reading them per
// unit costs nothing, while large units leave a worker idle at the end of
// every product when the other is slowed (q8 0.6B shape, decode steps of
// 8 and 16 conversations, alternated in one run: 5-7% faster).
const matmulFewRows = 16

// start cuts the products into units for threads workers. A batched
// product (GEMM) of more than matmulFewRows rows takes larger units,
// about two per worker and product: each unit re-reads the whole batch of
// activations, so small units cost more than they balance (pp512 on the
// 0.6B shape: 189 tok/s with 256 KiB units, 206 with two per worker, 204
// with one).
func (t *matmulTask) start(threads int) {
	t.units = t.units[:0]
	for j := range t.jobs {
		w := t.jobs[j].w
		tiles := format.Tiles(w.n)
		chunk := max(1, matmulChunkBytes/w.typ.TileBytes(w.k))
		if t.jobs[j].rows > matmulFewRows {
			per := 2 * threads
			chunk = max(chunk, (tiles+per-1)/per)
		}
		for t0 := 0; t0 < tiles; t0 += chunk {
			t.units = append(t.units, matUnit{int32(j), int32(t0), int32(min(t0+chunk, tiles))})
		}
	}
	t.next.Store(0)
}

func (t *matmulTask) Run(_, _ int) {
	for {
		i := int(t.next.Add(1)) - 1
		if i >= len(t.units) {
			return
		}
		u := t.units[i]
		job := &t.jobs[u.j]
		w := job.w
		w.typ.Mul(t.k, job.dst, w.n, w.tiles, job.x, job.xq, job.rows, w.n, w.k, int(u.t0), int(u.t1))
	}
}
