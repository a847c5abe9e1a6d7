package serve

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/qwenc/qwenc/tokenizer"
)

// textSource turns generated ids into text: chat.Splitter, which routes
// Qwen3's thinking to the reasoning, or rawText.
type textSource interface {
	Add(id int32) (reasoning, content string)
	Flush() (reasoning, content string)
	Reasoning() bool
}

// rawText is the text of a raw completion, markers included, as qwenrun
// prints it.
type rawText struct{ dec *tokenizer.StreamDecoder }

func (r rawText) Add(id int32) (string, string) { return "", r.dec.Add(id) }
func (r rawText) Flush() (string, string)       { return "", r.dec.Flush() }
func (r rawText) Reasoning() bool               { return false }

// delta is text ready for the client, and the log-probabilities of the
// content tokens it completes.
type delta struct {
	Reasoning, Content string
	Logprobs           []Event
}

func (d delta) empty() bool { return d.Reasoning == "" && d.Content == "" && len(d.Logprobs) == 0 }

// assembler turns a generation's events into deltas, holding back text
// that could start a stop string. Stop strings are matched within the
// reasoning and within the answer, not across the marker between them.
// A token's log-probability is released with the last byte of its text,
// so one whose text is cut by a stop string is never sent; those of the
// reasoning and of the think markers are not sent at all, as OpenAI's
// logprobs cover the content.
type assembler struct {
	src       textSource
	stop      stopMatcher
	logprobs  bool
	reasoning bool        // the channel of the held text
	pending   []heldToken // content tokens whose text is held back
}

type heldToken struct {
	ev  Event
	end int // offset in the held text just after the token's text; -1: not known yet
}

// add takes a token; with matched, a stop string came and the delta is
// the last one.
func (a *assembler) add(ev Event) (d delta, matched bool) {
	before := a.src.Reasoning()
	r, c := a.src.Add(ev.Token)
	after := a.src.Reasoning()
	var lp *Event
	if a.logprobs && !before && !after {
		lp = &ev
	}
	if r != "" && a.push(&d, true, r, nil) {
		return d, true
	}
	if (c != "" || lp != nil) && a.push(&d, false, c, lp) {
		return d, true
	}
	a.switchTo(&d, after)
	return d, false
}

// flush ends the text at the end of the generation.
func (a *assembler) flush() (d delta, matched bool) {
	r, c := a.src.Flush()
	if a.push(&d, true, r, nil) || a.push(&d, false, c, nil) {
		return d, true
	}
	a.release(&d, a.reasoning, a.stop.flush())
	return d, false
}

func (a *assembler) push(d *delta, reasoning bool, text string, lp *Event) bool {
	if text == "" && lp == nil {
		return false
	}
	a.switchTo(d, reasoning)
	if lp != nil {
		a.pending = append(a.pending, heldToken{*lp, -1})
	}
	if text != "" {
		// Tokens without text of their own hold the first bytes of the
		// character this text completes: they end where it does.
		for i := range a.pending {
			if a.pending[i].end < 0 {
				a.pending[i].end = len(a.stop.held) + len(text)
			}
		}
	}
	out, matched := a.stop.add(text)
	a.release(d, reasoning, out)
	if matched {
		a.pending = nil
	}
	return matched
}

// switchTo releases what is held of the other channel.
func (a *assembler) switchTo(d *delta, reasoning bool) {
	if reasoning != a.reasoning {
		a.release(d, a.reasoning, a.stop.flush())
		a.reasoning, a.pending = reasoning, nil
	}
}

// release adds the first len(text) bytes of the held text to d, with the
// tokens that end within them.
func (a *assembler) release(d *delta, reasoning bool, text string) {
	if reasoning {
		d.Reasoning += text
		return
	}
	d.Content += text
	n := 0
	for n < len(a.pending) && a.pending[n].end >= 0 && a.pending[n].end <= len(text) {
		d.Logprobs = append(d.Logprobs, a.pending[n].ev)
		n++
	}
	a.pending = a.pending[n:]
	for i := range a.pending {
		if a.pending[i].end >= 0 {
			a.pending[i].end -= len(text)
		}
	}
}

// generation is a request running in the engine.
type generation struct {
	s      *Server
	stream *Stream
	cancel context.CancelFunc
	asm    assembler
	rl     *reqLog
}

// outcome is how a generation ended.
type outcome struct {
	finish string // "stop" or "length"
	usage  Usage
}

// start submits req; the generation ends with ctx. Its text comes from
// src and ends before the first of stops.
func (s *Server) start(ctx context.Context, rl *reqLog, req Request, src textSource, stops []string) (*generation, *apiError) {
	gctx, cancel := context.WithCancel(ctx)
	st, err := s.e.Submit(gctx, req)
	switch {
	case errors.Is(err, ErrBusy):
		cancel()
		return nil, &apiError{status: http.StatusServiceUnavailable, msg: err.Error(), code: "server_busy", retryAfter: 1}
	case errors.Is(err, ErrClosed):
		cancel()
		return nil, &apiError{status: http.StatusServiceUnavailable, msg: err.Error(), code: "shutting_down"}
	case err != nil:
		cancel()
		return nil, badRequest("", "%v", err)
	}
	rl.hasGeneration, rl.prompt = true, len(req.Prompt)
	return &generation{s: s, stream: st, cancel: cancel, rl: rl,
		asm: assembler{src: src, stop: stopMatcher{stops: stops}, logprobs: req.TopLogprobs >= 0}}, nil
}

// run reads the generation to its end, handing released text to emit.
// It fails when the client goes (ctx ends) or emit fails; the engine
// then stops the generation within one step.
func (g *generation) run(ctx context.Context, emit func(delta) error) (outcome, error) {
	defer g.cancel()
	stopped := false
	var last time.Time
	for {
		ev, err := g.stream.Next(ctx)
		if err != nil {
			g.rl.clientGone = true
			return outcome{}, err
		}
		if ev.Done {
			return g.end(ev, stopped, emit)
		}
		if last.IsZero() {
			g.rl.ttft = ev.Time.Sub(g.rl.start)
			g.s.metrics.ttft.Observe(g.rl.ttft.Seconds())
		} else {
			g.s.metrics.itl.Observe(ev.Time.Sub(last).Seconds())
		}
		last = ev.Time
		if stopped {
			continue // the engine stops within a step; its tokens are not sent
		}
		d, matched := g.asm.add(ev)
		if !d.empty() {
			if err := emit(d); err != nil {
				g.rl.clientGone = true
				return outcome{}, err
			}
		}
		if matched {
			stopped = true
			g.cancel()
		}
	}
}

func (g *generation) end(ev Event, stopped bool, emit func(delta) error) (outcome, error) {
	if ev.Reason == StopCancelled && !stopped {
		// Only the client's leaving cancels the request's context here;
		// the engine may have ended the job before run saw ctx end, and a
		// last write to the closed connection can still succeed.
		g.rl.clientGone = true
		return outcome{}, context.Canceled
	}
	if !stopped {
		d, matched := g.asm.flush()
		stopped = matched
		if !d.empty() {
			if err := emit(d); err != nil {
				g.rl.clientGone = true
				return outcome{}, err
			}
		}
	}
	u := ev.Usage
	g.rl.cached, g.rl.generated = u.CachedTokens, u.CompletionTokens
	g.s.metrics.countTokens(u)
	// A generation cut by the server's shutdown is incomplete, which is
	// what "length" tells a client.
	finish := "length"
	if stopped || ev.Reason == StopToken {
		finish = "stop"
	}
	return outcome{finish: finish, usage: u}, nil
}
