package serve

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/qwen"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestClaudeCodeRequest: a request as Claude Code sends it, to
// /v1/messages?beta=true with anthropic-beta headers, metadata,
// context_management, service_tier and cache_control, and system
// entries among its messages, which are folded into the system prompt
// after the top-level one, in their order. The second such request reads
// the prompt from the cache, and says so as cache_read_input_tokens.
func TestClaudeCodeRequest(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	body := `{"model":"tiny-a","max_tokens":2,"temperature":0,"stream":%s,
		"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.0.1; cch=abc"},{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}}],
		"messages":[{"role":"system","content":"Mind the tests."},
			{"role":"user","content":[{"type":"text","text":"Hi","cache_control":{"type":"ephemeral","ttl":"1h"}}]},
			{"role":"system","content":[{"type":"text","text":"Be brief."}]}],
		"metadata":{"user_id":"u1"},"service_tier":"auto",
		"context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]},
		"thinking":{"type":"adaptive"},"output_config":{"effort":"low"}}`
	want := []qwen.Message{{Role: "system", Content: "You are Claude Code.\n\nMind the tests.\n\nBe brief."}, {Role: "user", Content: "Hi"}}
	n, err := ts.m.Count(qwen.Request{Messages: want})
	if err != nil {
		t.Fatal(err)
	}
	headers := []string{"anthropic-version", "2023-06-01", "anthropic-beta", "claude-code-20250219,interleaved-thinking-2025-05-14,no-such-beta-2099-01-01"}
	var first anthropicMessageOut
	for i, stream := range []string{"false", "true", "false"} {
		resp, out := ts.post(t, "/v1/messages?beta=true", strings.ReplaceAll(body, "%s", stream), headers...)
		var msg anthropicMessageOut
		if stream == "true" {
			msg, _ = accumulate(t, namedEvents(t, out))
		} else {
			unmarshal(t, out, &msg)
		}
		u := msg.Usage
		if resp.StatusCode != 200 || u.InputTokens+u.CacheReadInputTokens != n {
			t.Fatalf("request %d: %d %s; want a prompt of %d tokens", i, resp.StatusCode, out, n)
		}
		if i == 0 {
			first = msg
		} else if u.CacheReadInputTokens == 0 || jsonOf(t, msg.Content) != jsonOf(t, first.Content) {
			t.Errorf("request %d: %s; want the cache read and the first answer %s", i, out, jsonOf(t, first.Content))
		}
	}
	if resp, out := ts.post(t, "/v1/messages/count_tokens?beta=true", strings.ReplaceAll(body, "%s", "false"), headers...); out != `{"input_tokens":`+itoa(n)+"}\n" {
		t.Errorf("count_tokens: %d %s; want %d", resp.StatusCode, out, n)
	}
}

// TestAnthropicOutputFormat: output_config.format (and the beta's
// output_format) holds the answer's text to the schema, streamed or not,
// through the grammar; what it cannot hold to is refused, never answered
// free.
func TestAnthropicOutputFormat(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	schemaText := `{"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer","minimum":0,"maximum":120}},"required":["name","age"],"additionalProperties":false}`
	var doc any
	if err := json.Unmarshal([]byte(schemaText), &doc); err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("person.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("person.json")
	if err != nil {
		t.Fatal(err)
	}
	for seed, format := range []string{`"output_config":{"format":{"type":"json_schema","schema":` + schemaText + `}}`, `"output_format":{"type":"json_schema","schema":` + schemaText + `}`} {
		for _, stream := range []bool{false, true} {
			body := `{"model":"tiny-a","max_tokens":200,"temperature":1,"thinking":{"type":"disabled"},"messages":[{"role":"user","content":"Invent a person."}],` +
				format + `,"stream":` + map[bool]string{true: "true", false: "false"}[stream] + `}`
			// Anthropic has no seed: another top_k makes each format's
			// answers others.
			body = strings.Replace(body, `"temperature":1`, `"temperature":1,"top_k":`+itoa(40+seed), 1)
			resp, out := ts.post(t, "/v1/messages", body)
			var msg anthropicMessageOut
			if stream {
				msg, _ = accumulate(t, namedEvents(t, out))
			} else {
				unmarshal(t, out, &msg)
			}
			if resp.StatusCode != 200 || len(msg.Content) != 1 || msg.Content[0].Text == nil || *msg.StopReason != "end_turn" {
				t.Fatalf("%s: %d %s", format[:16], resp.StatusCode, out)
			}
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(*msg.Content[0].Text)))
			if err != nil || schema.Validate(v) != nil {
				t.Errorf("%s, stream %v: %q is not valid: %v %v", format[:16], stream, *msg.Content[0].Text, err, schema.Validate(v))
			}
		}
	}
	for _, c := range []struct{ extra, msg string }{
		{`"output_config":{"format":{"type":"json_object"}}`, `output_config.format.type "json_object": want json_schema`},
		{`"output_config":{"format":{"type":"json_schema"}}`, "output_config.format.schema: missing"},
		{`"output_config":{"format":{"type":"json_schema","schema":{"type":"object","not":{}}}}`, "output_config.format.schema: json schema #: not: not supported"},
		{`"output_format":{"type":"json_schema","schema":{"type":"object","not":{}}}`, "output_format.schema: json schema #: not: not supported"},
		{`"output_format":{"type":"json_schema","schema":{}},"output_config":{"format":{"type":"json_schema","schema":{}}}`, "give one"},
		{`"output_config":{"effort":"extreme"}`, `output_config.effort: reasoning effort "extreme"`},
		{`"thinking":{"type":"adaptive","budget_tokens":0}`, "thinking.budget_tokens: want a positive number"},
	} {
		resp, out := ts.post(t, "/v1/messages", `{"model":"tiny-a","max_tokens":8,"messages":[{"role":"user","content":"Hi"}],`+c.extra+`}`)
		var e anthropicErrorJSON
		unmarshal(t, out, &e)
		if resp.StatusCode != 400 || e.Type != "error" || e.Error == nil || !strings.Contains(e.Error.Message, c.msg) {
			t.Errorf("%s: %d %s; want 400, %q", c.extra, resp.StatusCode, out, c.msg)
		}
	}
}

// TestAnthropicThinkingEffort: adaptive thinking thinks as the model
// does, within budget_tokens when given, or within output_config.effort's
// budget (at most a share of max_tokens); enabled within budget_tokens;
// disabled not at all; an effort alone sets the thinking too.
func TestAnthropicThinkingEffort(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	tg := ts.target()
	for body, check := range map[string]func(qwen.Request) bool{
		`"thinking":{"type":"adaptive"}`:                                                     func(r qwen.Request) bool { return r.ThinkBudget == 0 && !r.NoThinking },
		`"thinking":{"type":"adaptive","budget_tokens":30}`:                                  func(r qwen.Request) bool { return r.ThinkBudget == 30 },
		`"thinking":{"type":"adaptive"},"output_config":{"effort":"low"}`:                    func(r qwen.Request) bool { return r.ThinkBudget == 1000 },
		`"thinking":{"type":"adaptive"},"output_config":{"effort":"max"}`:                    func(r qwen.Request) bool { return r.ThinkBudget == 0 && !r.NoThinking },
		`"thinking":{"type":"enabled","budget_tokens":1024},"output_config":{}`:              func(r qwen.Request) bool { return r.ThinkBudget == 1024 },
		`"thinking":{"type":"disabled"},"output_config":{"effort":"high"}`:                   func(r qwen.Request) bool { return r.NoThinking && r.ThinkBudget == 0 },
		`"output_config":{"effort":"medium"}`:                                                func(r qwen.Request) bool { return r.ThinkBudget == 2000 },
		`"output_config":{"effort":"none"}`:                                                  func(r qwen.Request) bool { return r.NoThinking },
		`"thinking":{"type":"adaptive","budget_tokens":40},"output_config":{"effort":"low"}`: func(r qwen.Request) bool { return r.ThinkBudget == 40 },
	} {
		var mr messagesRequest
		unmarshal(t, `{"model":"tiny-a","max_tokens":4000,"messages":[{"role":"user","content":"Hi"}],`+body+`}`, &mr)
		req, e := tg.messagesRequest(&mr, false)
		if e != nil || !check(req) {
			t.Errorf("%s: %+v %v", body, req, e)
		}
	}
}
