package chat

import (
	"strings"
	"testing"
)

// TestMessageEnds: the positions after each message's <|im_end|> and its
// newline, in a rendered conversation's tokens.
func TestMessageEnds(t *testing.T) {
	tok := qwenTokenizer(t)
	f, err := Lookup("qwen3")
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello"}, {Role: "user", Content: "Bye"}}
	segs, err := f.Render(msgs, Options{GenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := Encode(tok, segs)
	if err != nil {
		t.Fatal(err)
	}
	ends := f.MessageEnds(tok, ids)
	if len(ends) != len(msgs) {
		t.Fatalf("%d message ends for %d messages: %v", len(ends), len(msgs), ends)
	}
	for i, e := range ends {
		if got := tok.Decode(ids[:e]); !strings.HasSuffix(got, "<|im_end|>\n") {
			t.Errorf("end %d at %d: the text before it ends %q", i, e, got[max(0, len(got)-20):])
		}
	}
}
