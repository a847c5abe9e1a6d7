package qwen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"time"

	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/runtime/engine"
)

// StopReason says why a generation ended.
type StopReason = engine.StopReason

// Why a generation ended.
const (
	StopEOS       = engine.StopEOS       // the model ended its answer
	StopString    = engine.StopString    // a stop string came
	StopLength    = engine.StopLength    // MaxTokens were generated, or Request.Context's tokens, or PromptOnly
	StopContext   = engine.StopContext   // the conversation's context (Info.Context) is full
	StopInterrupt = engine.StopInterrupt // the request's context ended
	StopShutdown  = engine.StopShutdown  // the Model shut down or closed
	StopError     = engine.StopError     // the engine failed to run it; the Delta comes with an ErrGeneration
)

// Usage counts a generation's tokens and times.
type Usage struct {
	// PromptTokens of which CachedTokens came from an earlier request's
	// state (the state cache), and CompletionTokens generated.
	PromptTokens     int
	CachedTokens     int
	CompletionTokens int
	// Queued is the wait for a free conversation, Prefill the prompt's
	// steps, TimeToFirstToken and Total from Start.
	Queued, Prefill, TimeToFirstToken, Total time.Duration
	// KVTokens and KVBytes are the conversation's KV cache at the end:
	// the positions it holds and the bytes of its chunks.
	KVTokens int
	KVBytes  int64
	// Drafted is the tokens drafted and checked, Accepted those kept.
	Drafted, Accepted int
}

// Delta is a part of a generation: the text generated since the previous
// Delta, the reasoning (Qwen3's thinking) apart from the answer. The last
// Delta of a generation has Stop set, and Usage.
type Delta struct {
	Reasoning, Content string
	// IDs are the tokens generated since the previous Delta; their text
	// may be held back for a later one (a character split across tokens,
	// or the possible start of a stop string).
	IDs []int32
	// Logprobs, with Request.Logprobs, are the content tokens whose text
	// this Delta completes.
	Logprobs []Logprob
	// Time is when the engine produced the Delta's tokens.
	Time time.Time
	// ToolCalls, with Request.Tools, are pieces of the calls the answer
	// makes; their text is not Content.
	ToolCalls []ToolCallDelta
	// PromptLogits, with Request.PromptLogits, are in the first Delta.
	PromptLogits []float32
	Stop         StopReason
	// Matched, when Stop is StopString, is the stop string that came
	// (Anthropic's stop_sequence names it).
	Matched string
	Usage   Usage
}

// TokenLogprob is a token, its text and its log-probability under the
// model, before the sampler's penalties and temperature.
type TokenLogprob struct {
	ID      int32
	Bytes   []byte // a character may be split across tokens
	Logprob float32
}

// Logprob is a generated token's log-probability, and the most likely
// tokens' at that step, most likely first.
type Logprob struct {
	TokenLogprob
	Top []TokenLogprob
}

// events is what a Stream reads: the engine's stream of a request.
type events interface {
	Next(context.Context) (engine.Event, error)
}

// Stream is a running generation.
type Stream struct {
	m       *Model
	ctx     context.Context // the caller's
	cancel  context.CancelFunc
	evs     events
	prompt  []int32
	asm     assembler
	relaxed []Relaxation
}

// Start submits a request and returns its Stream once the engine has
// taken it: errors in the request (a *PromptTooLongError among them),
// ErrBusy when the queue is full and ErrClosed after Shutdown come here,
// before anything is generated. When ctx ends, the generation stops
// within one step. The Stream must be read to its end, or closed.
func (m *Model) Start(ctx context.Context, req Request) (*Stream, error) {
	release, err := m.hold()
	if err != nil {
		return nil, err
	}
	defer release()
	p, err := m.prepare(&req)
	if err != nil {
		return nil, err
	}
	gctx, cancel := context.WithCancel(ctx)
	st, err := m.e.Submit(gctx, p.req)
	if err != nil {
		cancel()
		return nil, err
	}
	// Copies of the caller's slices, which the stream reads as it goes
	// while the caller may fill them again for its next request.
	s := &Stream{m: m, ctx: ctx, cancel: cancel, evs: st, prompt: p.req.Prompt, relaxed: p.relaxed,
		asm: assembler{src: m.textOf(p), stop: stopMatcher{stops: slices.Clone(req.Stop)}, logprobs: p.req.TopLogprobs >= 0}}
	if len(req.Tools) > 0 {
		s.asm.calls = m.format.NewCallParser(slices.Clone(req.Tools), newCallID)
	}
	return s, nil
}

// Generate runs a request and yields its Deltas as they come; an error
// that refused it comes alone. When ctx ends, the last Delta (the text so
// far, StopInterrupt, the usage) comes with ctx's error. Breaking out of
// the loop stops the generation.
func (m *Model) Generate(ctx context.Context, req Request) iter.Seq2[Delta, error] {
	return func(yield func(Delta, error) bool) {
		st, err := m.Start(ctx, req)
		if err != nil {
			yield(Delta{}, err)
			return
		}
		for d, err := range st.Deltas() {
			if !yield(d, err) {
				return
			}
		}
	}
}

// Prompt is the tokens of the request's prompt, the chat template
// applied.
func (s *Stream) Prompt() []int32 { return s.prompt }

// Relaxed lists the keywords of the request's schemas (its tools'
// parameters, its JSONSchema with RelaxSchema) that the grammar could not
// enforce and held to less: the answer may not be valid for them. A
// server names them to its client (a response header) and logs them.
func (s *Stream) Relaxed() []Relaxation { return s.relaxed }

// Close stops the generation, if it is still running.
func (s *Stream) Close() { s.cancel() }

// errStreamRead is what ranging over Deltas yields once the last Delta
// was read.
var errStreamRead = errors.New("the stream was read to its end already")

// Deltas yields the generation's Deltas, as Generate does. It may be
// ranged over once; breaking out of the loop stops the generation.
func (s *Stream) Deltas() iter.Seq2[Delta, error] {
	return func(yield func(Delta, error) bool) {
		defer s.cancel()
		matched, tokens := false, 0
		for {
			// The engine ends every request with a Done event, within a
			// step of its context's end, so this wait is bounded.
			ev, err := s.evs.Next(context.Background())
			if errors.Is(err, io.EOF) {
				// Deltas ranged over again, after the last Delta.
				err = errStreamRead
			}
			if err != nil {
				yield(Delta{}, err)
				return
			}
			if matched && !ev.Done {
				continue // generated before the engine saw the stop; not part of the answer
			}
			// The text is made of the tokenizer's bytes, in the mapping.
			release, err := s.m.hold()
			if err != nil {
				yield(Delta{Stop: StopShutdown}, err)
				return
			}
			if ev.Done {
				d, err := s.last(ev, matched, tokens)
				release()
				yield(d, err)
				return
			}
			tokens++
			p, stop := s.asm.add(ev)
			d := s.delta(p, ev)
			release()
			d.IDs = []int32{ev.Token}
			if stop {
				matched = true
				s.cancel()
			}
			if !yield(d, nil) {
				return
			}
		}
	}
}

// last is the Delta of the Done event: the rest of the text, why it
// stopped, and, when the caller's context ended it, that context's error.
func (s *Stream) last(ev engine.Event, matched bool, tokens int) (Delta, error) {
	var p piece
	if !matched {
		p, matched = s.asm.flush()
	}
	d := s.delta(p, ev)
	d.Stop, d.Usage = ev.Reason, Usage(ev.Usage)
	if matched {
		// The engine generated until it saw the stop; the answer ended at
		// the token that completed the stop string.
		d.Stop, d.Matched, d.Usage.CompletionTokens = StopString, s.asm.stop.matched, tokens
		return d, nil
	}
	if ev.Reason == StopInterrupt && s.ctx.Err() != nil {
		return d, context.Cause(s.ctx)
	}
	if ev.Reason == StopError {
		return d, fmt.Errorf("%w: %v", ErrGeneration, ev.Err)
	}
	return d, nil
}

// delta is the Delta of a piece of text released with event ev.
func (s *Stream) delta(p piece, ev engine.Event) Delta {
	d := Delta{Reasoning: p.reasoning, Content: p.content, ToolCalls: p.calls, Time: ev.Time, PromptLogits: ev.PromptLogits}
	if s.asm.logprobs {
		// Copies: the tokenizer's bytes are in the model's mapping, which
		// Close unmaps while a caller may still hold the Delta.
		tok := s.m.m.Tokenizer
		for _, t := range p.tokens {
			lp := Logprob{TokenLogprob: TokenLogprob{ID: t.Token, Bytes: bytes.Clone(tok.TokenBytes(t.Token)), Logprob: t.Logprob}}
			for _, top := range t.Top {
				lp.Top = append(lp.Top, TokenLogprob{ID: top.Token, Bytes: bytes.Clone(tok.TokenBytes(top.Token)), Logprob: top.Logprob})
			}
			d.Logprobs = append(d.Logprobs, lp)
		}
	}
	return d
}

// Prefill evaluates a conversation (or a raw prompt) without answering,
// and keeps its KV cache, so that the request that continues it (these
// messages and a new one) prefills only the new message: to load a saved
// chat, or warm a long system prompt that many requests share. Of a
// conversation it evaluates what that request will share with it: Qwen3
// drops an answer's thinking once a new message follows. It returns the
// usage; when ctx ends first, with ctx's error.
func (m *Model) Prefill(ctx context.Context, req Request) (Usage, error) {
	ids, err := m.shared(req)
	if err != nil {
		return Usage{}, err
	}
	run := Request{Tokens: ids, PromptOnly: true, KV: req.KV}
	if len(ids) == 0 {
		return Usage{}, nil
	}
	var last Delta
	for d, err := range m.Generate(ctx, run) {
		if err != nil {
			return d.Usage, err
		}
		last = d
	}
	return last.Usage, nil
}

// shared is the prompt Prefill evaluates: of a conversation, what the
// request that continues it will share with it.
func (m *Model) shared(req Request) ([]int32, error) {
	release, err := m.hold()
	if err != nil {
		return nil, err
	}
	defer release()
	ids, isChat, err := m.encode(&req, false)
	if err != nil || !isChat {
		return ids, err
	}
	next := req
	next.Messages = append(slices.Clip(req.Messages), Message{Role: "user"})
	more, _, err := m.encode(&next, true)
	if err != nil {
		return nil, err
	}
	return ids[:chat.CommonPrefix(ids, more)], nil
}

// Count is the number of tokens of a request's prompt, the chat template
// applied.
func (m *Model) Count(req Request) (int, error) {
	release, err := m.hold()
	if err != nil {
		return 0, err
	}
	defer release()
	ids, _, err := m.encode(&req, true)
	return len(ids), err
}
