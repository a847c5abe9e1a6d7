package infer

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/kernels"
)

// deltaBenchShapes are the Gated DeltaNet layers of Qwen3.5-0.8B (16 key
// and 16 value heads of 128) and 4B (16 and 32), from synth's presets
// (qwengen --preset).
func deltaBenchShapes() map[string]format.Hybrid {
	out := map[string]format.Hybrid{}
	for name, s := range map[string]synth.Shape{"0.8b": synth.Qwen35_08B(), "4b": synth.Qwen35_4B()} {
		out[name] = format.Hybrid{KeyHeads: s.LinearKeyHeads, ValueHeads: s.LinearValueHeads,
			KeyDim: s.LinearKeyHeadDim, ValueDim: s.LinearValueHeadDim, ConvKernel: s.ConvKernel}
	}
	return out
}

// benchGatedDeltaRule runs one layer's GatedDeltaRule op on threads
// workers over random inputs: a step of tokens tokens of one sequence,
// chunked or token by token. A decode step (tokens 1) takes the state of
// another of enough sequences to overflow the caches each time, as a
// model's layers do one after the other, so that the state comes from
// memory; a prefill keeps one sequence.
func benchGatedDeltaRule(b *testing.B, hy format.Hybrid, tokens int, chunked bool, threads int) {
	c := format.Config{Heads: 1, KVHeads: 1, HeadDim: 32, Hybrid: hy}
	k := kernels.Detect()
	r := &Runner{m: &Model{Config: c}, k: k, pool: kernels.NewPool(threads), work: make([]workspace, threads)}
	defer r.pool.Close()
	for w := range r.work {
		r.work[w] = newWorkspace(&c)
	}
	nv := hy.ValueHeads
	mixed := 2*hy.KeyHeads*hy.KeyDim + nv*hy.ValueDim
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int, scale float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * scale)
		}
		return x
	}
	op := &boundOp{w32: random(nv, 1), w32b: random(nv, 1)}
	for h := range op.w32 {
		op.w32[h] = -0.1 - 2*float32(h)/float32(nv) // slow to fast decays
	}
	floats := nv * kernels.DeltaHeadFloats(hy.KeyDim, hy.ValueDim)
	seqs := 1
	if tokens == 1 {
		seqs = max(1, 3*(64<<20)/(4*floats)) // three times a 64 MiB last-level cache
	}
	states := make([]LayerState, seqs)
	for i := range states {
		states[i] = &recurrentState{v: random(floats, 0.01)} // touched, as a running model's are
	}
	conv, a, bb, out := random(tokens*mixed, 1), random(tokens*nv, 1), random(tokens*nv, 1), make([]float32, tokens*nv*hy.ValueDim)
	t := &r.tasks.delta
	t.chunkMin = 1 << 30
	if chunked {
		t.chunkMin = 1
	}
	segs := []segment{{n: tokens}}
	i := 0
	for b.Loop() {
		segs[0].states = states[i%seqs : i%seqs+1]
		i++
		t.prepare(r, op, segs, conv, a, bb, out)
		r.pool.Run(t)
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(tokens)/sec, "tok/s")
	if tokens == 1 {
		// The state's bytes, read and written once.
		b.ReportMetric(2*4*float64(floats)/sec/1e9, "state-GB/s")
	}
}

// BenchmarkGatedDeltaRule measures the delta rule's two forms per step
// length on the Qwen3.5-0.8B and 4B layer shapes with 2 threads: a decode
// step (the recurrence, with the state's bandwidth) and prefill steps of
// 16 to 4096 tokens of one sequence by either form, the measurement
// deltaChunkMin is chosen from.
func BenchmarkGatedDeltaRule(b *testing.B) {
	for name, hy := range deltaBenchShapes() {
		b.Run(fmt.Sprintf("%s/decode", name), func(b *testing.B) { benchGatedDeltaRule(b, hy, 1, false, 2) })
		for _, tokens := range []int{16, 32, 64, 128, 512, 4096} {
			for _, chunked := range []bool{false, true} {
				form := "recurrent"
				if chunked {
					form = "chunked"
				}
				b.Run(fmt.Sprintf("%s/%s/tokens=%d", name, form, tokens), func(b *testing.B) {
					benchGatedDeltaRule(b, hy, tokens, chunked, 2)
				})
			}
		}
	}
}
