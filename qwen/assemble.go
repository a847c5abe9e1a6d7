package qwen

import (
	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/format/tokenizer"
	"github.com/qwenc/qwenc/runtime/engine"
)

// textSource turns generated ids into text: chat.Splitter, which routes
// the model's thinking to the reasoning, or rawText.
type textSource interface {
	Add(id int32) (reasoning, content string)
	Flush() (reasoning, content string)
	Reasoning() bool
}

// rawText is the text of a raw completion, markers included, as the model
// wrote it.
type rawText struct{ dec *tokenizer.StreamDecoder }

func (r rawText) Add(id int32) (string, string) { return "", r.dec.Add(id) }
func (r rawText) Flush() (string, string)       { return "", r.dec.Flush() }
func (r rawText) Reasoning() bool               { return false }

// piece is text ready for the caller, and the content tokens it completes
// (their log-probabilities).
type piece struct {
	reasoning, content string
	tokens             []engine.Event
	calls              []ToolCallDelta
}

// assembler turns a generation's events into text, holding back text that
// could start a stop string. Stop strings are matched within the
// reasoning and within the answer, not across the marker between them. A
// token's log-probability is released with the last byte of its text, so
// one whose text is cut by a stop string is never given; those of the
// reasoning and of the think markers are not given at all, as OpenAI's
// logprobs cover the content.
type assembler struct {
	src       textSource
	calls     chat.CallParser // with tools: takes the calls out of the content
	stop      stopMatcher
	logprobs  bool
	reasoning bool        // the channel of the held text
	pending   []heldToken // content tokens whose text is held back
}

type heldToken struct {
	ev  engine.Event
	end int // offset in the held text just after the token's text; -1: not known yet
}

// add takes a token; with matched, a stop string came and the piece is
// the last one.
func (a *assembler) add(ev engine.Event) (d piece, matched bool) {
	before := a.src.Reasoning() || a.inCall()
	r, c := a.src.Add(ev.Token)
	if a.calls != nil {
		c = a.calls.Add(c)
		d.calls = a.calls.Take()
	}
	after := a.src.Reasoning()
	var lp *engine.Event
	if a.logprobs && !before && !after && !a.inCall() {
		lp = &ev
	}
	if r != "" && a.push(&d, true, r, nil) {
		return d, true
	}
	if (c != "" || lp != nil) && a.push(&d, false, c, lp) {
		return d, true
	}
	if len(d.calls) > 0 && !a.reasoning {
		// The text held as a possible start of a stop string goes out
		// before the call: a stop string cannot run across it (a call's
		// text is not content), and held to the end it would come after.
		a.release(&d, false, a.stop.flush())
	}
	a.switchTo(&d, after)
	return d, false
}

// flush ends the text at the end of the generation.
func (a *assembler) flush() (d piece, matched bool) {
	r, c := a.src.Flush()
	if a.calls != nil {
		c = a.calls.Add(c) + a.calls.Flush()
		d.calls = a.calls.Take()
	}
	if a.push(&d, true, r, nil) || a.push(&d, false, c, nil) {
		return d, true
	}
	a.release(&d, a.reasoning, a.stop.flush())
	return d, false
}

// inCall reports whether the text is going into a tool call: its tokens
// are not content tokens.
func (a *assembler) inCall() bool { return a.calls != nil && a.calls.InCall() }

func (a *assembler) push(d *piece, reasoning bool, text string, lp *engine.Event) bool {
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
func (a *assembler) switchTo(d *piece, reasoning bool) {
	if reasoning != a.reasoning {
		a.release(d, a.reasoning, a.stop.flush())
		a.reasoning, a.pending = reasoning, nil
	}
}

// release adds the first len(text) bytes of the held text to d, with the
// tokens that end within them.
func (a *assembler) release(d *piece, reasoning bool, text string) {
	if reasoning {
		d.reasoning += text
		return
	}
	d.content += text
	n := 0
	for n < len(a.pending) && a.pending[n].end >= 0 && a.pending[n].end <= len(text) {
		d.tokens = append(d.tokens, a.pending[n].ev)
		n++
	}
	a.pending = a.pending[n:]
	for i := range a.pending {
		if a.pending[i].end >= 0 {
			a.pending[i].end -= len(text)
		}
	}
}
