package infer

import (
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
