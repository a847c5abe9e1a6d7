package qwen_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/runtime/sampling"
)

// TestDraftsKeepTheText: drafts from the text, a prediction, and a draft
// model's guesses change no token of the answer, greedy or sampled with a
// seed, alone and with other conversations in the same steps; the
// prediction that is the very answer is accepted almost whole.
func TestDraftsKeepTheText(t *testing.T) {
	plain := open(t, "qwen3-go-demo.qbin", qwen.WithParallel(1))
	drafting := open(t, "qwen3-go-demo.qbin", qwen.WithParallel(3), qwen.WithStateCache(0))
	// The model drafting for itself: its guesses are what it picks,
	// greedy, so most are kept; sampled, those it would have sampled.
	guessing := open(t, "qwen3-go-demo.qbin", qwen.WithDraftModel("qwen3-go-demo.qbin"))
	long := strings.Repeat("func (s *Set) Add(v int) { s.m[v] = struct{}{} }\n", 6)
	var sampled = &sampling.Params{Temperature: 0.8, TopK: 40, TopP: 0.95, RepeatPenalty: 1.1, Seed: 7}
	for _, sp := range []*sampling.Params{greedy, sampled} {
		var reqs []qwen.Request
		for _, p := range []string{long, "package main\n\nimport \"fmt\"\n\nfunc main() {\n", "// Copyright 2009 The Go Authors. All rights reserved.\n"} {
			reqs = append(reqs, qwen.Request{Prompt: p, MaxTokens: 48, Sampling: sp})
		}
		reqs = append(reqs, qwen.Request{Messages: []qwen.Message{{Role: "user", Content: "Write a Go function that reverses a string."}}, MaxTokens: 40, Sampling: sp})
		wants := make([]result, len(reqs))
		for i, req := range reqs {
			wants[i] = generate(t, plain, req)
		}
		// Together: the drafts of several conversations checked in the
		// same steps, beside one without drafts.
		together := make([]result, len(reqs))
		var wg sync.WaitGroup
		for i, req := range reqs {
			if i > 0 {
				req.Draft = qwen.DefaultDraft
			}
			wg.Go(func() { together[i] = generate(t, drafting, req) })
		}
		wg.Wait()
		for i := range reqs {
			if together[i].content != wants[i].content {
				t.Errorf("request %d together, sampling %+v: %q, want %q", i, *sp, together[i].content, wants[i].content)
			}
		}
		for i, req := range reqs {
			want := wants[i]
			for _, kind := range []struct{ text, model int }{{0, qwen.DefaultDraftModel}, {qwen.DefaultDraft, 4}} {
				r := req
				// DraftPMin < 0: a guess at every step, however unsure.
				r.Draft, r.DraftModel, r.DraftPMin = kind.text, kind.model, -1
				got := generate(t, guessing, r)
				if got.content != want.content || got.reasoning != want.reasoning {
					t.Errorf("request %d, sampling %+v, drafts %+v: %q, without %q", i, *sp, kind, got.content, want.content)
				}
				// Greedy, its own guesses are its picks (the text's
				// may not be).
				if u := got.last.Usage; sp == greedy && kind.text == 0 && (u.Drafted == 0 || 2*u.Accepted < u.Drafted) {
					t.Errorf("request %d, drafts %+v: %d drafted, %d kept", i, kind, u.Drafted, u.Accepted)
				}
			}
			req.Draft = qwen.DefaultDraft
			got := generate(t, drafting, req)
			if got.content != want.content || got.reasoning != want.reasoning {
				t.Errorf("request %d, sampling %+v: with drafts %q, without %q", i, *sp, got.content, want.content)
			}
			t.Logf("request %d: %d drafted, %d accepted", i, got.last.Usage.Drafted, got.last.Usage.Accepted)
			req.Prediction = want.reasoning + want.content
			pred := generate(t, drafting, req)
			if pred.content != want.content {
				t.Errorf("request %d with its answer predicted: %q, want %q", i, pred.content, want.content)
			}
			// The steps' own tokens, and the prediction's text tokenized
			// apart from the answer's, are not accepted drafts.
			if u := pred.last.Usage; req.Messages == nil && 4*u.Accepted < 3*u.CompletionTokens {
				t.Errorf("request %d: the answer predicted, only %d of %d tokens accepted (%d drafted)", i, u.Accepted, u.CompletionTokens, u.Drafted)
			}
		}
	}
}

// TestDraftModelRefusals: a draft model of another vocabulary; guesses
// asked of a Model without one.
func TestDraftModelRefusals(t *testing.T) {
	if _, err := qwen.Open("tiny-a.qbin", qwen.WithDraftModel("nope.qbin")); err == nil || !strings.Contains(err.Error(), "draft model: ") {
		t.Errorf("a draft model that is not there: %v", err)
	}
	if !qwen.RaceEnabled { // tiny-rerank is not compiled under -race
		_, err := qwen.Open("tiny-a.qbin", qwen.WithDraftModel("tiny-rerank.qbin"))
		if err == nil || !strings.Contains(err.Error(), "draft model tiny-rerank.qbin: its vocabulary is 151669 tokens in 151669 rows, the model's 151669 tokens in 151936 rows") {
			t.Errorf("another vocabulary: %v", err)
		}
	}
	m := open(t, "tiny-a.qbin")
	_, err := m.Start(t.Context(), qwen.Request{Prompt: "x", DraftModel: 4})
	if err == nil || !strings.Contains(err.Error(), "opened without a draft model") {
		t.Errorf("DraftModel without a draft model: %v", err)
	}
}

// TestMTPDrafts: the Qwen3.5 demo drafting with its own MTP head, one
// guess a step and chains of three, writes the text it writes without,
// greedy or sampled with a seed, alone and beside other conversations;
// greedy, most of its guesses are kept. A model without the block, or a
// request without WithMTP, is refused; WithAutoMTP leaves the demo, whose
// head costs as much as its layers, without it.
func TestMTPDrafts(t *testing.T) {
	if qwen.RaceEnabled {
		t.Skip("the Qwen3.5 demo is not compiled under the race detector; the engine's TestMTPDrafts races the MTP drafts")
	}
	plain := open(t, "qwen35-go-demo.qbin", qwen.WithParallel(1))
	mtp := open(t, "qwen35-go-demo.qbin", qwen.WithParallel(3), qwen.WithMTP())
	if i := mtp.Info(); !i.MTP || !i.MTPDrafts || i.MTPCost <= 0 {
		t.Fatalf("Info: MTP %v, drafts %v, cost %g", i.MTP, i.MTPDrafts, i.MTPCost)
	}
	var sampled = &sampling.Params{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: 7}
	prompts := []string{"package main\n\nimport \"fmt\"\n\nfunc main() {\n", "// Copyright 2009 The Go Authors. All rights reserved.\n", "func (s *Set) Add(v int) {\n"}
	for _, sp := range []*sampling.Params{greedy, sampled} {
		for _, k := range []int{1, 2, 3} {
			wants := make([]result, len(prompts))
			for i, p := range prompts {
				wants[i] = generate(t, plain, qwen.Request{Prompt: p, MaxTokens: 48, Sampling: sp})
			}
			got := make([]result, len(prompts))
			var wg sync.WaitGroup
			for i, p := range prompts {
				wg.Go(func() { got[i] = generate(t, mtp, qwen.Request{Prompt: p, MaxTokens: 48, Sampling: sp, DraftMTP: k}) })
			}
			wg.Wait()
			for i := range prompts {
				u := got[i].last.Usage
				if got[i].content != wants[i].content {
					t.Errorf("prompt %d, sampling %+v, chains of %d: %q, without %q", i, *sp, k, got[i].content, wants[i].content)
				}
				// The first guess of a chain is kept most often, the later
				// ones less (the chains go on whatever the head's
				// confidence): on average more than one in k+1.
				if sp == greedy && (u.Drafted == 0 || (k+1)*u.Accepted < u.Drafted) {
					t.Errorf("prompt %d, chains of %d: %d drafted, %d kept", i, k, u.Drafted, u.Accepted)
				}
			}
		}
	}
	// The other drafters on the hybrid model: the text's, a prediction,
	// and the model drafting for itself.
	others := open(t, "qwen35-go-demo.qbin", qwen.WithParallel(2), qwen.WithDraftModel("qwen35-go-demo.qbin"))
	for i, p := range prompts {
		want := generate(t, plain, qwen.Request{Prompt: p, MaxTokens: 48, Sampling: greedy})
		for _, r := range []qwen.Request{
			{Draft: qwen.DefaultDraft},
			{Draft: qwen.DefaultDraft, Prediction: want.content},
			{DraftModel: 4, DraftPMin: -1},
		} {
			r.Prompt, r.MaxTokens, r.Sampling = p, 48, greedy
			got := generate(t, others, r)
			if u := got.last.Usage; got.content != want.content || u.Drafted == 0 {
				t.Errorf("prompt %d, drafts %+v: %q (%d drafted), without %q", i, r, got.content, u.Drafted, want.content)
			}
		}
	}
	if _, err := qwen.Open("qwen3-go-demo.qbin", qwen.WithMTP()); err == nil || !strings.Contains(err.Error(), "no MTP block") {
		t.Errorf("WithMTP on a model without the block: %v", err)
	}
	if _, err := plain.Start(t.Context(), qwen.Request{Prompt: "x", MaxTokens: 2, DraftMTP: 1}); err == nil || !strings.Contains(err.Error(), "WithMTP") {
		t.Errorf("DraftMTP without WithMTP: %v", err)
	}
	auto := open(t, "qwen35-go-demo.qbin", qwen.WithAutoMTP())
	if i := auto.Info(); i.MTPDrafts || i.MTPPays() {
		t.Errorf("WithAutoMTP on the demo (guess cost %.3f): drafts %v", i.MTPCost, i.MTPDrafts)
	}
}
