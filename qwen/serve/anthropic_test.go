package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qwenc/qwenc/qwen"
)

// namedEvent is an event of Anthropic's stream: its event: line's name
// and its data.
type namedEvent struct{ name, data string }

// namedEvents splits a Server-Sent Events body whose every event is
// named, as Anthropic's are.
func namedEvents(t *testing.T, body string) []namedEvent {
	t.Helper()
	var out []namedEvent
	for _, ev := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		name, data, ok := strings.Cut(ev, "\n")
		name, okName := strings.CutPrefix(name, "event: ")
		data, okData := strings.CutPrefix(data, "data: ")
		if !ok || !okName || !okData || strings.Contains(data, "\n") {
			t.Fatalf("not a named event: %q", ev)
		}
		out = append(out, namedEvent{name, data})
	}
	return out
}

// eventJSON is any event of the stream, read back.
type eventJSON struct {
	Type         string
	Message      *anthropicMessageOut
	Index        *int
	ContentBlock *anthropicBlock `json:"content_block"`
	Delta        struct {
		Type, Text, Thinking, Signature string
		PartialJSON                     string  `json:"partial_json"`
		StopReason                      string  `json:"stop_reason"`
		StopSequence                    *string `json:"stop_sequence"`
	}
	Usage *anthropicUsage
	Error *anthropicErrorBody
}

// accumulate checks a stream's events, in the order Anthropic's protocol
// has them (message_start; each block's start, deltas of its kind and
// stop, indices counting from 0; message_delta, message_stop; pings
// anywhere after message_start), and builds the message from them as the
// SDKs' stream helpers do. It returns the pings it saw.
func accumulate(t *testing.T, evs []namedEvent) (msg anthropicMessageOut, pings int) {
	t.Helper()
	open := -1 // the open block's index
	var args strings.Builder
	deltaOf := map[string]string{"text": "text_delta", "thinking": "thinking_delta", "tool_use": "input_json_delta"}
	for i, ne := range evs {
		var ev eventJSON
		unmarshal(t, ne.data, &ev)
		bad := func(why string) { t.Fatalf("event %d %s %s: %s", i, ne.name, ne.data, why) }
		switch {
		case ev.Type != ne.name:
			bad("its type is not its name")
		case i == 0 && ev.Type != "message_start":
			bad("the first event is not message_start")
		case i == len(evs)-1 && ev.Type != "message_stop":
			bad("the last event is not message_stop")
		case ev.Type != "ping" && ev.Type != "message_start" && ev.Type != "message_stop" && ev.Type != "message_delta" && ev.Index == nil:
			bad("no index")
		}
		switch ev.Type {
		case "ping":
		case "message_start":
			if i != 0 || ev.Message == nil || len(ev.Message.Content) != 0 || ev.Message.StopReason != nil {
				bad("message_start")
			}
			msg = *ev.Message
		case "content_block_start":
			if open >= 0 || *ev.Index != len(msg.Content) || ev.ContentBlock == nil || deltaOf[ev.ContentBlock.Type] == "" {
				bad("a block starts out of turn")
			}
			open = *ev.Index
			msg.Content = append(msg.Content, *ev.ContentBlock)
			args.Reset()
		case "content_block_delta":
			// A thinking block's signature comes last, in a delta of its own.
			signs := ev.Delta.Type == "signature_delta" && msg.Content[open].Type == "thinking"
			if *ev.Index != open || ev.Delta.Type != deltaOf[msg.Content[open].Type] && !signs {
				bad("a delta outside its block, or of another kind")
			}
			b := &msg.Content[open]
			switch {
			case signs:
				*b.Signature += ev.Delta.Signature
			case b.Type == "text":
				*b.Text += ev.Delta.Text
			case b.Type == "thinking":
				*b.Thinking += ev.Delta.Thinking
			default:
				args.WriteString(ev.Delta.PartialJSON)
			}
		case "content_block_stop":
			if *ev.Index != open {
				bad("stops a block that is not open")
			}
			if b := msg.Content[open]; b.Type == "thinking" && (b.Signature == nil || *b.Signature == "") {
				bad("a thinking block stops unsigned")
			}
			if b := &msg.Content[open]; b.Type == "tool_use" {
				var c bytes.Buffer
				if json.Compact(&c, []byte(args.String())) != nil {
					bad("a tool_use input that is not JSON: " + args.String())
				}
				b.Input = c.Bytes()
			}
			open = -1
		case "message_delta":
			if open >= 0 || ev.Usage == nil || i != len(evs)-2 {
				bad("message_delta out of turn")
			}
			msg.StopReason, msg.StopSequence, msg.Usage = &ev.Delta.StopReason, ev.Delta.StopSequence, *ev.Usage
		case "message_stop":
		default:
			bad("an unknown event")
		}
		if ev.Type == "ping" {
			pings++
		}
	}
	return msg, pings
}

// jsonOf is v's JSON, to compare.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// messagesBody is a Messages request of tiny-a, greedy.
func messagesBody(maxTokens int, extra string) string {
	return `{"model":"tiny-a","max_tokens":` + itoa(maxTokens) + `,"temperature":0,"system":"Be brief.",` +
		`"messages":[{"role":"user","content":"` + question + `"}]` + extra + `}`
}

// TestAnthropicMessages: a message, greedy, is what the model answers
// alone, streamed or not; the stream's events come in order and add up
// to the message; usage counts the prompt as count_tokens does, the
// cache's part apart; stop_sequences give stop_sequence; and tools with
// tool_choice any give tool_use blocks whose input fits the schema.
func TestAnthropicMessages(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	const n = 12
	_, ids, _, want := greedyAlone(t, ts, qwen.Request{Messages: systemAndQuestion, MaxTokens: n})
	prompt, err := ts.m.Count(qwen.Request{Messages: systemAndQuestion})
	if err != nil {
		t.Fatal(err)
	}
	resp, body := ts.post(t, "/v1/messages", messagesBody(n, ""), "anthropic-version", "2023-06-01")
	var whole anthropicMessageOut
	unmarshal(t, body, &whole)
	if resp.StatusCode != 200 || !strings.HasPrefix(whole.ID, "msg_") || whole.Type != "message" || whole.Role != "assistant" ||
		whole.Model != "tiny-a" || len(whole.Content) != 1 || whole.Content[0].Type != "text" || *whole.Content[0].Text != want ||
		*whole.StopReason != "max_tokens" || whole.StopSequence != nil || !strings.Contains(body, `"stop_sequence":null`) {
		t.Fatalf("%d %s; want the text %q", resp.StatusCode, body, want)
	}
	if u := whole.Usage; u.InputTokens+u.CacheReadInputTokens != prompt || u.OutputTokens != n {
		t.Errorf("usage %+v; want %d prompt tokens in all, %d output", u, prompt, n)
	}
	// count_tokens counts the same prompt, whatever max_tokens and the
	// sampling say; Claude Code's billing header is left out of it, and
	// an empty system prompt is none.
	for _, system := range []string{`"Be brief."`, `[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.0; cch=1a2b3;"},{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}]`} {
		resp, body = ts.post(t, "/v1/messages/count_tokens", `{"model":"tiny-a","system":`+system+`,"messages":[{"role":"user","content":[{"type":"text","text":"`+question+`"}]}]}`)
		if resp.StatusCode != 200 || body != `{"input_tokens":`+itoa(prompt)+"}\n" {
			t.Errorf("count_tokens with the system %s: %d %s; want %d", system, resp.StatusCode, body, prompt)
		}
	}
	bare, err := ts.m.Count(qwen.Request{Messages: systemAndQuestion[1:]})
	if err != nil {
		t.Fatal(err)
	}
	resp, body = ts.post(t, "/v1/messages/count_tokens", `{"model":"tiny-a","system":"","messages":[{"role":"user","content":"`+question+`"}]}`)
	if resp.StatusCode != 200 || body != `{"input_tokens":`+itoa(bare)+"}\n" {
		t.Errorf("count_tokens with an empty system prompt: %d %s; want %d, as without one", resp.StatusCode, body, bare)
	}

	resp, body = ts.post(t, "/v1/messages", messagesBody(n, `,"stream":true`))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("streamed: %d %s", resp.StatusCode, body)
	}
	streamed, _ := accumulate(t, namedEvents(t, body))
	if jsonOf(t, streamed.Content) != jsonOf(t, whole.Content) || *streamed.StopReason != "max_tokens" || streamed.StopSequence != nil {
		t.Errorf("streamed %s; not streamed %s", jsonOf(t, streamed), body)
	}
	// The same prompt again: all of it but its last token from the cache.
	if u := streamed.Usage; u.CacheReadInputTokens != prompt-1 || u.InputTokens != 1 || u.OutputTokens != n {
		t.Errorf("streamed usage %+v; want %d from the cache, 1 evaluated, %d output", u, prompt-1, n)
	}

	// A stop sequence across two tokens ends the text before it.
	stop, cut := spanningStop(t, ts, ids, want)
	for _, stream := range []string{"", `,"stream":true`} {
		resp, body = ts.post(t, "/v1/messages", messagesBody(n, `,"stop_sequences":["never",`+jsonString(stop)+`]`+stream))
		msg := whole
		if stream == "" {
			unmarshal(t, body, &msg)
		} else {
			msg, _ = accumulate(t, namedEvents(t, body))
		}
		if resp.StatusCode != 200 || *msg.Content[0].Text != want[:cut] || *msg.StopReason != "stop_sequence" || msg.StopSequence == nil || *msg.StopSequence != stop {
			t.Errorf("stop_sequences%s: %d %s; want %q then stop_sequence %q", stream, resp.StatusCode, body, want[:cut], stop)
		}
	}

	// tool_choice any on the random model: the grammar gives a valid call.
	const tools = `,"tools":[{"name":"weather","description":"The forecast.","input_schema":{"type":"object","properties":{"city":{"enum":["Paris","Oslo"]},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false}}],"tool_choice":{"type":"any"},"thinking":{"type":"disabled"}`
	resp, body = ts.post(t, "/v1/messages", messagesBody(200, tools))
	whole = anthropicMessageOut{}
	unmarshal(t, body, &whole)
	if resp.StatusCode != 200 || *whole.StopReason != "tool_use" || len(whole.Content) == 0 {
		t.Fatalf("tool_choice any: %d %s", resp.StatusCode, body)
	}
	for _, b := range whole.Content {
		var in struct {
			City string
			Days int
		}
		dec := json.NewDecoder(bytes.NewReader(b.Input))
		dec.DisallowUnknownFields()
		if b.Type != "tool_use" || !strings.HasPrefix(b.ID, "toolu_") || len(b.ID) != len("toolu_")+24 || b.Name != "weather" ||
			dec.Decode(&in) != nil || (in.City != "Paris" && in.City != "Oslo") || in.Days < 1 || in.Days > 7 {
			t.Errorf("block %s", jsonOf(t, b))
		}
	}
	resp, body = ts.post(t, "/v1/messages", messagesBody(200, tools+`,"stream":true`))
	streamed, _ = accumulate(t, namedEvents(t, body))
	for i := range whole.Content {
		whole.Content[i].ID = "" // each answer has ids of its own
	}
	for i := range streamed.Content {
		streamed.Content[i].ID = ""
	}
	if jsonOf(t, streamed.Content) != jsonOf(t, whole.Content) || *streamed.StopReason != "tool_use" {
		t.Errorf("tools streamed %s; not streamed %s", jsonOf(t, streamed), jsonOf(t, whole))
	}
}

// TestAnthropicToolChoiceNone: with tool_choice none the tools are still
// in the prompt, as Qwen3's template and llama.cpp have them and as
// Anthropic counts them, and no call comes back: on a model that opens a
// call wherever one may come (auto calls), none answers in text, the
// text tiny-a writes, streamed or not.
func TestAnthropicToolChoiceNone(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	const tools = `,"tools":[{"name":"weather","description":"The forecast.","input_schema":{"type":"object","properties":{"city":{"enum":["Paris","Oslo"]}},"required":["city"],"additionalProperties":false}}],"thinking":{"type":"disabled"}`
	body := func(choice string) string {
		return messagesBody(40, tools+`,"tool_choice":{"type":"`+choice+`","disable_parallel_tool_use":true}`)
	}
	request := func(body string) qwen.Request {
		var mr messagesRequest
		unmarshal(t, body, &mr)
		req, e := ts.target().messagesRequest(&mr, false)
		if e != nil {
			t.Fatal(e.msg)
		}
		return req
	}
	none := request(body("none"))
	prompt, err := ts.m.RenderPrompt(none)
	if err != nil {
		t.Fatal(err)
	}
	auto, err := ts.m.RenderPrompt(request(body("auto")))
	if err != nil {
		t.Fatal(err)
	}
	const listed = "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"weather\", \"description\": \"The forecast.\""
	if none.ToolChoice != "none" || prompt != auto || !strings.Contains(prompt, listed) {
		t.Errorf("tool_choice none: the prompt\n%s\nwith auto\n%s\nwant the tools listed: %s", prompt, auto, listed)
	}
	count := func(extra string) string {
		_, body := ts.post(t, "/v1/messages/count_tokens", `{"model":"tiny-a","system":"Be brief.","messages":[{"role":"user","content":"`+question+`"}]`+extra+`}`)
		return body
	}
	if n, all, bare := count(tools+`,"tool_choice":{"type":"none"}`), count(tools), count(`,"thinking":{"type":"disabled"}`); n != all || n == bare {
		t.Errorf("count_tokens with tools and tool_choice none %s, with tools %s, without %s", n, all, bare)
	}

	_, body0 := ts.post(t, "/v1/messages", body("none"))
	var plain anthropicMessageOut
	unmarshal(t, body0, &plain)
	eager := eagerCaller(t, ts.m, none)
	resp, out := eager.post(t, "/v1/messages", body("auto"))
	var called anthropicMessageOut
	unmarshal(t, out, &called)
	if resp.StatusCode != 200 || *called.StopReason != "tool_use" || len(called.Content) != 1 || called.Content[0].Type != "tool_use" {
		t.Fatalf("the eager model with tool_choice auto: %d %s; want a call", resp.StatusCode, out)
	}
	for _, stream := range []string{"", `,"stream":true`} {
		resp, out := eager.post(t, "/v1/messages", strings.TrimSuffix(body("none"), "}")+stream+"}")
		var msg anthropicMessageOut
		if stream == "" {
			unmarshal(t, out, &msg)
		} else {
			msg, _ = accumulate(t, namedEvents(t, out))
		}
		if resp.StatusCode != 200 || *msg.StopReason == "tool_use" || jsonOf(t, msg.Content) != jsonOf(t, plain.Content) {
			t.Errorf("the eager model with tool_choice none%s: %d %s; want tiny-a's %s", stream, resp.StatusCode, out, jsonOf(t, plain.Content))
		}
	}
}

// TestAnthropicSampling: top_k and top_p reach the sampler: at
// temperature 1, top_k 1 and top_p 0 keep the most likely token alone,
// so they answer as greedy decoding does, every time, where temperature 1
// alone wanders off it.
func TestAnthropicSampling(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	text := func(sampling string) string {
		t.Helper()
		resp, body := ts.post(t, "/v1/messages", `{"model":"tiny-a","max_tokens":16,"system":"Be brief.","messages":[{"role":"user","content":"`+question+`"}],`+sampling+`}`)
		var m anthropicMessageOut
		unmarshal(t, body, &m)
		if resp.StatusCode != 200 || len(m.Content) != 1 || m.Content[0].Text == nil {
			t.Fatalf("%s: %d %s", sampling, resp.StatusCode, body)
		}
		return *m.Content[0].Text
	}
	greedy := text(`"temperature":0`)
	wandered := 0
	for range 6 {
		for _, s := range []string{`"temperature":1,"top_k":1`, `"temperature":1,"top_p":0`} {
			if got := text(s); got != greedy {
				t.Errorf("%s: %q; greedy %q", s, got, greedy)
			}
		}
		if text(`"temperature":1`) != greedy {
			wandered++
		}
	}
	if wandered == 0 {
		t.Errorf("temperature 1 gave the greedy answer six times out of six: the check above cannot tell")
	}
}

// TestClaudeCodeSchemas: tool schemas as Claude Code sends them (WebFetch's
// url in format uri under 2020-12's $schema; a number with an exclusive
// minimum of 0; an integer between 0 and 2^53-1) are taken, not refused,
// and a forced call's input fits them. (The random model would wander in
// a URL's path for ever; grammar.TestSchemaInstancesValidate checks the
// URLs.)
func TestClaudeCodeSchemas(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	const tools = `,"tools":[{"name":"WebFetch","description":"Fetches a URL.","input_schema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"url":{"description":"The URL to fetch content from","type":"string","format":"uri"},"prompt":{"type":"string"}},"required":["url","prompt"],"additionalProperties":false}},` +
		`{"name":"Sleep","input_schema":{"type":"object","properties":{"seconds":{"type":"number","exclusiveMinimum":0},"count":{"type":"integer","minimum":0,"maximum":9007199254740991}},"required":["seconds","count"],"additionalProperties":false}}],"thinking":{"type":"disabled"}`
	if resp, body := ts.post(t, "/v1/messages", messagesBody(40, tools+`,"tool_choice":{"type":"auto"}`)); resp.StatusCode != 200 {
		t.Fatalf("Claude Code's schemas: %d %s", resp.StatusCode, body)
	}
	for _, temp := range []string{"0", "0.7", "1"} {
		resp, body := ts.post(t, "/v1/messages", messagesBody(200, tools+`,"tool_choice":{"type":"tool","name":"Sleep"},"temperature":`+temp))
		var out anthropicMessageOut
		unmarshal(t, body, &out)
		if resp.StatusCode != 200 || *out.StopReason != "tool_use" || len(out.Content) != 1 {
			t.Fatalf("a call of Sleep: %d %s", resp.StatusCode, body)
		}
		var in struct {
			Seconds *float64
			Count   *int64
		}
		dec := json.NewDecoder(bytes.NewReader(out.Content[0].Input))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil || in.Seconds == nil || *in.Seconds <= 0 || in.Count == nil || *in.Count < 0 {
			t.Errorf("Sleep's input %s: %v", out.Content[0].Input, err)
		}
	}
}

// TestAnthropicConversation: what a Messages request becomes: the system
// blocks, text joined, thinking given back as the turn's reasoning,
// tool_use as its calls, each tool_result a tool message (an error one
// saying so), and the thinking and tool_choice settings.
func TestAnthropicConversation(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	var mr messagesRequest
	unmarshal(t, `{"model":"tiny-a","max_tokens":50,"system":[{"type":"text","text":"Be brief."},{"type":"text","text":"Be kind."}],
		"messages":[
			{"role":"user","content":[{"type":"text","text":"Weather?"},{"type":"text","text":"In Paris."}]},
			{"role":"assistant","content":[{"type":"thinking","thinking":"A lookup.","signature":"abc"},{"type":"redacted_thinking","data":"xyz"},
				{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"weather","input":{"city":"Paris"}},
				{"type":"tool_use","id":"toolu_2","name":"time","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18C"},
				{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":[{"type":"text","text":"no clock"}]},
				{"type":"text","text":"And tomorrow?"}]}],
		"tools":[{"name":"weather","input_schema":{"type":"object"}},{"name":"time","description":"Now.","input_schema":{"type":"object"}}],
		"tool_choice":{"type":"tool","name":"weather","disable_parallel_tool_use":true},
		"thinking":{"type":"adaptive","budget_tokens":64},"stop_sequences":["", "END"],"metadata":{"user_id":"u"}}`, &mr)
	req, e := ts.target().messagesRequest(&mr, false)
	if e != nil {
		t.Fatal(e.msg)
	}
	want := []qwen.Message{
		{Role: "system", Content: "Be brief.\n\nBe kind."},
		{Role: "user", Content: "Weather?\n\nIn Paris."},
		{Role: "assistant", Content: "Checking.", Reasoning: "A lookup.", ToolCalls: []qwen.ToolCall{
			{ID: "toolu_1", Name: "weather", Arguments: `{"city": "Paris"}`}, {ID: "toolu_2", Name: "time", Arguments: "{}"}}},
		{Role: "tool", Content: "18C", ToolCallID: "toolu_1"},
		{Role: "tool", Content: "Error: no clock", ToolCallID: "toolu_2"},
		{Role: "user", Content: "And tomorrow?"},
	}
	if jsonOf(t, req.Messages) != jsonOf(t, want) {
		t.Errorf("messages\n%s\nwant\n%s", jsonOf(t, req.Messages), jsonOf(t, want))
	}
	if len(req.Tools) != 2 || req.ToolName != "weather" || req.ToolChoice != "" || !req.OneToolCall || req.ThinkBudget != 64 ||
		req.NoThinking || req.MaxTokens != 50 || !slices.Equal(req.Stop, []string{"END"}) {
		t.Errorf("request %+v", req)
	}
	for choice, want := range map[string]string{`{"type":"any"}`: "required", `{"type":"auto"}`: "auto", `{"type":"none"}`: "none"} {
		mr.ToolChoice = nil
		unmarshal(t, `{"tool_choice":`+choice+`,"thinking":{"type":"disabled"}}`, &mr)
		if req, e = ts.target().messagesRequest(&mr, false); e != nil || req.ToolChoice != want || req.ToolName != "" || req.OneToolCall || !req.NoThinking {
			t.Errorf("tool_choice %s: %+v", choice, req)
		}
	}
	// The tool loop's next turn is answered, from the cache of the turn
	// before: a tool_result follows the answer given back as it was.
	const turn = `{"model":"tiny-a","temperature":0,"thinking":{"type":"disabled"},"tools":[{"name":"weather","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"Weather?"}`
	_, body := ts.post(t, "/v1/messages", turn+`],"tool_choice":{"type":"any"},"max_tokens":200}`)
	var first anthropicMessageOut
	unmarshal(t, body, &first)
	if len(first.Content) == 0 {
		t.Fatalf("tool_choice any: %s", body)
	}
	results := ""
	for _, b := range first.Content {
		results += `,{"type":"tool_result","tool_use_id":"` + b.ID + `","content":"18C"}`
	}
	resp, body := ts.post(t, "/v1/messages", turn+`,{"role":"assistant","content":`+jsonOf(t, first.Content)+`},{"role":"user","content":[`+results[1:]+`]}],"max_tokens":4}`)
	var next anthropicMessageOut
	unmarshal(t, body, &next)
	// Qwen3's template drops the empty think block of a no-think answer
	// once it is history: what is reused is the first prompt without it,
	// the prompt with thinking on.
	_, count := ts.post(t, "/v1/messages/count_tokens", strings.Replace(turn, `"thinking":{"type":"disabled"},`, "", 1)+`]}`)
	if resp.StatusCode != 200 || count != `{"input_tokens":`+itoa(next.Usage.CacheReadInputTokens)+"}\n" {
		t.Errorf("the next turn: %d %s, %d tokens from the cache; the first turn's prompt without its think block: %s", resp.StatusCode, body, next.Usage.CacheReadInputTokens, count)
	}
	// A model that does not think (Qwen2.5's template) has no thinking to
	// bound: thinking enabled asks it nothing, as disabled does.
	qwen25 := ts.target()
	qwen25.info.ChatTemplate = "qwen2.5"
	mr.Thinking.Type, mr.Thinking.BudgetTokens, mr.MaxTokens = "enabled", new(1024), new(2048)
	if req, e = qwen25.messagesRequest(&mr, false); e != nil || req.ThinkBudget != 0 || req.NoThinking {
		t.Errorf("thinking enabled on Qwen2.5: %+v", req)
	}
}

// TestAnthropicThinkingOmitted: with thinking.display "omitted" (Claude
// Code asks it) a thinking block comes without its text, streamed or
// not, no thinking_delta sent, its signature carrying the text; the block
// sent back so restores the thinking the template renders, while a
// signature not this server's (Claude's) restores nothing and one
// broken is refused, naming it. A display of another name is refused.
func TestAnthropicThinkingOmitted(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	pieces := toolAnswer()
	answer := func(stream bool) (string, anthropicMessageOut) {
		rec := httptest.NewRecorder()
		if e := ts.answerMessage(rec, ts.target(), forced(ts, pieces), stream, true); e != nil {
			t.Fatal(e.msg)
		}
		var msg anthropicMessageOut
		if stream {
			msg, _ = accumulate(t, namedEvents(t, rec.Body.String()))
		} else {
			unmarshal(t, rec.Body.String(), &msg)
		}
		return rec.Body.String(), msg
	}
	body, whole := answer(false)
	streamedBody, streamed := answer(true)
	if b := whole.Content[0]; b.Type != "thinking" || b.Thinking == nil || *b.Thinking != "" || b.Signature == nil || *b.Signature == "" {
		t.Fatalf("thinking block %s; want no text and a signature", jsonOf(t, b))
	}
	if strings.Contains(body, "Two lookups") || strings.Contains(streamedBody, "Two lookups") || strings.Contains(streamedBody, "thinking_delta") {
		t.Errorf("the thinking was sent:\n%s\n%s", body, streamedBody)
	}
	if jsonOf(t, streamed.Content) != jsonOf(t, whole.Content) {
		t.Errorf("streamed %s\nnot streamed %s", jsonOf(t, streamed.Content), jsonOf(t, whole.Content))
	}
	sig := *whole.Content[0].Signature

	turn := func(block string) (qwen.Request, *apiError) {
		var mr messagesRequest
		unmarshal(t, `{"model":"tiny-a","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024,"display":"omitted"},
			"tools":[{"name":"weather","input_schema":{"type":"object"}}],
			"messages":[{"role":"user","content":"Weather in Paris?"},
				{"role":"assistant","content":[`+block+`,{"type":"tool_use","id":"toolu_a","name":"weather","input":{"city":"Paris"}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"Sunny."}]}]}`, &mr)
		return ts.target().messagesRequest(&mr, false)
	}
	req, e := turn(`{"type":"thinking","thinking":"","signature":"` + sig + `"}`)
	if e != nil {
		t.Fatal(e.msg)
	}
	if got := req.Messages[1].Reasoning; got != "Two lookups." {
		t.Errorf("the thinking restored from the signature: %q", got)
	}
	// Claude's signature (protobuf in base64) carries nothing of ours.
	if req, e := turn(`{"type":"thinking","thinking":"","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}`); e != nil || req.Messages[1].Reasoning != "" {
		t.Errorf("Claude's signature: %v %q", e, req.Messages[1].Reasoning)
	}
	broken := base64.StdEncoding.EncodeToString([]byte("qwt1 not deflate"))
	if _, e := turn(`{"type":"thinking","thinking":"","signature":"` + broken + `"}`); e == nil || e.param != "messages[1].content[0].signature" {
		t.Errorf("a broken signature: %v", e)
	}
	// Text sent with the block is the block's, whatever the signature.
	if req, e := turn(`{"type":"thinking","thinking":"Edited.","signature":"` + sig + `"}`); e != nil || req.Messages[1].Reasoning != "Edited." {
		t.Errorf("text and signature: %v %q", e, req.Messages[1].Reasoning)
	}

	resp, out := ts.post(t, "/v1/messages", `{"model":"tiny-a","max_tokens":2,"thinking":{"type":"adaptive","display":"hidden"},"messages":[{"role":"user","content":"Hi"}]}`)
	if resp.StatusCode != 400 || !strings.Contains(out, "thinking.display") {
		t.Errorf("display hidden: %d %s", resp.StatusCode, out)
	}
	for _, display := range []string{"summarized", "omitted"} {
		if resp, out := ts.post(t, "/v1/messages", `{"model":"tiny-a","max_tokens":2,"temperature":0,"thinking":{"type":"adaptive","display":"`+display+`"},"messages":[{"role":"user","content":"Hi"}]}`); resp.StatusCode != 200 {
			t.Errorf("display %s: %d %s", display, resp.StatusCode, out)
		}
	}
}

// TestAnthropicToolReference: Claude Code's ToolSearch answers with
// tool_reference blocks, which load the deferred tools they name: each
// is that name in the tool message, and the next turn is answered.
func TestAnthropicToolReference(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	body := `{"model":"tiny-a","max_tokens":2,"temperature":0,"thinking":{"type":"disabled"},
		"tools":[{"name":"ToolSearch","input_schema":{"type":"object","properties":{"query":{"type":"string"}}}},
			{"name":"mcp__echo__echo","input_schema":{"type":"object"},"defer_loading":true},
			{"name":"mcp__echo__ping","input_schema":{"type":"object"},"defer_loading":true}],
		"messages":[{"role":"user","content":"Echo hi."},
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"ToolSearch","input":{"query":"select:mcp__echo__echo,mcp__echo__ping"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[
				{"type":"tool_reference","tool_name":"mcp__echo__echo"},{"type":"tool_reference","tool_name":"mcp__echo__ping"}]}]}]}`
	var mr messagesRequest
	unmarshal(t, body, &mr)
	req, e := ts.target().messagesRequest(&mr, false)
	if e != nil {
		t.Fatal(e.msg)
	}
	if n := len(req.Messages); n != 3 || jsonOf(t, req.Messages[2]) != jsonOf(t, qwen.Message{Role: "tool", Content: "mcp__echo__echo\n\nmcp__echo__ping", ToolCallID: "toolu_1"}) {
		t.Errorf("messages %s; want the tool message to name the tools", jsonOf(t, req.Messages))
	}
	if resp, out := ts.post(t, "/v1/messages", body); resp.StatusCode != 200 {
		t.Errorf("%d %s", resp.StatusCode, out)
	}
}

// TestAnthropicDocuments: a document of text (a text source, or a
// content source of text blocks) is its title, its context and its text,
// in a user message or a tool result, and is answered.
func TestAnthropicDocuments(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	body := `{"model":"tiny-a","max_tokens":2,"temperature":0,"thinking":{"type":"disabled"},
		"tools":[{"name":"fetch","input_schema":{"type":"object"}}],
		"messages":[{"role":"user","content":[
				{"type":"document","source":{"type":"text","media_type":"text/plain","data":"The grass is green."},"title":"Facts","context":"From a book.","citations":{"enabled":false},"cache_control":{"type":"ephemeral"}},
				{"type":"text","text":"What color is the grass?"}]},
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"fetch","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[
				{"type":"document","source":{"type":"content","content":[{"type":"text","text":"The sky"},{"type":"text","text":"is blue."}]}}]}]}]}`
	var mr messagesRequest
	unmarshal(t, body, &mr)
	req, e := ts.target().messagesRequest(&mr, false)
	if e != nil {
		t.Fatal(e.msg)
	}
	want := []qwen.Message{
		{Role: "user", Content: "Facts\n\nFrom a book.\n\nThe grass is green.\n\nWhat color is the grass?"},
		{Role: "assistant", ToolCalls: []qwen.ToolCall{{ID: "toolu_1", Name: "fetch", Arguments: "{}"}}},
		{Role: "tool", Content: "The sky\n\nis blue.", ToolCallID: "toolu_1"},
	}
	if jsonOf(t, req.Messages) != jsonOf(t, want) {
		t.Errorf("messages\n%s\nwant\n%s", jsonOf(t, req.Messages), jsonOf(t, want))
	}
	if resp, out := ts.post(t, "/v1/messages", body); resp.StatusCode != 200 {
		t.Errorf("%d %s", resp.StatusCode, out)
	}
}

// TestAnthropicStreamBlocks: an answer that thinks, says a sentence and
// makes two calls streams as four blocks, in order, each with its index,
// that add up to the message not streamed; an answer cut by the server's
// shutdown or broken off is an error, in Anthropic's shape, streamed or
// not.
func TestAnthropicStreamBlocks(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	pieces := toolAnswer()
	answer := func(g *generation, stream bool) (*httptest.ResponseRecorder, anthropicMessageOut) {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/v1/messages", nil)
		if e := ts.answerMessage(rec, ts.target(), g, stream, false); e != nil {
			writeError(rec, r, e)
		}
		var msg anthropicMessageOut
		if !stream {
			unmarshal(t, rec.Body.String(), &msg)
		}
		return rec, msg
	}
	_, whole := answer(forced(ts, pieces), false)
	var kinds []string
	for _, b := range whole.Content {
		kinds = append(kinds, b.Type)
	}
	if strings.Join(kinds, ",") != "thinking,text,tool_use,tool_use" || *whole.Content[0].Thinking != "Two lookups." || whole.Content[0].Signature == nil || *whole.Content[0].Signature == "" ||
		*whole.Content[1].Text != "Let me check." || whole.Content[2].ID != "toolu_a" || whole.Content[2].Name != "weather" ||
		string(whole.Content[2].Input) != `{"city":"Paris"}` || whole.Content[3].ID != "toolu_b" || string(whole.Content[3].Input) != `{"zone":"CET"}` ||
		*whole.StopReason != "tool_use" || whole.Usage.OutputTokens != len(pieces) || whole.Usage.InputTokens != 7 {
		t.Fatalf("answer %s", jsonOf(t, whole))
	}
	rec, _ := answer(forced(ts, pieces), true)
	evs := namedEvents(t, rec.Body.String())
	var order []string
	for _, ev := range evs {
		var e eventJSON
		unmarshal(t, ev.data, &e)
		step := e.Type
		if e.Index != nil {
			step += itoa(*e.Index)
		}
		if e.Delta.Type != "" {
			step += ":" + e.Delta.Type
		}
		order = append(order, step)
	}
	wantOrder := "message_start content_block_start0 content_block_delta0:thinking_delta content_block_delta0:signature_delta content_block_stop0 " +
		"content_block_start1 content_block_delta1:text_delta content_block_stop1 " +
		"content_block_start2 content_block_delta2:input_json_delta content_block_stop2 " +
		"content_block_start3 content_block_delta3:input_json_delta content_block_delta3:input_json_delta content_block_delta3:input_json_delta content_block_stop3 " +
		"message_delta message_stop"
	if got := strings.Join(order, " "); got != wantOrder {
		t.Errorf("events\n%s\nwant\n%s", got, wantOrder)
	}
	streamed, _ := accumulate(t, evs)
	if jsonOf(t, streamed.Content) != jsonOf(t, whole.Content) || *streamed.StopReason != "tool_use" || jsonOf(t, streamed.Usage) != jsonOf(t, whole.Usage) {
		t.Errorf("streamed %s\nnot streamed %s", jsonOf(t, streamed), jsonOf(t, whole))
	}

	// The signature is the thinking's: the same again, another for
	// other thinking.
	_, again := answer(forced(ts, pieces), false)
	other := slices.Clone(pieces)
	other[0].Reasoning = "One lookup."
	_, otherMsg := answer(forced(ts, other), false)
	if *again.Content[0].Signature != *whole.Content[0].Signature || *otherMsg.Content[0].Signature == *whole.Content[0].Signature {
		t.Errorf("signatures %q, again %q, of other thinking %q", *whole.Content[0].Signature, *again.Content[0].Signature, *otherMsg.Content[0].Signature)
	}

	// Text alone, ended by the model: end_turn.
	if _, m := answer(forced(ts, pieces[1:2]), false); *m.StopReason != "end_turn" || len(m.Content) != 1 {
		t.Errorf("text: %s", jsonOf(t, m))
	}
	for _, c := range []struct {
		stop   qwen.StopReason
		status int
		typ    string
	}{{qwen.StopShutdown, 529, "overloaded_error"}, {"", 500, "api_error"}} {
		rec, _ := answer(forcedTo(ts, pieces, c.stop), false)
		var e eventJSON
		unmarshal(t, rec.Body.String(), &e)
		if rec.Code != c.status || e.Type != "error" || e.Error == nil || e.Error.Type != c.typ {
			t.Errorf("stop %q: %d %s; want %d, %s", c.stop, rec.Code, rec.Body.String(), c.status, c.typ)
		}
		rec, _ = answer(forcedTo(ts, pieces, c.stop), true)
		evs := namedEvents(t, rec.Body.String())
		last := evs[len(evs)-1]
		unmarshal(t, last.data, &e)
		if last.name != "error" || e.Error == nil || e.Error.Type != c.typ || strings.Contains(rec.Body.String(), "message_delta") {
			t.Errorf("stop %q streamed: %s", c.stop, rec.Body.String())
		}
	}
}

// anthropicErrorJSON is Anthropic's error shape.
type anthropicErrorJSON struct {
	Type  string
	Error *anthropicErrorBody
}

// TestAnthropicErrors: each refusal in Anthropic's shape, its type by
// its status; the key as x-api-key or a bearer token.
func TestAnthropicErrors(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{APIKey: "s3cret"})
	const m = `"model":"tiny-a","max_tokens":4`
	user := func(content string) string {
		return `{` + m + `,"messages":[{"role":"user","content":` + content + `}]}`
	}
	for _, c := range []struct {
		path, body string
		status     int
		typ, msg   string
	}{
		{"/v1/messages", `{` + m + `,"messages":[`, 400, "invalid_request_error", "malformed JSON"},
		{"/v1/messages", `{"model":"tiny-a","messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "max_tokens: Field required"},
		{"/v1/messages", `{` + m + `,"temperature":-1,"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "temperature"},
		// Anthropic's temperature is in [0, 1], where OpenAI's goes to 2.
		{"/v1/messages", `{` + m + `,"temperature":1.5,"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "temperature 1.5 is outside [0, 1]"},
		{"/v1/messages", `{` + m + `,"temperature":1.0000001,"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "temperature 1.0000001 is outside [0, 1]"},
		{"/v1/messages", user(`[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]`), 400, "invalid_request_error",
			"messages[0].content[0]: image blocks are not supported: this model has no vision"},
		{"/v1/messages", user(`[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image"}]}]`), 400, "invalid_request_error", "messages[0].content[0].content[0]: image blocks"},
		{"/v1/messages", user(`[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}]`), 400, "invalid_request_error",
			`messages[0].content[0].source.type "base64": a document is read as text, from a text or content source: this model has no vision`},
		{"/v1/messages", user(`[{"type":"document"}]`), 400, "invalid_request_error", "messages[0].content[0].source: want a document source"},
		{"/v1/messages", user(`[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"},"citations":{"enabled":true}}]`), 400, "invalid_request_error",
			"messages[0].content[0].citations: citations are not supported"},
		{"/v1/messages", user(`[{"type":"document","source":{"type":"content","content":[{"type":"image"}]}}]`), 400, "invalid_request_error", "messages[0].content[0].source.content[0]: image blocks"},
		{"/v1/messages", user(`[{"type":"tool_result","tool_use_id":"t","content":[{"type":"tool_reference"}]}]`), 400, "invalid_request_error", "messages[0].content[0].content[0].tool_name: missing"},
		{"/v1/messages", user(`7`), 400, "invalid_request_error", "content: want a string or a list of content blocks"},
		{"/v1/messages", user(`[{"type":"text","text":5}]`), 400, "invalid_request_error", "messages[0].content[0].text: want a string, got number"},
		{"/v1/messages", user(`[]`), 400, "invalid_request_error", "messages[0].content: empty"},
		{"/v1/messages", `{` + m + `,"messages":[]}`, 400, "invalid_request_error", "at least one message"},
		{"/v1/messages", `{` + m + `,"system":[{"type":"image"}],"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "the system prompt is text"},
		{"/v1/messages", `{` + m + `,"system":5,"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "system: want a string or a list"},
		{"/v1/messages", `{` + m + `,"messages":[{"role":"system","content":"Hi"}]}`, 400, "invalid_request_error", `at least one message is required, besides system entries`},
		{"/v1/messages", `{` + m + `,"messages":[{"role":"robot","content":"Hi"}]}`, 400, "invalid_request_error", `messages[0].role "robot": want user, assistant or system`},
		{"/v1/messages", `{` + m + `,"messages":[{"role":"system","content":[{"type":"image"}]},{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", `messages[0].content[0]: a "image" block: the system prompt is text`},
		{"/v1/messages", `{` + m + `,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"The answer is"}]}`, 400, "invalid_request_error", "prefilled answer is not supported"},
		{"/v1/messages", `{` + m + `,"thinking":{"type":"enabled"},"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "thinking.budget_tokens"},
		// Anthropic's rules for budget_tokens: at least 1024, and below
		// max_tokens, whose share of the answer it is.
		{"/v1/messages", `{` + m + `,"thinking":{"type":"enabled","budget_tokens":1000},"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "thinking.budget_tokens: 1000 is below 1024"},
		{"/v1/messages/count_tokens", `{"model":"tiny-a","thinking":{"type":"enabled","budget_tokens":4},"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "thinking.budget_tokens: 4 is below 1024"},
		{"/v1/messages", `{"model":"tiny-a","max_tokens":1024,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error",
			"thinking.budget_tokens: 1024 must be less than max_tokens (1024)"},
		{"/v1/messages", `{` + m + `,"thinking":{"type":"sometimes"},"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", `thinking.type "sometimes"`},
		{"/v1/messages", `{` + m + `,"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "it needs tools"},
		{"/v1/messages", `{` + m + `,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"g"},"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", `tool_choice.name "g": not among the tools`},
		{"/v1/messages/count_tokens", `{"model":"tiny-a","tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"g"},"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", `tool_choice.name "g": not among the tools`},
		{"/v1/messages", `{` + m + `,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "server tools are not supported"},
		{"/v1/messages", `{` + m + `,"mcp_servers":[{"type":"url","url":"https://example.com/sse","name":"example"}],"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "mcp_servers: Anthropic's MCP connector is not supported"},
		{"/v1/messages/count_tokens", `{"model":"tiny-a","mcp_servers":[{"type":"url","url":"https://example.com/sse","name":"example"}],"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "mcp_servers"},
		{"/v1/messages", `{` + m + `,"tools":[{"name":"f"}],"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "tools[0].input_schema: missing"},
		{"/v1/messages", `{` + m + `,"tools":[{"name":"f","input_schema":{"type":"object","minProperties":"one"}}],"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "minProperties"},
		// A tool's input is an object: Anthropic refuses a schema of
		// another type, or of none.
		{"/v1/messages", `{` + m + `,"tools":[{"name":"f","input_schema":{"type":"string","enum":["a"]}}],"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", `tools[0].input_schema.type "string": want "object"`},
		{"/v1/messages", `{` + m + `,"tools":[{"name":"f","input_schema":{"type":"object"}},{"name":"g","input_schema":{"properties":{"a":{}}}}],"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", `tools[1].input_schema.type: missing; want "object"`},
		{"/v1/messages/count_tokens", `{"model":"tiny-a","tools":[{"name":"f","input_schema":{"type":["object","null"]}}],"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", `tools[0].input_schema.type ["object","null"]: want "object"`},
		// Tool names as Anthropic takes them: ^[a-zA-Z0-9_-]{1,128}$, each
		// once.
		{"/v1/messages", `{` + m + `,"tools":[{"name":"a b\"c","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", `tools[0].name "a b\"c": want at most 128 letters, digits, _ and -`},
		{"/v1/messages", `{` + m + `,"tools":[{"name":"` + strings.Repeat("x", 129) + `","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", `tools[0].name "xxx`},
		{"/v1/messages", `{` + m + `,"tools":[{"name":"f","input_schema":{"type":"object"}},{"name":"mcp__git-hub__f_2","input_schema":{"type":"object"}},{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", `tools[2].name "f": tools[0] has it too: tool names must be unique`},
		{"/v1/messages", `{` + m + `,"stop_sequences":"END","messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "stop_sequences: want an array"},
		{"/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":4,"messages":[{"role":"user","content":"Hi"}]}`, 404, "not_found_error", `the model "claude-sonnet-4-5" does not exist: this server has "tiny-a"`},
		{"/v1/messages/count_tokens", `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"Hi"}]}`, 404, "not_found_error", "does not exist"},
		{"/v1/messages/count_tokens", `{"model":"tiny-a","messages":[{"role":"user","content":[{"type":"image"}]}]}`, 400, "invalid_request_error", "reads text only"},
		{"/v1/messages/batches", `{}`, 404, "not_found_error", "no endpoint POST /v1/messages/batches"},
	} {
		resp, body := ts.post(t, c.path, c.body, "x-api-key", "s3cret", "anthropic-version", "2023-06-01")
		var e anthropicErrorJSON
		unmarshal(t, body, &e)
		if resp.StatusCode != c.status || e.Type != "error" || e.Error == nil || e.Error.Type != c.typ || !strings.Contains(e.Error.Message, c.msg) {
			t.Errorf("%s %s: %d %s; want %d, %s, %q", c.path, c.body, resp.StatusCode, body, c.status, c.typ, c.msg)
		}
	}
	// With interleaved thinking Anthropic takes a budget beyond
	// max_tokens: the budget of a whole turn's thinking blocks.
	if resp, body := ts.post(t, "/v1/messages", `{"model":"tiny-a","max_tokens":1025,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[{"role":"user","content":"Hi"}]}`,
		"x-api-key", "s3cret", "anthropic-beta", "fine-grained-tool-streaming-2025-05-14,interleaved-thinking-2025-05-14"); resp.StatusCode != 200 {
		t.Errorf("budget_tokens beyond max_tokens, interleaved: %d %.300s", resp.StatusCode, body)
	}
	hi := `{"model":"tiny-a","max_tokens":1,"messages":[{"role":"user","content":"Hi"}]}`
	for _, header := range [][]string{nil, {"x-api-key", "wrong"}, {"Authorization", "Bearer wrong"}, {"Authorization", "s3cret"}} {
		resp, body := ts.post(t, "/v1/messages", hi, header...)
		var e anthropicErrorJSON
		unmarshal(t, body, &e)
		if resp.StatusCode != 401 || e.Error == nil || e.Error.Type != "authentication_error" || !strings.Contains(e.Error.Message, "x-api-key") {
			t.Errorf("%q: %d %s", header, resp.StatusCode, body)
		}
	}
	for _, header := range [][]string{{"x-api-key", "s3cret"}, {"Authorization", "Bearer s3cret"}} {
		if resp, body := ts.post(t, "/v1/messages", hi, header...); resp.StatusCode != 200 {
			t.Errorf("%q: %d %s", header, resp.StatusCode, body)
		}
	}
	// x-api-key opens the other protocols too.
	if resp, body := ts.post(t, "/v1/chat/completions", `{"model":"tiny-a","max_tokens":1,"messages":[{"role":"user","content":"Hi"}]}`, "x-api-key", "s3cret"); resp.StatusCode != 200 {
		t.Errorf("OpenAI with x-api-key: %d %s", resp.StatusCode, body)
	}
}

// openMessages starts a streamed Messages request and returns its events
// as they come.
func openMessages(t *testing.T, ts *testServer, ctx context.Context, body string) <-chan namedEvent {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", ts.url+"/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	evs := make(chan namedEvent, 1000)
	go func() {
		defer resp.Body.Close()
		defer close(evs)
		sc := bufio.NewScanner(resp.Body)
		var name string
		for sc.Scan() {
			line := sc.Text()
			if n, ok := strings.CutPrefix(line, "event: "); ok {
				name = n
			} else if data, ok := strings.CutPrefix(line, "data: "); ok {
				evs <- namedEvent{name, data}
			}
		}
	}()
	return evs
}

// next is the next event of a stream, within a minute.
func next(t *testing.T, evs <-chan namedEvent) namedEvent {
	t.Helper()
	select {
	case ev, ok := <-evs:
		if !ok {
			t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(time.Minute):
		t.Fatal("no event within a minute")
	}
	return namedEvent{}
}

// TestAnthropicWaiting: a stream waiting for a slot sends pings; a
// request beyond the full queue is 529 overloaded_error with
// Retry-After; a client that leaves mid-stream frees its slot within a
// step, logged as 499.
func TestAnthropicWaiting(t *testing.T) {
	ts, stopLong := busyServer(t)
	ctx, leave := context.WithCancel(context.Background())
	defer leave()
	evs := openMessages(t, ts, ctx, `{"model":"tiny-a","max_tokens":100000,"temperature":0,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`)
	if ev := next(t, evs); ev.name != "message_start" {
		t.Fatalf("first event %v", ev)
	}
	for range 3 {
		if ev := next(t, evs); ev.name != "ping" || ev.data != `{"type":"ping"}` {
			t.Fatalf("waiting for a slot: %v", ev)
		}
	}
	if ts.m.Stats().Queued != 1 {
		t.Fatal("the request is not queued")
	}
	resp, body := ts.post(t, "/v1/messages", `{"model":"tiny-a","max_tokens":1,"messages":[{"role":"user","content":"Hi"}]}`)
	var e anthropicErrorJSON
	unmarshal(t, body, &e)
	if resp.StatusCode != 529 || resp.Header.Get("Retry-After") != "1" || e.Error == nil || e.Error.Type != "overloaded_error" {
		t.Errorf("beyond the queue: %d, Retry-After %q, %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	stopLong()
	for ev := next(t, evs); ev.name != "content_block_delta"; ev = next(t, evs) {
		if ev.name != "ping" && ev.name != "content_block_start" {
			t.Fatalf("before the text: %v", ev)
		}
	}
	next(t, evs)
	leave()
	waitFor(t, func() bool { return ts.m.Stats().Active == 0 })
	waitFor(t, func() bool { return ts.log.logged(t, request("POST", "/v1/messages", 499, "INFO")) != nil })
	if resp, body := ts.post(t, "/v1/messages", `{"model":"tiny-a","max_tokens":2,"messages":[{"role":"user","content":"Hi"}]}`); resp.StatusCode != 200 {
		t.Fatalf("after a disconnect: %d %s", resp.StatusCode, body)
	}
}

// TestAnthropicBatching: eight concurrent Messages streams share the
// engine's steps as eight OpenAI streams do: the mean decode batch, from
// the engine's counts, is about eight for both.
func TestAnthropicBatching(t *testing.T) {
	ts := newTestServer(t, modelOpts{Parallel: 8}, ServerOptions{})
	const streams, n = 8, 32
	batch := func(path, body string) float64 {
		before := ts.m.Stats()
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range streams {
			wg.Go(func() {
				<-start
				resp, err := http.Post(ts.url+path, "application/json", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"output_tokens":`+itoa(n))) && !bytes.Contains(b, []byte(`"completion_tokens":`+itoa(n))) {
					t.Errorf("%s: %d %s", path, resp.StatusCode, b)
				}
			})
		}
		close(start)
		wg.Wait()
		after := ts.m.Stats()
		return float64(after.Decoded-before.Decoded) / float64(after.DecodeSteps-before.DecodeSteps)
	}
	// The better of two rounds each: on a loaded machine the streams'
	// requests may come in late enough to miss the first steps.
	best := func(path, body string) float64 { return max(batch(path, body), batch(path, body)) }
	openAI := best("/v1/chat/completions", `{"model":"tiny-a","max_tokens":32,"temperature":0,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hi"}]}`)
	messages := best("/v1/messages", `{"model":"tiny-a","max_tokens":32,"temperature":0,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`)
	t.Logf("mean decode batch of %d streams: OpenAI %.2f, Messages %.2f", streams, openAI, messages)
	if messages < 6 || messages < openAI-1 {
		t.Errorf("mean decode batch of %d Messages streams %.2f, of OpenAI streams %.2f", streams, messages, openAI)
	}
}

// TestAnthropicConsecutiveTurns: "Consecutive user or assistant turns in
// your request will be combined into a single turn" (the Messages API's
// messages): a turn split in two is prompted as the one given whole.
func TestAnthropicConsecutiveTurns(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	count := func(messages string) string {
		t.Helper()
		resp, b := ts.post(t, "/v1/messages/count_tokens", `{"model":"tiny-a","messages":`+messages+`,
			"tools":[{"name":"ls","description":"list","input_schema":{"type":"object","properties":{"dir":{"type":"string"}}}}]}`)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		return b
	}
	for name, p := range map[string][2]string{
		"user": {
			`[{"role":"user","content":"Look at the repo."},{"role":"user","content":"Then list src."}]`,
			`[{"role":"user","content":[{"type":"text","text":"Look at the repo."},{"type":"text","text":"Then list src."}]}]`},
		"assistant": {
			`[{"role":"user","content":"list src"},
			  {"role":"assistant","content":[{"type":"thinking","thinking":"I should call ls.","signature":""},{"type":"text","text":"Listing."}]},
			  {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"ls","input":{"dir":"src"}}]},
			  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a.go"}]},
			  {"role":"user","content":"and now?"}]`,
			`[{"role":"user","content":"list src"},
			  {"role":"assistant","content":[{"type":"thinking","thinking":"I should call ls.","signature":""},{"type":"text","text":"Listing."},
			    {"type":"tool_use","id":"toolu_1","name":"ls","input":{"dir":"src"}}]},
			  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a.go"},{"type":"text","text":"and now?"}]}]`},
	} {
		if split, whole := count(p[0]), count(p[1]); split != whole {
			t.Errorf("%s turn split in two: %s; given whole: %s", name, split, whole)
		}
	}
}

// TestAnthropicSignatureBombs: signatures restore at most 16 MiB of
// thinking over a whole request, not 16 MiB each: a body of 8 MiB holds
// hundreds of signatures that inflate a thousandfold, which would take
// gigabytes. The signature past the bound is refused, naming it.
func TestAnthropicSignatureBombs(t *testing.T) {
	sig := signThinking(strings.Repeat("a", 1<<20))
	var msgs []string
	for range 20 {
		msgs = append(msgs, `{"role":"user","content":"Go on."}`,
			`{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"`+sig+`"},{"type":"text","text":"Done."}]}`)
	}
	msgs = append(msgs, `{"role":"user","content":"Again."}`)
	var in []anthropicMessage
	unmarshal(t, "["+strings.Join(msgs, ",")+"]", &in)
	_, e := anthropicMessages(nil, in)
	if e == nil {
		t.Fatal("20 MiB of thinking restored from signatures")
	}
	if e.param != "messages[33].content[0].signature" || !strings.Contains(e.msg, "16 MiB") {
		t.Errorf("refused: %s %s", e.param, e.msg)
	}
}
