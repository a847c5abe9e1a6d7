package serve

import (
	"strings"
	"testing"

	"github.com/qwenc/qwenc/qwen"
)

// TestHistoryAsSent: a history as clients send it, a call whose
// arguments were cut off (a run interrupted), a call without arguments,
// an assistant's content null or empty beside its calls, is answered on
// every protocol, the call rendered as the text that is there.
func TestHistoryAsSent(t *testing.T) {
	ts := newTestServer(t, modelOpts{NoCache: true}, ServerOptions{})
	want := []qwen.Message{{Role: "user", Content: "Weather?"},
		{Role: "assistant", ToolCalls: []qwen.ToolCall{{ID: "call_1", Name: "weather", Arguments: `{"city": "Par`}, {ID: "call_2", Name: "now", Arguments: "{}"}}},
		{Role: "tool", Content: "18C"}, {Role: "tool", Content: "12:00"}}
	n, err := ts.m.Count(qwen.Request{Messages: want})
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := ts.m.RenderPrompt(qwen.Request{Messages: want})
	if err != nil || !strings.Contains(prompt, `{"name": "weather", "arguments": {"city": "Par}`) || !strings.Contains(prompt, `{"name": "now", "arguments": {}}`) {
		t.Fatalf("rendered %q, %v", prompt, err)
	}
	const results = `{"role":"tool","tool_call_id":"call_1","content":"18C"},{"role":"tool","tool_call_id":"call_2","content":"12:00"}`
	calls := `[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\": \"Par"}},{"id":"call_2","type":"function","function":{"name":"now","arguments":""}}]`
	for _, content := range []string{`null`, `""`, `[]`} {
		body := `{"model":"tiny-a","max_tokens":1,"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":` + content + `,"tool_calls":` + calls + `},` + results + `]}`
		resp, out := ts.post(t, "/v1/chat/completions", body)
		var c chatCompletion
		unmarshal(t, out, &c)
		if resp.StatusCode != 200 || c.Usage.PromptTokens != n {
			t.Errorf("OpenAI, content %s: %d %s; want %d prompt tokens", content, resp.StatusCode, out, n)
		}
	}
	// Ollama's arguments are an object, or text some clients send.
	ollama := `{"model":"tiny-a","stream":false,"options":{"num_predict":1},"messages":[{"role":"user","content":"Weather?"},` +
		`{"role":"assistant","content":"","tool_calls":[{"function":{"name":"weather","arguments":"{\"city\": \"Par"}},{"function":{"name":"now"}}]},` +
		`{"role":"tool","content":"18C"},{"role":"tool","content":"12:00"}]}`
	resp, out := ts.post(t, "/api/chat", ollama)
	if lines := ollamaLines(t, out); resp.StatusCode != 200 || *lines[0].PromptEvalCount != n {
		t.Errorf("Ollama: %d %s; want %d prompt tokens", resp.StatusCode, out, n)
	}
	// Anthropic's input is an object: one that is not is its text.
	anthropic := `{"model":"tiny-a","max_tokens":1,"messages":[{"role":"user","content":"Weather?"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"weather","input":["Paris"]}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"18C"}]}]}`
	want = []qwen.Message{want[0], {Role: "assistant", ToolCalls: []qwen.ToolCall{{Name: "weather", Arguments: `["Paris"]`}}}, want[2]}
	if n, err = ts.m.Count(qwen.Request{Messages: want}); err != nil {
		t.Fatal(err)
	}
	resp, out = ts.post(t, "/v1/messages/count_tokens", anthropic)
	if resp.StatusCode != 200 || out != `{"input_tokens":`+itoa(n)+"}\n" {
		t.Errorf("Anthropic: %d %s; want %d tokens", resp.StatusCode, out, n)
	}
	if resp, out := ts.post(t, "/v1/messages", anthropic); resp.StatusCode != 200 {
		t.Errorf("Anthropic: %d %s", resp.StatusCode, out)
	}
}

// TestNoVision: an image, in any protocol's shape, is refused with a 400
// that says the model has no vision and names where it is.
func TestNoVision(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	for _, c := range []struct{ path, body, where string }{
		{"/v1/chat/completions", `{"model":"tiny-a","messages":[{"role":"user","content":[{"type":"text","text":"What is it?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}`, "messages[0].content[1]"},
		{"/v1/chat/completions", `{"model":"tiny-a","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"","format":"wav"}}]}]}`, "messages[0].content[0]"},
		{"/v1/responses", `{"model":"tiny-a","input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}]}]}`, "input[0].content[0]"},
		{"/v1/messages", `{"model":"tiny-a","max_tokens":4,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}`, "messages[0].content[0]"},
		{"/api/chat", `{"model":"tiny-a","messages":[{"role":"user","content":"What is it?","images":["iVBORw0KGgo="]}]}`, "messages[0].images"},
		{"/api/generate", `{"model":"tiny-a","prompt":"What is it?","images":["iVBORw0KGgo="]}`, "images"},
	} {
		resp, out := ts.post(t, c.path, c.body)
		if resp.StatusCode != 400 || !strings.Contains(out, c.where) || !strings.Contains(out, "this model has no vision") {
			t.Errorf("%s %s: %d %s; want 400 naming %s", c.path, c.body, resp.StatusCode, out, c.where)
		}
	}
}
