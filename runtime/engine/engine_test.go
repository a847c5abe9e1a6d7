package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qwenc/qwenc/compiler"
	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
	"github.com/qwenc/qwenc/internal/testmodel"
	"github.com/qwenc/qwenc/kernels"
	"github.com/qwenc/qwenc/runtime/infer"
	"github.com/qwenc/qwenc/runtime/sampling"
)

func openModel(t *testing.T, path string) *infer.Model {
	t.Helper()
	m, err := infer.Open(path, infer.Options{Threads: 2, Kernels: kernels.Detect()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// demoModel compiles the bundled trained model.
func demoModel(t *testing.T, typ format.DType) *infer.Model {
	t.Helper()
	return demoModelOf(t, "qwen3-go-demo", typ)
}

// demoModelOf compiles a bundled model.
func demoModelOf(t *testing.T, name string, typ format.DType) *infer.Model {
	t.Helper()
	dir := testmodel.Dir(t, name)
	out := filepath.Join(t.TempDir(), "demo.qbin")
	if _, err := compiler.Compile(context.Background(), dir, compiler.Options{Output: out, MaxPrefill: 64, NoSync: true, Type: typ}); err != nil {
		t.Fatal(err)
	}
	return openModel(t, out)
}

func smallModel(t *testing.T, maxPrefill int) *infer.Model {
	t.Helper()
	s := synth.Shape{ModelType: "qwen3", Hidden: 64, Intermediate: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 300, MaxPositions: 1 << 16, Tied: true, DType: "BF16", Seed: 5, EOS: synth.MiniEOS}
	return openModel(t, synthtest.Compile(t, s, maxPrefill))
}

func newEngine(t *testing.T, m *infer.Model, o Options) *Engine {
	t.Helper()
	o.Runner = infer.Options{Threads: 2, Kernels: kernels.Detect()}
	e, err := New(m, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Shutdown(context.Background()) })
	return e
}

// collect reads a stream to its end.
func collect(t *testing.T, s *Stream) ([]Event, Event) {
	t.Helper()
	var evs []Event
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		ev, err := s.Next(ctx)
		if err == io.EOF {
			t.Fatal("stream ended without a Done event")
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Done {
			if _, err := s.Next(ctx); err != io.EOF {
				t.Fatalf("after Done: %v, want io.EOF", err)
			}
			return evs, ev
		}
		evs = append(evs, ev)
	}
}

func tokensOf(evs []Event) []int32 {
	var ids []int32
	for _, e := range evs {
		ids = append(ids, e.Token)
	}
	return ids
}

// greedyAlone generates n greedy tokens after prompt with a session alone.
func greedyAlone(t *testing.T, m *infer.Model, prompt []int32, n int) []int32 {
	t.Helper()
	s, _ := m.NewSession(0)
	l, err := s.Feed(prompt)
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	for range n {
		best := 0
		for i, v := range l[:m.Tokenizer.VocabSize()] { // padding rows are never sampled
			if v > l[best] {
				best = i
			}
		}
		out = append(out, int32(best))
		if l, err = s.Feed([]int32{int32(best)}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestBatchingKeepsGreedyText: eight concurrent requests on the bundled
// model, some prompts longer than a prefill chunk, each return exactly the
// greedy text they return alone; Stats counts every token after each
// one's first (which its prompt's last step gives) as decoded, in steps
// shared between them.
func TestBatchingKeepsGreedyText(t *testing.T) {
	for _, typ := range []format.DType{format.F16, format.Q8} {
		m := demoModel(t, typ)
		e := newEngine(t, m, Options{Parallel: 8, Chunk: 16})
		refs := testmodelPrompts(t)
		const n = 20
		want := make([][]int32, len(refs))
		for i, p := range refs {
			want[i] = greedyAlone(t, m, p, n)
		}
		streams := make([]*Stream, len(refs))
		for i, p := range refs {
			var err error
			if streams[i], err = e.Submit(context.Background(), Request{Prompt: p, MaxTokens: n, TopLogprobs: -1}); err != nil {
				t.Fatal(err)
			}
		}
		for i, s := range streams {
			evs, done := collect(t, s)
			got := tokensOf(evs)
			if done.Reason != StopLength || done.Usage.CompletionTokens != n || done.Usage.PromptTokens != len(refs[i]) {
				t.Errorf("%s request %d: done %+v", typ, i, done)
			}
			for j := range want[i] {
				if j >= len(got) || got[j] != want[i][j] {
					t.Fatalf("%s request %d: batched %v, alone %v", typ, i, got, want[i])
				}
			}
		}
		st := e.Stats()
		if st.Decoded != int64(len(refs)*(n-1)) || st.DecodeSteps < n-1 || 2*st.DecodeSteps > st.Decoded {
			t.Errorf("%s: %d conversations decoded in %d steps; want %d in fewer than half as many steps", typ, st.Decoded, st.DecodeSteps, len(refs)*(n-1))
		}
		t.Logf("%s: mean decode batch %.2f", typ, float64(st.Decoded)/float64(st.DecodeSteps))
	}
}

// testmodelPrompts are eight prompts of the bundled model: its reference
// prompts and prefixes of them.
func testmodelPrompts(t *testing.T) [][]int32 {
	m := [][]int32{
		{1722, 1887, 271, 474, 2399},
		{2830, 320, 82, 353, 5475, 8, 220},
		{322, 2955, 220, 17, 15, 15, 24, 576, 5994, 24124},
	}
	long := make([]int32, 0, 90)
	for len(long) < 90 {
		long = append(long, m[len(long)%3]...)
	}
	return append(m, long[:90], long[:40], m[0][:2], m[1][:4], []int32{1722})
}

func TestStopsAndLimits(t *testing.T) {
	m := smallModel(t, 32)
	e := newEngine(t, m, Options{Parallel: 2, Ctx: 40})
	// A prompt whose greedy continuation changes token (this random model
	// tends to repeat one).
	var prompt, ref []int32
	for p := int32(1); ; p++ {
		prompt = []int32{p, p + 1, p + 2}
		if ref = greedyAlone(t, m, prompt, 8); slices.ContainsFunc(ref, func(id int32) bool { return id != ref[0] }) {
			break
		}
	}

	// A stop token ends the generation and is not emitted.
	first := 1 // the first step whose token is new
	for slices.Contains(ref[:first], ref[first]) {
		first++
	}
	s, _ := e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 8, Stop: []int32{ref[first]}, TopLogprobs: -1})
	evs, done := collect(t, s)
	if done.Reason != StopEOS || len(evs) != first {
		t.Errorf("stop token %d: %d tokens, reason %s; want %d, stop", ref[first], len(evs), done.Reason, first)
	}
	// The context ends it with "ctx" after the last token that fits.
	s, _ = e.Submit(context.Background(), Request{Prompt: make([]int32, 30), MaxTokens: -1, TopLogprobs: -1})
	evs, done = collect(t, s)
	if done.Reason != StopContext || len(evs) != 11 {
		t.Errorf("context 40, prompt 30: %d tokens, reason %s; want 11, ctx", len(evs), done.Reason)
	}
	// A prompt the context cannot hold is refused at once.
	if _, err := e.Submit(context.Background(), Request{Prompt: make([]int32, 41)}); err == nil || err.Error() != "the prompt has 41 tokens, more than the context of 40" {
		t.Errorf("41 tokens: %v", err)
	}
	for _, bad := range [][]int32{nil, {300}, {-1}} {
		if _, err := e.Submit(context.Background(), Request{Prompt: bad}); err == nil {
			t.Errorf("prompt %v accepted", bad)
		}
	}
}

// TestPaddingNeverSampled: the head scores more rows than the tokenizer
// has ids (smallModel's 300 for 266, as Qwen3.5's 248,320 for 248,077),
// and a token without text is never sampled, nor listed among the top
// log-probabilities. At temperature 5 the random model's distribution is
// nearly flat, so a tenth of the draws would land on a padding row.
func TestPaddingNeverSampled(t *testing.T) {
	m := smallModel(t, 32)
	n := m.Tokenizer.VocabSize()
	if n >= m.Config.Vocab {
		t.Fatalf("the tokenizer has %d ids for %d rows: no padding to test", n, m.Config.Vocab)
	}
	e := newEngine(t, m, Options{})
	s, _ := e.Submit(context.Background(), Request{Prompt: []int32{9, 8, 7}, MaxTokens: 300, TopLogprobs: 20,
		Params: sampling.Params{Temperature: 5, Seed: 3}})
	evs, _ := collect(t, s)
	if len(evs) < 300 {
		t.Fatalf("%d tokens, want 300", len(evs))
	}
	for _, ev := range evs {
		if int(ev.Token) >= n {
			t.Fatalf("sampled %d, past the tokenizer's %d ids", ev.Token, n)
		}
		for _, top := range ev.Top {
			if int(top.Token) >= n {
				t.Fatalf("top log-probabilities list %d, past the tokenizer's %d ids", top.Token, n)
			}
		}
	}
}

func TestLogprobs(t *testing.T) {
	m := smallModel(t, 32)
	e := newEngine(t, m, Options{})
	prompt := []int32{9, 8, 7, 6}
	s, _ := e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 3, TopLogprobs: 5})
	evs, _ := collect(t, s)
	sess, _ := m.NewSession(0)
	l, _ := sess.Feed(prompt)
	for step, ev := range evs {
		row := l[:m.Tokenizer.VocabSize()] // the head's padding rows are never sampled
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, float64(v))
		}
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v) - mx)
		}
		lse := mx + math.Log(z)
		if d := math.Abs(float64(ev.Logprob) - (float64(l[ev.Token]) - lse)); d > 1e-4 {
			t.Errorf("step %d: logprob %v, want %v", step, ev.Logprob, float64(l[ev.Token])-lse)
		}
		if len(ev.Top) != 5 || ev.Top[0].Token != ev.Token {
			t.Errorf("step %d: top %v, the greedy token %d first", step, ev.Top, ev.Token)
		}
		for i := 1; i < len(ev.Top); i++ {
			if ev.Top[i].Logprob > ev.Top[i-1].Logprob {
				t.Errorf("step %d: top not sorted: %v", step, ev.Top)
			}
		}
		l, _ = sess.Feed([]int32{ev.Token})
	}
}

// TestTopLogprobsTies: tokens of equal logits are listed lower id first,
// as greedy sampling picks the lowest: the token a greedy request emits
// heads its own top list, and a cut through a tie keeps the lower ids.
func TestTopLogprobsTies(t *testing.T) {
	lp := &logprobs{k: kernels.Detect(), raw: make([]float32, 8), scratch: make([]float32, 8)}
	for _, c := range []struct {
		row  []float32
		n    int
		want []int32
	}{
		{[]float32{1, 1, 1}, 3, []int32{0, 1, 2}},
		{[]float32{5, 5, 6}, 2, []int32{2, 0}},
		{[]float32{0, 3, 2, 3, 3}, 2, []int32{1, 3}},
	} {
		raw := lp.before(c.row)
		_, top := lp.after(raw, 0, c.n)
		var got []int32
		for _, tl := range top {
			got = append(got, tl.Token)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("row %v, top %d: %v, want %v", c.row, c.n, got, c.want)
		}
	}
}

// TestTopLogprobsPastVocab: asked for more top tokens than the
// vocabulary has (the engine's callers bound it, a Go program need not),
// the list is the whole vocabulary; room for as many as asked was
// allocated first, and 1<<40 of them ended the process.
func TestTopLogprobsPastVocab(t *testing.T) {
	lp := &logprobs{k: kernels.Detect(), raw: make([]float32, 4), scratch: make([]float32, 4)}
	raw := lp.before([]float32{1, 4, 2, 3})
	_, top := lp.after(raw, 1, 1<<40)
	var got []int32
	for _, tl := range top {
		got = append(got, tl.Token)
	}
	if want := []int32{1, 3, 2, 0}; !slices.Equal(got, want) {
		t.Errorf("top %v, want %v", got, want)
	}
}

// TestBias: a request's Bias moves its tokens' logits before the
// sampler: -100 bans the greedy token, 100 forces another, while the
// log-probability reported stays the model's. A biased id past the
// tokenizer's vocabulary is refused.
func TestBias(t *testing.T) {
	m := smallModel(t, 32)
	e := newEngine(t, m, Options{})
	prompt := []int32{9, 8, 7, 6}
	first := func(bias map[int32]float32) Event {
		t.Helper()
		s, err := e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 1, TopLogprobs: 0, Bias: bias})
		if err != nil {
			t.Fatal(err)
		}
		evs, _ := collect(t, s)
		return evs[0]
	}
	greedy := first(nil)
	if got := first(map[int32]float32{greedy.Token: -100}); got.Token == greedy.Token {
		t.Errorf("the greedy token %d banned: still chosen", greedy.Token)
	}
	forced := (greedy.Token + 1) % int32(m.Tokenizer.VocabSize())
	sess, _ := m.NewSession(0)
	l, _ := sess.Feed(prompt)
	mx, z := math.Inf(-1), 0.0
	for _, v := range l[:m.Tokenizer.VocabSize()] {
		mx = math.Max(mx, float64(v))
	}
	for _, v := range l[:m.Tokenizer.VocabSize()] {
		z += math.Exp(float64(v) - mx)
	}
	want := float64(l[forced]) - mx - math.Log(z)
	if got := first(map[int32]float32{forced: 100}); got.Token != forced || math.Abs(float64(got.Logprob)-want) > 1e-4 {
		t.Errorf("token %d forced: got %d, logprob %v; want it, logprob %v", forced, got.Token, got.Logprob, want)
	}
	if _, err := e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 1, Bias: map[int32]float32{int32(m.Tokenizer.VocabSize()): 1}}); err == nil {
		t.Error("a bias past the vocabulary was accepted")
	}
}

// TestCancelFreesTheSlot: a cancelled request ends with "cancelled" within
// a step, and its slot goes to the request waiting in the queue.
func TestCancelFreesTheSlot(t *testing.T) {
	m := smallModel(t, 32)
	e := newEngine(t, m, Options{Parallel: 1, Queue: 1})
	ctx, cancel := context.WithCancel(context.Background())
	long, _ := e.Submit(ctx, Request{Prompt: []int32{1, 2}, MaxTokens: -1, TopLogprobs: -1})
	waitFor(t, func() bool { return e.Stats().Active == 1 })
	waiting, err := e.Submit(context.Background(), Request{Prompt: []int32{3}, MaxTokens: 4, TopLogprobs: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Submit(context.Background(), Request{Prompt: []int32{4}, MaxTokens: 1}); !errors.Is(err, ErrBusy) {
		t.Errorf("a third request: %v, want ErrBusy", err)
	}
	// Let the first generate a little, then cancel it.
	for range 3 {
		if _, err := long.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	_, done := collect(t, long)
	if done.Reason != StopInterrupt {
		t.Errorf("cancelled request: reason %s", done.Reason)
	}
	if evs, done := collect(t, waiting); done.Reason != StopLength || len(evs) != 4 {
		t.Errorf("queued request: %d tokens, %s", len(evs), done.Reason)
	}
	waitFor(t, func() bool { st := e.Stats(); return st.Active == 0 && st.Queued == 0 })
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPrefixReuse: turn 2 of a conversation (turn 1's prompt, its answer
// and more) prefills only what is new, and generates what a fresh session
// would.
func TestPrefixReuse(t *testing.T) {
	m := smallModel(t, 32)
	e := newEngine(t, m, Options{})
	turn1 := []int32{10, 11, 12, 13, 14}
	s, _ := e.Submit(context.Background(), Request{Prompt: turn1, MaxTokens: 4, TopLogprobs: -1})
	evs, done := collect(t, s)
	if done.Usage.CachedTokens != 0 {
		t.Errorf("turn 1: %d cached tokens", done.Usage.CachedTokens)
	}
	turn2 := append(append(append([]int32{}, turn1...), tokensOf(evs)...), 20, 21, 22)
	want := greedyAlone(t, m, turn2, 5)
	s, _ = e.Submit(context.Background(), Request{Prompt: turn2, MaxTokens: 5, TopLogprobs: -1})
	evs, done = collect(t, s)
	// The session holds turn 1's prompt and the answer's tokens but the
	// last, which was never fed.
	if done.Usage.CachedTokens != len(turn1)+3 {
		t.Errorf("turn 2: %d cached tokens, want %d", done.Usage.CachedTokens, len(turn1)+3)
	}
	got := tokensOf(evs)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("turn 2 from the cache: %v, fresh %v", got, want)
		}
	}
	// The same prompt again reuses all but its last token.
	s, _ = e.Submit(context.Background(), Request{Prompt: turn2, MaxTokens: 1, TopLogprobs: -1})
	if _, done = collect(t, s); done.Usage.CachedTokens != len(turn2)-1 {
		t.Errorf("the same prompt: %d cached tokens, want %d", done.Usage.CachedTokens, len(turn2)-1)
	}
}

// TestShutdown: queued requests end at once, running ones at the end of
// the grace period, later ones are refused.
func TestShutdown(t *testing.T) {
	m := smallModel(t, 32)
	e, err := New(m, Options{Parallel: 1, Runner: infer.Options{Threads: 2, Kernels: kernels.Detect()}})
	if err != nil {
		t.Fatal(err)
	}
	running, _ := e.Submit(context.Background(), Request{Prompt: []int32{1}, MaxTokens: -1, TopLogprobs: -1})
	queued, _ := e.Submit(context.Background(), Request{Prompt: []int32{2}, MaxTokens: 3, TopLogprobs: -1})
	if _, err := running.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { e.Shutdown(ctx) })
	if _, done := collect(t, queued); done.Reason != StopShutdown {
		t.Errorf("queued: %s", done.Reason)
	}
	if _, done := collect(t, running); done.Reason != StopShutdown {
		t.Errorf("running: %s", done.Reason)
	}
	wg.Wait()
	if _, err := e.Submit(context.Background(), Request{Prompt: []int32{1}}); !errors.Is(err, ErrClosed) {
		t.Errorf("after shutdown: %v", err)
	}
	// Again, with a context that has ended too (Close after Serve's
	// graceful shutdown): it returns at once.
	for range 20 {
		e.Shutdown(ctx)
	}
}

// TestSoak: 192 requests from 16 clients at once, some with stop tokens,
// some cancelled at a random moment, some refused by the full queue and
// retried: every request ends (a Done event or a refusal), the engine is
// idle again, and no goroutine is left behind.
func TestSoak(t *testing.T) {
	m := smallModel(t, 32)
	before := runtime.NumGoroutine()
	e, err := New(m, Options{Parallel: 4, Queue: 8, Chunk: 8, CacheBytes: 16 << 20,
		Runner: infer.Options{Threads: 2, Kernels: kernels.Detect()}})
	if err != nil {
		t.Fatal(err)
	}
	const clients, perClient = 16, 12
	var ended, refused, cancelled atomic.Int32
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			for r := range perClient {
				prompt := make([]int32, 1+rng.IntN(40))
				for i := range prompt {
					prompt[i] = int32(rng.IntN(300))
				}
				ctx, cancel := context.WithCancel(context.Background())
				req := Request{Prompt: prompt, MaxTokens: rng.IntN(30), TopLogprobs: rng.IntN(3) - 1}
				if r%3 == 0 {
					req.Stop = []int32{int32(rng.IntN(300))}
				}
				var s *Stream
				var err error
				for {
					if s, err = e.Submit(ctx, req); !errors.Is(err, ErrBusy) {
						break
					}
					refused.Add(1)
					time.Sleep(time.Millisecond)
				}
				if err != nil {
					t.Error(err)
					cancel()
					return
				}
				cancelAt := -1
				if rng.IntN(5) == 0 {
					cancelAt = rng.IntN(10)
				}
				for n := 0; ; n++ {
					if n == cancelAt {
						cancel()
					}
					ev, err := s.Next(context.Background())
					if err != nil {
						t.Error(err)
						break
					}
					if ev.Done {
						ended.Add(1)
						if ev.Reason == StopInterrupt {
							cancelled.Add(1)
						}
						break
					}
				}
				cancel()
			}
		})
	}
	wg.Wait()
	if n := ended.Load(); n != clients*perClient {
		t.Errorf("%d of %d requests ended", n, clients*perClient)
	}
	waitFor(t, func() bool { st := e.Stats(); return st.Active == 0 && st.Queued == 0 && st.KVBytes == 0 })
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before })
	t.Logf("%d requests ended (%d cancelled), %d submissions refused as busy and retried", ended.Load(), cancelled.Load(), refused.Load())
}

// TestPromptOnly: MaxTokens 0 evaluates the prompt and keeps its cache;
// the same prompt again needs no step at all; PromptLogits are the
// prompt's last logits, as a session alone gives them, in the first event.
func TestPromptOnly(t *testing.T) {
	m := smallModel(t, 32)
	e := newEngine(t, m, Options{})
	prompt := []int32{5, 6, 7, 8, 9}
	s, _ := e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 0, PromptLogits: true, TopLogprobs: -1})
	evs, done := collect(t, s)
	if len(evs) != 0 || done.Reason != StopLength || done.Usage.CompletionTokens != 0 || done.Usage.KVTokens != len(prompt) {
		t.Fatalf("prompt only: %d events, done %+v", len(evs), done)
	}
	sess, _ := m.NewSession(0)
	want, _ := sess.Feed(prompt)
	if len(done.PromptLogits) != len(want) || maxAbsDiff(done.PromptLogits, want) > 1e-5 {
		t.Errorf("prompt logits differ from a session's by %g", maxAbsDiff(done.PromptLogits, want))
	}
	s, _ = e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 0, TopLogprobs: -1})
	if _, done = collect(t, s); done.Usage.CachedTokens != len(prompt) || done.Reason != StopLength {
		t.Errorf("the same prompt again: %+v", done)
	}
	// With a token to generate, the first event carries the logits.
	s, _ = e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 2, PromptLogits: true, TopLogprobs: -1})
	evs, done = collect(t, s)
	if len(evs) != 2 || maxAbsDiff(evs[0].PromptLogits, want) > 1e-5 || evs[1].PromptLogits != nil || done.PromptLogits != nil {
		t.Errorf("logits with generation: %d events, first logits %d long", len(evs), len(evs[0].PromptLogits))
	}
	if done.Usage.CachedTokens != len(prompt)-1 || done.Usage.KVTokens != len(prompt)+1 || done.Usage.Prefill <= 0 {
		t.Errorf("generation after the prompt: usage %+v", done.Usage)
	}
}

// TestOneShotSessions: one-shot requests (embeddings, scores) pass their
// sessions on to those admitted after them, which keep the prefix they
// share (a reranker's query) and give what a fresh session gives; they
// neither take a conversation's cached session, though their prompts
// start as its does, nor keep theirs once none runs.
func TestOneShotSessions(t *testing.T) {
	m := smallModel(t, 64)
	e := newEngine(t, m, Options{})
	ctx := context.Background()
	talk := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	s, _ := e.Submit(ctx, Request{Prompt: talk, MaxTokens: 1, TopLogprobs: -1})
	collect(t, s)
	kept := e.Stats().CachedBytes
	if kept == 0 {
		t.Fatal("the conversation's cache was not kept")
	}
	const n, shared = 3 * MaxScoring, 40
	rows := []int32{5, 6}
	reqs := make([]Request, n)
	for i := range reqs {
		p := append([]int32(nil), talk[:4]...) // what the conversation's prompt starts with
		for k := 4; k < shared; k++ {
			p = append(p, int32(10+k))
		}
		p = append(p, int32(60+i), 9, 9, int32(1+i%50))
		reqs[i] = Request{Prompt: p, PromptLogits: true, Rows: rows, TopLogprobs: -1, OneShot: true}
	}
	ss, err := e.SubmitAll(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range ss {
		_, done := collect(t, s)
		// Admitted in order: the first MaxScoring find nothing to take,
		// each later one a session of the same prefix.
		want := 0
		if i >= MaxScoring {
			want = shared
		}
		if done.Usage.CachedTokens != want {
			t.Errorf("request %d: %d tokens cached, want %d", i, done.Usage.CachedTokens, want)
		}
		if i%37 == 0 || i == n-1 {
			sess, _ := m.NewSession(0)
			full, _ := sess.Feed(reqs[i].Prompt)
			got := done.PromptLogits
			if len(got) != 2 || math.Abs(float64(got[0]-full[5])) > 1e-4 || math.Abs(float64(got[1]-full[6])) > 1e-4 {
				t.Errorf("request %d: rows %v, a fresh session's %v", i, got, []float32{full[5], full[6]})
			}
		}
	}
	waitFor(t, func() bool { return e.Stats().Active == 0 })
	if st := e.Stats(); st.CachedBytes != kept {
		t.Errorf("after the one-shot requests %d bytes kept, before them %d", st.CachedBytes, kept)
	}
	s, _ = e.Submit(ctx, Request{Prompt: append(talk, 11), MaxTokens: 1, TopLogprobs: -1})
	if _, again := collect(t, s); again.Usage.CachedTokens != len(talk) {
		t.Errorf("the conversation again: %d tokens cached, want %d", again.Usage.CachedTokens, len(talk))
	}
}

// stall is a constraint that holds the engine's loop in its first Allow
// until release is closed, and allows everything.
type stall struct {
	entered, release chan struct{}
	once             sync.Once
}

func (s *stall) Allow([]float32) {
	s.once.Do(func() { close(s.entered) })
	<-s.release
}
func (s *stall) Accept(int32) error     { return nil }
func (s *stall) Done() bool             { return false }
func (s *stall) Prefix(ids []int32) int { return len(ids) }

// lastRow reads a one-shot request's stream to its end and returns its
// output row; it may run on any goroutine.
func lastRow(s *Stream) ([]float32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var row []float32
	for {
		ev, err := s.Next(ctx)
		if err == io.EOF {
			return row, nil
		}
		if err != nil {
			return nil, err
		}
		if ev.PromptLogits != nil {
			row = ev.PromptLogits
		}
	}
}

// TestConcurrentOneShotShareSteps: the one-shot requests of several
// clients, waiting together, are prefilled in one step (Stats'
// PrefillSteps and Prefilled), beside a conversation's decoding, and each
// output is what the request gives alone.
func TestConcurrentOneShotShareSteps(t *testing.T) {
	m := smallModel(t, 64)
	e := newEngine(t, m, Options{Chunk: 64})
	ctx := context.Background()
	hold := &stall{entered: make(chan struct{}), release: make(chan struct{})}
	talk, err := e.Submit(ctx, Request{Prompt: []int32{1, 2, 3}, MaxTokens: 2, TopLogprobs: -1, Constraint: hold})
	if err != nil {
		t.Fatal(err)
	}
	<-hold.entered // the loop waits in the conversation's first token
	const clients, inputs = 6, 2
	req := func(c, i int) Request {
		return Request{Prompt: []int32{int32(20 + c), int32(40 + i), 7, 8}, PromptLogits: true, TopLogprobs: -1, OneShot: true}
	}
	rows := make([][][]float32, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reqs := []Request{req(c, 0), req(c, 1)}
			ss, err := e.SubmitAll(ctx, reqs)
			if err != nil {
				t.Error(err)
				return
			}
			for _, s := range ss {
				row, err := lastRow(s)
				if err != nil {
					t.Error(err)
				}
				rows[c] = append(rows[c], row)
			}
		}()
	}
	waitFor(t, func() bool { return e.Stats().Queued == clients*inputs })
	before := e.Stats()
	close(hold.release)
	wg.Wait()
	collect(t, talk)
	after := e.Stats()
	if steps, n := after.PrefillSteps-before.PrefillSteps, after.Prefilled-before.Prefilled; steps != 1 || n != clients*inputs {
		t.Errorf("%d prompts of %d clients prefilled in %d steps, want %d in 1", n, clients, steps, clients*inputs)
	}
	for c := range clients {
		if len(rows[c]) != inputs {
			t.Fatalf("client %d: %d outputs, want %d", c, len(rows[c]), inputs)
		}
		for i, got := range rows[c] {
			s, err := e.Submit(ctx, req(c, i))
			if err != nil {
				t.Fatal(err)
			}
			alone, err := lastRow(s)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(alone) || maxAbsDiff(got, alone) > 1e-4 {
				t.Errorf("client %d, input %d: differs from alone by %g", c, i, maxAbsDiff(got, alone))
			}
		}
	}
}

// TestPoolRecycles: the one-shot pool hands out a session of the KV type
// asked for even without a shared prefix, and drops one of another type
// rather than hold it beside the session the caller then allocates.
func TestPoolRecycles(t *testing.T) {
	m := smallModel(t, 32)
	pool := newReuse(1 << 30).pool
	for _, kv := range []format.KVType{format.KVF16, format.KVQ8} {
		s, _ := m.NewSessionKV(0, kv)
		if _, err := s.Feed([]int32{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		pool.put(s)
	}
	if s, keep := pool.take([]int32{7, 8}, format.KVQ8, 1, false); s == nil || s.KVType() != format.KVQ8 || keep != 0 {
		t.Fatalf("no prefix shared: %v, keep %d", s, keep)
	}
	if s, _ := pool.take([]int32{1, 2}, format.KVQ8, 1, false); s != nil || len(pool.entries) != 0 || pool.bytes != 0 {
		t.Errorf("only an f16 session left, a q8 one asked for: %v; %d left, %d bytes", s, len(pool.entries), pool.bytes)
	}
}

func maxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestKVTypesAndClearCache: each request gets the KV cache type it asks
// for, a cached conversation is reused only by one of the same type, and
// ClearCache drops what is kept.
func TestKVTypesAndClearCache(t *testing.T) {
	m := smallModel(t, 32)
	e := newEngine(t, m, Options{})
	prompt := []int32{21, 22, 23, 24}
	run := func(kv format.KVType) Event {
		s, err := e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 1, TopLogprobs: -1, KV: kv})
		if err != nil {
			t.Fatal(err)
		}
		_, done := collect(t, s)
		return done
	}
	f16 := run(format.KVF16)
	q8 := run(format.KVQ8)
	if q8.Usage.CachedTokens != 0 || q8.Usage.KVBytes >= f16.Usage.KVBytes {
		t.Errorf("q8 after f16: %d cached, %d KV bytes (f16: %d)", q8.Usage.CachedTokens, q8.Usage.KVBytes, f16.Usage.KVBytes)
	}
	if again := run(format.KVQ8); again.Usage.CachedTokens != len(prompt)-1 {
		t.Errorf("q8 again: %d cached", again.Usage.CachedTokens)
	}
	waitFor(t, func() bool { return e.Stats().CachedBytes > 0 })
	e.ClearCache()
	if after := run(format.KVF16); after.Usage.CachedTokens != 0 {
		t.Errorf("after ClearCache: %d cached tokens", after.Usage.CachedTokens)
	}
	// A type the runtime does not have is refused, not run as f16 (and
	// written to the state cache's directory, whose next run removes it
	// as damaged).
	if _, err := e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 1, KV: format.KVType(9)}); err == nil || !strings.Contains(err.Error(), "KV cache type KVType(9)") {
		t.Errorf("KV cache type 9: %v", err)
	}
}

// TestGenerationStops: the generation loop of every front end, on an odd
// shape (Qwen2 biases, 3 KV heads): the context stops it after the last
// token that fits, MaxTokens with "length", a stop token before it, and a
// cancelled context with "interrupt".
func TestGenerationStops(t *testing.T) {
	s := synth.Shape{ModelType: "qwen2", Hidden: 72, Intermediate: 100, Layers: 2, Heads: 3, KVHeads: 3, HeadDim: 14,
		Vocab: 333, MaxPositions: 1024, Tied: false, DType: "BF16", Seed: 13, EOS: synth.MiniEOS}
	m := openModel(t, synthtest.Compile(t, s, 16))
	e := newEngine(t, m, Options{Parallel: 1, Ctx: 40})
	rng := rand.New(rand.NewPCG(1, 0))
	prompt := make([]int32, 30)
	for i := range prompt {
		prompt[i] = int32(rng.IntN(s.Vocab))
	}
	run := func(req Request) ([]Event, Event) {
		st, err := e.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return collect(t, st)
	}
	evs, done := run(Request{Prompt: prompt, MaxTokens: -1, TopLogprobs: -1})
	if done.Reason != StopContext || len(evs) != 11 || done.Usage.KVTokens != 40 {
		t.Fatalf("stop %q after %d generated, %d in cache; want ctx after 11 with 40 cached", done.Reason, len(evs), done.Usage.KVTokens)
	}
	evs, done = run(Request{Prompt: []int32{5, 6, 7}, MaxTokens: 6, TopLogprobs: -1})
	if done.Reason != StopLength || len(evs) != 6 {
		t.Fatalf("stop %q with %d tokens", done.Reason, len(evs))
	}
	// Make the fourth generated token a stop token: generation ends before it.
	stop := evs[3].Token
	evs2, done := run(Request{Prompt: []int32{5, 6, 7}, MaxTokens: 6, Stop: []int32{stop}, TopLogprobs: -1})
	if done.Reason != StopEOS || len(evs2) > 3 {
		t.Fatalf("stop %q with %v, want eos before %d", done.Reason, tokensOf(evs2), stop)
	}
	// A cancelled context ends the generation long before its 1,000
	// tokens. (In the 40-token context above the generation could end at
	// the context before the cancel came.)
	e = newEngine(t, m, Options{Parallel: 1, Ctx: 1024})
	ctx, cancel := context.WithCancel(context.Background())
	st, err := e.Submit(ctx, Request{Prompt: []int32{1, 2}, MaxTokens: 1000, TopLogprobs: -1})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := st.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return e.Stats().Active == 1 })
	cancel()
	_, done = collect(t, st)
	if done.Reason != StopInterrupt || done.Usage.CompletionTokens >= 1000 {
		t.Fatalf("stop %q after %d tokens, want interrupt", done.Reason, done.Usage.CompletionTokens)
	}
}

// refuse is a constraint whose Accept refuses whatever the sampler picks:
// a bug of the constraint's, which ends its request with StopError.
type refuse struct{}

func (refuse) Allow([]float32)        {}
func (refuse) Accept(int32) error     { return errors.New("not this one") }
func (refuse) Done() bool             { return false }
func (refuse) Prefix(ids []int32) int { return len(ids) }

// explode is a constraint that panics: a bug, which must end its request,
// not the engine or the requests beside it.
type explode struct{}

func (explode) Allow([]float32)        { panic("boom") }
func (explode) Accept(int32) error     { return nil }
func (explode) Done() bool             { return false }
func (explode) Prefix(ids []int32) int { return len(ids) }

// TestFailedStepEndsItsRequests: a request whose step fails (a constraint
// that refuses the sampled token, one that panics) ends with StopError and
// the reason, beside a request that goes on to its end; the engine then
// serves the next request as before, and holds nothing of the failed
// ones.
func TestFailedStepEndsItsRequests(t *testing.T) {
	m := smallModel(t, 32)
	e := newEngine(t, m, Options{})
	prompt := []int32{10, 11, 12, 13}
	want := greedyAlone(t, m, prompt, 8)
	for _, c := range []struct {
		bad  Constraint
		want string
	}{{refuse{}, "constraint refuses: not this one"}, {explode{}, "internal error: boom"}} {
		good := submit(t, e, Request{Prompt: prompt, MaxTokens: 8, TopLogprobs: -1})
		bad := submit(t, e, Request{Prompt: prompt, MaxTokens: 8, TopLogprobs: -1, Constraint: c.bad})
		_, done := collect(t, bad)
		if done.Reason != StopError || done.Err == nil || !strings.Contains(done.Err.Error(), c.want) {
			t.Errorf("%T: ended %q with %v, want StopError and %q", c.bad, done.Reason, done.Err, c.want)
		}
		if evs, done := collect(t, good); done.Reason != StopLength || !slices.Equal(tokensOf(evs), want) {
			t.Errorf("%T: the request beside it ended %q with %v, want the greedy %v", c.bad, done.Reason, tokensOf(evs), want)
		}
	}
	if evs, _ := collect(t, submit(t, e, Request{Prompt: prompt, MaxTokens: 8, TopLogprobs: -1})); !slices.Equal(tokensOf(evs), want) {
		t.Errorf("after the failures: %v, want %v", tokensOf(evs), want)
	}
	if st := e.Stats(); st.Active != 0 || st.KVBytes != 0 {
		t.Errorf("after the requests: %+v", st)
	}
}

// TestFailedRetryEndsItself: a retried prompt samples its first token
// from the logits kept with the cache, as its request is admitted, with
// no step: a constraint that refuses the token or panics there ends that
// request with StopError, as in a step, not the engine (a panic there
// ended the process) nor the request beside it.
func TestFailedRetryEndsItself(t *testing.T) {
	m := recurrentModel(t, format.F16)
	e := newEngine(t, m, Options{})
	prompt := []int32{10, 11, 12, 13, 14, 15}
	want := greedyAlone(t, m, prompt, 4)
	if _, done := collect(t, submit(t, e, Request{Prompt: prompt, MaxTokens: 2, TopLogprobs: -1})); done.Reason != StopLength {
		t.Fatalf("first: %s %v", done.Reason, done.Err)
	}
	for _, c := range []struct {
		bad  Constraint
		want string
	}{{refuse{}, "constraint refuses: not this one"}, {explode{}, "internal error: boom"}} {
		good := submit(t, e, Request{Prompt: []int32{20, 21, 22}, MaxTokens: 30, TopLogprobs: -1})
		bad := submit(t, e, Request{Prompt: prompt, MaxTokens: 4, TopLogprobs: -1, Constraint: c.bad})
		_, done := collect(t, bad)
		if done.Reason != StopError || done.Err == nil || !strings.Contains(done.Err.Error(), c.want) || done.Usage.CachedTokens != len(prompt) {
			t.Errorf("%T: ended %q with %v (%d cached), want StopError and %q from the kept logits", c.bad, done.Reason, done.Err, done.Usage.CachedTokens, c.want)
		}
		if _, done := collect(t, good); done.Reason != StopLength {
			t.Errorf("%T: the request beside it ended %q with %v", c.bad, done.Reason, done.Err)
		}
	}
	if evs, _ := collect(t, submit(t, e, Request{Prompt: prompt, MaxTokens: 4, TopLogprobs: -1})); !slices.Equal(tokensOf(evs), want) {
		t.Errorf("after the failures: %v, want %v", tokensOf(evs), want)
	}
	waitFor(t, func() bool { st := e.Stats(); return st.Active == 0 && st.KVBytes == 0 })
}

// TestCacheKeepsOthersFromOneTooLarge: a conversation whose session alone
// is larger than the cache's bound is not kept, and pushes out none of the
// sessions there: they serve their next turns as before (a long context
// emptied the cache of every other conversation, then went itself).
func TestCacheKeepsOthersFromOneTooLarge(t *testing.T) {
	m := smallModel(t, 32)
	chunk := m.SequenceBytes(1, format.KVF16)
	budget := 3*chunk + chunk/2
	e := newEngine(t, m, Options{CacheBytes: budget})
	var short [][]int32
	for i := range 3 {
		p := randomPrompt(20, uint64(i))
		short = append(short, p)
		collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 2}))
	}
	if st := e.Stats(); st.CacheEvictions != 0 || st.CachedBytes != 3*chunk {
		t.Fatalf("after three short conversations: %+v", st)
	}
	collect(t, submit(t, e, Request{Prompt: randomPrompt(1000, 9), MaxTokens: 2}))
	if st := e.Stats(); st.CacheEvictions != 1 || st.CachedBytes != 3*chunk {
		t.Errorf("after one larger than the bound of %d: %+v", budget, st)
	}
	for i, p := range short {
		if _, done := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 0})); done.Usage.CachedTokens != len(p) {
			t.Errorf("short conversation %d again: %d cached tokens, want %d", i, done.Usage.CachedTokens, len(p))
		}
	}
}

// TestStreamReadKeepsLittle: a stream read as it is written holds what is
// not read yet, not every event of the generation (a long answer kept
// some 200 bytes a token until its stream was dropped).
func TestStreamReadKeepsLittle(t *testing.T) {
	s := newStream()
	for i := range 10000 {
		s.push(Event{Token: int32(i)})
		if ev, err := s.Next(context.Background()); err != nil || ev.Token != int32(i) {
			t.Fatalf("event %d: %+v, %v", i, ev, err)
		}
	}
	if n := cap(s.events); n > 64 {
		t.Errorf("after 10,000 events read one by one, the stream holds room for %d", n)
	}
	s.push(Event{Token: 1})
	s.push(Event{Done: true})
	if ev, err := s.Next(context.Background()); err != nil || ev.Token != 1 {
		t.Fatalf("%+v, %v", ev, err)
	}
	if ev, err := s.Next(context.Background()); err != nil || !ev.Done {
		t.Fatalf("%+v, %v", ev, err)
	}
	if _, err := s.Next(context.Background()); err != io.EOF {
		t.Fatalf("after Done: %v", err)
	}
}

// TestRowsChecked: head rows outside the vocabulary are refused at
// Submit: run, they failed the step, and with it every request that
// shared the step.
func TestRowsChecked(t *testing.T) {
	m := smallModel(t, 32)
	e := newEngine(t, m, Options{})
	for _, row := range []int32{-1, int32(m.Config.Vocab)} {
		good := Request{Prompt: []int32{1, 2, 3}, MaxTokens: 3, TopLogprobs: -1}
		bad := Request{Prompt: []int32{4, 5, 6}, MaxTokens: 0, PromptLogits: true, Rows: []int32{7, row}, TopLogprobs: -1}
		ss, err := e.SubmitAll(context.Background(), []Request{good, bad})
		if err == nil {
			if _, done := collect(t, ss[0]); done.Reason != StopLength {
				t.Errorf("row %d: the request beside it ended %q with %v", row, done.Reason, done.Err)
			}
			collect(t, ss[1])
		}
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("head row %d outside", row)) {
			t.Errorf("row %d: %v, want it refused", row, err)
		}
	}
}
