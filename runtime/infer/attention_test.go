package infer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/graph"
	"github.com/qwenc/qwenc/format/wtype"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
	"github.com/qwenc/qwenc/kernels"
)

// TestAttentionLongContext runs a prompt over five KV chunks against the
// float64 reference: prefilled in batches of 300 (blocks that start
// mid-chunk), then decoded token by token across a chunk boundary, with an
// f16 and a q8 cache, on every kernel path: with 3 threads and decode's
// chunk spans as fine as they go (one chunk each: partial softmax results
// combined), and with 2 threads and the default spans.
func TestAttentionLongContext(t *testing.T) {
	s := synth.Shape{ModelType: "qwen3", Hidden: 64, Intermediate: 96, Layers: 2, Heads: 6, KVHeads: 2, HeadDim: 40,
		Vocab: 300, MaxPositions: 2048, Tied: true, DType: "BF16", Seed: 61, EOS: synth.MiniEOS}
	promptLen, decode := 1270, 21 // the decode crosses position 1280
	if kernels.Detect() == kernels.Generic {
		// The portable kernels alone (purego, arm64 under emulation):
		// three chunks, the decode crossing position 512.
		promptLen = 500
	}
	tokens := randomTokens(promptLen+decode, s.Vocab, 8)
	want := referenceLogits(t, s, tokens)
	path := synthtest.Compile(t, s, 300)
	// The q8 cache's tolerance: keys, values, and the queries and
	// probabilities they meet in int8 (0.052 seen on avx512vnni; on the
	// trained model, perplexity +0.03%); the f16 one is the dense models'
	// 0.05.
	tol := map[format.KVType]float64{format.KVF16: 0.05, format.KVQ8: 0.08}
	paths := kernels.SupportedPaths()
	if raceEnabled {
		paths = []kernels.Path{kernels.Detect()}
	}
	for _, kp := range paths {
		for threads, minSpan := range map[int]int{3: 1, 2: attnMinSpan} {
			m := openModel(t, path, kp, threads)
			for _, kvt := range []format.KVType{format.KVF16, format.KVQ8} {
				name := fmt.Sprintf("%s/threads=%d/%s/minSpan=%d", kp, threads, kvt, minSpan)
				m.runner().tasks.attn.minSpan = minSpan
				sess, err := m.NewSessionKV(0, kvt)
				if err != nil {
					t.Fatal(err)
				}
				sess.MaxBatch = 300
				got, err := sess.Feed(tokens[:promptLen])
				if err != nil {
					t.Fatal(err)
				}
				worst := diff64(got, want[promptLen-1])
				for i := promptLen; i < len(tokens); i++ {
					if got, err = sess.Feed(tokens[i : i+1]); err != nil {
						t.Fatal(err)
					}
					worst = max(worst, diff64(got, want[i]))
				}
				if worst > tol[kvt] {
					t.Errorf("%s: logits off the reference by %.4f > %.2f", name, worst, tol[kvt])
				}
				if kp == kernels.Detect() && threads == 2 {
					t.Logf("%s: worst logit error %.4f", name, worst)
				}
			}
			m.runner().tasks.attn.minSpan = attnMinSpan
		}
	}
}

func diff64(got []float32, want []float64) float64 {
	var d float64
	for i, w := range want {
		d = max(d, math.Abs(float64(got[i])-w))
	}
	return d
}

// TestKVQ8RoundTrip stores keys and values and reads them back: each
// element within half a step of its scale (a key's per 32 dimensions, a
// value's per position), a zero vector stored as zero; then the scores and
// values of a chunk against the f16 cache's.
func TestKVQ8RoundTrip(t *testing.T) {
	st := &graph.State{Kind: graph.AttentionKV, KVHeads: 3, HeadDim: 40}
	// Two layers, each a cache of its own.
	kvs := [2]*KVCache{newKVCache(st, format.KVQ8), newKVCache(st, format.KVQ8)}
	f16s := [2]*KVCache{newKVCache(st, format.KVF16), newKVCache(st, format.KVF16)}
	for l := range 2 {
		kvs[l].Reserve(0, 300)
		f16s[l].Reserve(0, 300)
		if want := st.Bytes(300, format.KVQ8); kvs[l].Bytes() != want || want != 2*3*graph.KVHeadChunkBytes(40, format.KVQ8) {
			t.Fatalf("Bytes = %d, the state says %d", kvs[l].Bytes(), want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	tmp := newKVScratch(40)
	type stored struct{ key, val []float32 }
	in := map[[3]int]stored{}
	for pos := range 300 {
		for l := range 2 {
			for h := range 3 {
				key, val := make([]float32, 40), make([]float32, 40)
				if pos != 31 { // position 31 stays all zero
					for d := range key {
						key[d], val[d] = float32(rng.NormFloat64()*3), float32(rng.NormFloat64())
					}
				}
				kvs[l].store(kernels.Generic, h, pos, key, val, &tmp)
				f16s[l].store(kernels.Generic, h, pos, key, val, &tmp)
				in[[3]int{l, h, pos}] = stored{key, val}
			}
		}
	}
	key, vrow := make([]float32, 64), make([]float32, 256)
	for at, s := range in {
		l, h, pos := at[0], at[1], at[2]
		vs, kc, vc := kvs[l].q8(h, pos/256)
		r := pos % 256
		tb := wtype.Q8.TileBytes(64)
		kernels.Traits(wtype.Q8).DequantizeRow(key, kc[(r/32)*tb:(r/32+1)*tb], r%32, 64)
		vb := wtype.Q8.TileBytes(256)
		for d := range 40 {
			kernels.Traits(wtype.Q8).DequantizeRow(vrow, vc[(d/32)*vb:(d/32+1)*vb], d%32, 256)
			v := vrow[r] * vs[r]
			var amax float64
			for _, x := range s.key[d/32*32 : min(40, d/32*32+32)] {
				amax = max(amax, math.Abs(float64(x)))
			}
			if math.Abs(float64(key[d]-s.key[d])) > amax/127*0.51+1e-6 || math.Abs(float64(v-s.val[d])) > float64(vs[r])/2+1e-6 {
				t.Fatalf("layer %d head %d pos %d dim %d: got %g, %g want %g, %g", l, h, pos, d, key[d], v, s.key[d], s.val[d])
			}
		}
		for d := 40; d < 64; d++ {
			if key[d] != 0 {
				t.Fatalf("pos %d: padding dimension %d reads %g", pos, d, key[d])
			}
		}
	}
	// Chunk 1 holds positions 256..299: scores of 3 queries and values of
	// 3 probability rows over its 44 positions, q8 against f16.
	kv, f16 := kvs[1], f16s[1]
	for _, kp := range kernels.SupportedPaths() {
		q := make([]float32, 3*40)
		for i := range q {
			q[i] = float32(rng.NormFloat64())
		}
		ws := newWorkspace(&format.Config{Heads: 3, KVHeads: 3, HeadDim: 40})
		got, want := make([]float32, 3*256), make([]float32, 3*256)
		kv.scores(kp, 2, 1, got, 256, kv.quantizeQueries(kp, q, 40, 3, ws.qPad, ws.qQ8), 3, 44, 0.5)
		f16.scores(kp, 2, 1, want, 256, f16.quantizeQueries(kp, q, 40, 3, ws.qPad, ws.qQ8), 3, 44, 0.5)
		// Keys and queries in int8, each within half a step of 1/127 of
		// its block's maximum: a few percent of the largest score at most.
		for r := range 3 {
			var top float64
			for _, v := range want[r*256 : r*256+44] {
				top = max(top, math.Abs(float64(v)))
			}
			if d := maxDiff(got[r*256:r*256+44], want[r*256:r*256+44]); d > 0.03*top {
				t.Errorf("%s: q8 scores off f16's by %g, more than 3%% of the largest, %g", kp, d, top)
			}
		}
		p := make([]float32, 3*256)
		for i := range p {
			p[i] = rng.Float32() / 44
		}
		p2 := slices.Clone(p)
		gotV, wantV := make([]float32, 3*40), make([]float32, 3*40)
		kv.values(kp, 2, 1, gotV, p, 256, 3, 44, ws.pQ8)
		f16.values(kp, 2, 1, wantV, p2, 256, 3, 44, ws.pQ8)
		if d := maxDiff(gotV, wantV); d > 0.02 {
			t.Errorf("%s: q8 values off f16's by %g", kp, d)
		}
	}
}

// TestKVQ8GreedyKeepsText: on the trained model, with the q8 KV cache the
// greedy text is the f16 cache's (the reference's, which f16 follows
// through every case) at every step whose margin exceeds 0.05.
func TestKVQ8GreedyKeepsText(t *testing.T) {
	m := openModel(t, compileBundled(t, "qwen3-go-demo"), kernels.Detect(), 2)
	for _, c := range loadReference(t, "qwen3-go-demo") {
		s, _ := m.NewSessionKV(0, format.KVQ8)
		logits, err := s.Feed(c.PromptIDs)
		if err != nil {
			t.Fatal(err)
		}
		for step, want := range c.Greedy {
			if id, _ := argmax(logits); int32(id) != want {
				if c.GreedyMargins[step] > 0.05 {
					t.Errorf("%s: greedy step %d = %d, want %d (margin %.3f)", c.Name, step, id, want, c.GreedyMargins[step])
				}
				break
			}
			if logits, err = s.Feed([]int32{want}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
