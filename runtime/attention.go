package runtime

import (
	"math"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/kernels"
)

// attnBlock is the number of query rows one attention work item handles:
// enough rows for the GEMM kernel to reuse each K and V tile it loads.
const attnBlock = 32

// attentionTask computes causal attention for a step: for each sequence
// of the step, each query head and block of its tokens, scores = Q·Kᵀ per
// KV chunk (a tile-major GEMM over the chunk's K), softmax per row over the
// positions the row may see, then out = P·V per chunk (a GEMM over the
// chunk's transposed V). For a sequence with one token (decode) the query
// heads of one GQA group are the rows of one GEMM, so each KV chunk is read
// once per group.
type attentionTask struct {
	r      *Runner
	segs   []segment
	layer  int
	q, out []float32
	items  []attnItem // reused from step to step
}

// attnItem is one work item: for a one-token sequence, KV head a; else
// query head a and block b of the sequence's rows.
type attnItem struct{ seg, a, b int32 }

func (t *attentionTask) prepare(r *Runner, segs []segment, layer int, q, out []float32) {
	c := &r.m.Config
	t.r, t.segs, t.layer, t.q, t.out = r, segs, layer, q, out
	t.items = t.items[:0]
	for si, sg := range segs {
		if sg.n == 1 {
			for g := range c.KVHeads {
				t.items = append(t.items, attnItem{int32(si), int32(g), 0})
			}
			continue
		}
		blocks := (sg.n + attnBlock - 1) / attnBlock
		for h := range c.Heads {
			for b := range blocks {
				t.items = append(t.items, attnItem{int32(si), int32(h), int32(b)})
			}
		}
	}
}

func (t *attentionTask) Run(w, nw int) {
	c := &t.r.m.Config
	group := c.Heads / c.KVHeads
	qdim := c.Heads * c.HeadDim
	i0, i1 := kernels.Split(len(t.items), nw, w)
	for _, it := range t.items[i0:i1] {
		sg := &t.segs[it.seg]
		if sg.n == 1 {
			// The group's query heads are consecutive in q: rows of stride head_dim.
			g := int(it.a)
			t.attend(w, sg, g, sg.row0*qdim+g*group*c.HeadDim, c.HeadDim, group, 0)
			continue
		}
		h, t0 := int(it.a), int(it.b)*attnBlock
		rows := min(attnBlock, sg.n-t0)
		t.attend(w, sg, h/group, (sg.row0+t0)*qdim+h*c.HeadDim, qdim, rows, t0)
	}
}

// attend handles rows query vectors starting at q[off] with row stride ld,
// of sequence sg against its KV head g. For a sequence of several tokens
// row r is its token t0+r, which sees positions [0, pos+t0+r]; for one
// token (decode) every row is that token, which sees [0, pos].
func (t *attentionTask) attend(w int, sg *segment, g, off, ld, rows, t0 int) {
	c := &t.r.m.Config
	k := t.r.k
	hd := c.HeadDim
	const chunk = format.KVChunkTokens
	decode := sg.n == 1
	last := sg.pos + t0 + rows - 1 // position of the last row's token
	if decode {
		last = sg.pos
	}
	n := last + 1
	chunks := (n + chunk - 1) / chunk
	stride := chunks * chunk
	ws := &t.r.work[w]
	scores := ws.scores[:rows*stride]
	q := t.q[off:]
	for ci := range chunks {
		valid := min(chunk, n-ci*chunk)
		tiles := format.Tiles(valid)
		kc := sg.kv.k[t.layer][g][ci]
		if rows == 1 {
			k.MatVecTiles(scores[ci*chunk:], kc, q, chunk, hd, 0, tiles)
		} else {
			k.GemmTiles(scores[ci*chunk:], stride, kc, q, ld, rows, chunk, hd, 0, tiles)
		}
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	for r := range rows {
		see := n
		if !decode {
			see = sg.pos + t0 + r + 1
		}
		row := scores[r*stride : (r+1)*stride]
		k.Scale(row[:see], scale)
		k.Softmax(row[:see])
		clear(row[see:])
	}
	// out = P·V, one chunk at a time into a scratch block, then summed.
	part := ws.part[:rows*hd]
	for r := range rows {
		clear(t.out[off+r*ld : off+r*ld+hd])
	}
	for ci := range chunks {
		vc := sg.kv.v[t.layer][g][ci]
		if rows == 1 {
			k.MatVecTiles(part, vc, scores[ci*chunk:], hd, chunk, 0, format.Tiles(hd))
		} else {
			k.GemmTiles(part, hd, vc, scores[ci*chunk:], stride, rows, hd, chunk, 0, format.Tiles(hd))
		}
		for r := range rows {
			o := t.out[off+r*ld : off+r*ld+hd]
			k.Add(o, o, part[r*hd:(r+1)*hd])
		}
	}
}

// workspace is one worker's attention scratch, sized for the session's
// context: scores for a block of rows over every position, and one block
// of partial outputs.
type workspace struct {
	scores, part []float32
}

func (ws *workspace) reserve(c *format.Config, ctx int) {
	rows := max(attnBlock, c.Heads/c.KVHeads)
	positions := format.KVChunks(ctx) * format.KVChunkTokens
	if len(ws.scores) < rows*positions {
		ws.scores = make([]float32, rows*positions)
	}
	if len(ws.part) < rows*c.HeadDim {
		ws.part = make([]float32, rows*c.HeadDim)
	}
}
