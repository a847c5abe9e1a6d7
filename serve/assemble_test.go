package serve

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/qwenc/qwenc/chat"
	"github.com/qwenc/qwenc/tokenizer"
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
		return int32(v)
	}
	text := func(s string) {
		for _, v := range tok.Encode(s, false) {
			ids = append(ids, int32(v))
		}
	}
	ids = append(ids, id(chat.ThinkOpen))
	text("\nThe user asks for 2+2. That is four.\n")
	ids = append(ids, id(chat.ThinkClose))
	text("\n\n")
	text("2+2 is 4 ")
	ids = append(ids, id("\xe6"), id("\x97"), id("\xa5")) // 日, byte by byte
	text(" and STOP after.")
	return ids, "\nThe user asks for 2+2. That is four.\n", "2+2 is 4 日 and STOP after."
}

// forced is a generation whose tokens are given instead of sampled.
func forced(ts *testServer, ids []int32, stops []string, logprobs bool) *generation {
	st := newStream()
	now := time.Now()
	for i, id := range ids {
		st.push(Event{Token: id, Logprob: -float32(i+1) / 100, Time: now})
	}
	st.push(Event{Done: true, Reason: StopToken, Usage: Usage{PromptTokens: 7, CompletionTokens: len(ids)}})
	return &generation{s: ts.Server, stream: st, cancel: func() {}, rl: &reqLog{start: now},
		asm: assembler{src: chat.NewSplitter(ts.e.Model().Tokenizer, false), stop: stopMatcher{stops: stops}, logprobs: logprobs}}
}

// TestAssemblerReasoning: the reasoning and the answer come apart, with
// stop strings in either, and log-probabilities only for the answer's
// tokens whose text is sent.
func TestAssemblerReasoning(t *testing.T) {
	ts := newTestServer(t, Options{}, ServerOptions{})
	tok := ts.e.Model().Tokenizer
	ids, reasoning, content := thinkingAnswer(t, tok)
	for _, c := range []struct {
		stops                []string
		reasoning, content   string
		finish               string
		contentTokensCounted bool
	}{
		{nil, reasoning, content, "stop", true},
		{[]string{"asks"}, "\nThe user ", "", "stop", false},
		{[]string{"4 日 a"}, reasoning, "2+2 is ", "stop", false},
		{[]string{"日"}, reasoning, "2+2 is 4 ", "stop", false},
		{[]string{"four.\n\n2+2"}, reasoning, content, "stop", true}, // not across the marker
	} {
		g := forced(ts, ids, c.stops, true)
		var r, ct strings.Builder
		var lps []Event
		out, err := g.run(t.Context(), func(d delta) error {
			r.WriteString(d.Reasoning)
			ct.WriteString(d.Content)
			lps = append(lps, d.Logprobs...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if r.String() != c.reasoning || ct.String() != c.content || out.finish != c.finish {
			t.Errorf("stops %q: reasoning %q, content %q, %s; want %q, %q, %s", c.stops, r.String(), ct.String(), out.finish,
				c.reasoning, c.content, c.finish)
		}
		// The tokens' texts make the content, but for the newlines the
		// template puts after </think>, which the content drops.
		var joined []byte
		for _, ev := range lps {
			joined = append(joined, tok.TokenBytes(ev.Token)...)
		}
		if got := strings.TrimLeft(string(joined), "\n"); got != ct.String() {
			t.Errorf("stops %q: log-probabilities of %q, content %q", c.stops, got, ct.String())
		}
	}
}

// TestChatAnswerReasoning: reasoning_content in the stream's deltas and
// in the message, beside the content.
func TestChatAnswerReasoning(t *testing.T) {
	ts := newTestServer(t, Options{}, ServerOptions{})
	ids, reasoning, content := thinkingAnswer(t, ts.e.Model().Tokenizer)
	rec := httptest.NewRecorder()
	ts.answerChat(rec, httptest.NewRequest("POST", "/v1/chat/completions", nil), forced(ts, ids, nil, false), true, true)
	events := sseEvents(t, rec.Body.String())
	if events[len(events)-1] != "[DONE]" {
		t.Fatalf("the stream ends with %q", events[len(events)-1])
	}
	var r, c strings.Builder
	var finish string
	for _, e := range events[:len(events)-1] {
		var ch chatCompletion
		unmarshal(t, e, &ch)
		for _, choice := range ch.Choices {
			r.WriteString(choice.Delta.ReasoningContent)
			if choice.Delta.Content != nil {
				c.WriteString(*choice.Delta.Content)
			}
			if choice.FinishReason != nil {
				finish = *choice.FinishReason
			}
		}
	}
	if r.String() != reasoning || c.String() != content || finish != "stop" {
		t.Errorf("streamed reasoning %q, content %q, %s", r.String(), c.String(), finish)
	}

	rec = httptest.NewRecorder()
	ts.answerChat(rec, httptest.NewRequest("POST", "/v1/chat/completions", nil), forced(ts, ids, nil, false), false, false)
	var res struct {
		Choices []struct {
			Message map[string]string `json:"message"`
		} `json:"choices"`
	}
	unmarshal(t, rec.Body.String(), &res)
	if m := res.Choices[0].Message; m["reasoning_content"] != reasoning || m["content"] != content || m["role"] != "assistant" {
		t.Errorf("message %q", m)
	}
}

// TestOllamaAnswerThinking: Ollama's thinking field, in /api/chat's
// message and in /api/generate's object.
func TestOllamaAnswerThinking(t *testing.T) {
	ts := newTestServer(t, Options{}, ServerOptions{})
	ids, reasoning, content := thinkingAnswer(t, ts.e.Model().Tokenizer)
	for _, isChat := range []bool{true, false} {
		rec := httptest.NewRecorder()
		ts.ollamaAnswer(rec, httptest.NewRequest("POST", "/api/chat", nil), forced(ts, ids, nil, false), true, isChat)
		var th, c strings.Builder
		lines := strings.Split(strings.TrimSpace(rec.Body.String()), "\n")
		for _, line := range lines {
			var o struct {
				Message  *ollamaOut `json:"message"`
				Response *string    `json:"response"`
				Thinking string     `json:"thinking"`
			}
			unmarshal(t, line, &o)
			if isChat {
				th.WriteString(o.Message.Thinking)
				c.WriteString(o.Message.Content)
			} else {
				th.WriteString(o.Thinking)
				c.WriteString(*o.Response)
			}
		}
		if th.String() != reasoning || c.String() != content {
			t.Errorf("chat %v: thinking %q, content %q", isChat, th.String(), c.String())
		}
		var last map[string]any
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last["done"] != true || last["done_reason"] != "stop" {
			t.Errorf("chat %v: last line %s", isChat, lines[len(lines)-1])
		}
	}
}
