package serve

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/qwenc/qwenc/qwen"
)

// TestChatThinking: chat completions take OpenAI's reasoning_effort and
// a thinking_budget (Qwen's own API's) onto the request, the budget
// before the effort, and enable_thinking false before both; what makes
// no sense is refused naming the field.
func TestChatThinking(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	tg := ts.target()
	for body, check := range map[string]func(qwen.Request) bool{
		`"reasoning_effort":"low"`:                      func(r qwen.Request) bool { return r.ThinkBudget == 250 && !r.NoThinking },
		`"reasoning_effort":"high"`:                     func(r qwen.Request) bool { return r.ThinkBudget == 750 },
		`"reasoning_effort":"xhigh"`:                    func(r qwen.Request) bool { return r.ThinkBudget == 0 && !r.NoThinking },
		`"reasoning_effort":"none"`:                     func(r qwen.Request) bool { return r.ThinkBudget == 0 && r.NoThinking },
		`"reasoning_effort":"minimal"`:                  func(r qwen.Request) bool { return r.NoThinking },
		`"thinking_budget":30`:                          func(r qwen.Request) bool { return r.ThinkBudget == 30 && !r.NoThinking },
		`"thinking_budget":30,"reasoning_effort":"low"`: func(r qwen.Request) bool { return r.ThinkBudget == 30 },
		`"reasoning_effort":"high","chat_template_kwargs":{"enable_thinking":false}`: func(r qwen.Request) bool { return r.NoThinking && r.ThinkBudget == 0 },
	} {
		var cr chatRequest
		unmarshal(t, `{"model":"tiny-a","max_tokens":1000,"messages":[{"role":"user","content":"Hi"}],`+body+`}`, &cr)
		req, e := tg.chatRequest(&cr)
		if e != nil || !check(req) {
			t.Errorf("%s: %+v %v", body, req, e)
		}
	}
	const m = `{"model":"tiny-a","messages":[{"role":"user","content":"Hi"}],`
	for _, c := range []struct{ body, param, msg string }{
		{m + `"reasoning_effort":"extreme"}`, "reasoning_effort", `reasoning_effort: reasoning effort "extreme": want none`},
		{m + `"thinking_budget":0}`, "thinking_budget", "want a positive number of tokens, not 0"},
		{m + `"thinking_budget":"many"}`, "thinking_budget", "thinking_budget"},
		{m + `"thinking_budget":8,"reasoning_effort":"none"}`, "thinking_budget", "switches off"},
		{m + `"thinking_budget":8,"chat_template_kwargs":{"enable_thinking":false}}`, "thinking_budget", "switches off"},
	} {
		wantBadRequest(t, ts, "/v1/chat/completions", c.body, c.param, c.msg)
	}

	// The budget bounds what the model thinks: tiny-a thinks as long as
	// it may, so its reasoning is the budget's, then the answer follows.
	msgs := userMessage(question)
	_, _, reasoning, content := greedyAlone(t, ts, qwen.Request{Messages: msgs, ThinkBudget: 5, MaxTokens: 12})
	if reasoning == "" || content == "" {
		t.Fatalf("alone: reasoning %q, content %q: want both", reasoning, content)
	}
	var r chatCompletion
	resp, out := ts.post(t, "/v1/chat/completions", `{"model":"tiny-a","messages":[{"role":"user","content":"`+question+`"}],"max_tokens":12,"temperature":0,"thinking_budget":5}`)
	unmarshal(t, out, &r)
	if resp.StatusCode != 200 || r.Choices[0].Message.ReasoningContent != reasoning || *r.Choices[0].Message.Content != content {
		t.Errorf("thinking_budget 5: %d %s; want reasoning %q, content %q", resp.StatusCode, out, reasoning, content)
	}
}

// TestOllamaThinkLevels: Ollama's think levels are the reasoning efforts
// of their names, within num_predict: low thinks within a quarter of it.
func TestOllamaThinkLevels(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	msgs := userMessage(question)
	_, _, reasoning, content := greedyAlone(t, ts, qwen.Request{Messages: msgs, ThinkBudget: 4, MaxTokens: 16})
	if reasoning == "" || content == "" {
		t.Fatalf("alone: reasoning %q, content %q: want both", reasoning, content)
	}
	for _, path := range []string{"/api/chat", "/api/generate"} {
		body := `{"model":"tiny-a","messages":[{"role":"user","content":"` + question + `"}],"think":"low","stream":false,"options":{"temperature":0,"num_predict":16}}`
		if path == "/api/generate" {
			body = `{"model":"tiny-a","prompt":"` + question + `","think":"low","stream":false,"options":{"temperature":0,"num_predict":16}}`
		}
		resp, out := ts.post(t, path, body)
		var o struct {
			Message  *struct{ Content, Thinking string }
			Response string
			Thinking string
		}
		unmarshal(t, out, &o)
		if o.Message != nil {
			o.Response, o.Thinking = o.Message.Content, o.Message.Thinking
		}
		if resp.StatusCode != 200 || o.Thinking != reasoning || o.Response != content {
			t.Errorf("%s think low: %d %s; want thinking %q, answer %q", path, resp.StatusCode, out, reasoning, content)
		}
	}
	resp, out := ts.post(t, "/api/chat", `{"model":"tiny-a","messages":[{"role":"user","content":"Hi"}],"think":"extreme"}`)
	if resp.StatusCode != 400 || !strings.Contains(out, `{"error":"`) || !strings.Contains(out, "think") {
		t.Errorf("think extreme: %d %s", resp.StatusCode, out)
	}
}

// TestOllamaThinkWithoutThinking: think true, or a level, to a model that
// does not think (Qwen2.5's chat format) is refused naming think, as
// Ollama refuses it, not answered without the thinking asked for; false,
// or no think, is answered.
func TestOllamaThinkWithoutThinking(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	qwen25 := ts.target()
	qwen25.info.ChatTemplate = "qwen2.5"
	one, stream := wholeNumber(1), false
	for name, think := range map[string]thinkFlag{
		"true": {set: true, on: true}, "low": {set: true, on: true, level: "low"}, "false": {set: true}, "unset": {},
	} {
		req := qwen.Request{Messages: userMessage("Hi"), NoThinking: !think.enabled()}
		rec := httptest.NewRecorder()
		e := ts.ollamaRun(rec, httptest.NewRequest("POST", "/api/chat", nil), &reqLog{start: time.Now()}, qwen25,
			&ollamaOptions{NumPredict: &one}, think, req, &stream, true)
		refuse := think.on
		switch {
		case refuse && (e == nil || e.status != 400 || e.param != "think" || !strings.Contains(e.msg, "does not support thinking")):
			t.Errorf("think %s: %+v, %s; want a 400 naming think", name, e, rec.Body)
		case !refuse && (e != nil || rec.Code != 200):
			t.Errorf("think %s: %+v, %d %s", name, e, rec.Code, rec.Body)
		}
	}
}
