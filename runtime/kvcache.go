package runtime

import "github.com/qwenc/qwenc/format"

// KVCache holds the keys and values of every layer in f16, in chunks of
// format.KVChunkTokens positions. A chunk is allocated when the sequence
// first reaches it and never moved or reallocated afterwards; memory grows
// by one chunk per layer per 256 positions.
//
// Within a chunk, K (and V) is laid out [kvHeads][256][headDim], so the
// rows one KV head contributes to attention are contiguous.
type KVCache struct {
	layers, kvHeads, headDim int
	// k[l][h] lists, per chunk, the slice of chunk memory holding head h of
	// layer l; v likewise. The attention kernel reads these lists directly.
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

// Reserve makes sure positions [0, n) have chunks in every layer.
func (kv *KVCache) Reserve(n int) {
	for kv.chunks*format.KVChunkTokens < n {
		per := format.KVChunkTokens * kv.headDim
		for l := range kv.layers {
			k := make([]uint16, kv.kvHeads*per)
			v := make([]uint16, kv.kvHeads*per)
			for h := range kv.kvHeads {
				kv.k[l][h] = append(kv.k[l][h], k[h*per:(h+1)*per:(h+1)*per])
				kv.v[l][h] = append(kv.v[l][h], v[h*per:(h+1)*per:(h+1)*per])
			}
		}
		kv.chunks++
	}
}

// Chunks is the number of allocated chunks per layer.
func (kv *KVCache) Chunks() int { return kv.chunks }

// Bytes is the memory the cache holds, K and V of every layer.
func (kv *KVCache) Bytes() int64 {
	return int64(kv.chunks) * int64(kv.layers) * 2 * int64(format.KVChunkTokens*kv.kvHeads*kv.headDim) * 2
}

// row returns where position pos of head h of layer l is stored, in K and V.
func (kv *KVCache) row(l, h, pos int) (k, v []uint16) {
	c, r := pos/format.KVChunkTokens, pos%format.KVChunkTokens
	o := r * kv.headDim
	return kv.k[l][h][c][o : o+kv.headDim], kv.v[l][h][c][o : o+kv.headDim]
}
