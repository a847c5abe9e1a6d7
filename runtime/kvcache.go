package runtime

import (
	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/kernels"
)

// KVCache holds the keys and values of every layer in f16, in chunks of
// format.KVChunkTokens (256) positions. A chunk is allocated when the
// sequence first reaches it and never moved or reallocated afterwards;
// memory grows by one chunk per layer per 256 positions.
//
// Each chunk of one KV head is stored tile-major, like the weights, so
// attention runs on the same matrix kernels:
//   - K as a [256, headDim] matrix (rows are positions): scores for a
//     block of queries are a GEMM of the queries with this chunk;
//   - V transposed, as a [headDim, 256] matrix: the weighted sum of values
//     is a GEMM of the attention probabilities with this chunk.
type KVCache struct {
	layers, kvHeads, headDim int
	// k[l][h][c] and v[l][h][c] are chunk c of head h of layer l.
	k, v   [][][][]uint16
	chunks int
}

// NewKVCache returns an empty cache; no memory is allocated until Reserve.
func NewKVCache(c *format.Config) *KVCache {
	kv := &KVCache{layers: c.Layers, kvHeads: c.KVHeads, headDim: c.HeadDim}
	kv.k = make([][][][]uint16, c.Layers)
	kv.v = make([][][][]uint16, c.Layers)
	for l := range c.Layers {
		kv.k[l] = make([][][]uint16, c.KVHeads)
		kv.v[l] = make([][][]uint16, c.KVHeads)
	}
	return kv
}

// kElems and vElems are the f16 counts of one head's K and V in one chunk:
// tile-major sizes, padded to whole 32-row tiles.
func (kv *KVCache) kElems() int { return format.TileMajorElems(format.KVChunkTokens, kv.headDim) }
func (kv *KVCache) vElems() int { return format.TileMajorElems(kv.headDim, format.KVChunkTokens) }

// Reserve makes sure positions [0, n) have chunks in every layer.
func (kv *KVCache) Reserve(n int) {
	ke, ve := kv.kElems(), kv.vElems()
	for kv.chunks*format.KVChunkTokens < n {
		for l := range kv.layers {
			// One allocation per layer and chunk for all heads' K and V.
			mem := make([]uint16, kv.kvHeads*(ke+ve))
			for h := range kv.kvHeads {
				o := h * (ke + ve)
				kv.k[l][h] = append(kv.k[l][h], mem[o:o+ke:o+ke])
				kv.v[l][h] = append(kv.v[l][h], mem[o+ke:o+ke+ve:o+ke+ve])
			}
		}
		kv.chunks++
	}
}

// Chunks is the number of allocated chunks per layer.
func (kv *KVCache) Chunks() int { return kv.chunks }

// Bytes is the memory the cache holds, K and V of every layer.
func (kv *KVCache) Bytes() int64 {
	return int64(kv.chunks) * int64(kv.layers) * int64(kv.kvHeads) * int64(kv.kElems()+kv.vElems()) * 2
}

// store writes the key and value vectors of head h of layer l at position
// pos, converting to f16; tmp is scratch of head_dim elements.
func (kv *KVCache) store(k kernels.Path, l, h, pos int, key, val []float32, tmp []uint16) {
	c, r := pos/format.KVChunkTokens, pos%format.KVChunkTokens
	hd := kv.headDim
	kc := kv.k[l][h][c]
	// A key is one column of the chunk's tile: convert it with the vector
	// kernel, then scatter with the tile's stride.
	k.F32ToF16(tmp[:hd], key)
	base := (r/format.TileRows)*hd*format.TileRows + r%format.TileRows
	for d, x := range tmp[:hd] {
		kc[base+d*format.TileRows] = x
	}
	vc := kv.v[l][h][c]
	for d0 := 0; d0 < hd; d0 += format.TileRows {
		d1 := min(d0+format.TileRows, hd)
		o := ((d0/format.TileRows)*format.KVChunkTokens + r) * format.TileRows
		k.F32ToF16(vc[o:o+d1-d0], val[d0:d1])
	}
}
