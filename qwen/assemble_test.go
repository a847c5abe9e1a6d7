package qwen

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/format/tokenizer"
	"github.com/qwenc/qwenc/runtime/engine"
)

// thinkingAnswer is the ids of a Qwen3 answer with reasoning, in the
// real Qwen tokenizer: <think>, the reasoning, </think>, "\n\n", the
// answer, and one character split across byte tokens.
func thinkingAnswer(t *testing.T, tok *tokenizer.Tokenizer) (ids []int32, reasoning, content string) {
	t.Helper()
	id := func(s string) int32 {
		v, ok := tok.TokenID(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		return v
	}
	text := func(s string) { ids = append(ids, tok.Encode(s, false)...) }
	ids = append(ids, id(chat.ThinkOpen))
	text("\nThe user asks for 2+2. That is four.\n")
	ids = append(ids, id(chat.ThinkClose))
	text("\n\n")
	text("2+2 is 4 ")
	ids = append(ids, id("\xe6"), id("\x97"), id("\xa5")) // 日, byte by byte
	text(" and STOP after.")
	return ids, "\nThe user asks for 2+2. That is four.\n", "2+2 is 4 日 and STOP after."
}

// forcedEvents is an engine stream whose tokens are given instead of
// sampled.
type forcedEvents struct{ evs []engine.Event }

func (f *forcedEvents) Next(context.Context) (engine.Event, error) {
	if len(f.evs) == 0 {
		return engine.Event{}, io.EOF
	}
	ev := f.evs[0]
	f.evs = f.evs[1:]
	return ev, nil
}

// forced is a chat generation whose tokens are given, ending with reason.
func forced(m *Model, ids []int32, stops []string, logprobs bool, reason engine.StopReason) *Stream {
	var evs []engine.Event
	now := time.Now()
	for i, id := range ids {
		evs = append(evs, engine.Event{Token: id, Logprob: -float32(i+1) / 100, Time: now})
	}
	evs = append(evs, engine.Event{Done: true, Reason: reason, Usage: engine.Usage{PromptTokens: 7, CompletionTokens: len(ids) + 2}})
	return &Stream{m: m, ctx: context.Background(), cancel: func() {}, evs: &forcedEvents{evs},
		asm: assembler{src: m.format.NewSplitter(m.m.Tokenizer, chat.Options{}), stop: stopMatcher{stops: stops}, logprobs: logprobs}}
}

// TestAssemblerReasoning: the reasoning and the answer come apart, with
// stop strings in either, and log-probabilities only for the answer's
// tokens whose text is given; a stop string ends the generation with
// StopString at the token that completed it.
func TestAssemblerReasoning(t *testing.T) {
	m := tinyModel(t)
	tok := m.m.Tokenizer
	ids, reasoning, content := thinkingAnswer(t, tok)
	for _, c := range []struct {
		stops                []string
		reasoning, content   string
		finish               StopReason
		contentTokensCounted bool
	}{
		{nil, reasoning, content, StopEOS, true},
		{[]string{"asks"}, "\nThe user ", "", StopString, false},
		{[]string{"4 日 a"}, reasoning, "2+2 is ", StopString, false},
		{[]string{"日"}, reasoning, "2+2 is 4 ", StopString, false},
		{[]string{"four.\n\n2+2"}, reasoning, content, StopEOS, true}, // not across the marker
	} {
		var r, ct strings.Builder
		var lps []Logprob
		var last Delta
		generated := 0
		for d, err := range forced(m, ids, c.stops, true, StopEOS).Deltas() {
			if err != nil {
				t.Fatal(err)
			}
			r.WriteString(d.Reasoning)
			ct.WriteString(d.Content)
			lps = append(lps, d.Logprobs...)
			generated += len(d.IDs)
			last = d
		}
		if r.String() != c.reasoning || ct.String() != c.content || last.Stop != c.finish {
			t.Errorf("stops %q: reasoning %q, content %q, %s; want %q, %q, %s", c.stops, r.String(), ct.String(), last.Stop,
				c.reasoning, c.content, c.finish)
		}
		if c.finish == StopString && last.Usage.CompletionTokens != generated {
			t.Errorf("stops %q: %d completion tokens, %d ids up to the stop", c.stops, last.Usage.CompletionTokens, generated)
		}
		// The tokens' texts make the content, but for the newlines the
		// template puts after </think>, which the content drops.
		var joined []byte
		for _, lp := range lps {
			joined = append(joined, lp.Bytes...)
		}
		if got := strings.TrimLeft(string(joined), "\n"); got != ct.String() {
			t.Errorf("stops %q: log-probabilities of %q, content %q", c.stops, got, ct.String())
		}
	}
}
