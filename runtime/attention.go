package runtime

import (
	"math"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/kernels"
)

// attnBlock is the number of query rows one attention work item handles:
// enough rows for the GEMM kernel to reuse each K and V tile it loads.
const attnBlock = 32

// attentionTask computes causal attention for a step: for each query head
// and block of tokens, scores = Q·Kᵀ per KV chunk (a tile-major GEMM over
// the chunk's K), softmax per row over the positions the row may see, then
// out = P·V per chunk (a GEMM over the chunk's transposed V). In decode the
// query heads of one GQA group are the rows of one GEMM, so each KV chunk is
// read once per group.
type attentionTask struct {
	m             *Model
	kv            *KVCache
	q, out        []float32
	layer, pos, T int
}

// items is the number of work items: per KV head in decode, per query head
// and block of tokens in prefill.
func (t *attentionTask) items() int {
	c := &t.m.Config
	if t.T == 1 {
		return c.KVHeads
	}
	return c.Heads * ((t.T + attnBlock - 1) / attnBlock)
}

func (t *attentionTask) Run(w, nw int) {
	c := &t.m.Config
	i0, i1 := kernels.Split(t.items(), nw, w)
	for i := i0; i < i1; i++ {
		if t.T == 1 {
			group := c.Heads / c.KVHeads
			// The group's query heads are consecutive in q: rows of stride head_dim.
			t.attend(w, i, i*group*c.HeadDim, c.HeadDim, group, 0)
		} else {
			blocks := (t.T + attnBlock - 1) / attnBlock
			h, b := i/blocks, i%blocks
			t0 := b * attnBlock
			rows := min(attnBlock, t.T-t0)
			qdim := c.Heads * c.HeadDim
			t.attend(w, h/(c.Heads/c.KVHeads), t0*qdim+h*c.HeadDim, qdim, rows, t0)
		}
	}
}

// attend handles rows query vectors starting at q[off] with row stride ld,
// against KV head g; row r belongs to token t0+r in decode-or-prefill terms
// (in decode all rows are the same token, t0 = 0). Row r sees positions
// [0, pos+t0+r] in prefill, [0, pos] in decode.
func (t *attentionTask) attend(w, g, off, ld, rows, t0 int) {
	c := &t.m.Config
	k := t.m.k
	hd := c.HeadDim
	const chunk = format.KVChunkTokens
	decode := t.T == 1
	last := t.pos + t0 + rows - 1 // position of the last row's token
	if decode {
		last = t.pos
	}
	n := last + 1
	chunks := (n + chunk - 1) / chunk
	stride := chunks * chunk
	ws := &t.m.work[w]
	scores := ws.scores[:rows*stride]
	q := t.q[off:]
	for ci := range chunks {
		valid := min(chunk, n-ci*chunk)
		tiles := format.Tiles(valid)
		kc := t.kv.k[t.layer][g][ci]
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
			see = t.pos + t0 + r + 1
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
		vc := t.kv.v[t.layer][g][ci]
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
