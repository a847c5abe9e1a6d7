package infer

import (
	"math"
	"sync/atomic"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/graph"
	"github.com/qwenc/qwenc/kernels"
)

// step runs one forward step of frame f over tokens, the rows of the
// sequences segs (in order; each with its own KV cache and positions;
// len(tokens) <= f's planned tokens), and returns the logits of the last
// token, a view into the arena valid until the next step. With hidden, it
// stops before the final norm and returns the residual stream of every
// row instead ([len(tokens), hidden]), for callers that need the logits of
// more than the last row. Every KV cache must have room for its rows.
func (r *Runner) step(f *frame, tokens []int32, segs []segment, hidden bool) []float32 {
	T := len(tokens)
	m := r.m
	c := &m.Config
	k := r.k
	eps := float32(c.RMSNormEps)
	hd := c.HeadDim
	for _, sg := range segs {
		for i := range sg.n {
			r.rowPos[sg.row0+i] = sg.pos + i
		}
	}
	p := f
	for i := 0; i < len(p.ops); i++ {
		op := &p.ops[i]
		switch op.Kind {
		case graph.RopeTable:
			rope := p.view(op.Out, T)
			half := hd / 2
			for t := range T {
				for j, fr := range m.invFreq {
					s, co := math.Sincos(float64(r.rowPos[t]) * fr)
					rope[t*hd+j] = float32(co * m.ropeScale)
					rope[t*hd+half+j] = float32(s * m.ropeScale)
				}
			}
		case graph.Embed:
			x := p.view(op.Out, T)
			h := c.Hidden
			for t, id := range tokens {
				row := x[t*h : (t+1)*h]
				if w := &op.w; w.rows != nil {
					k.F16ToF32(row, w.rows[int(id)*h:(int(id)+1)*h])
				} else {
					tb := w.typ.TileBytes(h)
					tile := int(id) / format.TileRows
					w.typ.DequantizeRow(row, w.tiles[tile*tb:(tile+1)*tb], int(id)%format.TileRows, h)
				}
			}
		case graph.QuantizeRows:
			rows := p.rows(op.In[0], T)
			qt := &r.tasks.quant
			qt.k, qt.x, qt.dst, qt.cols = k, p.view(op.In[0], rows), p.quantView(op.Out, rows), p.g.Tensors[op.In[0]].Cols
			if rows == 1 {
				qt.Run(0, 1) // a few hundred nanoseconds: less than waking the pool
			} else {
				r.pool.Run(qt)
			}
		case graph.RMSNorm:
			h := c.Hidden
			in := p.view(op.In[0], T)
			if hidden && op.Layer < 0 {
				return in
			}
			if op.LastRow {
				k.RMSNorm(p.view(op.Out, 1), in[(T-1)*h:T*h], op.w32, eps)
				break
			}
			out := p.view(op.Out, T)
			for t := range T {
				k.RMSNorm(out[t*h:(t+1)*h], in[t*h:(t+1)*h], op.w32, eps)
			}
		case graph.MatMul, graph.ExpertMatMul:
			// The products of one input (q, k and v; gate and up) follow
			// each other and run as one task: one hand-out and one join
			// instead of three, and the workers balance across all of them.
			mm := &r.tasks.mm
			mm.reset(k)
			for ; i < len(p.ops) && p.ops[i].Kind == op.Kind && p.ops[i].In[0] == op.In[0]; i++ {
				o := &p.ops[i]
				if o.Kind == graph.ExpertMatMul {
					r.addExpertMatmuls(p, o, T)
					continue
				}
				rows := p.rows(o.In[0], T)
				if p.g.Tensors[o.In[0]].Quantized {
					mm.add(o, &o.w, rows, p.view(o.Out, rows), nil, p.quantView(o.In[0], rows))
				} else {
					mm.add(o, &o.w, rows, p.view(o.Out, rows), p.view(o.In[0], rows), nil)
				}
			}
			i--
			r.runMatmuls()
		case graph.Route:
			r.route(p, op, T)
		case graph.GatherRows:
			r.gatherRows(p, op, T)
		case graph.ExpertSum:
			r.expertSum(p, op, T)
		case graph.QKRope:
			q, kk := p.view(op.InOut[0], T), p.view(op.InOut[1], T)
			rope := p.view(op.In[0], T)
			half := hd / 2
			for t := range T {
				cos, sin := rope[t*hd:t*hd+half], rope[t*hd+half:(t+1)*hd]
				for h := range c.Heads {
					v := q[(t*c.Heads+h)*hd : (t*c.Heads+h+1)*hd]
					if op.w32 != nil {
						k.RMSNorm(v, v, op.w32, eps)
					}
					k.RoPE(v, cos, sin)
				}
				for h := range c.KVHeads {
					v := kk[(t*c.KVHeads+h)*hd : (t*c.KVHeads+h+1)*hd]
					if op.w32b != nil {
						k.RMSNorm(v, v, op.w32b, eps)
					}
					k.RoPE(v, cos, sin)
				}
			}
		case graph.KVStore:
			st := &r.tasks.kvStore
			st.r, st.segs, st.layer, st.k, st.v = r, segs, op.Layer, p.view(op.In[0], T), p.view(op.In[1], T)
			if T == 1 {
				st.Run(0, 1) // a few microseconds: less than waking the pool
			} else {
				r.pool.Run(st)
			}
		case graph.Attention:
			at := &r.tasks.attn
			at.prepare(r, segs, op.Layer, p.view(op.In[0], T), p.view(op.Out, T))
			r.pool.Run(at)
			at.combine()
		case graph.AddInPlace:
			x := p.view(op.InOut[0], T)
			k.Add(x, x, p.view(op.In[0], T))
		case graph.SiLUMul:
			ew := &r.tasks.silu
			rows := p.rows(op.In[0], T)
			ew.k, ew.gate, ew.up, ew.width = k, p.view(op.InOut[0], rows), p.view(op.In[0], rows), p.g.Tensors[op.In[0]].Cols
			r.pool.Run(ew)
		}
	}
	return p.view(p.g.Logits, 1)
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

// rows is how many rows of tensor t a step of T tokens uses.
func (p *frame) rows(t, T int) int { return p.g.Tensors[t].RowsFor(T) }

// tasks are the pool tasks of a step, preallocated so that a step does not
// allocate: the executor fills their fields and hands a pointer to the pool.
type tasks struct {
	mm      matmulTask
	attn    attentionTask
	kvStore kvStoreTask
	silu    siluTask
	quant   quantizeTask
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

// kvStoreTask writes a step's keys and values into the sequences' caches,
// the rows' heads split across workers.
type kvStoreTask struct {
	r     *Runner
	segs  []segment
	layer int
	k, v  []float32
}

// The sequences' rows are consecutive, so the rows x heads of the whole
// step split evenly across the workers, however many sequences there are.
func (t *kvStoreTask) Run(w, nw int) {
	c := &t.r.m.Config
	hd := c.HeadDim
	last := &t.segs[len(t.segs)-1]
	i0, i1 := kernels.Split((last.row0+last.n)*c.KVHeads, nw, w)
	si := 0
	for i := i0; i < i1; i++ {
		row, h := i/c.KVHeads, i%c.KVHeads
		for row >= t.segs[si].row0+t.segs[si].n {
			si++
		}
		sg := &t.segs[si]
		o := (row*c.KVHeads + h) * hd
		sg.kv.store(t.r.k, t.layer, h, sg.pos+row-sg.row0, t.k[o:o+hd], t.v[o:o+hd], &t.r.work[w].kv)
	}
}
