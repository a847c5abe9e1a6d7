package serve

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/qwenc/qwenc/qwen"
)

// thinkingAnswer is a Qwen3 answer with reasoning, as package qwen gives
// it (tested there): pieces of reasoning, then of the answer, one with a
// character of three bytes.
func thinkingAnswer() (pieces []qwen.Delta, reasoning, content string) {
	for _, r := range []string{"\nThe user asks", " for 2+2.", " That is four.\n"} {
		pieces = append(pieces, qwen.Delta{Reasoning: r, IDs: []int32{1}})
	}
	for _, c := range []string{"", "2+2 is 4 ", "日", " and STOP after."} {
		pieces = append(pieces, qwen.Delta{Content: c, IDs: []int32{2}})
	}
	return pieces, "\nThe user asks for 2+2. That is four.\n", "2+2 is 4 日 and STOP after."
}

// forced is a generation whose deltas are given, ended by the model.
func forced(ts *testServer, pieces []qwen.Delta) *generation {
	return forcedTo(ts, pieces, qwen.StopEOS)
}

// forcedTo is a generation whose deltas are given, and why it stopped;
// "": it breaks off without its last delta.
func forcedTo(ts *testServer, pieces []qwen.Delta, stop qwen.StopReason) *generation {
	now := time.Now()
	deltas := func(yield func(qwen.Delta, error) bool) {
		for _, d := range pieces {
			d.Time = now
			if !yield(d, nil) {
				return
			}
		}
		if stop != "" {
			yield(qwen.Delta{Time: now, Stop: stop, Usage: qwen.Usage{PromptTokens: 7, CompletionTokens: len(pieces)}}, nil)
		}
	}
	return &generation{s: ts.Server, deltas: deltas, stop: func() {}, rl: &reqLog{start: now}}
}

// TestChatAnswerReasoning: reasoning_content in the stream's deltas and
// in the message, beside the content.
func TestChatAnswerReasoning(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	pieces, reasoning, content := thinkingAnswer()
	rec := httptest.NewRecorder()
	ts.answerChat(rec, httptest.NewRequest("POST", "/v1/chat/completions", nil), ts.target(), forced(ts, pieces), true, true)
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
	ts.answerChat(rec, httptest.NewRequest("POST", "/v1/chat/completions", nil), ts.target(), forced(ts, pieces), false, false)
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
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	pieces, reasoning, content := thinkingAnswer()
	for _, isChat := range []bool{true, false} {
		rec := httptest.NewRecorder()
		ts.ollamaAnswer(rec, httptest.NewRequest("POST", "/api/chat", nil), ts.target(), forced(ts, pieces), true, isChat)
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
