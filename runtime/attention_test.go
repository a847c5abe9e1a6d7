package runtime

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qwenc/qwenc/format"
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
	const promptLen, decode = 1270, 21 // the decode crosses position 1280
	tokens := randomTokens(promptLen+decode, s.Vocab, 8)
	want := referenceLogits(t, s, tokens)
	path := synthtest.Compile(t, s, 300)
	// The q8 cache's tolerance: int8 keys and values with a scale per
	// position and head; the f16 one is the dense models' 0.05.
	tol := map[format.KVType]float64{format.KVF16: 0.05, format.KVQ8: 0.06}
	for _, kp := range kernels.SupportedPaths() {
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
// element within half a step of its scale, a zero vector stored as zero.
func TestKVQ8RoundTrip(t *testing.T) {
	c := &format.Config{Layers: 2, KVHeads: 3, HeadDim: 40}
	kv := NewKVCache(c, format.KVQ8)
	kv.Reserve(300)
	if want := int64(2) * 2 * 3 * c.KVHeadChunkBytes(format.KVQ8); kv.Bytes() != want {
		t.Fatalf("Bytes = %d, want %d", kv.Bytes(), want)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	tmp := make([]uint16, c.HeadDim)
	type stored struct{ key, val []float32 }
	in := map[[3]int]stored{}
	for _, pos := range []int{0, 1, 31, 32, 255, 256, 299} {
		for l := range 2 {
			for h := range 3 {
				key, val := make([]float32, 40), make([]float32, 40)
				if pos != 31 { // position 31 stays all zero
					for d := range key {
						key[d], val[d] = float32(rng.NormFloat64()*3), float32(rng.NormFloat64())
					}
				}
				kv.store(kernels.Generic, l, h, pos, key, val, tmp)
				in[[3]int{l, h, pos}] = stored{key, val}
			}
		}
	}
	for at, s := range in {
		l, h, pos := at[0], at[1], at[2]
		ks, vs, kc, vc := kv.q8(l, h, pos/256)
		r := pos % 256
		for d := range 40 {
			k := float32(kc[((r/32)*40+d)*32+r%32]) * ks[r]
			v := float32(vc[((d/32)*256+r)*32+d%32]) * vs[r]
			if math.Abs(float64(k-s.key[d])) > float64(ks[r])/2+1e-6 || math.Abs(float64(v-s.val[d])) > float64(vs[r])/2+1e-6 {
				t.Fatalf("layer %d head %d pos %d dim %d: got %g, %g want %g, %g (scales %g, %g)", l, h, pos, d, k, v, s.key[d], s.val[d], ks[r], vs[r])
			}
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
