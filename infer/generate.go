package infer

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/qwenc/qwenc/sampling"
)

// StopReason says why generation ended.
type StopReason string

const (
	StopEOS       StopReason = "eos"       // a stop token was sampled
	StopLength    StopReason = "length"    // MaxTokens were generated
	StopCtx       StopReason = "ctx"       // the context is full
	StopInterrupt StopReason = "interrupt" // the context was cancelled
)

// GenerateOptions configure one Generate call.
type GenerateOptions struct {
	MaxTokens int     // tokens to generate; < 0: until a stop token or the context is full; 0: evaluate the prompt only
	Stop      []int32 // token ids that end generation; the stop token is not emitted
	Sampler   *sampling.Sampler
	// OnPromptLogits, if set, sees the logits of the prompt's last position
	// before anything is sampled.
	OnPromptLogits func([]float32)
	// OnToken is called with each generated token as soon as it is chosen.
	OnToken func(id int32)
}

// Result is what Generate produced and how long it took.
type Result struct {
	Generated     []int32
	Stop          StopReason
	PromptTokens  int // tokens actually evaluated (cached prefix excluded)
	PrefillTime   time.Duration
	DecodeTime    time.Duration
	DecodedTokens int // forward steps after the prompt
}

// Generate feeds prompt after the tokens already in the session, then
// samples until a stop token, MaxTokens, the end of the context, or ctx is
// cancelled (checked between prefill batches and between tokens). An
// interrupted or context-full generation is not an error: the Result says
// why it stopped.
func (s *Session) Generate(ctx context.Context, prompt []int32, o GenerateOptions) (Result, error) {
	var r Result
	if len(prompt) == 0 {
		return r, errors.New("generate: empty prompt")
	}
	if len(s.tokens)+len(prompt) > s.ctx {
		return r, ErrContextFull
	}
	t0 := time.Now()
	var logits []float32
	batch := s.m.prefill.g.Tokens
	for p := prompt; len(p) > 0; {
		if ctx.Err() != nil {
			r.Stop, r.PrefillTime = StopInterrupt, time.Since(t0)
			return r, nil
		}
		n := min(len(p), batch)
		var err error
		if logits, err = s.Feed(p[:n]); err != nil {
			return r, err
		}
		r.PromptTokens += n
		p = p[n:]
	}
	r.PrefillTime = time.Since(t0)
	if o.OnPromptLogits != nil {
		o.OnPromptLogits(logits)
	}
	t1 := time.Now()
	history := append(make([]int32, 0, min(s.ctx, 1<<16)), s.tokens...)
	for {
		if o.MaxTokens >= 0 && len(r.Generated) >= o.MaxTokens {
			r.Stop = StopLength
			break
		}
		if ctx.Err() != nil {
			r.Stop = StopInterrupt
			break
		}
		id := o.Sampler.Sample(logits, history)
		if slices.Contains(o.Stop, id) {
			r.Stop = StopEOS
			break
		}
		r.Generated = append(r.Generated, id)
		history = append(history, id)
		if o.OnToken != nil {
			o.OnToken(id)
		}
		if o.MaxTokens >= 0 && len(r.Generated) >= o.MaxTokens {
			r.Stop = StopLength
			break
		}
		if len(s.tokens) >= s.ctx {
			r.Stop = StopCtx
			break
		}
		var err error
		if logits, err = s.Feed([]int32{id}); err != nil {
			return r, err
		}
		r.DecodedTokens++
	}
	r.DecodeTime = time.Since(t1)
	return r, nil
}
