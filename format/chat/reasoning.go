package chat

import (
	"strings"

	"github.com/qwenc/qwenc/format/tokenizer"
)

// Splitter turns a stream of generated token ids into text, separating
// Qwen3's reasoning (between <think> and </think>) from the answer, the
// way vLLM and llama-server return reasoning_content and content. It
// decodes incrementally: bytes of a character split across tokens wait for
// the rest.
type Splitter struct {
	dec         *tokenizer.StreamDecoder
	open, close int32 // the marker ids, -1 when the vocabulary has none
	reasoning   bool
	trimLeading bool // drop the newlines the template puts after </think>
}

// NewSplitter starts a splitter. With thinking, the answer begins in the
// reasoning (the prompt ended with <think>, as some Qwen3 templates do);
// otherwise it begins as content and a <think> token opens the reasoning.
func NewSplitter(tok *tokenizer.Tokenizer, thinking bool) *Splitter {
	s := &Splitter{dec: tok.NewStreamDecoder(), open: -1, close: -1, reasoning: thinking}
	if id, ok := tok.TokenID(ThinkOpen); ok {
		s.open = id
	}
	if id, ok := tok.TokenID(ThinkClose); ok {
		s.close = id
	}
	return s
}

// Add returns the text the token completes, as reasoning or content. The
// markers themselves are not part of either.
func (s *Splitter) Add(id int32) (reasoning, content string) {
	switch id {
	case s.open:
		r, c := s.flushTo()
		s.reasoning = true
		return r, c
	case s.close:
		r, c := s.flushTo()
		s.reasoning, s.trimLeading = false, true
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
