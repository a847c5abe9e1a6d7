package serve

import (
	"encoding/json"
	"fmt"
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

// failing is a generation the engine fails after some text, as
// qwen.Stream gives it: the last delta with an ErrGeneration.
func failing(ts *testServer) *generation {
	now := time.Now()
	deltas := func(yield func(qwen.Delta, error) bool) {
		if !yield(qwen.Delta{Content: "Hello", IDs: []int32{1}, Time: now}, nil) {
			return
		}
		yield(qwen.Delta{Time: now, Stop: qwen.StopError, Usage: qwen.Usage{PromptTokens: 7, CompletionTokens: 1}},
			fmt.Errorf("%w: the kernel failed", qwen.ErrGeneration))
	}
	return &generation{s: ts.Server, deltas: deltas, stop: func() {}, rl: &reqLog{start: now}}
}

// TestGenerationFails: a generation the engine fails is answered in each
// protocol's shape, never as an empty 200 or a stream that just stops:
// a 500 with the error object when nothing was sent yet, else the
// stream's error (OpenAI's error object then [DONE], Ollama's error
// line, Anthropic's error event); the request is logged as failed.
func TestGenerationFails(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	answer := map[string]func(w *httptest.ResponseRecorder, g *generation, stream bool) *apiError{
		"openai": func(w *httptest.ResponseRecorder, g *generation, stream bool) *apiError {
			return ts.answerChat(w, httptest.NewRequest("POST", "/v1/chat/completions", nil), ts.target(), g, stream, false)
		},
		"ollama": func(w *httptest.ResponseRecorder, g *generation, stream bool) *apiError {
			return ts.ollamaAnswer(w, httptest.NewRequest("POST", "/api/chat", nil), ts.target(), g, stream, true)
		},
		"anthropic": func(w *httptest.ResponseRecorder, g *generation, stream bool) *apiError {
			return ts.answerMessage(w, ts.target(), g, stream, false)
		},
	}
	streamEnd := map[string]string{"openai": "[DONE]", "ollama": `{"error":"the generation failed: the kernel failed"}`, "anthropic": `"type":"api_error"`}
	for name, f := range answer {
		for _, stream := range []bool{false, true} {
			rec, g := httptest.NewRecorder(), failing(ts)
			e := f(rec, g, stream)
			body := rec.Body.String()
			if g.rl.failed == nil || g.rl.clientGone {
				t.Errorf("%s, stream %v: logged failed %v, client gone %v", name, stream, g.rl.failed, g.rl.clientGone)
			}
			if !stream {
				if e == nil || e.status != 500 || !strings.Contains(e.msg, "the kernel failed") || body != "" {
					t.Errorf("%s: answered %v and %q, want a 500 naming the failure", name, e, body)
				}
				continue
			}
			if e != nil || !strings.Contains(body, "Hello") || !strings.Contains(strings.TrimSpace(body[strings.LastIndex(strings.TrimSpace(body), "\n")+1:]), streamEnd[name]) {
				t.Errorf("%s, streamed: answered %v, body %q: want the text, then the error, ending with %s", name, e, body, streamEnd[name])
			}
			if name == "openai" && !strings.Contains(body, `{"error":{"message":"the generation failed: the kernel failed","type":"server_error"`) {
				t.Errorf("openai, streamed: no error object in %q", body)
			}
		}
	}
}
