package infer

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/arch"
	"github.com/qwenc/qwenc/format/graph"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/testarch"
	"github.com/qwenc/qwenc/kernels"
)

// TestCausalConvReference: the convolution of a sequence fed in steps of
// every size, against a plain float64 convolution of the whole sequence
// with zeros before it, for kernels of 1 to 5 taps.
func TestCausalConvReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const c, n = 13, 23
	for width := 1; width <= 5; width++ {
		w := make([]float32, c*width)
		for i := range w {
			w[i] = float32(rng.NormFloat64())
		}
		in := make([]float32, n*c)
		for i := range in {
			in[i] = float32(rng.NormFloat64())
		}
		want := make([]float64, n*c)
		for tk := range n {
			for ch := range c {
				var sum float64
				for j := range width {
					if src := tk - width + 1 + j; src >= 0 {
						sum += float64(w[ch*width+j]) * float64(in[src*c+ch])
					}
				}
				want[tk*c+ch] = sum / (1 + math.Exp(-sum))
			}
		}
		for _, steps := range [][]int{{n}, {1, 1, 1, 1, 19}, {2, 3, 5, 13}, {7, 1, 15}} {
			prev := make([]float32, (width-1)*c)
			out := make([]float32, n*c)
			at := 0
			for _, k := range steps {
				conv(out[at*c:(at+k)*c], in[at*c:(at+k)*c], prev, w, c)
				at += k
			}
			for i := range out {
				if math.Abs(float64(out[i])-want[i]) > 1e-5*(1+math.Abs(want[i])) {
					t.Fatalf("width %d, steps %v: out[%d] = %g, want %g", width, steps, i, out[i], want[i])
				}
			}
		}
	}
}

// recurrentModel compiles a small model of testarch's architecture, whose
// layers each keep a recurrent state beside their KV cache.
func recurrentModel(t *testing.T, typ format.DType) *Model {
	t.Helper()
	s := synth.Shape{Hidden: 64, Intermediate: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 300, MaxPositions: 4096, Tied: false, DType: "BF16", Seed: 21, EOS: synth.MiniEOS}
	m, err := Open(testarch.Compile(t, s, 64, typ), Options{Threads: 2, Kernels: kernels.Detect(), Archs: testarch.Registry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestRecurrentSession: a session of a model with recurrent layers goes
// back only to its checkpoints, a snapshot, or the start, and from each
// the same tokens give the same logits as one straight run; what it holds
// is what its states and inspect's table say.
func TestRecurrentSession(t *testing.T) {
	m := recurrentModel(t, format.F16)
	prompt := randomTokens(60, 300, 3)
	straight, _ := m.NewSession(0)
	want, err := straight.Feed(prompt)
	if err != nil {
		t.Fatal(err)
	}
	want = append([]float32(nil), want...)
	if straight.Rewindable() {
		t.Fatal("a session with recurrent layers says it rewinds by itself")
	}
	a, _ := testarch.Registry().For(testarch.ModelType)
	table := graph.ReportStates(arch.States(a, &m.Config), []int{60}, format.KVF16)
	if got := straight.Bytes(); got != m.SequenceBytes(60, format.KVF16) || got != int64(table.BySeq[0].TotalBytes) || table.RecurrentLayers != 2 {
		t.Fatalf("60 tokens: the session holds %d bytes, its states say %d, inspect's table %+v", got, m.SequenceBytes(60, format.KVF16), table)
	}

	s, _ := m.NewSession(0)
	check := func(what string, tail []int32) {
		t.Helper()
		got, err := s.Feed(tail)
		if err != nil {
			t.Fatal(err)
		}
		if d := maxDiff(got, want); d > 2e-3 {
			t.Fatalf("%s: logits off the straight run's by %g", what, d)
		}
	}
	for _, at := range [][2]int{{0, 10}, {10, 25}} {
		if _, err := s.Feed(prompt[at[0]:at[1]]); err != nil {
			t.Fatal(err)
		}
		s.Checkpoint()
	}
	sn := s.Snapshot()
	check("in steps", prompt[25:])
	if s.Bytes() <= m.SequenceBytes(60, format.KVF16) {
		t.Errorf("two checkpoints cost nothing: %d bytes", s.Bytes())
	}
	if p := s.RewindPoint(20); p != 10 || s.CanRewind(20) {
		t.Errorf("RewindPoint(20) = %d, want the checkpoint at 10", p)
	}
	if err := s.Rewind(20); err == nil || !strings.Contains(err.Error(), "deepest before it is at 10") {
		t.Errorf("rewind to 20, between checkpoints: %v", err)
	}
	if err := s.Restore(sn); err != nil {
		t.Fatal(err)
	}
	check("from the snapshot at 25", prompt[25:])
	if err := s.Rewind(10); err != nil {
		t.Fatal(err)
	}
	if err := s.Restore(sn); err == nil {
		t.Error("a snapshot at 25 restored after the session went back to 10")
	}
	check("from the checkpoint at 10", prompt[10:])
	if err := s.Rewind(0); err != nil {
		t.Fatal(err)
	}
	if p := s.RewindPoint(10); p != 0 {
		t.Errorf("after going back to 0, RewindPoint(10) = %d: a checkpoint past 0 survived", p)
	}
	check("from the start", prompt)

	// A model of attention alone rewinds anywhere, with no copies.
	plain := openModel(t, synthModel(t, shapes()["qwen3-tied-odd"], 64), kernels.Detect(), 2)
	p, _ := plain.NewSession(0)
	if _, err := p.Feed(prompt[:30]); err != nil {
		t.Fatal(err)
	}
	before := p.Bytes()
	p.Checkpoint()
	if !p.Rewindable() || !p.CanRewind(17) || p.Bytes() != before || p.Snapshot().bytes != 0 {
		t.Errorf("attention alone: rewindable %v, to 17 %v, %d bytes after a checkpoint (%d before)", p.Rewindable(), p.CanRewind(17), p.Bytes(), before)
	}
}

// TestFork: sessions forked from one share its KV chunks, and each goes
// on on its own: two forks and the original, each fed a different
// continuation (the forks at a checkpoint and at the end, of a model with
// recurrent layers; at any position, of one of attention alone), give the
// logits of straight runs of their whole texts, and writing into a shared
// chunk copies it first.
func TestFork(t *testing.T) {
	for _, c := range []struct {
		name string
		m    *Model
	}{{"recurrent", recurrentModel(t, format.F16)}, {"attention", openModel(t, synthModel(t, shapes()["qwen3-untied"], 64), kernels.Detect(), 2)}} {
		m := c.m
		vocab := m.Config.Vocab
		prompt := randomTokens(300, min(vocab, 300), 5)
		straight := func(tokens []int32) []float32 {
			s, _ := m.NewSession(0)
			l, err := s.Feed(tokens)
			if err != nil {
				t.Fatal(err)
			}
			return slices.Clone(l)
		}
		base, _ := m.NewSession(0)
		if _, err := base.Feed(prompt[:270]); err != nil {
			t.Fatal(err)
		}
		base.Checkpoint()
		if _, err := base.Feed(prompt[270:290]); err != nil {
			t.Fatal(err)
		}
		at := 270 // a checkpoint: a recurrent session can fork there
		if base.Rewindable() {
			at = 263 // anywhere
		}
		forks := map[int]*Session{}
		for _, n := range []int{at, 290} {
			f, err := base.Fork(n)
			if err != nil {
				t.Fatal(err)
			}
			forks[n] = f
		}
		if _, err := base.Fork(275); !base.Rewindable() && err == nil {
			t.Errorf("%s: a fork between checkpoints", c.name)
		}
		shared := map[*byte]bool{}
		base.Memory(func(id *byte, _ int64) { shared[id] = true })
		forks[at].Memory(func(id *byte, n int64) {
			if !shared[id] && n == graph.KVChunkBytes(m.Config.KVHeads, m.Config.HeadDim, format.KVF16) {
				t.Errorf("%s: the fork at %d holds a chunk of its own before it writes", c.name, at)
			}
		})
		// Each goes on with a text of its own, the original too.
		tails := map[*Session][]int32{base: randomTokens(15, min(vocab, 300), 7), forks[at]: randomTokens(40, min(vocab, 300), 8), forks[290]: randomTokens(9, min(vocab, 300), 9)}
		for s, tail := range tails {
			if _, err := s.Feed(tail); err != nil {
				t.Fatal(err)
			}
		}
		for s, tail := range tails {
			got, err := s.Feed(tail[:1]) // one more: the logits after the whole text
			if err != nil {
				t.Fatal(err)
			}
			want := straight(append(slices.Clone(s.Tokens()[:s.Len()-1]), tail[0]))
			if d := maxDiff(got, want); d > 2e-3 {
				t.Errorf("%s: a session of %d tokens off a straight run by %g", c.name, s.Len(), d)
			}
		}
		mine := 0
		forks[at].Memory(func(id *byte, n int64) {
			if !shared[id] && n == graph.KVChunkBytes(m.Config.KVHeads, m.Config.HeadDim, format.KVF16) {
				mine++
			}
		})
		if mine == 0 {
			t.Errorf("%s: the fork at %d wrote into shared chunks", c.name, at)
		}
	}
}
