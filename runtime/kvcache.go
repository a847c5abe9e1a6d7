package runtime

import (
	"math"
	"unsafe"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/kernels"
)

// KVCache holds the keys and values of every layer, in f16 or int8
// (format.KVType), in chunks of format.KVChunkTokens (256) positions. A
// chunk is allocated when the sequence first reaches it and never moved or
// reallocated afterwards; memory grows by one chunk per layer per 256
// positions.
//
// Each chunk of one KV head is stored tile-major, like the weights, so
// attention runs on the same matrix kernels:
//   - K as a [256, headDim] matrix (rows are positions): the scores of a
//     block of queries are a GEMM of the queries with this chunk;
//   - V transposed, as a [headDim, 256] matrix: the weighted sum of values
//     is a GEMM of the attention probabilities with this chunk.
//
// In q8 every position has one scale for its key and one for its value
// (per head): a key's scale multiplies its scores and a value's scale its
// probabilities, so the kernels see plain int8 matrices.
type KVCache struct {
	typ                      format.KVType
	layers, kvHeads, headDim int
	headBytes                int64 // one head's part of a chunk (format.Config.KVHeadChunkBytes)
	// mem[l][c] is chunk c of layer l, every head's part in turn: for q8
	// the key scales, the value scales, K, V; for f16 K, V.
	mem    [][][]byte
	chunks int
}

// NewKVCache returns an empty cache of type t; no memory is allocated
// until Reserve.
func NewKVCache(c *format.Config, t format.KVType) *KVCache {
	return &KVCache{typ: t, layers: c.Layers, kvHeads: c.KVHeads, headDim: c.HeadDim,
		headBytes: c.KVHeadChunkBytes(t), mem: make([][][]byte, c.Layers)}
}

// Type is how the cache stores keys and values.
func (kv *KVCache) Type() format.KVType { return kv.typ }

// kElems and vElems are the element counts of one head's K and V in one
// chunk: tile-major sizes, padded to whole 32-row tiles.
func (kv *KVCache) kElems() int { return format.TileMajorElems(format.KVChunkTokens, kv.headDim) }
func (kv *KVCache) vElems() int { return format.TileMajorElems(kv.headDim, format.KVChunkTokens) }

// Reserve makes sure positions [0, n) have chunks in every layer.
func (kv *KVCache) Reserve(n int) {
	for kv.chunks*format.KVChunkTokens < n {
		for l := range kv.layers {
			// One allocation per layer and chunk for all heads; large
			// allocations are page-aligned, and every part's size is a
			// multiple of 64 bytes, so each part is cache-line aligned.
			kv.mem[l] = append(kv.mem[l], make([]byte, int64(kv.kvHeads)*kv.headBytes))
		}
		kv.chunks++
	}
}

// Chunks is the number of allocated chunks per layer.
func (kv *KVCache) Chunks() int { return kv.chunks }

// Bytes is the memory the cache holds, K and V of every layer.
func (kv *KVCache) Bytes() int64 {
	return int64(kv.chunks) * int64(kv.layers) * int64(kv.kvHeads) * kv.headBytes
}

// head returns head h's part of chunk c of layer l.
func (kv *KVCache) head(l, h, c int) []byte {
	o := int64(h) * kv.headBytes
	return kv.mem[l][c][o : o+kv.headBytes]
}

// f16 returns the K and V of head h in chunk c of layer l of an f16 cache.
func (kv *KVCache) f16(l, h, c int) (k, v []uint16) {
	b := kv.head(l, h, c)
	all := unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
	ke := kv.kElems()
	return all[:ke:ke], all[ke:]
}

// q8 returns the scales, K and V of head h in chunk c of layer l of a q8
// cache.
func (kv *KVCache) q8(l, h, c int) (ks, vs []float32, k, v []int8) {
	b := kv.head(l, h, c)
	const n = format.KVChunkTokens
	sc := unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), 2*n)
	all := unsafe.Slice((*int8)(unsafe.Pointer(&b[8*n])), len(b)-8*n)
	ke := kv.kElems()
	return sc[:n:n], sc[n:], all[:ke:ke], all[ke:]
}

// store writes the key and value vectors of head h of layer l at position
// pos; tmp is scratch of head_dim elements.
func (kv *KVCache) store(k kernels.Path, l, h, pos int, key, val []float32, tmp []uint16) {
	c, r := pos/format.KVChunkTokens, pos%format.KVChunkTokens
	hd := kv.headDim
	// A key is one column of its chunk's tile (stride 32 elements); a value
	// is position r of each 32-row tile of the transposed V.
	kBase := (r/format.TileRows)*hd*format.TileRows + r%format.TileRows
	if kv.typ == format.KVQ8 {
		ks, vs, kc, vc := kv.q8(l, h, c)
		q := unsafe.Slice((*int8)(unsafe.Pointer(&tmp[0])), hd)
		ks[r] = quantizeInt8(q, key)
		for d, x := range q {
			kc[kBase+d*format.TileRows] = x
		}
		vs[r] = quantizeInt8(q, val)
		for d0 := 0; d0 < hd; d0 += format.TileRows {
			d1 := min(d0+format.TileRows, hd)
			o := ((d0/format.TileRows)*format.KVChunkTokens + r) * format.TileRows
			copy(vc[o:o+d1-d0], q[d0:d1])
		}
		return
	}
	kc, vc := kv.f16(l, h, c)
	k.F32ToF16(tmp[:hd], key)
	for d, x := range tmp[:hd] {
		kc[kBase+d*format.TileRows] = x
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

// scores sets dst[r*ld+p] = scale · (row r of q) · key p for the rows
// query vectors at q (row stride ldq) and the first valid positions of
// chunk c of head h of layer l. Up to the end of the last 32-position tile
// may be written.
func (kv *KVCache) scores(k kernels.Path, l, h, c int, dst []float32, ld int, q []float32, ldq, rows, valid int, scale float32) {
	const n = format.KVChunkTokens
	hd, tiles := kv.headDim, format.Tiles(valid)
	if kv.typ == format.KVQ8 {
		ks, _, kc, _ := kv.q8(l, h, c)
		if rows == 1 {
			k.MatVecTilesI8(dst, kc, hd, q, n, hd, 0, tiles)
		} else {
			k.GemmTilesI8(dst, ld, kc, hd, q, ldq, rows, n, hd, 0, tiles)
		}
		for r := range rows {
			row := dst[r*ld : r*ld+valid]
			k.MulScale(row, row, ks[:valid], scale)
		}
		return
	}
	kc, _ := kv.f16(l, h, c)
	if rows == 1 {
		k.MatVecTiles(dst, kc, q, n, hd, 0, tiles)
	} else {
		k.GemmTiles(dst, ld, kc, q, ldq, rows, n, hd, 0, tiles)
	}
	for r := range rows {
		k.Scale(dst[r*ld:r*ld+valid], scale)
	}
}

// values sets dst[r*headDim+d] = Σ_p prob[r*ld+p] · value p (dimension d)
// over the first valid positions of chunk c of head h of layer l. In q8 it
// scales prob by the values' scales first.
func (kv *KVCache) values(k kernels.Path, l, h, c int, dst, prob []float32, ld, rows, valid int) {
	const n = format.KVChunkTokens
	hd := kv.headDim
	if kv.typ == format.KVQ8 {
		_, vs, _, vc := kv.q8(l, h, c)
		for r := range rows {
			row := prob[r*ld : r*ld+valid]
			k.MulScale(row, row, vs[:valid], 1)
		}
		if rows == 1 {
			k.MatVecTilesI8(dst, vc, n, prob, hd, valid, 0, format.Tiles(hd))
		} else {
			k.GemmTilesI8(dst, hd, vc, n, prob, ld, rows, hd, valid, 0, format.Tiles(hd))
		}
		return
	}
	_, vc := kv.f16(l, h, c)
	if rows == 1 {
		k.MatVecTilesLd(dst, vc, n, prob, hd, valid, 0, format.Tiles(hd))
	} else {
		k.GemmTilesLd(dst, hd, vc, n, prob, ld, rows, hd, valid, 0, format.Tiles(hd))
	}
}
