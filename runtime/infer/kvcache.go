package infer

import (
	"math"
	"slices"
	"unsafe"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/graph"
	"github.com/qwenc/qwenc/format/wtype"
	"github.com/qwenc/qwenc/kernels"
)

// KVCache is an attention layer's state (graph.AttentionKV): the keys and
// values of one sequence in f16 or int8 (format.KVType), in chunks of
// format.KVChunkTokens (256) positions. A chunk is allocated when the
// sequence first reaches it and never moved or reallocated afterwards;
// memory grows by one chunk per 256 positions.
//
// Each chunk of one KV head is stored tile-major, like the weights, so
// attention runs on the same matrix kernels:
//   - K as a [256, headDim] matrix (rows are positions): the scores of a
//     block of queries are a GEMM of the queries with this chunk;
//   - V transposed, as a [headDim, 256] matrix: the weighted sum of values
//     is a GEMM of the attention probabilities with this chunk.
//
// In q8 both are q8 matrices of the weights' layout, and attention's
// products run on the kernels of the quantized weights (int8 dot
// products): K of head_dim rounded up to whole blocks of 32, with an f16
// scale per position and block, against the queries quantized once per
// work item; V with unit block scales and an f32 scale per position,
// which multiplies the position's probabilities before they are
// quantized (a block's 32 positions arrive one at a time, so no block
// scale could be fixed when the first is stored).
//
// A KVCache can go back to any earlier position by itself: the rows past
// it are written again by the next step.
type KVCache struct {
	typ              format.KVType
	kvHeads, headDim int
	headBytes        int64 // one head's part of a chunk (graph.KVHeadChunkBytes)
	// mem[c] is chunk c, every head's part in turn: for q8 the value
	// scales, K, V; for f16 K, V.
	mem [][]byte
	// shared[c] says chunk c is another cache's too (Fork): it is copied
	// before this cache writes into it.
	shared []bool
}

// newKVCache returns an empty cache of type t for state s; no memory is
// allocated until Reserve.
func newKVCache(s *graph.State, t format.KVType) *KVCache {
	return &KVCache{typ: t, kvHeads: s.KVHeads, headDim: s.HeadDim, headBytes: graph.KVHeadChunkBytes(s.HeadDim, t)}
}

// Type is how the cache stores keys and values.
func (kv *KVCache) Type() format.KVType { return kv.typ }

// Reserve makes sure positions [0, to) have chunks, and that the chunks
// of positions [from, to), which the next step writes, are this cache's
// own.
func (kv *KVCache) Reserve(from, to int) {
	const n = format.KVChunkTokens
	for c := from / n; c < len(kv.shared) && c*n < to; c++ {
		if kv.shared[c] {
			kv.mem[c], kv.shared[c] = slices.Clone(kv.mem[c]), false
		}
	}
	for len(kv.mem)*format.KVChunkTokens < to {
		// One allocation per chunk for all heads; large allocations are
		// page-aligned, and every part's size is a multiple of 64 bytes,
		// so each part is cache-line aligned.
		kv.mem = append(kv.mem, make([]byte, int64(kv.kvHeads)*kv.headBytes))
		if kv.typ == format.KVQ8 {
			c := len(kv.mem) - 1
			for h := range kv.kvHeads {
				_, _, v := kv.q8(h, c)
				tb := wtype.Q8.TileBytes(format.KVChunkTokens)
				for t := range format.Tiles(kv.headDim) {
					kernels.SetQ8UnitScales(v[t*tb:(t+1)*tb], format.KVChunkTokens)
				}
			}
		}
	}
}

// Fork returns a cache of the first n positions that shares this one's
// chunks. Neither cache writes into a shared chunk: each copies it before
// its first write into it (Reserve).
func (kv *KVCache) Fork(n int) LayerState {
	chunks := min(graph.KVChunks(n), len(kv.mem))
	for len(kv.shared) < chunks {
		kv.shared = append(kv.shared, false)
	}
	for c := range chunks {
		kv.shared[c] = true
	}
	f := *kv
	f.mem = slices.Clone(kv.mem[:chunks])
	f.shared = slices.Repeat([]bool{true}, chunks)
	return &f
}

// Chunks is the number of allocated chunks.
func (kv *KVCache) Chunks() int { return len(kv.mem) }

// Bytes is the memory the cache holds.
func (kv *KVCache) Bytes() int64 { return int64(len(kv.mem)) * int64(kv.kvHeads) * kv.headBytes }

// Rewindable: a KV cache goes back to any position by itself.
func (kv *KVCache) Rewindable() bool { return true }

// Snapshot is nil: going back needs no copy.
func (kv *KVCache) Snapshot() StateCopy { return nil }

// Restore has nothing to do: the session's length says which rows hold.
func (kv *KVCache) Restore(StateCopy) {}

// kElems is the element count of one head's f16 K in one chunk.
func (kv *KVCache) kElems() int { return format.TileMajorElems(format.KVChunkTokens, kv.headDim) }

// head returns head h's part of chunk c.
func (kv *KVCache) head(h, c int) []byte {
	o := int64(h) * kv.headBytes
	return kv.mem[c][o : o+kv.headBytes]
}

// f16 returns the K and V of head h in chunk c of an f16 cache.
func (kv *KVCache) f16(h, c int) (k, v []uint16) {
	b := kv.head(h, c)
	all := unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
	ke := kv.kElems()
	return all[:ke:ke], all[ke:]
}

// kCols is the columns of a q8 K matrix: head_dim in whole q8 blocks.
func (kv *KVCache) kCols() int { return format.Tiles(kv.headDim) * format.TileRows }

// q8 returns the value scales, the q8 K matrix and the q8 V matrix of
// head h in chunk c of a q8 cache.
func (kv *KVCache) q8(h, c int) (vs []float32, k, v []byte) {
	b := kv.head(h, c)
	const n = format.KVChunkTokens
	kb := format.Tiles(n) * wtype.Q8.TileBytes(kv.kCols())
	vs = unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
	return vs, b[4*n : 4*n+kb : 4*n+kb], b[4*n+kb:]
}

// kvScratch is what store needs besides the vectors: a key in f16, a key
// padded to whole q8 blocks, a value in int8.
type kvScratch struct {
	f16 []uint16
	pad []float32
	i8  []int8
}

func newKVScratch(headDim int) kvScratch {
	return kvScratch{make([]uint16, headDim), make([]float32, format.Tiles(headDim)*format.TileRows), make([]int8, headDim)}
}

// store writes the key and value vectors of head h at position pos.
func (kv *KVCache) store(k kernels.Path, h, pos int, key, val []float32, tmp *kvScratch) {
	c, r := pos/format.KVChunkTokens, pos%format.KVChunkTokens
	hd := kv.headDim
	if kv.typ == format.KVQ8 {
		vs, kc, vc := kv.q8(h, c)
		// A key is row r of the q8 K matrix. The encoder refuses only a
		// key that is not finite (then the model's output is NaN
		// anyway); the row then reads as zeros.
		copy(tmp.pad, key)
		tb := wtype.Q8.TileBytes(kv.kCols())
		t := r / format.TileRows
		_ = kernels.QuantizeQ8Row(kc[t*tb:(t+1)*tb], tmp.pad, r%format.TileRows, kv.kCols())
		// A value is column r of the transposed V, rows d of tile d/32.
		vs[r] = quantizeInt8(tmp.i8, val)
		vb := wtype.Q8.TileBytes(format.KVChunkTokens)
		for d, x := range tmp.i8[:hd] {
			t := d / format.TileRows
			kernels.SetQ8Value(vc[t*vb:(t+1)*vb], d%format.TileRows, r, x)
		}
		return
	}
	// A key is one column of its chunk's tile (stride 32 elements); a value
	// is position r of each 32-row tile of the transposed V.
	kc, vc := kv.f16(h, c)
	k.F32ToF16(tmp.f16, key)
	base := (r/format.TileRows)*hd*format.TileRows + r%format.TileRows
	for d, x := range tmp.f16 {
		kc[base+d*format.TileRows] = x
	}
	for d0 := 0; d0 < hd; d0 += format.TileRows {
		d1 := min(d0+format.TileRows, hd)
		o := ((d0/format.TileRows)*format.KVChunkTokens + r) * format.TileRows
		k.F32ToF16(vc[o:o+d1-d0], val[d0:d1])
	}
}

// quantizeInt8 rounds x to int8 in dst with the scale max|x|/127 and
// returns the scale (0 for a zero vector).
func quantizeInt8(dst []int8, x []float32) float32 {
	var amax float32
	for _, v := range x {
		amax = max(amax, math.Float32frombits(math.Float32bits(v)&0x7fffffff))
	}
	if amax == 0 {
		clear(dst[:len(x)])
		return 0
	}
	inv := 127 / amax
	for i, v := range x {
		dst[i] = int8(math.Round(float64(v * inv)))
	}
	return amax / 127
}

// queries is a block of query vectors as scores takes them: f32 rows of
// stride ld, and for a q8 cache the same rows quantized.
type queries struct {
	f  []float32
	ld int
	q8 []byte
}

// quantizeQueries makes the queries of rows vectors at q (row stride ld)
// for this cache: for q8 it quantizes them (once for every chunk they
// meet) into buf, padded to whole blocks in pad.
func (kv *KVCache) quantizeQueries(k kernels.Path, q []float32, ld, rows int, pad []float32, buf []byte) queries {
	qs := queries{f: q, ld: ld}
	if kv.typ != format.KVQ8 {
		return qs
	}
	kc, hd := kv.kCols(), kv.headDim
	if kc != hd {
		for r := range rows {
			copy(pad[r*kc:r*kc+hd], q[r*ld:r*ld+hd])
			clear(pad[r*kc+hd : (r+1)*kc])
		}
		q, ld = pad, kc
	}
	qs.q8 = buf[:rows*kernels.QActRowBytes(kc)]
	k.QuantizeActs(qs.q8, q, ld, rows, kc)
	return qs
}

// scores sets dst[r*ld+p] = scale · (query r · key p) for the first valid
// positions of chunk c of head h. Up to the end of the last 32-position
// tile may be written.
func (kv *KVCache) scores(k kernels.Path, h, c int, dst []float32, ld int, q queries, rows, valid int, scale float32) {
	const n = format.KVChunkTokens
	hd, tiles := kv.headDim, format.Tiles(valid)
	if kv.typ == format.KVQ8 {
		_, kc, _ := kv.q8(h, c)
		k.GemmQ(wtype.Q8, dst, ld, kc, q.q8, rows, n, kv.kCols(), 0, tiles)
	} else {
		kc, _ := kv.f16(h, c)
		if rows == 1 {
			k.MatVecTiles(dst, kc, q.f, n, hd, 0, tiles)
		} else {
			k.GemmTiles(dst, ld, kc, q.f, q.ld, rows, n, hd, 0, tiles)
		}
	}
	for r := range rows {
		k.Scale(dst[r*ld:r*ld+valid], scale)
	}
}

// values sets dst[r*headDim+d] = Σ_p prob[r*ld+p] · value p (dimension d)
// over the first valid positions of chunk c of head h. In q8 it scales
// prob by the values' scales, zeroes it past valid and quantizes it into
// buf.
func (kv *KVCache) values(k kernels.Path, h, c int, dst, prob []float32, ld, rows, valid int, buf []byte) {
	const n = format.KVChunkTokens
	hd := kv.headDim
	if kv.typ == format.KVQ8 {
		vs, _, vc := kv.q8(h, c)
		for r := range rows {
			row := prob[r*ld : r*ld+n]
			k.MulScale(row[:valid], row[:valid], vs[:valid], 1)
			clear(row[valid:])
		}
		xq := buf[:rows*kernels.QActRowBytes(n)]
		k.QuantizeActs(xq, prob, ld, rows, n)
		k.GemmQ(wtype.Q8, dst, hd, vc, xq, rows, hd, n, 0, format.Tiles(hd))
		return
	}
	_, vc := kv.f16(h, c)
	k.GemmTilesLd(dst, hd, vc, n, prob, ld, rows, hd, valid, 0, format.Tiles(hd))
}
