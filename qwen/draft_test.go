package qwen_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/sampling"
)

// TestDraftsKeepTheText: drafts from the text, and a prediction, change
// no token of the answer, greedy or sampled with a seed, alone and with
// other conversations in the same steps; the prediction that is the very
// answer is accepted almost whole.
func TestDraftsKeepTheText(t *testing.T) {
	plain := open(t, "qwen3-go-demo.qbin", qwen.WithParallel(1))
	drafting := open(t, "qwen3-go-demo.qbin", qwen.WithParallel(3), qwen.WithPrefixCache(0))
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
