package qwen

import "time"

// Result is a generation gathered from its Deltas (Add), for a summary
// of it: the tokens, why it stopped, and the times of its prefill and its
// decode.
type Result struct {
	Prompt, Generated []int32
	Stop              StopReason
	Usage             Usage
}

// Add takes in the next Delta of the generation.
func (r *Result) Add(d Delta) {
	r.Generated = append(r.Generated, d.IDs...)
	if d.Stop != "" {
		r.Stop, r.Usage = d.Stop, d.Usage
	}
}

// Merge adds a later generation's tokens and figures, for the totals of a
// chat: the stop reason and the KV cache are the later one's.
func (r *Result) Merge(later Result) {
	r.Generated = append(r.Generated, later.Generated...)
	u, l := &r.Usage, later.Usage
	u.PromptTokens += l.PromptTokens
	u.CachedTokens += l.CachedTokens
	u.CompletionTokens += l.CompletionTokens
	u.Queued += l.Queued
	u.Prefill += l.Prefill
	u.Total += l.Total
	u.Drafted += l.Drafted
	u.Accepted += l.Accepted
	u.KVTokens, u.KVBytes = l.KVTokens, l.KVBytes
	r.Stop = later.Stop
}

// Prefill is the prompt tokens evaluated (a cached prefix is not) and the
// time they took.
func (r Result) Prefill() (int, time.Duration) {
	return r.Usage.PromptTokens - r.Usage.CachedTokens, r.Usage.Prefill
}

// Decode is the tokens generated and the time they took.
func (r Result) Decode() (int, time.Duration) {
	return len(r.Generated), r.Usage.Total - r.Usage.Queued - r.Usage.Prefill
}
