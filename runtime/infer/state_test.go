package infer

import (
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

// TestInspectMemoryHybrid: what inspect's table says a sequence of the
// Qwen3.5 models holds (their DeltaNet layers' recurrent and conv states
// and their attention layers' KV chunks) is what a session allocates,
// for both KV types, below, at and past a chunk's end.
func TestInspectMemoryHybrid(t *testing.T) {
	lengths := []int{1, 100, format.KVChunkTokens, format.KVChunkTokens + 1}
	for _, name := range []string{"tiny-q35", "tiny-q35-moe"} {
		m := openModel(t, compileBundled(t, name), kernels.Detect(), 2)
		a, err := arch.Builtin().For(m.Config.ModelType)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range []format.KVType{format.KVF16, format.KVQ8} {
			table := graph.ReportStates(arch.States(a, &m.Config), lengths, kv)
			if table.RecurrentLayers == 0 || table.AttentionLayers == 0 {
				t.Fatalf("%s: inspect's table has %d recurrent and %d attention layers", name, table.RecurrentLayers, table.AttentionLayers)
			}
			s, err := m.NewSessionKV(0, kv)
			if err != nil {
				t.Fatal(err)
			}
			prompt := randomTokens(lengths[len(lengths)-1], 300, 5)
			at := 0
			for i, n := range lengths {
				if _, err := s.Feed(prompt[at:n]); err != nil {
					t.Fatal(err)
				}
				at = n
				if got, want := s.Bytes(), int64(table.BySeq[i].TotalBytes); got != want {
					t.Errorf("%s, %s KV, %d tokens: the session holds %d bytes, inspect says %d", name, kv, n, got, want)
				}
			}
		}
	}
}

// TestKeepWithinStep: a session of a Qwen3.5 model fed a step of several
// tokens after Speculate, then kept at each position within it, goes on
// with the logits of a straight run of the tokens it kept and the rest,
// without feeding any token again; a stale or foreign snapshot is refused.
func TestKeepWithinStep(t *testing.T) {
	for _, name := range []string{"tiny-q35", "tiny-q35-moe"} {
		m := openModel(t, compileBundled(t, name), kernels.Detect(), 2)
		prompt := randomTokens(40, 300, 11)
		draft := randomTokens(5, 300, 12)
		tail := randomTokens(6, 300, 13)
		for k := 0; k <= len(draft); k++ {
			kept := slices.Concat(prompt, draft[:k], tail)
			straight, _ := m.NewSession(0)
			want, err := straight.Feed(kept)
			if err != nil {
				t.Fatal(err)
			}
			want = slices.Clone(want)

			s, _ := m.NewSession(0)
			if _, err := s.Feed(prompt); err != nil {
				t.Fatal(err)
			}
			sn := s.Speculate()
			if _, err := s.Feed(draft); err != nil {
				t.Fatal(err)
			}
			if err := s.Keep(sn, len(prompt)+k); err != nil {
				t.Fatal(err)
			}
			if s.Len() != len(prompt)+k {
				t.Fatalf("%s: kept %d, the session holds %d", name, len(prompt)+k, s.Len())
			}
			got, err := s.Feed(tail)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(got, want); d > 1e-3 {
				t.Errorf("%s: kept %d of the step: logits off a straight run's by %g", name, k, d)
			}
			if err := s.Keep(sn, len(prompt)+1); err == nil {
				t.Errorf("%s: kept %d, then again within the step", name, k)
			}
		}
		other, _ := m.NewSession(0)
		s, _ := m.NewSession(0)
		s.Feed(prompt)
		if err := s.Keep(other.Speculate(), 0); err == nil {
			t.Errorf("%s: another session's snapshot kept", name)
		}
		sn := s.Snapshot()
		s.Feed(draft)
		if err := s.Keep(sn, len(prompt)+1); err == nil || !strings.Contains(err.Error(), "Speculate") {
			t.Errorf("%s: a plain snapshot kept within a step: %v", name, err)
		}
	}
}

// TestTrimStepBuffers: after a drafted step (Speculate, a step, Keep
// within it) a Qwen3.5 session still holds its recurrent states' logs
// and their replay's outputs; Memory, which the engine's state cache
// counts against its bound, counts them, and Trim lets them go: the
// session then holds what a session never drafted holds, and goes on
// with the logits of a straight run, drafting again.
func TestTrimStepBuffers(t *testing.T) {
	m := openModel(t, compileBundled(t, "tiny-q35"), kernels.Detect(), 2)
	prompt := randomTokens(40, 300, 11)
	draft := randomTokens(8, 300, 12)
	tail := randomTokens(6, 300, 13)
	memory := func(s *Session) int64 {
		var n int64
		s.Memory(func(_ *byte, b int64) { n += b })
		return n
	}
	held := func(s *Session) int64 {
		var n int64
		for _, st := range s.states {
			if r, ok := st.(*recurrentState); ok {
				n += 4 * int64(cap(r.log)+cap(r.scratch))
			}
		}
		return n
	}
	straight, _ := m.NewSession(0)
	if _, err := straight.Feed(slices.Concat(prompt, draft[:2])); err != nil {
		t.Fatal(err)
	}
	s, _ := m.NewSession(0)
	if _, err := s.Feed(prompt); err != nil {
		t.Fatal(err)
	}
	sn := s.Speculate()
	if _, err := s.Feed(draft); err != nil {
		t.Fatal(err)
	}
	if err := s.Keep(sn, len(prompt)+2); err != nil {
		t.Fatal(err)
	}
	if h := held(s); h == 0 || memory(s) < memory(straight)+h {
		t.Errorf("after a drafted step the session holds %d bytes of logs; Memory counts %d, a session never drafted %d", h, memory(s), memory(straight))
	}
	s.Trim()
	if h := held(s); h != 0 || memory(s) != memory(straight) {
		t.Errorf("trimmed: %d bytes of logs held, Memory %d, a session never drafted %d", h, memory(s), memory(straight))
	}
	want, err := straight.Feed(tail)
	if err != nil {
		t.Fatal(err)
	}
	want = slices.Clone(want)
	sn = s.Speculate()
	got, err := s.Feed(tail)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(got, want); d > 1e-3 {
		t.Errorf("trimmed, then a drafted step: logits off a straight run's by %g", d)
	}
	if err := s.Keep(sn, s.Len()-1); err != nil {
		t.Errorf("trimmed, then kept within a drafted step: %v", err)
	}
}
