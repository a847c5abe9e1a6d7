package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qwenc/qwenc/compiler"
	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/reference"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
	"github.com/qwenc/qwenc/internal/testarch"
	"github.com/qwenc/qwenc/internal/testmodel"
	"github.com/qwenc/qwenc/kernels"
	"github.com/qwenc/qwenc/runtime/infer"
	"github.com/qwenc/qwenc/runtime/sampling"
)

// TestDrafter: the longest n-gram's latest continuation, never across the
// fence between the prediction and the prompt; the prediction followed
// while the text does; the length backing off on misses, then resting.
func TestDrafter(t *testing.T) {
	// After "1 2" the latest continuation is 4, after "7 1 2" it is 3:
	// the longer match wins.
	dr := newDrafter(Draft{Max: 4}, []int32{7, 1, 2, 3, 8, 1, 2, 4, 7, 1, 2})
	if got := dr.propose(nil, 10); !slices.Equal(got, []int32{3, 8, 1, 2}) {
		t.Errorf("after 7 1 2: %v, want 3 8 1 2", got)
	}
	if got := newDrafter(Draft{Max: 4}, []int32{7, 1, 2, 3, 8, 1, 2, 4, 9, 1, 2}).propose(nil, 10); !slices.Equal(got, []int32{4, 9, 1, 2}) {
		t.Errorf("after 9 1 2: %v, want 4 9 1 2", got)
	}
	dr.accepted(77) // never seen: nothing to draft
	if got := dr.propose(nil, 10); got != nil {
		t.Errorf("after 77: %v", got)
	}
	if got := newDrafter(Draft{Max: 4}, []int32{5, 6, 5}).propose(nil, 1); !slices.Equal(got, []int32{6}) {
		t.Errorf("room 1: %v", got)
	}
	if got := newDrafter(Draft{Max: 4, Min: 3}, []int32{5, 6, 5}).propose(nil, 10); got != nil {
		t.Errorf("shorter than Min: %v", got)
	}

	// A prediction is drafted from its start, followed, and once the text
	// parts from it, found again by its n-grams.
	pred := []int32{10, 11, 12, 13, 14, 15}
	dr = newDrafter(Draft{Max: 3, Prediction: pred}, []int32{14, 99})
	if got := dr.propose(nil, 10); !slices.Equal(got, []int32{10, 11, 12}) {
		t.Errorf("prediction: %v", got)
	}
	dr.accepted(10)
	dr.accepted(11)
	if got := dr.propose(nil, 10); !slices.Equal(got, []int32{12, 13, 14}) {
		t.Errorf("prediction followed: %v", got)
	}
	dr.accepted(50)
	dr.accepted(13)
	if got := dr.propose(nil, 10); !slices.Equal(got, []int32{14, 15}) {
		t.Errorf("prediction found again after 13: %v", got)
	}
	// The fence: the prompt's first token does not continue the prediction.
	dr = newDrafter(Draft{Max: 3, Prediction: []int32{1, 2}}, []int32{3})
	dr.cursor = -1
	dr.accepted(2)
	if got := dr.propose(nil, 10); got != nil {
		t.Errorf("after 2, across the fence: %v", got)
	}

	// Back-off.
	dr = newDrafter(Draft{Max: 8}, []int32{1, 2, 1, 2, 1})
	for _, want := range []int{4, 2, 1, 1} {
		dr.checked(0, dr.limit)
		if dr.limit != want {
			t.Errorf("after a miss: limit %d, want %d", dr.limit, want)
		}
	}
	if dr.rest != 1 {
		t.Errorf("after two misses at 1: rest %d, want 1 (then 3, 7, ...)", dr.rest)
	}
	if got := dr.propose(nil, 10); got != nil || dr.rest != 0 {
		t.Errorf("resting: %v, rest %d", got, dr.rest)
	}
	dr.checked(1, 1)
	if dr.limit != 2 || dr.misses != 0 {
		t.Errorf("after a hit: limit %d, misses %d", dr.limit, dr.misses)
	}
}

// synthModel is a small random model of the given vocabulary; models of
// different seeds disagree, as a draft model and its target do.
func synthModel(t *testing.T, seed uint64, vocab int) *infer.Model {
	t.Helper()
	s := synth.Shape{ModelType: "qwen3", Hidden: 64, Intermediate: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: vocab, MaxPositions: 1 << 16, Tied: true, DType: "BF16", Seed: seed, EOS: synth.MiniEOS}
	return openModel(t, synthtest.Compile(t, s, 64))
}

// TestDraftModelKeepsGreedyText: the bundled model at f16 with itself at
// q4 as the draft model, eight conversations batched, a prefill chunk
// shorter than some prompts: the same greedy tokens as alone without
// drafts, with the text's drafts as well or not, and most guesses kept.
func TestDraftModelKeepsGreedyText(t *testing.T) {
	m := demoModel(t, format.F16)
	e := newEngine(t, m, Options{Parallel: 8, Chunk: 16, Drafter: demoModel(t, format.Q4)})
	refs := testmodelPrompts(t)
	const n = 24
	for _, d := range []Draft{{Model: 8}, {Model: 4, Max: 16}} {
		streams := make([]*Stream, len(refs))
		for i, p := range refs {
			var err error
			if streams[i], err = e.Submit(context.Background(), Request{Prompt: p, MaxTokens: n, TopLogprobs: -1, Draft: d}); err != nil {
				t.Fatal(err)
			}
		}
		var drafted, accepted int
		for i, s := range streams {
			evs, done := collect(t, s)
			if got, want := tokensOf(evs), greedyAlone(t, m, refs[i], n); !slices.Equal(got, want) {
				t.Errorf("%+v, request %d: with drafts %v, alone %v", d, i, got, want)
			}
			drafted += done.Usage.Drafted
			accepted += done.Usage.Accepted
		}
		t.Logf("%+v: %d drafted, %d accepted", d, drafted, accepted)
		if 2*accepted < drafted || drafted == 0 {
			t.Errorf("%+v: %d of %d guesses of the model at q4 kept", d, accepted, drafted)
		}
	}
	if st := e.Stats(); st.Active != 0 || st.KVBytes != 0 {
		t.Errorf("after the requests: %+v", st)
	}
}

// TestDraftsOnEveryPath: on every kernel path this CPU runs, the
// bundled model at each weight type, drafting from the text and from
// itself at q4 for all its reference prompts together (two of them on
// the slow portable path), gives the greedy tokens it gives alone on that
// path.
func TestDraftsOnEveryPath(t *testing.T) {
	dir := testmodel.Dir(t, "qwen3-go-demo")
	compiled := map[format.DType]string{}
	for _, typ := range []format.DType{format.F16, format.Q8, format.Q4} {
		compiled[typ] = filepath.Join(t.TempDir(), typ.String()+".qbin")
		if _, err := compiler.Compile(context.Background(), dir, compiler.Options{Output: compiled[typ], MaxPrefill: 64, NoSync: true, Type: typ}); err != nil {
			t.Fatal(err)
		}
	}
	const n = 12
	for _, k := range kernels.SupportedPaths() {
		refs := testmodelPrompts(t)
		if k == kernels.Generic {
			refs = refs[:2]
		}
		open := func(path string) *infer.Model {
			m, err := infer.Open(path, infer.Options{Threads: 2, Kernels: k})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			return m
		}
		drafter := open(compiled[format.Q4])
		for _, typ := range []format.DType{format.F16, format.Q8, format.Q4} {
			start := time.Now()
			m := open(compiled[typ])
			e, err := New(m, Options{Parallel: len(refs), Drafter: drafter, Runner: infer.Options{Threads: 2, Kernels: k}})
			if err != nil {
				t.Fatal(err)
			}
			streams := make([]*Stream, len(refs))
			for i, p := range refs {
				streams[i] = submit(t, e, Request{Prompt: p, MaxTokens: n, TopLogprobs: -1, Draft: Draft{Max: 8, Model: 4}})
			}
			accepted := 0
			for i, s := range streams {
				evs, done := collect(t, s)
				if got, want := tokensOf(evs), greedyAlone(t, m, refs[i], n); !slices.Equal(got, want) {
					t.Errorf("%s, %s, request %d: with drafts %v, alone %v", k, typ, i, got, want)
				}
				accepted += done.Usage.Accepted
			}
			if accepted == 0 {
				t.Errorf("%s, %s: no draft kept", k, typ)
			}
			e.Shutdown(context.Background())
			t.Logf("%s, %s: %d drafts kept, %v", k, typ, accepted, time.Since(start))
		}
	}
}

// TestDraftModelRefused: a draft model of another vocabulary, and a
// request for guesses from an engine without one.
func TestDraftModelRefused(t *testing.T) {
	m := synthModel(t, 5, 300)
	_, err := New(m, Options{Drafter: synthModel(t, 6, 301), Runner: infer.Options{Threads: 1}})
	if err == nil || !strings.Contains(err.Error(), "vocabulary is 301 tokens, the model's 300") {
		t.Errorf("another vocabulary: %v", err)
	}
	e := newEngine(t, m, Options{})
	if _, err := e.Submit(context.Background(), Request{Prompt: []int32{1, 2}, MaxTokens: 2, Draft: Draft{Model: 4}}); err == nil || !strings.Contains(err.Error(), "has none") {
		t.Errorf("guesses without a draft model: %v", err)
	}
}

// forbid is a constraint that refuses one token.
type forbid struct{ id int32 }

func (f forbid) Allow(l []float32) { l[f.id] = float32(math.Inf(-1)) }
func (f forbid) Accept(id int32) error {
	if id == f.id {
		return errors.New("forbidden")
	}
	return nil
}
func (forbid) Done() bool { return false }
func (f forbid) Prefix(ids []int32) int {
	if i := slices.Index(ids, f.id); i >= 0 {
		return i
	}
	return len(ids)
}

// TestDraftCutByConstraint: a draft is cut before the first token the
// constraint refuses, so no row is spent on it: predicted the greedy
// answer a0 a1 a2 with a2 forbidden, the step after a0 checks a1 alone,
// then picks its own token where a2 was; the text is what the constraint
// gives without drafts.
func TestDraftCutByConstraint(t *testing.T) {
	m := demoModel(t, format.F16)
	e := newEngine(t, m, Options{})
	p := testmodelPrompts(t)[0]
	a := greedyAlone(t, m, p, 3)
	want, _ := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 3, TopLogprobs: -1, Constraint: forbid{a[2]}}))
	evs, done := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 3, TopLogprobs: -1, Constraint: forbid{a[2]},
		Draft: Draft{Max: 16, Prediction: a}}))
	if got := tokensOf(evs); !slices.Equal(got, tokensOf(want)) || got[2] == a[2] {
		t.Errorf("drafted under the constraint %v, without drafts %v (unconstrained %v)", got, tokensOf(want), a)
	}
	if u := done.Usage; u.Drafted != 1 || u.Accepted != 1 {
		t.Errorf("%d drafted, %d accepted: want a1 alone drafted and kept", u.Drafted, u.Accepted)
	}
}

func submit(t *testing.T, e *Engine, r Request) *Stream {
	t.Helper()
	s, err := e.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDraftsKeepTheDistribution: sampled with every filter and penalty,
// the first three tokens after a prompt, drafted by a random model of the
// same vocabulary (kept only where the sampler picks them), have the
// distribution they have without drafts. A two-sample chi-square test of
// homogeneity over the triples compares 2,000 samples of each (disjoint
// seeds); bins with fewer than 10 in all are pooled, so every bin's
// expected count is at least 5 and the statistic is close to chi-square
// with bins-1 degrees of freedom. The bound is that law's 0.999 quantile:
// a correct engine fails one run in a thousand, and the seeds are fixed,
// so a run that passes keeps passing. The test's power is shown on a
// shift smaller than a wrong acceptance rule makes: the same samples
// against temperature 6 rather than 5 must fail it (the random model's
// logits are so far apart that it takes a high temperature to spread them).
func TestDraftsKeepTheDistribution(t *testing.T) {
	m := synthModel(t, 5, 300)
	e := newEngine(t, m, Options{Parallel: 8, Drafter: synthModel(t, 6, 300)})
	prompt := []int32{17, 42, 17, 42, 99, 17}
	params := sampling.Params{Temperature: 5, TopK: 12, TopP: 0.95, MinP: 0.02, RepeatPenalty: 1.3, PresencePenalty: 0.4}
	const n = 2000
	var drafted, accepted int
	sample := func(p sampling.Params, seed0 uint64, d Draft) map[[3]int32]int {
		counts := map[[3]int32]int{}
		streams := make([]*Stream, 0, 32)
		flush := func() {
			for _, s := range streams {
				evs, done := collect(t, s)
				if len(evs) != 3 {
					t.Fatalf("%d tokens: %+v", len(evs), done)
				}
				counts[[3]int32(tokensOf(evs))]++
				drafted += done.Usage.Drafted
				accepted += done.Usage.Accepted
			}
			streams = streams[:0]
		}
		for i := range uint64(n) {
			p.Seed = seed0 + i
			streams = append(streams, submit(t, e, Request{Prompt: prompt, Params: p, MaxTokens: 3, TopLogprobs: -1, Draft: d}))
			if len(streams) == cap(streams) {
				flush()
			}
		}
		flush()
		return counts
	}
	plain := sample(params, 1, Draft{})
	withDrafts := sample(params, 1+n, Draft{Model: 4, Max: 4})
	if drafted == 0 || accepted == 0 || accepted == drafted {
		t.Fatalf("%d drafted, %d accepted: the test needs guesses both kept and refused", drafted, accepted)
	}
	stat, df := chiSquare(plain, withDrafts)
	bound := chiSquareQuantile999(df)
	t.Logf("%d drafted, %d accepted; chi-square %.1f over %d degrees of freedom, bound %.1f", drafted, accepted, stat, df, bound)
	if stat > bound {
		t.Errorf("with drafts the triples' distribution differs: chi-square %.1f > %.1f (%d degrees of freedom)", stat, bound, df)
	}
	hot := params
	hot.Temperature = 6
	stat, df = chiSquare(plain, sample(hot, 1+2*n, Draft{}))
	t.Logf("against temperature 6: chi-square %.1f over %d degrees of freedom", stat, df)
	if stat <= chiSquareQuantile999(df) {
		t.Errorf("the test does not tell temperature 6 from 5: chi-square %.1f over %d degrees of freedom", stat, df)
	}
}

// chiSquare is the two-sample statistic of homogeneity for samples of
// equal size, rare bins (under 10 in all) pooled into one.
func chiSquare(a, b map[[3]int32]int) (float64, int) {
	keys := map[[3]int32]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var stat float64
	bins, ra, rb := 0, 0, 0
	add := func(x, y int) {
		d := float64(x - y)
		stat += d * d / float64(x+y)
		bins++
	}
	for k := range keys {
		if x, y := a[k], b[k]; x+y >= 10 {
			add(x, y)
		} else {
			ra, rb = ra+x, rb+y
		}
	}
	if ra+rb > 0 {
		add(ra, rb)
	}
	return stat, bins - 1
}

// chiSquareQuantile999 is the 0.999 quantile of chi-square with df
// degrees of freedom, by Wilson and Hilferty's cube-root approximation
// (within 1% from a few degrees of freedom up).
func chiSquareQuantile999(df int) float64 {
	const z = 3.0902 // the standard normal's 0.999 quantile
	k := float64(df)
	c := 1 - 2/(9*k) + z*math.Sqrt(2/(9*k))
	return k * c * c * c
}

// TestBackOff: guesses that keep missing rest 1, 3, 7, ... steps, up to
// maxRest; a hit ends the back-off.
func TestBackOff(t *testing.T) {
	var b backoff
	for _, want := range []int{1, 3, 7, 15, 31, 32, 32} {
		b.checked(false)
		if b.rest != want {
			t.Errorf("after %d misses: rest %d, want %d", b.misses, b.rest, want)
		}
	}
	b.checked(true)
	if b.misses != 0 {
		t.Errorf("after a hit: %d misses", b.misses)
	}
}

// TestMTPRestsOnRandomWeights: the MTP head of a model of random weights
// guesses little right, so its guesses back off and few steps check one
// that misses (without the back-off every step would); the text is the
// same as without drafts.
func TestMTPRestsOnRandomWeights(t *testing.T) {
	m := demoModelOf(t, "tiny-q35", format.F16)
	e := newEngine(t, m, Options{Parallel: 1, MTP: true})
	const n = 96
	prompt := []int32{9, 8, 7, 6, 5, 4, 3, 2, 1}
	plain, _ := collect(t, submit(t, e, Request{Prompt: prompt, MaxTokens: n, TopLogprobs: -1, Stop: []int32{}}))
	evs, done := collect(t, submit(t, e, Request{Prompt: prompt, MaxTokens: n, TopLogprobs: -1, Stop: []int32{}, Draft: Draft{MTP: 1}}))
	if got, want := tokensOf(evs), tokensOf(plain); !slices.Equal(got, want) {
		t.Fatalf("with MTP drafts %v, without %v", got, want)
	}
	kept, missed := done.Usage.Accepted, done.Usage.Drafted-done.Usage.Accepted
	t.Logf("%d tokens: %d guesses checked, %d kept", len(tokensOf(evs)), done.Usage.Drafted, kept)
	if missed > 2*kept+8 {
		t.Errorf("%d guesses missed for %d kept: the head's drafts do not back off", missed, kept)
	}
}

// recurrentModel compiles a small model of testarch's architecture, whose
// layers each keep a recurrent state (which cannot go back by itself)
// beside their KV cache: a hybrid model's sessions, plugged in with no
// change to the engine.
func recurrentModel(t *testing.T, typ format.DType) *infer.Model {
	t.Helper()
	s := synth.Shape{Hidden: 64, Intermediate: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 300, MaxPositions: 1 << 16, Tied: false, DType: "BF16", Seed: 21, EOS: synth.MiniEOS}
	m, err := infer.Open(testarch.Compile(t, s, 64, typ), infer.Options{Threads: 2, Kernels: kernels.Detect(), Archs: testarch.Registry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// aloneLogprobs generates n greedy tokens after prompt with a session
// alone and returns them with their log-probabilities.
func aloneLogprobs(t *testing.T, m *infer.Model, prompt []int32, n int) ([]int32, []float64) {
	t.Helper()
	s, _ := m.NewSession(0)
	l, err := s.Feed(prompt)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	var lps []float64
	for range n {
		row := l[:m.Tokenizer.VocabSize()] // padding rows are never sampled
		best, mx := 0, math.Inf(-1)
		for i, v := range row {
			if float64(v) > mx {
				best, mx = i, float64(v)
			}
		}
		var sum float64
		for _, v := range row {
			sum += math.Exp(float64(v) - mx)
		}
		ids, lps = append(ids, int32(best)), append(lps, -math.Log(sum))
		if l, err = s.Feed([]int32{int32(best)}); err != nil {
			t.Fatal(err)
		}
	}
	return ids, lps
}

// sameAsAlone checks that a generation's tokens and their
// log-probabilities are those of the model alone (within what batching
// changes): the log-probabilities tell a state that went wrong even where
// a random model's greedy text would not.
func sameAsAlone(t *testing.T, what string, m *infer.Model, prompt []int32, evs []Event) {
	t.Helper()
	ids, lps := aloneLogprobs(t, m, prompt, len(evs))
	if got := tokensOf(evs); !slices.Equal(got, ids) {
		t.Errorf("%s: %v, alone %v", what, got, ids)
		return
	}
	for i, ev := range evs {
		if d := math.Abs(float64(ev.Logprob) - lps[i]); d > 2e-3 {
			t.Errorf("%s: token %d's log-probability %g, alone %g", what, i, ev.Logprob, lps[i])
			return
		}
	}
}

// TestRecurrentLayersKeepTheText: on a model whose sessions cannot go back
// by themselves, the prefix cache starts the next turn of a conversation
// from the checkpoint at the end of the last prompt, and drafts from the
// text, from a prediction and from a draft model (itself at q8, whose
// sessions cannot go back either) are checked through a snapshot and the
// replay of what was kept: every answer is the greedy text the model
// gives alone, token for token and with the same log-probabilities, and
// some drafts were not kept, so the snapshot and replay did run.
func TestRecurrentLayersKeepTheText(t *testing.T) {
	m := recurrentModel(t, format.F16)
	e := newEngine(t, m, Options{Parallel: 4, Chunk: 16, Drafter: recurrentModel(t, format.Q8)})
	// Turn 1; then turn 2 with turn 1's prompt and answer and more, which
	// continues the session where it is (all but the answer's last token,
	// never fed, come from the cache); then a turn that edits the answer,
	// which goes back to the checkpoint at the end of turn 1's prompt.
	turn1 := []int32{10, 11, 12, 13, 14, 15, 16}
	evs, _ := collect(t, submit(t, e, Request{Prompt: turn1, MaxTokens: 6}))
	sameAsAlone(t, "turn 1", m, turn1, evs)
	answer := tokensOf(evs)
	for _, c := range []struct {
		what   string
		prompt []int32
		cached int
	}{
		{"turn 2", append(append(slices.Clone(turn1), answer...), 20, 21, 22), len(turn1) + len(answer) - 1},
		{"an edited answer", append(append(slices.Clone(turn1), answer[:3]...), 23, 24), len(turn1)},
	} {
		evs, done := collect(t, submit(t, e, Request{Prompt: c.prompt, MaxTokens: 6}))
		sameAsAlone(t, c.what, m, c.prompt, evs)
		if done.Usage.CachedTokens != c.cached {
			t.Errorf("%s took %d tokens from the cache, want %d", c.what, done.Usage.CachedTokens, c.cached)
		}
	}

	// A text that repeats itself, for the drafts to guess.
	var rep []int32
	for i := range 40 {
		rep = append(rep, int32(30+i%9), int32(50+i%4))
	}
	const n = 24
	want := greedyAlone(t, m, rep, n)
	for _, d := range []Draft{{Max: 8}, {Max: 6, Prediction: append(slices.Clone(want[:10]), 7, 7, 7)}, {Model: 4}} {
		var streams []*Stream
		for range 3 {
			streams = append(streams, submit(t, e, Request{Prompt: rep, MaxTokens: n, Draft: d}))
		}
		drafted, accepted := 0, 0
		for _, s := range streams {
			evs, done := collect(t, s)
			sameAsAlone(t, fmt.Sprintf("%+v", d), m, rep, evs)
			drafted += done.Usage.Drafted
			accepted += done.Usage.Accepted
		}
		t.Logf("%+v: %d drafted, %d kept", d, drafted, accepted)
		if drafted == 0 || accepted == drafted {
			t.Errorf("%+v: %d drafted, %d kept: the snapshot and replay did not run", d, drafted, accepted)
		}
	}
	if st := e.Stats(); st.Active != 0 || st.KVBytes != 0 {
		t.Errorf("after the requests: %+v", st)
	}
}

// TestStateCacheAgentSession: an agent's session on a model whose layers
// cannot go back by themselves. A long first prompt (its messages' ends
// marked), turns that each add a message to the answer before them, a
// turn that edits an earlier message and one that retries the last
// answer: every turn computes only what is new to it, beyond the copies
// the cache keeps, each answer is the model's alone, and eight
// conversations at once that share the first prompt keep the cache within
// its budget.
func TestStateCacheAgentSession(t *testing.T) {
	m := recurrentModel(t, format.F16)
	e := newEngine(t, m, Options{Parallel: 8, CheckpointEvery: 64})
	rng := rand.New(rand.NewPCG(3, 4))
	msg := func(n int) []int32 {
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = int32(20 + rng.IntN(250))
		}
		return append(ids, 9) // 9 ends a message here
	}
	var prompt []int32
	var marks []int
	add := func(ids []int32) {
		prompt = append(prompt, ids...)
		marks = append(marks, len(prompt))
	}
	add(msg(150))
	add(msg(90))
	computed, fresh := 0, 0
	turn := func(what string, p []int32, ms []int, newTokens int) []int32 {
		t.Helper()
		evs, done := collect(t, submit(t, e, Request{Prompt: p, Marks: ms, MaxTokens: 5}))
		sameAsAlone(t, what, m, p, evs)
		c := done.Usage.PromptTokens - done.Usage.CachedTokens
		computed += c
		fresh += newTokens
		t.Logf("%s: %d prompt tokens, %d computed, %d new", what, len(p), c, newTokens)
		return tokensOf(evs)
	}
	answer := turn("turn 1", prompt, marks, len(prompt))
	for i := 2; i <= 6; i++ {
		before := len(prompt)
		add(append(slices.Clone(answer[:4]), 9)) // the answer, as the client sends it back
		add(msg(30))
		answer = turn(fmt.Sprintf("turn %d", i), slices.Clone(prompt), slices.Clone(marks), len(prompt)-before)
	}
	// An earlier message edited: what follows it is new again.
	edited := slices.Clone(prompt[:marks[3]])
	editedMarks := slices.Clone(marks[:4])
	edited = append(edited, msg(20)...)
	editedMarks = append(editedMarks, len(edited))
	turn("an edited message", edited, editedMarks, len(edited)-marks[3])
	// The last turn again: all of its prompt is kept, with the logits
	// after it, so not one token is computed; and sampled with a seed, it
	// draws what a fresh request with that seed draws.
	before := computed
	turn("a retried answer", slices.Clone(prompt), slices.Clone(marks), 0)
	if computed != before {
		t.Errorf("the retried answer computed %d prompt tokens, want 0", computed-before)
	}
	p := sampling.Params{Temperature: 0.9, Seed: 11}
	sampled, done := collect(t, submit(t, e, Request{Prompt: slices.Clone(prompt), Marks: slices.Clone(marks), MaxTokens: 5, Params: p, PromptLogits: true, TopLogprobs: 2}))
	if done.Usage.CachedTokens != len(prompt) {
		t.Errorf("a sampled retry took %d of %d prompt tokens from the cache", done.Usage.CachedTokens, len(prompt))
	}
	fresh2 := newEngine(t, m, Options{Parallel: 1, CheckpointEvery: 64})
	alone, _ := collect(t, submit(t, fresh2, Request{Prompt: slices.Clone(prompt), MaxTokens: 5, Params: p, PromptLogits: true, TopLogprobs: 2}))
	if got, want := tokensOf(sampled), tokensOf(alone); !slices.Equal(got, want) {
		t.Errorf("a sampled retry from the kept logits drew %v, a fresh request %v", got, want)
	}
	// Equal up to the order of the sums (the prompts were cut into other
	// steps).
	if len(sampled) == 0 || len(alone) == 0 || len(sampled[0].PromptLogits) != m.Config.Vocab {
		t.Fatalf("a retry's first event: %d events, %d prompt logits", len(sampled), len(sampled[0].PromptLogits))
	}
	worst := math.Abs(float64(sampled[0].Logprob - alone[0].Logprob))
	for i, v := range sampled[0].PromptLogits {
		worst = max(worst, math.Abs(float64(v-alone[0].PromptLogits[i])))
	}
	if worst > 2e-3 {
		t.Errorf("a retry's prompt logits or first logprob are %g from a fresh request's", worst)
	}
	if float64(computed) > 1.1*float64(fresh) {
		t.Errorf("%d prompt tokens computed for %d new ones", computed, fresh)
	}

	// Eight at once on the first prompt, within a budget of about three
	// sessions' states.
	budget := 3 * m.SequenceBytes(len(prompt), format.KVF16)
	e2 := newEngine(t, m, Options{Parallel: 8, CacheBytes: budget, CheckpointEvery: 64})
	var streams []*Stream
	var prompts [][]int32
	for i := range 8 {
		p := append(slices.Clone(prompt[:marks[1]]), msg(10+i)...)
		prompts = append(prompts, p)
		streams = append(streams, submit(t, e2, Request{Prompt: p, Marks: []int{marks[0], marks[1], len(p)}, MaxTokens: 6}))
	}
	for i, s := range streams {
		evs, _ := collect(t, s)
		sameAsAlone(t, fmt.Sprintf("conversation %d of 8", i), m, prompts[i], evs)
		if st := e2.Stats(); st.CachedBytes > budget {
			t.Errorf("the cache holds %d bytes, over its budget of %d", st.CachedBytes, budget)
		}
	}
	if st := e2.Stats(); st.CacheHits+st.CacheMisses != 8 || st.CachedBytes > budget {
		t.Errorf("after 8 conversations: %+v (budget %d)", st, budget)
	}
}

// TestMTPDrafts: the trained Qwen3.5 demo drafting with its own MTP head,
// one guess a step and chains of two and three, gives the greedy tokens it gives
// without (on its reference prompts, 40 tokens each), and its guesses are
// kept as often as the float64 reference's would be in the same greedy
// self-speculative run: within 0.05.
func TestMTPDrafts(t *testing.T) {
	m := demoModelOf(t, "qwen35-go-demo", format.F16)
	if !m.HasMTP() {
		t.Fatal("no MTP block")
	}
	ref, err := reference.Load(testmodel.Dir(t, "qwen35-go-demo"))
	if err != nil {
		t.Fatal(err)
	}
	exp, err := reference.ReadExpected(testmodel.Testdata(t, "qwen35-go-demo", "expected"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	e := newEngine(t, m, Options{Parallel: 4, MTP: true, Runner: infer.Options{MTPVocab: 32768}})
	var refDrafted, refKept int
	var oneGuess float64
	for _, k := range []int{1, 2, 3} {
		drafted, kept, made := 0, 0, 0
		for _, c := range exp.Cases {
			plain, _ := collect(t, submit(t, e, Request{Prompt: c.PromptIDs, MaxTokens: n, TopLogprobs: -1}))
			evs, done := collect(t, submit(t, e, Request{Prompt: c.PromptIDs, MaxTokens: n, TopLogprobs: -1, Draft: Draft{MTP: k, PMin: 0.75}}))
			if got, want := tokensOf(evs), tokensOf(plain); !slices.Equal(got, want) {
				t.Errorf("%s, chains of %d: with MTP drafts %v, without %v", c.Name, k, got, want)
			}
			drafted += done.Usage.Drafted
			kept += done.Usage.Accepted
			made += done.Usage.CompletionTokens
			// Sampled, each token is drawn as it would be without drafts
			// (a draft is kept when the draw equals it): the same seed
			// gives the same text.
			p := sampling.Params{Temperature: 0.8, TopP: 0.95, Seed: 5}
			sampled, _ := collect(t, submit(t, e, Request{Prompt: c.PromptIDs, MaxTokens: n, TopLogprobs: -1, Params: p}))
			drafts, _ := collect(t, submit(t, e, Request{Prompt: c.PromptIDs, MaxTokens: n, TopLogprobs: -1, Params: p, Draft: Draft{MTP: k}}))
			if got, want := tokensOf(drafts), tokensOf(sampled); !slices.Equal(got, want) {
				t.Errorf("%s, chains of %d, sampled: with MTP drafts %v, without %v", c.Name, k, got, want)
			}
			if k == 1 {
				d, a := referenceMTPRun(t, ref, c.PromptIDs, tokensOf(plain))
				refDrafted, refKept = refDrafted+d, refKept+a
			}
		}
		if drafted == 0 {
			t.Fatalf("chains of %d: nothing drafted", k)
		}
		rate := float64(kept) / float64(drafted)
		// A step gives its token and the guesses it keeps: the tokens a
		// step, which bench-draft's step costs turn into a speedup.
		steps := made - kept
		t.Logf("chains of %d: %d drafted, %d kept (%.3f); %d tokens in %d steps (%.3f a step, %.3f guesses a step)", k, drafted, kept, rate, made, steps, float64(made)/float64(steps), float64(drafted)/float64(steps))
		// The chains go on whatever the head's confidence (Draft.MTP): a
		// request's PMin, here the draft model's default, cuts none.
		perStep := float64(drafted) / float64(steps)
		if k == 1 {
			oneGuess = perStep
		} else if perStep < 1.5*oneGuess {
			t.Errorf("chains of %d: %.3f guesses a step, against %.3f with one guess: cut short", k, perStep, oneGuess)
		}
		if k == 1 {
			want := float64(refKept) / float64(refDrafted)
			t.Logf("the float64 reference in the same run: %d drafted, %d kept (%.3f)", refDrafted, refKept, want)
			if math.Abs(rate-want) > 0.05 {
				t.Errorf("MTP drafts kept at %.3f, the reference's at %.3f", rate, want)
			}
		}
	}
}

// referenceMTPRun replays greedy self-speculative decoding with one MTP
// guess a step on the float64 reference: the main model's tokens are
// text's (the greedy continuation of prompt), and at each step the MTP
// head guesses the token after the one just chosen; a guess equal to the
// main model's next token is kept and the step yields two tokens. It
// returns the guesses made and kept.
func referenceMTPRun(t *testing.T, ref *reference.Model, prompt, text []int32) (drafted, kept int) {
	t.Helper()
	all := append(slices.Clone(prompt), text...)
	pass, err := ref.Forward(all)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := ref.MTP(all[:len(all)-1], pass.Hidden[:len(all)-1], all[len(all)-1])
	if err != nil {
		t.Fatal(err)
	}
	// Position p is the last fed; text[i] follows position len(prompt)+i-1.
	p := len(prompt) - 1
	for p+2 < len(all) {
		guess, _ := reference.Argmax(ref.Head(rows[p]))
		drafted++
		if int32(guess) == all[p+2] {
			kept++
			p += 2
		} else {
			p++
		}
	}
	return drafted, kept
}

// TestDraftCounts: a prediction that is the greedy answer is all kept,
// whatever ends the answer. No draft is made for the last token
// max_tokens allows (it could never be kept), a draft's token that ends
// the answer counts as accepted, and drafted tokens past it as nothing.
func TestDraftCounts(t *testing.T) {
	m := demoModel(t, format.F16)
	e := newEngine(t, m, Options{})
	p := testmodelPrompts(t)[0]
	want := greedyAlone(t, m, p, 8)
	for _, c := range []struct {
		max  int
		stop []int32
		n    int // the tokens emitted
	}{{2, nil, 2}, {3, nil, 3}, {5, nil, 5}, {8, []int32{want[3]}, 3}} {
		evs, done := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: c.max, Stop: c.stop, TopLogprobs: -1, Draft: Draft{Max: 16, Prediction: want}}))
		got := tokensOf(evs)
		if !slices.Equal(got, want[:c.n]) {
			t.Fatalf("max_tokens %d, stop %v: %v, want %v", c.max, c.stop, got, want[:c.n])
		}
		// Every token but the first (from the prompt's step) and the
		// last (nothing drafted for it) was drafted; the stop token too,
		// which is picked but not emitted.
		checked := c.n - 2
		if c.stop != nil {
			checked = c.n
		}
		if u := done.Usage; u.Drafted != checked || u.Accepted != checked {
			t.Errorf("max_tokens %d, stop %v: a prediction of the whole answer: drafted %d, accepted %d, want %d of each",
				c.max, c.stop, u.Drafted, u.Accepted, checked)
		}
	}
}

// TestDraftModelKeepsOneCopy: a hybrid draft model's session, which
// cannot rewind by itself, keeps a copy of its states where it caught up
// with the conversation at each step it guesses; only the latest is ever
// gone back to, so it keeps no more (before, 64 copies piled up a
// conversation).
func TestDraftModelKeepsOneCopy(t *testing.T) {
	m := demoModelOf(t, "tiny-q35", format.F16)
	dm := demoModelOf(t, "tiny-q35", format.Q8)
	e := newEngine(t, m, Options{Drafter: dm}) // its loop idles: the test runs the steps
	var prompt []int32
	for i := range 30 {
		prompt = append(prompt, int32(30+i%7), int32(50+i%3))
	}
	l, j := stepByStep(t, e, m, Request{Prompt: prompt, MaxTokens: 1000, TopLogprobs: -1, Stop: []int32{}, Draft: Draft{Model: 4}})
	guessed := 0
	for step := 0; step < 200 && !ended(j) && j.usage.CompletionTokens < 100; step++ {
		if err := l.run(); err != nil {
			t.Fatal(err)
		}
		if j.dsess != nil && j.usage.Drafted > 0 {
			guessed++
		}
	}
	if ended(j) || guessed < 10 {
		t.Fatalf("ended %v (%v), %d steps with drafts", ended(j), j.err, guessed)
	}
	if copies := len(j.dsess.Points()) - 1; copies > 1 {
		t.Errorf("after %d tokens the draft model's session keeps %d copies of its states (%d bytes)", j.usage.CompletionTokens, copies, j.dsess.Bytes())
	}
}

// TestMTPShadowEndsRest: while the MTP head rests after misses, its
// guess is kept aside, and a guess that would have been kept ends the
// rest, also when the head is the only drafter (its resting steps feed
// one token and are sampled, not checked).
func TestMTPShadowEndsRest(t *testing.T) {
	m := demoModelOf(t, "tiny-q35", format.F16)
	e := newEngine(t, m, Options{MTP: true}) // its loop idles: the test runs the steps
	prompt := []int32{9, 8, 7, 6, 5, 4, 3, 2, 1}
	want := greedyAlone(t, m, prompt, 3)
	l, j := stepByStep(t, e, m, Request{Prompt: prompt, MaxTokens: 20, TopLogprobs: -1, Stop: []int32{}, Draft: Draft{MTP: 1}})
	if err := l.run(); err != nil { // the prompt, then the first token and the head's guess
		t.Fatal(err)
	}
	if j.next != want[0] {
		t.Fatalf("first token %d, want %d", j.next, want[0])
	}
	for i, right := range []bool{false, true} {
		// The head rests, with a wrong guess (the rest goes on) or the
		// right one (it ends).
		next := want[1+i]
		j.mtpBack = backoff{rest: 3, misses: 2}
		j.mtpGuess = append(j.mtpGuess[:0], next)
		if !right {
			j.mtpGuess[0]++
		}
		if err := l.run(); err != nil {
			t.Fatal(err)
		}
		if j.next != next {
			t.Fatalf("token %d: %d, want %d", 1+i, j.next, next)
		}
		if rests := j.mtpBack.rest > 0; rests == right {
			t.Errorf("token %d, guessed right %v: the rest goes on: %v (%+v)", 1+i, right, rests, j.mtpBack)
		}
	}
}

// TestMTPDraftMin: Draft.Min, the fewest tokens worth drafting, holds for
// the MTP head's chains as for the other drafters.
func TestMTPDraftMin(t *testing.T) {
	m := demoModelOf(t, "tiny-q35", format.F16)
	e := newEngine(t, m, Options{MTP: true})
	prompt := []int32{9, 8, 7, 6, 5, 4, 3, 2, 1}
	for _, c := range []struct{ chain, min, most int }{{1, 2, 0}, {2, 2, 1 << 20}, {1, 1, 1 << 20}} {
		_, done := collect(t, submit(t, e, Request{Prompt: prompt, MaxTokens: 30, TopLogprobs: -1, Stop: []int32{}, Draft: Draft{MTP: c.chain, Min: c.min}}))
		if d := done.Usage.Drafted; d > c.most || (c.most > 0 && d == 0) {
			t.Errorf("chains of %d, Min %d: %d tokens drafted", c.chain, c.min, d)
		}
	}
}

// stepByStep starts req on e, whose loop idles (no request was
// submitted), in a loop of its own whose steps the test runs.
func stepByStep(t *testing.T, e *Engine, m *infer.Model, req Request) (*loop, *job) {
	t.Helper()
	l := &loop{e: e, reuse: newReuse(0), logits: newLogprobs(m)}
	j := &job{id: 1, ctx: context.Background(), req: req, stream: newStream(), submitted: time.Now(), mtpShadow: -1}
	if r := e.start(j, l.reuse, l.logits); r != "" {
		t.Fatal(r)
	}
	l.active = []*job{j}
	return l, j
}

// TestRetriesAboveMaxPrefill: a retried prompt starts from its kept
// logits and decodes without a prefill step, so more of them than a step
// has rows (Parallel above the model's max prefill) would make a step too
// large: the runner refused it, and every request in it failed. The ones
// past the step's rows wait for the next.
func TestRetriesAboveMaxPrefill(t *testing.T) {
	m := recurrentModel(t, format.F16)
	n := m.MaxPrefill() + 16
	e := newEngine(t, m, Options{Parallel: n})
	prompt := []int32{10, 11, 12, 13, 14, 15, 16}
	if _, done := collect(t, submit(t, e, Request{Prompt: prompt, MaxTokens: 2})); done.Reason != StopLength {
		t.Fatalf("first: %s %v", done.Reason, done.Err)
	}
	reqs := make([]Request, n)
	for i := range reqs {
		reqs[i] = Request{Prompt: prompt, MaxTokens: 4, TopLogprobs: -1}
	}
	ss, err := e.SubmitAll(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	var want []int32
	for i, s := range ss {
		evs, done := collect(t, s)
		if i == 0 {
			want = tokensOf(evs)
		}
		if done.Reason != StopLength || !slices.Equal(tokensOf(evs), want) || len(want) != 4 || done.Usage.CachedTokens != len(prompt) {
			t.Fatalf("request %d of %d (max prefill %d): %v, %s, cached %d: %v", i, n, m.MaxPrefill(), tokensOf(evs), done.Reason, done.Usage.CachedTokens, done.Err)
		}
	}
}

// TestKeptSessionsHoldNoStepBuffers: a conversation that drafted, on a
// model with recurrent layers, leaves in the state cache what the same
// conversation without drafts leaves: the logs of its drafted steps are
// not kept beside the states (uncounted, they held the cache past its
// bound; counted, they would crowd states out of it).
func TestKeptSessionsHoldNoStepBuffers(t *testing.T) {
	m := recurrentModel(t, format.F16)
	var rep []int32
	for i := range 40 {
		rep = append(rep, int32(30+i%9), int32(50+i%4))
	}
	kept := func(d Draft) (int64, Usage) {
		e := newEngine(t, m, Options{Parallel: 1})
		evs, done := collect(t, submit(t, e, Request{Prompt: rep, MaxTokens: 24, Draft: d}))
		sameAsAlone(t, fmt.Sprintf("%+v", d), m, rep, evs)
		waitFor(t, func() bool { return e.Stats().Active == 0 })
		return e.Stats().CachedBytes, done.Usage
	}
	plain, _ := kept(Draft{})
	drafted, u := kept(Draft{Max: 8})
	if u.Drafted == 0 || u.Accepted == u.Drafted {
		t.Fatalf("%d drafted, %d kept: no step went back within its draft", u.Drafted, u.Accepted)
	}
	if drafted != plain {
		t.Errorf("the cache holds %d bytes of a conversation that drafted, %d of the same without drafts", drafted, plain)
	}
}

// explodePrefix is a constraint whose Prefix panics: a bug met only when
// a draft is checked against it.
type explodePrefix struct{}

func (explodePrefix) Allow([]float32)    {}
func (explodePrefix) Accept(int32) error { return nil }
func (explodePrefix) Done() bool         { return false }
func (explodePrefix) Prefix([]int32) int { panic("boom") }

// overPrefix is a constraint whose Prefix takes more than it was given.
type overPrefix struct{ explodePrefix }

func (overPrefix) Prefix(ids []int32) int { return len(ids) + 1 }

// TestDraftConstraintPanics: a constraint that panics as a draft is cut
// to it, or says it takes more of the draft than there is, ends its
// request with StopError, and the request beside it goes on to its end
// (the panic came before the step had any request: none ended, and every
// step after failed the same way, for ever).
func TestDraftConstraintPanics(t *testing.T) {
	m := smallModel(t, 32)
	e := newEngine(t, m, Options{})
	prompt := []int32{10, 11, 12, 13}
	want := greedyAlone(t, m, prompt, 8)
	for _, c := range []struct {
		bad  Constraint
		want string
	}{{explodePrefix{}, "internal error: boom"}, {overPrefix{}, "internal error: the constraint takes 5 of 4 drafted tokens"}} {
		good := submit(t, e, Request{Prompt: []int32{20, 21}, MaxTokens: 8, TopLogprobs: -1})
		bad := submit(t, e, Request{Prompt: prompt, MaxTokens: 8, TopLogprobs: -1, Constraint: c.bad,
			Draft: Draft{Max: 4, Prediction: want}})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, s := range []*Stream{bad, good} {
			for {
				ev, err := s.Next(ctx)
				if err != nil {
					// A shutdown that does not wait for them, for the test to end.
					sctx, scancel := context.WithTimeout(context.Background(), time.Second)
					defer scancel()
					e.Shutdown(sctx)
					t.Fatalf("%T: the requests do not end: %v", c.bad, err)
				}
				if ev.Done {
					if s == bad && (ev.Reason != StopError || ev.Err == nil || !strings.Contains(ev.Err.Error(), c.want)) {
						t.Errorf("%T: the request whose constraint failed ended %q with %v", c.bad, ev.Reason, ev.Err)
					}
					if s == good && ev.Reason != StopLength {
						t.Errorf("%T: the request beside it ended %q with %v", c.bad, ev.Reason, ev.Err)
					}
					break
				}
			}
		}
	}
	waitFor(t, func() bool { st := e.Stats(); return st.Active == 0 && st.KVBytes == 0 })
}

// TestRowsShortTakeTurns: with more conversations decoding than a step
// has rows, those left out of a step get the next, not a place behind
// every conversation before them in the list (they waited for those to
// end, for a conversation without a bound the whole context).
func TestRowsShortTakeTurns(t *testing.T) {
	m := recurrentModel(t, format.F16)
	rows := m.MaxPrefill()
	e := newEngine(t, m, Options{Parallel: rows + 8})
	prompt := []int32{10, 11, 12, 13, 14, 15, 16}
	if _, done := collect(t, submit(t, e, Request{Prompt: prompt, MaxTokens: 2})); done.Reason != StopLength {
		t.Fatalf("first: %s %v", done.Reason, done.Err)
	}
	// All start from the logits kept, decoding at once: the first ones
	// for long, the last eight for two tokens.
	reqs := make([]Request, rows+8)
	for i := range reqs {
		reqs[i] = Request{Prompt: prompt, MaxTokens: 200, TopLogprobs: -1, Stop: []int32{}}
		if i >= rows {
			reqs[i].MaxTokens = 2
		}
	}
	ss, err := e.SubmitAll(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss[rows:] {
		evs, done := collect(t, s)
		if done.Reason != StopLength || len(evs) != 2 {
			t.Fatalf("a short one: %d tokens, %s %v", len(evs), done.Reason, done.Err)
		}
	}
	// Before the long ones are far into their 200 tokens.
	if st := e.Stats(); st.DecodeSteps > 50 {
		t.Errorf("the short conversations ended after %d decode steps", st.DecodeSteps)
	}
}
