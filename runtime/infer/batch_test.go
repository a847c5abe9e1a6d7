package infer

import (
	"errors"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/synthtest"
	"github.com/qwenc/qwenc/kernels"
)

// alone feeds prompt then each of next to a new session, one call each,
// and returns a copy of the logits after the prompt and after every token.
func alone(t *testing.T, m *Model, prompt, next []int32) [][]float32 {
	t.Helper()
	s, _ := m.NewSession(0)
	var out [][]float32
	l, err := s.Feed(prompt)
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, append([]float32(nil), l...))
	for _, id := range next {
		if l, err = s.Feed([]int32{id}); err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]float32(nil), l...))
	}
	return out
}

// TestStepMatchesFeed runs three sessions together through one Runner —
// their prompts in one step, then one token each per step — and compares
// every logits row with the same session run alone. Batching changes the
// order of the f16 products' float sums (a GEMM instead of a
// matrix-vector product), nothing else: quantized products are the same
// integer arithmetic in any batch, so a file whose matrices are all
// quantized batches exactly; in a file that mixes f16 products with
// quantized ones, a last-bit difference now and then moves an activation
// across a rounding boundary of its quantization, so its bound is the
// scale of q8's own error. A session that sits out a step is unaffected.
func TestStepMatchesFeed(t *testing.T) {
	for name, s := range map[string]struct {
		path string
		tol  float64
	}{
		"qwen3-f16":    {synthModel(t, shapes()["qwen3-tied-odd"], 512), 2e-3},
		"qwen2-f16":    {synthModel(t, shapes()["qwen2-bias"], 512), 2e-3},
		"qwen3-q8":     {synthtest.CompileAs(t, quantShapes()["qwen3-q-all"], 512, format.Q8), 0},
		"qwen2-q4-mix": {synthtest.CompileAs(t, quantShapes()["qwen2-q-mixed"], 512, format.Q4), 0.1},
		"moe-f16":      {compileBundled(t, "tiny-moe-a"), 2e-3},
		"moe-q8-mix":   {compileBundledAs(t, "tiny-moe-a", format.Q8), 0.1},
	} {
		m := openModel(t, s.path, kernels.Detect(), 2)
		vocab := m.Config.Vocab
		prompts := [][]int32{randomTokens(7, vocab, 1), randomTokens(300, vocab, 2), randomTokens(1, vocab, 3)}
		next := [][]int32{randomTokens(12, vocab, 4), randomTokens(12, vocab, 5), randomTokens(12, vocab, 6)}
		var want [][][]float32
		for i := range prompts {
			want = append(want, alone(t, m, prompts[i], next[i]))
		}
		r := m.NewRunner(Options{Threads: 2, Kernels: kernels.Detect()})
		defer r.Close()
		sess := make([]*Session, 3)
		seqs := make([]Seq, 3)
		for i := range sess {
			sess[i], _ = m.NewSession(0)
			seqs[i] = Seq{Session: sess[i], Tokens: prompts[i], Logits: true}
		}
		check := func(step, i int, got []float32) {
			t.Helper()
			if d := maxDiff(want[i][step], got); d > s.tol {
				t.Errorf("%s: step %d, sequence %d: logits differ from the session alone by %g", name, step, i, d)
			}
		}
		if err := r.Step(seqs); err != nil {
			t.Fatal(err)
		}
		for i := range seqs {
			check(0, i, r.Logits(i))
		}
		for step := range 12 {
			// Sequence 2 sits out every third step and catches up later.
			var batch []Seq
			var idx []int
			for i := range sess {
				if i == 2 && step%3 == 1 {
					continue
				}
				pos := sess[i].Len() - len(prompts[i])
				batch = append(batch, Seq{Session: sess[i], Tokens: next[i][pos : pos+1], Logits: true})
				idx = append(idx, i)
			}
			if err := r.Step(batch); err != nil {
				t.Fatal(err)
			}
			for j, i := range idx {
				check(sess[i].Len()-len(prompts[i]), i, r.Logits(j))
			}
		}
	}
}

// TestStepBatchingKeepsGreedyText is the server's promise on the bundled
// model: each of several conversations decoded together gives exactly the
// text it gives alone. On a q8 file every product is the same integer
// arithmetic whatever the batch, so the tokens are identical even through
// the near ties of the reference.
func TestStepBatchingKeepsGreedyText(t *testing.T) {
	m := openModel(t, compileBundledAs(t, "qwen3-go-demo", format.Q8), kernels.Detect(), 2)
	cases := loadReference(t, "qwen3-go-demo")
	const steps = 24
	greedyAlone := make([][]int32, len(cases))
	for i, c := range cases {
		s, _ := m.NewSession(0)
		l, err := s.Feed(c.PromptIDs)
		if err != nil {
			t.Fatal(err)
		}
		for range steps {
			id, _ := argmax(l)
			greedyAlone[i] = append(greedyAlone[i], int32(id))
			if l, err = s.Feed([]int32{int32(id)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := m.NewRunner(Options{Threads: 2, Kernels: kernels.Detect()})
	defer r.Close()
	seqs := make([]Seq, len(cases))
	for i, c := range cases {
		s, _ := m.NewSession(0)
		seqs[i] = Seq{Session: s, Tokens: c.PromptIDs, Logits: true}
	}
	got := make([][]int32, len(cases))
	for range steps {
		if err := r.Step(seqs); err != nil {
			t.Fatal(err)
		}
		for i := range seqs {
			id, _ := argmax(r.Logits(i))
			got[i] = append(got[i], int32(id))
			seqs[i].Tokens = []int32{int32(id)}
		}
	}
	for i := range cases {
		for j := range got[i] {
			if got[i][j] != greedyAlone[i][j] {
				t.Fatalf("%s: step %d: batched %d, alone %d", cases[i].Name, j, got[i][j], greedyAlone[i][j])
			}
		}
	}
}

func TestStepRefuses(t *testing.T) {
	s := shapes()["qwen3-tied-odd"]
	m := openModel(t, synthModel(t, s, 16), kernels.Detect(), 2)
	r := m.NewRunner(Options{Threads: 2, Kernels: kernels.Detect()})
	defer r.Close()
	a, _ := m.NewSession(0)
	b, _ := m.NewSession(20)
	other := openModel(t, synthModel(t, s, 16), kernels.Detect(), 1)
	c, _ := other.NewSession(0)
	for name, seqs := range map[string][]Seq{
		"empty":          nil,
		"too many":       {{Session: a, Tokens: randomTokens(10, s.Vocab, 1)}, {Session: b, Tokens: randomTokens(7, s.Vocab, 2)}},
		"same session":   {{Session: a, Tokens: []int32{1}}, {Session: a, Tokens: []int32{2}}},
		"past context":   {{Session: b, Tokens: randomTokens(16, s.Vocab, 3)}, {Session: a, Tokens: randomTokens(0, s.Vocab, 3)}},
		"bad token":      {{Session: a, Tokens: []int32{int32(s.Vocab)}}},
		"no tokens":      {{Session: a, Tokens: nil}},
		"other model":    {{Session: c, Tokens: []int32{1}}},
		"nil session":    {{Tokens: []int32{1}}},
		"context, later": {{Session: a, Tokens: []int32{1}}, {Session: b, Tokens: randomTokens(21, s.Vocab, 4)}},
	} {
		if err := r.Step(seqs); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if a.Len() != 0 || b.Len() != 0 {
		t.Fatalf("a refused step ran: sessions hold %d and %d tokens", a.Len(), b.Len())
	}
	b2, _ := m.NewSession(3)
	b2.Feed([]int32{1, 2, 3})
	if err := r.Step([]Seq{{Session: b2, Tokens: []int32{4}}}); !errors.Is(err, ErrContextFull) {
		t.Errorf("a full session: %v, want ErrContextFull", err)
	}
}

func TestStepDecodeDoesNotAllocate(t *testing.T) {
	for name, path := range map[string]string{
		"f16":     synthModel(t, shapes()["qwen3-tied-odd"], 16),
		"q4":      synthtest.CompileAs(t, quantShapes()["qwen3-q-all"], 16, format.Q4),
		"moe-f16": compileBundled(t, "tiny-moe-a"),
		"moe-q4":  compileBundledAs(t, "tiny-moe-a", format.Q4),
		"q35-odd": synthModel(t, qwen35Odd(), 16),
		"q35-moe": compileBundled(t, "tiny-q35-moe"),
	} {
		m := openModel(t, path, kernels.Detect(), 2)
		r := m.NewRunner(Options{Threads: 2, Kernels: kernels.Detect()})
		seqs := make([]Seq, 4)
		for i := range seqs {
			s, _ := m.NewSession(0)
			seqs[i] = Seq{Session: s, Tokens: []int32{int32(i + 1), 2, 3}, Logits: true}
		}
		if err := r.Step(seqs); err != nil {
			t.Fatal(err)
		}
		for i := range seqs {
			seqs[i].Tokens = []int32{int32(i + 5)}
		}
		allocs := testing.AllocsPerRun(30, func() {
			if err := r.Step(seqs); err != nil {
				t.Fatal(err)
			}
		})
		r.Close()
		if allocs != 0 {
			t.Errorf("%s: a batched decode step allocates %.1f times", name, allocs)
		}
	}
}
