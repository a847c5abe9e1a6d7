package infer

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/graph"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
	"github.com/qwenc/qwenc/kernels"
)

// synthModel compiles a random-weight model of the given shape.
func synthModel(t *testing.T, s synth.Shape, maxPrefill int) string {
	t.Helper()
	return synthtest.Compile(t, s, maxPrefill)
}

// shapes are the odd shapes every infer test runs on: dimensions that are
// not multiples of 32, untied heads, Qwen2 biases, GQA groups of 1 and 3.
func shapes() map[string]synth.Shape {
	base := synth.Shape{ModelType: "qwen3", Hidden: 72, Intermediate: 100, Layers: 2, Heads: 6, KVHeads: 2, HeadDim: 14,
		Vocab: 333, MaxPositions: 1024, Tied: true, DType: "BF16", Seed: 11, EOS: synth.MiniEOS}
	untied := base
	untied.Tied, untied.Seed = false, 12
	qwen2 := base
	qwen2.ModelType, qwen2.Heads, qwen2.KVHeads, qwen2.Tied, qwen2.Seed = "qwen2", 3, 3, false, 13
	return map[string]synth.Shape{"qwen3-tied-odd": base, "qwen3-untied": untied, "qwen2-bias": qwen2}
}

func randomTokens(n, vocab int, seed uint64) []int32 {
	rng := rand.New(rand.NewPCG(seed, 0))
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(rng.IntN(vocab))
	}
	return ids
}

func maxDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestBatchingDoesNotChangeLogits feeds the same 300-token prompt in one
// batch (up to the compiled 512), in batches of 37, and one token at a
// time, and compares the logits of the last position; and compares the
// logits of every position of the token-by-token run with a prefill of the
// same prefix at a few places. This crosses KV chunks (256) and batches.
func TestBatchingDoesNotChangeLogits(t *testing.T) {
	for name, s := range shapes() {
		path := synthModel(t, s, 512)
		for _, kp := range kernels.SupportedPaths() {
			m := openModel(t, path, kp, 2)
			prompt := randomTokens(300, s.Vocab, 5)
			run := func(batch int) []float32 { return lastLogits(t, m, prompt, batch) }
			one, b37, tok := run(0), run(37), run(1)
			if d := maxDiff(one, b37); d > 2e-3 {
				t.Errorf("%s/%s: one batch vs batches of 37 differ by %g", name, kp, d)
			}
			if d := maxDiff(one, tok); d > 2e-3 {
				t.Errorf("%s/%s: one batch vs token by token differ by %g", name, kp, d)
			}
		}
	}
}

// lastLogits feeds prompt to a new session in batches of at most batch
// tokens (0: the compiled maximum) and returns a copy of the last logits.
func lastLogits(t *testing.T, m *Model, prompt []int32, batch int) []float32 {
	t.Helper()
	sess, _ := m.NewSession(0)
	sess.MaxBatch = batch
	l, err := sess.Feed(prompt)
	if err != nil {
		t.Fatal(err)
	}
	return append([]float32(nil), l...)
}

func TestKVCacheGrowsByChunks(t *testing.T) {
	s := shapes()["qwen3-tied-odd"]
	m := openModel(t, synthModel(t, s, 64), kernels.Detect(), 2)
	sess, _ := m.NewSession(0)
	per := graph.KVChunkBytes(m.Config.KVHeads, m.Config.HeadDim, format.KVF16) * int64(m.Config.Layers)
	if sess.Bytes() != 0 {
		t.Fatal("an empty session holds KV memory")
	}
	first := sess.states[0].(*KVCache)
	var firstChunk *byte
	for _, step := range []struct{ feed, chunks int }{{5, 1}, {3, 1}, {248, 1}, {1, 2}, {255, 2}, {1, 3}} {
		if _, err := sess.Feed(randomTokens(step.feed, s.Vocab, uint64(step.feed))); err != nil {
			t.Fatal(err)
		}
		if first.Chunks() != step.chunks || sess.Bytes() != int64(step.chunks)*per {
			t.Fatalf("after %d tokens: %d chunks, %d bytes; want %d chunks", sess.Len(), first.Chunks(), sess.Bytes(), step.chunks)
		}
		if sess.Bytes() != m.SequenceBytes(sess.Len(), format.KVF16) {
			t.Fatalf("after %d tokens: %d bytes, the model's states say %d", sess.Len(), sess.Bytes(), m.SequenceBytes(sess.Len(), format.KVF16))
		}
		// A full chunk is never moved: the first chunk keeps its address.
		if p := &first.mem[0][0]; firstChunk == nil {
			firstChunk = p
		} else if p != firstChunk {
			t.Fatal("the first KV chunk moved")
		}
	}
	if want := int64(graph.KVChunks(513)) * per; sess.Bytes() != want {
		t.Fatalf("513 tokens hold %d bytes, want %d", sess.Bytes(), want)
	}
}

// TestContextLimit: a session holds its context and no more; a context
// above the model's maximum is refused. (Generation stopping at the
// context, at a stop token and at a cancellation is the engine's, which
// runs the one generation loop: internal/engine's TestGenerationStops.)
func TestContextLimit(t *testing.T) {
	s := shapes()["qwen2-bias"]
	m := openModel(t, synthModel(t, s, 16), kernels.Detect(), 1)
	sess, err := m.NewSession(40)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Feed(randomTokens(30, s.Vocab, 1)); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := sess.Feed([]int32{1}); err != nil {
			t.Fatal(err)
		}
	}
	if sess.Len() != 40 {
		t.Fatalf("%d tokens in the cache, want 40", sess.Len())
	}
	if _, err := sess.Feed([]int32{1}); err == nil {
		t.Fatal("feeding past the context succeeded")
	}
	if _, err := m.NewSession(m.Config.MaxPositions + 1); err == nil {
		t.Fatal("a context above the model's maximum was accepted")
	}
}

func TestDecodeStepDoesNotAllocate(t *testing.T) {
	s := shapes()["qwen3-tied-odd"]
	checkDecodeDoesNotAllocate(t, openModel(t, synthModel(t, s, 16), kernels.Detect(), 2))
}

// Nor with a q8 cache 600 positions deep whose decode attention is split
// into one-chunk spans.
func TestDecodeStepDoesNotAllocateQ8Split(t *testing.T) {
	s := shapes()["qwen3-tied-odd"]
	m := openModel(t, synthModel(t, s, 16), kernels.Detect(), 2)
	m.runner().tasks.attn.minSpan = 1
	sess, _ := m.NewSessionKV(0, format.KVQ8)
	if err := sess.FillKV(600, 1); err != nil {
		t.Fatal(err)
	}
	checkSessionDecodeDoesNotAllocate(t, sess)
}

func checkDecodeDoesNotAllocate(t *testing.T, m *Model) {
	t.Helper()
	sess, _ := m.NewSession(0)
	checkSessionDecodeDoesNotAllocate(t, sess)
}

func checkSessionDecodeDoesNotAllocate(t *testing.T, sess *Session) {
	t.Helper()
	sess.Feed([]int32{1, 2, 3})
	tok := []int32{4}
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := sess.Feed(tok); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("a decode step allocates %.1f times", allocs)
	}
}

// A zero Options runs the kernels this CPU runs fastest and one thread
// per usable CPU: what a Go program that does the obvious thing gets.
func TestZeroOptionsRunFast(t *testing.T) {
	m, err := Open(synthModel(t, shapes()["qwen3-tied-odd"], 16), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Kernels() != kernels.Detect() || m.Threads() != runtime.GOMAXPROCS(0) {
		t.Errorf("zero Options: kernels %s, %d threads; want %s, %d", m.Kernels(), m.Threads(), kernels.Detect(), runtime.GOMAXPROCS(0))
	}
	s, _ := m.NewSession(0)
	if _, err := s.Feed([]int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
}
