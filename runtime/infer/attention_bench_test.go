package infer

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/graph"
	"github.com/qwenc/qwenc/kernels"
)

// benchAttention runs one layer's attention of the Qwen3-0.6B shape (16
// query heads, 8 KV heads of 128) over a cache of depth positions filled
// with random keys and values, for tokens new tokens (512: a prefill
// batch; 1: a decode step), on threads workers.
func benchAttention(b *testing.B, kv format.KVType, depth, tokens, threads int) {
	c := format.Config{Layers: 1, Heads: 16, KVHeads: 8, HeadDim: 128}
	k := kernels.Detect()
	r := &Runner{m: &Model{Config: c}, k: k, pool: kernels.NewPool(threads), work: make([]workspace, threads)}
	defer r.pool.Close()
	for w := range r.work {
		r.work[w] = newWorkspace(&c)
	}
	r.tasks.attn.minSpan = attnMinSpan
	cache := newKVCache(&graph.State{Kind: graph.AttentionKV, KVHeads: c.KVHeads, HeadDim: c.HeadDim}, kv)
	cache.Reserve(0, depth+tokens)
	rng := rand.New(rand.NewPCG(1, 2))
	key, val := make([]float32, c.HeadDim), make([]float32, c.HeadDim)
	tmp := newKVScratch(c.HeadDim)
	for pos := range depth + tokens {
		for h := range c.KVHeads {
			for d := range key {
				key[d], val[d] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
			}
			cache.store(k, h, pos, key, val, &tmp)
		}
	}
	q := make([]float32, tokens*c.QDim())
	for i := range q {
		q[i] = float32(rng.NormFloat64())
	}
	out := make([]float32, len(q))
	segs := []segment{{states: []LayerState{cache}, n: tokens, pos: depth}}
	at := &r.tasks.attn
	for b.Loop() {
		at.kvs = []*KVCache{cache}
		at.prepare(r, segs, q, out)
		r.pool.Run(at)
		at.combine()
	}
	// Each new token's query heads take a product with the keys and with
	// the values of every position they see: 2 x head_dim FMAs each.
	var seen float64
	for t := range tokens {
		seen += float64(depth + t + 1)
	}
	flop := 4 * seen * float64(c.Heads*c.HeadDim)
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(flop/sec/1e9, "GFLOP/s")
	if tokens == 1 {
		bytes := float64(depth+1) * float64(graph.KVChunkBytes(c.KVHeads, c.HeadDim, kv)) / format.KVChunkTokens
		b.ReportMetric(bytes/sec/1e9, "KV-GB/s")
	}
}

// BenchmarkAttention measures a prefill batch of 512 tokens and a decode
// step at depths up to 16384, with 2 threads: attention arithmetic in
// GFLOP/s (compare with kernels' BenchmarkGemm2Threads in the same run)
// and, for decode, the KV cache read in GB/s.
func BenchmarkAttention(b *testing.B) {
	for _, kv := range []format.KVType{format.KVF16, format.KVQ8} {
		for _, depth := range []int{0, 1024, 4096, 16384} {
			for _, tokens := range []int{512, 1} {
				b.Run(fmt.Sprintf("%s/depth=%d/tokens=%d", kv, depth, tokens), func(b *testing.B) {
					benchAttention(b, kv, depth, tokens, 2)
				})
			}
		}
	}
}
