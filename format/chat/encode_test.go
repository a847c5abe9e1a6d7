package chat

import (
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/qwenc/qwenc/format/tokenizer"
	"github.com/qwenc/qwenc/internal/testmodel"
)

var (
	tokOnce sync.Once
	tokVal  *tokenizer.Tokenizer
	tokErr  error
)

// qwenTokenizer builds the real Qwen tokenizer once per test binary.
func qwenTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	tokOnce.Do(func() {
		var tj, cfg, blob []byte
		if tj, tokErr = os.ReadFile(testmodel.TokenizerJSON(t)); tokErr != nil {
			return
		}
		if cfg, tokErr = os.ReadFile(testmodel.Testdata(t, "tiny-a", "tokenizer_config.json")); tokErr != nil {
			return
		}
		var v *tokenizer.Vocab
		if v, tokErr = tokenizer.LoadHF(tj, cfg); tokErr != nil {
			return
		}
		if blob, tokErr = v.MarshalBinary(); tokErr != nil {
			return
		}
		tokVal, tokErr = tokenizer.Load(blob)
	})
	if tokErr != nil {
		t.Fatal(tokErr)
	}
	return tokVal
}

func ids(tok *tokenizer.Tokenizer, t *testing.T, marker string) int32 {
	id, ok := tok.TokenID(marker)
	if !ok {
		t.Fatalf("no token %q", marker)
	}
	return int32(id)
}

// TestEncode: markers are their ids, message text is plain even when it
// spells a marker.
func TestEncode(t *testing.T) {
	tok := qwenTokenizer(t)
	segs := render(t, qwen3, []Message{{Role: "user", Content: "hi <|im_end|>"}}, Options{GenerationPrompt: true})
	got, err := Encode(tok, segs)
	if err != nil {
		t.Fatal(err)
	}
	imStart, imEnd := ids(tok, t, ImStart), ids(tok, t, ImEnd)
	if got[0] != imStart || slices.Index(got, imEnd) != len(got)-5 {
		// <|im_start|>user\nhi <|im_end|>(text)<|im_end|>\n<|im_start|>assistant\n
		t.Errorf("encoded %v: want <|im_start|> first and one real <|im_end|> before the generation prompt", got)
	}
	if n := len(slices.DeleteFunc(slices.Clone(got), func(id int32) bool { return id != imEnd })); n != 1 {
		t.Errorf("%d <|im_end|> ids; the one typed in the message must stay text", n)
	}
	if _, err := Encode(tok, []Segment{{Text: "<|nonsense|>", Special: true}}); err == nil {
		t.Error("an unknown marker was encoded")
	}
}

func TestStopTokens(t *testing.T) {
	tok := qwenTokenizer(t)
	stop := StopTokens(tok, []int32{151645, 151643}, qwen3)
	if !slices.Equal(stop, []int32{151645, 151643}) {
		t.Errorf("stop tokens %v: the eos ids given already hold <|im_end|> and <|endoftext|>", stop)
	}
	for _, f := range append([]*Format{nil}, formats...) {
		if stop := StopTokens(tok, nil, f); !slices.Contains(stop, ids(tok, t, ImEnd)) {
			t.Errorf("%v: stop tokens %v lack <|im_end|>", f, stop)
		}
	}
}

// TestSplitter splits reasoning from the answer token by token, holds back
// a character split across tokens, and drops the newlines after </think>.
func TestSplitter(t *testing.T) {
	tok := qwenTokenizer(t)
	enc := func(s string) []int32 {
		var out []int32
		for _, id := range tok.Encode(s, false) {
			out = append(out, int32(id))
		}
		return out
	}
	open, close := ids(tok, t, ThinkOpen), ids(tok, t, ThinkClose)
	stream := slices.Concat([]int32{open}, enc("\nLet me think: é ok.\n"), []int32{close}, enc("\n\nThe answer is 42 ✓."))
	for _, opened := range []bool{false, true} {
		s := newSplitter(tok, ThinkOpen, ThinkClose, opened)
		var r, c string
		for _, id := range stream {
			dr, dc := s.Add(id)
			r, c = r+dr, c+dc
		}
		dr, dc := s.Flush()
		r, c = r+dr, c+dc
		if r != "\nLet me think: é ok.\n" || c != "The answer is 42 ✓." {
			t.Errorf("opened=%v: reasoning %q, content %q", opened, r, c)
		}
	}
	// Starting in the reasoning (the prompt ended with <think>, as
	// Qwen3.5's does with thinking on): text before </think> is
	// reasoning. Qwen3's prompt and one without thinking start in the
	// content.
	for _, c := range []struct {
		f            *Format
		o            Options
		wantR, wantC string
	}{
		{qwen35, Options{}, "hmm", "yes"},
		{qwen35, Options{NoThinking: true}, "", "hmmyes"},
		{qwen3, Options{}, "", "hmmyes"},
		{chatML, Options{}, "", "hmmyes"},
	} {
		s := c.f.NewSplitter(tok, c.o)
		var r, content string
		for _, id := range slices.Concat(enc("hmm"), []int32{close}, enc("yes")) {
			dr, dc := s.Add(id)
			r, content = r+dr, content+dc
		}
		if r != c.wantR || content != c.wantC {
			t.Errorf("%v %+v: reasoning %q, content %q; want %q, %q", c.f, c.o, r, content, c.wantR, c.wantC)
		}
	}
}

// TestSplitterOnce: once the close marker has ended the reasoning, later
// markers are the answer's text, as vLLM's Qwen3ReasoningParser splits
// once, at the first </think>: an answer that writes about Qwen's format
// went on as reasoning to the next close marker, both markers lost.
func TestSplitterOnce(t *testing.T) {
	tok := qwenTokenizer(t)
	enc := func(s string) []int32 { return tok.Encode(s, false) }
	open, close := ids(tok, t, ThinkOpen), ids(tok, t, ThinkClose)
	stream := slices.Concat(enc("plan"), []int32{close}, enc("\n\nQwen wraps reasoning in "),
		[]int32{open}, enc(" and "), []int32{close}, enc(" tags."))
	s := qwen35.NewSplitter(tok, Options{})
	var r, c string
	for _, id := range stream {
		dr, dc := s.Add(id)
		r, c = r+dr, c+dc
	}
	dr, dc := s.Flush()
	if r, c = r+dr, c+dc; r != "plan" || c != "Qwen wraps reasoning in <think> and </think> tags." {
		t.Errorf("reasoning %q, content %q", r, c)
	}
}
