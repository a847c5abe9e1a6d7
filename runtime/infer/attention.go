package infer

import (
	"math"
	"sync/atomic"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/graph"
	"github.com/qwenc/qwenc/kernels"
)

// attnBlock is the number of query rows one prefill work item handles:
// enough rows for the GEMM kernel to reuse each K and V tile it loads.
const attnBlock = 32

// attnItemsPerThread is how many decode work items a step aims for per
// worker: enough that a worker the OS has descheduled delays the step by a
// small share, and that few KV heads still keep every thread busy.
const attnItemsPerThread = 8

// attnMinSpan is the fewest chunks (of 256 positions) a decode work item
// takes: below it, combining the partial results costs more than the
// balance gains.
const attnMinSpan = 4

func bindAttention(m *Model, g *graph.Graph, o *boundOp) error {
	if err := checkWidth(g, o, o.In[0], m.Config.QDim(), "heads x head_dim"); err != nil {
		return err
	}
	return checkWidth(g, o, o.Out, m.Config.QDim(), "heads x head_dim")
}

func runAttention(s *step, i int) int {
	op := s.op(i)
	at := &s.r.tasks.attn
	at.kvs = s.kvCaches(op.State, at.kvs)
	at.prepare(s.r, s.segs, s.view(op.In[0]), s.view(op.Out))
	s.r.pool.Run(at)
	at.combine()
	return i + 1
}

// attentionTask computes causal attention for a step, one KV chunk at a
// time with a running (online) softmax, as flash attention does: for each
// block of query rows and each chunk the rows may see, scores = Q·Kᵀ over
// the chunk's filled positions (a tile-major GEMM), then per row the
// running maximum and sum are updated, the output rescaled, and P·V of the
// chunk added. No score matrix wider than a chunk exists, and chunks a
// block cannot see (the masked half of a causal prefill) are never read.
//
// A sequence of several tokens (prefill) is split into items of one query
// head and one block of rows, each over every chunk it sees. A sequence of
// one token (decode) is split into items of one KV head (whose GQA group
// of query heads are the rows of one GEMM, so each chunk is read once per
// group) and one span of chunks; each leaves a partial result (running
// maximum, sum and unnormalized output) that combine merges, as
// flash-decoding does, so threads share even one head's long context.
type attentionTask struct {
	r      *Runner
	segs   []segment
	kvs    []*KVCache // each segment's cache of the op's state
	q, out []float32
	items  []attnItem // reused from step to step
	next   atomic.Int64
	// minSpan is attnMinSpan except in tests, which split finer.
	minSpan int
	// The decode items' partial results, by slot: group rows each.
	partM, partL, partO []float32
	slots               int
}

// attnItem is one work item: for a one-token sequence, KV head a, chunks
// [c0, c1) and slot b for the partial result; else query head a and block
// b of the sequence's rows.
type attnItem struct{ seg, a, b, c0, c1 int32 }

func (t *attentionTask) prepare(r *Runner, segs []segment, q, out []float32) {
	c := &r.m.Config
	t.r, t.segs, t.q, t.out = r, segs, q, out
	t.items = t.items[:0]
	decodeSeqs := 0
	for _, sg := range segs {
		if sg.n == 1 {
			decodeSeqs++
		}
	}
	t.slots = 0
	want := 0 // spans per KV head of a decoding sequence, before its length
	if decodeSeqs > 0 {
		want = (attnItemsPerThread*r.pool.Threads() + decodeSeqs*c.KVHeads - 1) / (decodeSeqs * c.KVHeads)
	}
	for si, sg := range segs {
		if sg.n != 1 {
			continue
		}
		chunks := graph.KVChunks(sg.pos + 1)
		spans := max(1, min(want, chunks/max(1, t.minSpan)))
		for g := range c.KVHeads {
			for s := range spans {
				c0, c1 := kernels.Split(chunks, spans, s)
				t.items = append(t.items, attnItem{int32(si), int32(g), int32(t.slots), int32(c0), int32(c1)})
				t.slots++
			}
		}
	}
	// Prefill blocks go longest first (the last blocks see the most
	// chunks), so the short ones fill in at the end.
	for si, sg := range segs {
		if sg.n == 1 {
			continue
		}
		blocks := (sg.n + attnBlock - 1) / attnBlock
		for b := blocks - 1; b >= 0; b-- {
			for h := range c.Heads {
				t.items = append(t.items, attnItem{seg: int32(si), a: int32(h), b: int32(b)})
			}
		}
	}
	group := c.Heads / c.KVHeads
	if need := t.slots * group; len(t.partM) < need {
		t.partM, t.partL = make([]float32, need), make([]float32, need)
		t.partO = make([]float32, need*c.HeadDim)
	}
	t.next.Store(0)
}

// Run claims items from a shared counter: prefill items differ in length,
// and a descheduled worker should delay the step by one item only.
func (t *attentionTask) Run(w, _ int) {
	c := &t.r.m.Config
	group := c.Heads / c.KVHeads
	qdim := c.Heads * c.HeadDim
	hd := c.HeadDim
	ws := &t.r.work[w]
	for {
		i := int(t.next.Add(1)) - 1
		if i >= len(t.items) {
			return
		}
		it := t.items[i]
		sg := &t.segs[it.seg]
		if sg.n == 1 {
			// The group's query heads are consecutive in q: rows of stride head_dim.
			g, s := int(it.a), int(it.b)
			off := sg.row0*qdim + g*group*hd
			m, l := t.partM[s*group:(s+1)*group], t.partL[s*group:(s+1)*group]
			if it.c0 == 0 && int(it.c1) == graph.KVChunks(sg.pos+1) {
				// The head's only span (a short context): nothing to
				// merge, so the output goes straight where it belongs.
				t.span(ws, int(it.seg), g, off, hd, group, 0, 0, int(it.c1), t.out[off:], hd, m, l)
				for r := range group {
					t.r.k.Scale(t.out[off+r*hd:off+(r+1)*hd], 1/l[r])
				}
				continue
			}
			o := t.partO[s*group*hd : (s+1)*group*hd]
			t.span(ws, int(it.seg), g, off, hd, group, 0, int(it.c0), int(it.c1), o, hd, m, l)
			continue
		}
		h, t0 := int(it.a), int(it.b)*attnBlock
		rows := min(attnBlock, sg.n-t0)
		off := (sg.row0+t0)*qdim + h*hd
		last := sg.pos + t0 + rows - 1
		m, l := ws.m[:rows], ws.l[:rows]
		t.span(ws, int(it.seg), h/group, off, qdim, rows, t0, 0, last/format.KVChunkTokens+1, t.out[off:], qdim, m, l)
		for r := range rows {
			t.r.k.Scale(t.out[off+r*qdim:off+r*qdim+hd], 1/l[r])
		}
	}
}

// span runs rows query vectors starting at q[off] (row stride ld) of
// segment si against chunks [c0, c1) of its KV head g, leaving in o (row
// stride ldo) the unnormalized outputs, in m the rows' maximum scores and
// in l their sums of exp(score - m). For a sequence of several tokens row
// r is its token t0+r, which sees positions [0, pos+t0+r]; for one token
// (decode) every row is that token, which sees [0, pos].
func (t *attentionTask) span(ws *workspace, si, g, off, ld, rows, t0, c0, c1 int, o []float32, ldo int, m, l []float32) {
	sg, kv := &t.segs[si], t.kvs[si]
	k := t.r.k
	hd := t.r.m.Config.HeadDim
	const chunk = format.KVChunkTokens
	n := sg.pos + 1 // positions the last row sees
	if sg.n > 1 {
		n = sg.pos + t0 + rows
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	scores, part := ws.scores[:rows*chunk], ws.part[:rows*hd]
	for r := range rows {
		m[r], l[r] = float32(math.Inf(-1)), 0
		clear(o[r*ldo : r*ldo+hd])
	}
	q := kv.quantizeQueries(k, t.q[off:], ld, rows, ws.qPad, ws.qQ8)
	for ci := c0; ci < c1; ci++ {
		base := ci * chunk
		valid := min(chunk, n-base)
		kv.scores(k, g, ci, scores, chunk, q, rows, valid, scale)
		for r := range rows {
			see := valid
			if sg.n > 1 {
				see = min(valid, sg.pos+t0+r+1-base)
			}
			row := scores[r*chunk : r*chunk+valid]
			if see <= 0 {
				clear(row)
				ws.keep[r], ws.add[r] = 1, 0
				continue
			}
			lse, mc := k.LogSumExp(row[:see], row[:see]) // row[:see] = exp(s - mc)
			clear(row[see:])
			mNew := max(m[r], mc)
			keep := math.Exp(float64(m[r] - mNew))
			add := math.Exp(float64(mc - mNew))
			l[r] = float32(float64(l[r])*keep + add*math.Exp(lse-float64(mc)))
			m[r] = mNew
			ws.keep[r], ws.add[r] = float32(keep), float32(add)
		}
		kv.values(k, g, ci, part, scores, chunk, rows, valid, ws.pQ8)
		for r := range rows {
			or := o[r*ldo : r*ldo+hd]
			if ws.keep[r] != 1 {
				k.Scale(or, ws.keep[r])
			}
			if ws.add[r] != 0 {
				k.AXPY(or, ws.add[r], part[r*hd:(r+1)*hd])
			}
		}
	}
}

// combine merges the decode items' partial results into the output: the
// spans of one KV head, each with its own maximum, rescaled to the largest.
// A head of one span has written its output already.
func (t *attentionTask) combine() {
	c := &t.r.m.Config
	k := t.r.k
	group := c.Heads / c.KVHeads
	qdim := c.Heads * c.HeadDim
	hd := c.HeadDim
	items := t.items[:t.slots]
	for i0 := 0; i0 < len(items); {
		i1 := i0 + 1
		for i1 < len(items) && items[i1].seg == items[i0].seg && items[i1].a == items[i0].a {
			i1++
		}
		if i1 == i0+1 {
			i0 = i1
			continue
		}
		sg := &t.segs[items[i0].seg]
		g := int(items[i0].a)
		for r := range group {
			out := t.out[sg.row0*qdim+(g*group+r)*hd:][:hd]
			mx := float32(math.Inf(-1))
			for _, it := range items[i0:i1] {
				mx = max(mx, t.partM[int(it.b)*group+r])
			}
			var sum float64
			for _, it := range items[i0:i1] {
				s := int(it.b)*group + r
				sum += float64(t.partL[s]) * math.Exp(float64(t.partM[s]-mx))
			}
			clear(out)
			for _, it := range items[i0:i1] {
				s := int(it.b)*group + r
				w := math.Exp(float64(t.partM[s]-mx)) / sum
				k.AXPY(out, float32(w), t.partO[s*hd:(s+1)*hd])
			}
		}
		i0 = i1
	}
}

// workspace is one worker's attention scratch, sized for a block of rows
// and one chunk: its scores and partial output, per row the running
// maximum and sum and a chunk's rescaling factors, the rows' queries for
// a q8 cache, and the KV store's scratch.
type workspace struct {
	scores, part    []float32
	m, l, keep, add []float32
	qPad            []float32
	qQ8, pQ8        []byte
	kv              kvScratch
	delta           deltaScratch
}

func newWorkspace(c *format.Config) workspace {
	rows := max(attnBlock, c.Heads/c.KVHeads)
	kCols := format.Tiles(c.HeadDim) * format.TileRows
	return workspace{
		scores: make([]float32, rows*format.KVChunkTokens),
		part:   make([]float32, rows*c.HeadDim),
		m:      make([]float32, rows), l: make([]float32, rows),
		keep: make([]float32, rows), add: make([]float32, rows),
		qPad: make([]float32, rows*kCols), qQ8: make([]byte, rows*kernels.QActRowBytes(kCols)),
		pQ8:   make([]byte, rows*kernels.QActRowBytes(format.KVChunkTokens)),
		kv:    newKVScratch(c.HeadDim),
		delta: newDeltaScratch(&c.Hybrid),
	}
}
