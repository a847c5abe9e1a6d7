package qwen_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qwenc/qwenc/kernels"
	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/runtime/sampling"
)

func open(t *testing.T, path string, opts ...qwen.Option) *qwen.Model {
	t.Helper()
	m, err := qwen.Open(path, append([]qwen.Option{qwen.WithThreads(2)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// result is a whole generation: its text and its last Delta.
type result struct {
	reasoning, content string
	ids                []int32
	last               qwen.Delta
}

func generate(t *testing.T, m *qwen.Model, req qwen.Request) result {
	t.Helper()
	var r result
	for d, err := range m.Generate(context.Background(), req) {
		if err != nil {
			t.Fatalf("%+v: %v", req, err)
		}
		r.reasoning += d.Reasoning
		r.content += d.Content
		r.ids = append(r.ids, d.IDs...)
		r.last = d
	}
	return r
}

var greedy = &sampling.Params{}

// requests are chats and completions of the demo model, some longer than
// a prefill chunk, some sharing a prefix.
func requests() []qwen.Request {
	long := strings.Repeat("func (s *Set) Add(v int) { s.m[v] = struct{}{} }\n", 12)
	return []qwen.Request{
		{Messages: []qwen.Message{{Role: "user", Content: "Write a Go function that reverses a string."}}, MaxTokens: 16},
		{Messages: []qwen.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "What is a slice?"}}, MaxTokens: 16, NoThinking: true},
		{Prompt: "// Copyright 2009 The Go Authors. All rights reserved.\n", MaxTokens: 20},
		{Prompt: "func (b *Buffer) Len() int {\n", MaxTokens: 16},
		{Prompt: long, MaxTokens: 16},
		{Prompt: long + "func (s *Set) Has(v int) bool {\n", MaxTokens: 16},
		{Prompt: "package main\n\nimport \"fmt\"\n\nfunc main() {\n", MaxTokens: 16, KV: "q8"},
		{Tokens: []int32{1722, 1887, 271, 474, 2399}, MaxTokens: 16, Stop: []string{"\n"}},
	}
}

// TestConcurrentMatchesAlone: goroutines generating at once, batched into
// the same steps, get each the greedy text it gets alone. Under the race
// detector in make test-race.
func TestConcurrentMatchesAlone(t *testing.T) {
	reqs := requests()
	alone := make([]result, len(reqs))
	m := open(t, "qwen3-go-demo.qbin", qwen.WithParallel(1), qwen.WithStateCache(0))
	for i, req := range reqs {
		req.Sampling = greedy
		alone[i] = generate(t, m, req)
	}
	b := open(t, "qwen3-go-demo.qbin", qwen.WithParallel(4), qwen.WithPrefillChunk(16))
	for round := range 2 { // the second round starts from the prefix cache
		got := make([]result, len(reqs))
		var wg sync.WaitGroup
		for i, req := range reqs {
			req.Sampling = greedy
			wg.Go(func() { got[i] = generate(t, b, req) })
		}
		wg.Wait()
		for i := range reqs {
			if got[i].content != alone[i].content || got[i].reasoning != alone[i].reasoning || got[i].last.Stop != alone[i].last.Stop {
				t.Errorf("round %d, request %d: together %q (%s), alone %q (%s)", round, i, got[i].content, got[i].last.Stop,
					alone[i].content, alone[i].last.Stop)
			}
		}
	}
	if st := b.Stats(); st.Active != 0 || st.Queued != 0 || st.KVBytes != 0 {
		t.Errorf("after the requests: %+v", st)
	}
}

// TestStopStrings: a stop string ends the answer before it, with
// StopString and the string, the tokens counted up to the one that
// completed it.
func TestStopStrings(t *testing.T) {
	m := open(t, "qwen3-go-demo.qbin")
	req := qwen.Request{Prompt: "// Copyright 2009 The Go Authors. All rights reserved.\n", MaxTokens: 30, Sampling: greedy}
	full := generate(t, m, req)
	at := strings.Index(full.content, "governed")
	if at < 0 {
		t.Fatalf("the greedy text %q lacks the stop string", full.content)
	}
	req.Stop = []string{"BSD", "governed"}
	r := generate(t, m, req)
	if r.content != full.content[:at] || r.last.Stop != qwen.StopString || r.last.Matched != "governed" || r.last.Usage.CompletionTokens != len(r.ids) {
		t.Errorf("stopped: %q, %s (%q), %d tokens for %d ids; want %q", r.content, r.last.Stop, r.last.Matched, r.last.Usage.CompletionTokens, len(r.ids), full.content[:at])
	}
	// The request's stop strings are taken when it starts: the caller may
	// use its slice again, for the next request, while this one runs.
	st, err := m.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	req.Stop[1] = "no such text"
	var last qwen.Delta
	for d := range st.Deltas() {
		last = d
	}
	if last.Matched != "governed" {
		t.Errorf("the caller's slice changed after Start: stopped %s (%q)", last.Stop, last.Matched)
	}
}

// TestCancel: a cancelled context ends the generation; the last Delta has
// the usage, StopInterrupt, and the context's error. The engine never
// waits for its reader, so it may have generated a token or two more than
// the reader had seen when it cancelled: those come before the last Delta,
// and the usage counts exactly the tokens delivered. (That the engine
// stops within a step is runtime/engine's TestCancelFreesTheSlot.)
func TestCancel(t *testing.T) {
	m := open(t, "tiny-a.qbin")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	var last qwen.Delta
	var lastErr error
	for d, err := range m.Generate(ctx, qwen.Request{Prompt: "Hello", Sampling: greedy}) {
		if len(d.IDs) > 0 {
			n++
		}
		if n == 3 {
			cancel()
		}
		last, lastErr = d, err
	}
	if !errors.Is(lastErr, context.Canceled) || last.Stop != qwen.StopInterrupt || n < 3 || last.Usage.CompletionTokens != n {
		t.Errorf("cancelled after 3 tokens: %v, %s, %d generated, %d delivered", lastErr, last.Stop, last.Usage.CompletionTokens, n)
	}
	// Breaking out of the loop stops the generation too.
	for range m.Generate(context.Background(), qwen.Request{Prompt: "Hello", Sampling: greedy}) {
		break
	}
	waitIdle(t, m)
}

// TestCancelQueued: a request cancelled while it waits behind another
// waiting one ends at once, not when the queue reaches it: its last
// Delta comes while the conversation ahead still runs and the one
// behind it still waits.
func TestCancelQueued(t *testing.T) {
	m := open(t, "tiny-a.qbin", qwen.WithParallel(1))
	start := func(ctx context.Context, req qwen.Request) *qwen.Stream {
		st, err := m.Start(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	// Until the context is full: seconds, against the step a cancelled
	// request should take to end.
	running := start(context.Background(), qwen.Request{Prompt: "Hello", IgnoreEOS: true, Sampling: greedy})
	waiting := start(context.Background(), qwen.Request{Prompt: "Hello", MaxTokens: 1, Sampling: greedy})
	ctx, cancel := context.WithCancel(context.Background())
	behind := start(ctx, qwen.Request{Prompt: "Hello", MaxTokens: 1, Sampling: greedy})
	cancel()
	for d, err := range behind.Deltas() {
		if d.Stop != "" && (d.Stop != qwen.StopInterrupt || !errors.Is(err, context.Canceled)) {
			t.Errorf("cancelled in the queue: %s, %v", d.Stop, err)
		}
	}
	if st := m.Stats(); st.Active != 1 || st.Queued != 1 {
		t.Errorf("when the cancelled request ended: %d active, %d queued; want the one ahead of it running and the other waiting", st.Active, st.Queued)
	}
	running.Close()
	for _, st := range []*qwen.Stream{running, waiting} {
		for range st.Deltas() {
		}
	}
}

// TestStartTakesTheTokens: a request's Tokens are the engine's once
// Start returns, so a caller may reuse its buffer while the request
// waits for a slot and prefills: the prompt and the answer are those of
// the tokens given.
func TestStartTakesTheTokens(t *testing.T) {
	m := open(t, "qwen3-go-demo.qbin", qwen.WithParallel(1), qwen.WithStateCache(0))
	prompt := m.Tokenize("func (b *Buffer) Len() int {\n")
	want := generate(t, m, qwen.Request{Tokens: prompt, MaxTokens: 8, Sampling: greedy})
	// The request waits behind this one, so the engine reads its tokens
	// after Start has returned.
	ahead, err := m.Start(context.Background(), qwen.Request{Prompt: "package main\n", MaxTokens: 16, Sampling: greedy})
	if err != nil {
		t.Fatal(err)
	}
	buf := slices.Clone(prompt)
	st, err := m.Start(context.Background(), qwen.Request{Tokens: buf, MaxTokens: 8, Sampling: greedy})
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, m.Tokenize("// Copyright 2009 The Go Authors. All rights reserved.\n"))
	for range ahead.Deltas() {
	}
	var ids []int32
	for d, err := range st.Deltas() {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.IDs...)
	}
	if !slices.Equal(st.Prompt(), prompt) || !slices.Equal(ids, want.ids) {
		t.Errorf("the buffer reused after Start: prompt %v, answer %v; want %v, %v", st.Prompt(), ids, prompt, want.ids)
	}
}

func waitIdle(t *testing.T, m *qwen.Model) {
	t.Helper()
	for range 10000 {
		if st := m.Stats(); st.Active == 0 && st.Queued == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("the engine is still busy: %+v", m.Stats())
}

// TestPrefillAndPromptOnly: a prefilled conversation's next turn
// prefills only its new message; PromptOnly gives the prompt's logits and
// nothing else.
func TestPrefillAndPromptOnly(t *testing.T) {
	m := open(t, "qwen3-go-demo.qbin")
	msgs := []qwen.Message{{Role: "system", Content: "Answer in Go."}, {Role: "user", Content: "A slice?"},
		{Role: "assistant", Content: "<think>\nshort\n</think>\n\nIt is a view of an array."}}
	u, err := m.Prefill(context.Background(), qwen.Request{Messages: msgs})
	if err != nil || u.PromptTokens == 0 || u.KVTokens != u.PromptTokens {
		t.Fatalf("prefill: %+v, %v", u, err)
	}
	next := append(msgs, qwen.Message{Role: "user", Content: "And a map?"})
	n, err := m.Count(qwen.Request{Messages: next})
	if err != nil {
		t.Fatal(err)
	}
	r := generate(t, m, qwen.Request{Messages: next, MaxTokens: 2, Sampling: greedy})
	if r.last.Usage.CachedTokens != u.PromptTokens || r.last.Usage.PromptTokens != n {
		t.Errorf("next turn: %d of %d prompt tokens cached, want %d of %d", r.last.Usage.CachedTokens, r.last.Usage.PromptTokens, u.PromptTokens, n)
	}
	p := generate(t, m, qwen.Request{Prompt: "func main() {\n", PromptOnly: true, PromptLogits: true})
	if len(p.ids) != 0 || p.last.Stop != qwen.StopLength || len(p.last.PromptLogits) != m.Info().Vocab {
		t.Errorf("prompt only: %d ids, %s, %d logits", len(p.ids), p.last.Stop, len(p.last.PromptLogits))
	}
	best := 0
	for i, v := range p.last.PromptLogits {
		if v > p.last.PromptLogits[best] {
			best = i
		}
	}
	if g := generate(t, m, qwen.Request{Prompt: "func main() {\n", MaxTokens: 1, Sampling: greedy}); g.ids[0] != int32(best) {
		t.Errorf("greedy token %d, the prompt logits' best %d", g.ids[0], best)
	}
}

// TestSamplingRanges: the Go API holds Request.Sampling to the ranges of
// the parameter table, at every setting's edges (the bounds, just past
// them, values no float32 or int holds), as the command line and the
// HTTP protocols do.
func TestSamplingRanges(t *testing.T) {
	m := open(t, "tiny-a.qbin")
	type edge struct {
		v  float64
		ok bool
	}
	for _, s := range sampling.Settings() {
		step := 0.01
		if s.Integer {
			step = 1
		}
		edges := []edge{{s.Lo, !s.LoOpen}, {s.Lo - step, false}}
		switch {
		case math.IsInf(s.Hi, 1):
			edges = append(edges, edge{1e6, true}, edge{1e39, false})
		default:
			edges = append(edges, edge{s.Hi, true}, edge{s.Hi + step, false})
		}
		if !s.Integer {
			edges = append(edges, edge{math.NaN(), false})
		}
		if s.LoOpen && s.Lo == 0 {
			// A Params' zero is off (repeat_penalty), as a zero value should
			// be; just above it is in range.
			edges = append(edges[1:], edge{0, true}, edge{0.01, true})
		}
		for _, e := range edges {
			p := sampling.Params{}
			setRaw(&p, s.Name, e.v)
			st, err := m.Start(context.Background(), qwen.Request{Prompt: "Hi", MaxTokens: 1, Sampling: &p})
			if (err == nil) != e.ok || err != nil && !strings.Contains(err.Error(), "sampling: "+s.Name+" ") {
				t.Errorf("%s %v: error %v, want accepted %v (an error naming the setting)", s.Name, e.v, err, e.ok)
			}
			if st != nil {
				for range st.Deltas() {
				}
			}
		}
	}
}

// setRaw puts v into p's field for setting name as a Go program would,
// without the setting's checks.
func setRaw(p *sampling.Params, name string, v float64) {
	switch name {
	case "temperature":
		p.Temperature = float32(v)
	case "top_k":
		p.TopK = int(v)
	case "top_p":
		p.TopP = float32(v)
	case "min_p":
		p.MinP = float32(v)
	case "repeat_penalty":
		p.RepeatPenalty = float32(v)
	case "presence_penalty":
		p.PresencePenalty = float32(v)
	case "frequency_penalty":
		p.FrequencyPenalty = float32(v)
	case "repeat_last_n":
		p.RepeatLastN = int(v)
	default:
		panic("no field for " + name)
	}
}

// TestRequestErrors: a request that cannot run is refused by Start, with
// a message that says what is wrong, before anything is generated.
func TestRequestErrors(t *testing.T) {
	m := open(t, "tiny-a.qbin", qwen.WithContext(64))
	long := strings.Repeat("word ", 100)
	for _, c := range []struct {
		req  qwen.Request
		want string
	}{
		{qwen.Request{}, "no prompt"},
		{qwen.Request{Prompt: "a", Tokens: []int32{1}}, "more than one of"},
		{qwen.Request{Messages: []qwen.Message{}}, "no messages"},
		{qwen.Request{Messages: []qwen.Message{{Role: "robot", Content: "hi"}}}, `messages[0]: unknown role "robot"`},
		{qwen.Request{Prompt: "a", MaxTokens: -1}, "MaxTokens -1"},
		{qwen.Request{Prompt: "a", TopLogprobs: 3}, "TopLogprobs needs Logprobs"},
		{qwen.Request{Prompt: "a", Logprobs: true, TopLogprobs: 21}, "TopLogprobs 21: want 0 to 20"},
		{qwen.Request{Prompt: "a", Stop: []string{""}}, "stop string 0 is empty"},
		{qwen.Request{Prompt: "a", Stop: make([]string, 17)}, "17 stop strings, at most 16"},
		{qwen.Request{Prompt: "a", KV: "q4"}, `KV cache type "q4"`},
		{qwen.Request{Prompt: "a", Context: 65}, "context 65: want 1 to 64"},
		{qwen.Request{Prompt: long}, "more than the context of 64"},
		{qwen.Request{Prompt: "a b c d e f", Context: 3}, "more than the context of 3"},
		{qwen.Request{Tokens: []int32{1 << 30}}, "outside the vocabulary"},
		{qwen.Request{Prompt: "a", Sampling: &sampling.Params{TopP: 2}}, "sampling: top_p 2 is outside [0, 1]"},
		{qwen.Request{Prompt: "a", JSONSchema: json.RawMessage(`{"type": `)}, "JSONSchema is not JSON: unexpected end of JSON input"},
		{qwen.Request{Prompt: "a", Draft: 2, DraftPMin: math.NaN()}, "DraftPMin NaN"},
		{qwen.Request{Prompt: "a", JSONSchema: json.RawMessage(`{"type": "array"}`), JSONObject: true}, "JSONSchema and JSONObject: give one"},
	} {
		_, err := m.Start(context.Background(), c.req)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.req, err, c.want)
		}
	}
	var tooLong *qwen.PromptTooLongError
	if _, err := m.Start(context.Background(), qwen.Request{Prompt: long}); !errors.As(err, &tooLong) || tooLong.Context != 64 {
		t.Errorf("a long prompt: %v, want a *PromptTooLongError", err)
	}
}

// TestOpenKernels: without WithKernels a Model runs this CPU's fastest
// path (kernels.Detect), as a Go program that does the obvious thing
// should; WithKernels chooses another. $QWEN_KERNELS is qwenrun's: the
// package reads no environment, so it changes nothing here.
func TestOpenKernels(t *testing.T) {
	detected := kernels.Detect()
	// Another path this CPU runs, so that the override is seen.
	other := kernels.Generic
	if detected == kernels.Generic {
		other = kernels.SupportedPaths()[len(kernels.SupportedPaths())-1]
	}
	t.Setenv("QWEN_KERNELS", other.String())
	for _, c := range []struct {
		opts []qwen.Option
		want kernels.Path
	}{
		{nil, detected},
		{[]qwen.Option{qwen.WithKernels("")}, detected},
		{[]qwen.Option{qwen.WithKernels("auto")}, detected},
		{[]qwen.Option{qwen.WithKernels(other.String())}, other},
		{[]qwen.Option{qwen.WithKernels(other.String()), qwen.WithKernels(detected.String())}, detected},
	} {
		m, err := qwen.Open("tiny-a.qbin", append([]qwen.Option{qwen.WithThreads(1)}, c.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Info().Kernels; got != c.want.String() {
			t.Errorf("%d options: kernels %s, want %s", len(c.opts), got, c.want)
		}
		m.Close()
	}
}

// TestOpenLogger: WithLogger's logger is the engine's; without it the
// engine's records are discarded, at every level.
func TestOpenLogger(t *testing.T) {
	l := slog.New(slog.NewTextHandler(io.Discard, nil))
	if got := open(t, "tiny-a.qbin", qwen.WithLogger(l)).EngineLog(); got != l {
		t.Errorf("WithLogger: the engine logs to %p, want %p", got, l)
	}
	got := open(t, "tiny-a.qbin").EngineLog()
	if got == nil || got.Enabled(context.Background(), slog.LevelError) {
		t.Errorf("no WithLogger: the engine logs to %v, want a logger that discards", got)
	}
}

// TestOpenOptions: the kernels and the context asked for, and those
// refused with the range the model allows; a negative value is refused,
// not taken for the default.
func TestOpenOptions(t *testing.T) {
	m := open(t, "tiny-a.qbin", qwen.WithKernels("generic"), qwen.WithContext(100), qwen.WithKVType("q8"))
	if info := m.Info(); info.Kernels != "generic" || info.Context != 100 || info.KVType != "q8" || info.Threads != 2 {
		t.Errorf("info %+v", info)
	}
	for _, c := range []struct {
		opts []qwen.Option
		want string
	}{
		{[]qwen.Option{qwen.WithContext(0)}, "context 0: want 1 to 4096 tokens (the model's maximum context)"},
		{[]qwen.Option{qwen.WithContext(5000)}, "context 5000: want 1 to 4096 tokens"},
		{[]qwen.Option{qwen.WithKernels("sse9")}, `unknown path "sse9"`},
		{[]qwen.Option{qwen.WithKVType("int8")}, `KV cache type "int8"`},
		{[]qwen.Option{qwen.WithParallel(-1)}, "parallel -1"},
		{[]qwen.Option{qwen.WithThreads(-2)}, "threads -2"},
		{[]qwen.Option{qwen.WithPrefillChunk(-1)}, "prefill chunk -1"},
		{[]qwen.Option{qwen.WithStateCacheDir(t.TempDir(), -1)}, "state cache directory bound -1"},
		{[]qwen.Option{qwen.WithStateCache(-1)}, "state cache -1"},
	} {
		if _, err := qwen.Open("tiny-a.qbin", c.opts...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.opts, err, c.want)
		}
	}
	if _, err := qwen.Open("missing.qbin"); err == nil || !strings.Contains(err.Error(), "missing.qbin") {
		t.Errorf("a missing file: %v", err)
	}
	var ce *qwen.ContextError
	if _, err := qwen.Open("tiny-a.qbin", qwen.WithContext(-5)); !errors.As(err, &ce) || ce.Max != 4096 {
		t.Errorf("context -5: %v", err)
	}
}

// TestInspect: what a file says of its model without opening it to
// generate is what Open's Info says of it, less the engine's fields.
func TestInspect(t *testing.T) {
	for _, name := range []string{"tiny-a.qbin", "qwen3-go-demo.qbin"} {
		info := open(t, name).Info()
		got, err := qwen.Inspect(name)
		if err != nil {
			t.Fatal(err)
		}
		info.Context, info.ContextNote, info.Parallel, info.KVType, info.Kernels, info.Threads, info.DraftModel = 0, "", 0, "", "", 0, ""
		if !reflect.DeepEqual(got, info) {
			t.Errorf("%s: Inspect %+v\nOpen's Info %+v", name, got, info)
		}
	}
	if _, err := qwen.Inspect("missing.qbin"); err == nil || !strings.Contains(err.Error(), "missing.qbin") {
		t.Errorf("a missing file: %v", err)
	}
}

// TestCloseWhileInUse: Close racing a Stream being read and calls being
// made ends each with ErrClosed (Tokenize with a panic saying so), not
// with a fault in the file's unmapped memory; the Deltas read before stay
// whole.
func TestCloseWhileInUse(t *testing.T) {
	m, err := qwen.Open("tiny-a.qbin", qwen.WithThreads(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := qwen.Request{Prompt: "The capital of France is", IgnoreEOS: true, Logprobs: true, TopLogprobs: 2, Sampling: &sampling.Params{}}
	st, err := m.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	reading := make(chan struct{})
	type end struct {
		read []qwen.Delta
		last qwen.Delta
		err  error
	}
	ended := make(chan end)
	go func() {
		var e end
		for d, err := range st.Deltas() {
			if err != nil || d.Stop != "" {
				e.last, e.err = d, err
				break
			}
			if e.read = append(e.read, d); len(e.read) == 3 {
				close(reading)
			}
		}
		ended <- e
	}()
	// Callers still at work when Close comes: each stops at ErrClosed.
	var wg sync.WaitGroup
	callers := []func() error{
		func() error { _, err := m.Count(req); return err },
		func() error { _, err := m.RenderPrompt(req); return err },
		func() error {
			st, err := m.Start(ctx, qwen.Request{Prompt: "Hello", MaxTokens: 2, Sampling: &sampling.Params{}})
			if err != nil {
				return err
			}
			for _, err := range st.Deltas() {
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	errs := make([]error, len(callers))
	for i, call := range callers {
		wg.Go(func() {
			for errs[i] == nil {
				errs[i] = call()
			}
		})
	}
	<-reading
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	e := <-ended
	wg.Wait()
	if !errors.Is(e.err, qwen.ErrClosed) || e.last.Stop != qwen.StopShutdown {
		t.Errorf("the stream being read: %s, %v; want shutdown, ErrClosed", e.last.Stop, e.err)
	}
	// Read after Close: copies, not the tokenizer's mapped bytes.
	n := 0
	for _, d := range e.read {
		for _, lp := range d.Logprobs {
			n += len(bytes.Clone(lp.Bytes))
			if len(lp.Top) != 2 {
				t.Errorf("a Delta read before Close: %d top logprobs, want 2", len(lp.Top))
			}
		}
	}
	if n == 0 {
		t.Errorf("the %d Deltas read before Close have no logprob bytes", len(e.read))
	}
	for i, err := range errs {
		if !errors.Is(err, qwen.ErrClosed) {
			t.Errorf("caller %d: %v, want ErrClosed", i, err)
		}
	}
	// A program with no server in it is not told of one.
	if _, err := m.Start(ctx, req); !errors.Is(err, qwen.ErrClosed) || strings.Contains(err.Error(), "server") {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
	if _, err := m.Embed(ctx, qwen.EmbedRequest{Inputs: []string{"x"}}); !errors.Is(err, qwen.ErrClosed) {
		t.Errorf("Embed after Close: %v, want ErrClosed", err)
	}
	if err := m.Verify(); !errors.Is(err, qwen.ErrClosed) {
		t.Errorf("Verify after Close: %v, want ErrClosed", err)
	}
	if _, err := m.NewConversation(""); !errors.Is(err, qwen.ErrClosed) {
		t.Errorf("NewConversation after Close: %v, want ErrClosed", err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "after Close") {
			t.Errorf("Tokenize after Close: %v, want a panic saying so", r)
		}
	}()
	m.Tokenize("Hello")
}

// TestLeavingAStream: a loop broken after its first Delta, a context
// cancelled mid-answer and a Stream closed unread each give back their
// conversation, and leave no goroutine behind, with the only one
// conversation the Model has: the next request gets it.
func TestLeavingAStream(t *testing.T) {
	before := runtime.NumGoroutine()
	m, err := qwen.Open("tiny-a.qbin", qwen.WithThreads(1), qwen.WithParallel(1), qwen.WithQueue(1))
	if err != nil {
		t.Fatal(err)
	}
	long := qwen.Request{Prompt: "a", IgnoreEOS: true, Sampling: &sampling.Params{}}
	idle := func(how string) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); m.Stats().Active+m.Stats().Queued > 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the conversation is still taken: %+v", how, m.Stats())
			}
		}
	}
	for range m.Generate(context.Background(), long) {
		break
	}
	idle("a broken loop")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	for _, err := range m.Generate(ctx, long) {
		if n++; n == 2 {
			cancel()
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	idle("a cancelled context")
	st, err := m.Start(context.Background(), long)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	idle("a Stream closed unread")
	for _, err := range m.Generate(context.Background(), qwen.Request{Prompt: "a", MaxTokens: 2}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	m.Close()
	for deadline := time.Now().Add(time.Minute); runtime.NumGoroutine() > before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before Open:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
	}
}
