package chat

import (
	"strings"

	"github.com/qwenc/qwenc/format/tokenizer"
)

// Splitter turns a stream of generated token ids into text, separating
// the reasoning (between a format's think markers) from the answer, the
// way vLLM and llama-server return reasoning_content and content. It
// decodes incrementally: bytes of a character split across tokens wait for
// the rest. Format.NewSplitter makes one.
type Splitter struct {
	dec         *tokenizer.StreamDecoder
	open, close int32 // the marker ids, -1 when the vocabulary has none
	reasoning   bool
	trimLeading bool // drop the newlines the template puts after the close marker
	closed      bool // the reasoning has ended: later markers are answer text
}

// newSplitter starts a splitter at the markers open and close. With
// opened, the answer begins in the reasoning (the prompt ended with the
// open marker); otherwise it begins as content and the open marker opens
// the reasoning.
func newSplitter(tok *tokenizer.Tokenizer, open, close string, opened bool) *Splitter {
	s := &Splitter{dec: tok.NewStreamDecoder(), open: -1, close: -1, reasoning: opened}
	if id, ok := tok.TokenID(open); ok {
		s.open = id
	}
	if id, ok := tok.TokenID(close); ok {
		s.close = id
	}
	return s
}

// Add returns the text the token completes, as reasoning or content. The
// markers themselves are not part of either.
func (s *Splitter) Add(id int32) (reasoning, content string) {
	switch {
	case s.closed:
	case id == s.open:
		r, c := s.flushTo()
		s.reasoning = true
		return r, c
	case id == s.close:
		r, c := s.flushTo()
		s.reasoning, s.trimLeading, s.closed = false, true, true
		return r, c
	}
	return s.route(s.dec.Add(id))
}

// Flush returns what is still held back at the end of the answer.
func (s *Splitter) Flush() (reasoning, content string) { return s.flushTo() }

// Reasoning reports whether the text so far is inside a reasoning block.
func (s *Splitter) Reasoning() bool { return s.reasoning }

func (s *Splitter) flushTo() (string, string) { return s.route(s.dec.Flush()) }

func (s *Splitter) route(text string) (reasoning, content string) {
	if s.reasoning {
		return text, ""
	}
	if s.trimLeading {
		text = strings.TrimLeft(text, "\n")
		s.trimLeading = text == ""
	}
	return "", text
}
