package serve

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/qwen"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestApplyTemplateMatchesJinja posts chat's tool conversations, as an
// OpenAI client sends them, to /apply-template: the prompt is jinja2's
// rendering of Qwen3's template (chat/testdata, made by gen_tools.py).
func TestApplyTemplateMatchesJinja(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	var cases []struct {
		Name     string
		Tools    json.RawMessage
		Messages json.RawMessage
	}
	readFile(t, "../../format/chat/testdata/tools_cases.json", &cases)
	var golden []struct {
		Case, Family, Text string
		GenerationPrompt   bool `json:"generation_prompt"`
		Thinking           bool
	}
	readFile(t, "../../format/chat/testdata/tools_golden.json", &golden)
	checked := 0
	for _, c := range cases {
		for _, g := range golden {
			if g.Case != c.Name || g.Family != "qwen3" || !g.GenerationPrompt {
				continue
			}
			body := `{"messages":` + string(c.Messages) + `,"tools":` + string(c.Tools) +
				`,"chat_template_kwargs":{"enable_thinking":` + jsonBool(g.Thinking) + `}}`
			resp, out := ts.post(t, "/apply-template", body)
			var got struct{ Prompt string }
			unmarshal(t, out, &got)
			if resp.StatusCode != 200 || got.Prompt != g.Text {
				t.Errorf("%s (thinking %v): %d\n got %q\nwant %q", c.Name, g.Thinking, resp.StatusCode, got.Prompt, g.Text)
			}
			checked++
		}
	}
	if checked < 2*len(cases) {
		t.Fatalf("%d renderings checked", checked)
	}
}

func jsonBool(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func readFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	unmarshal(t, string(b), v)
}

// toolAnswer is an answer that thinks, says a sentence and makes two
// calls, as package qwen gives it (tested there): the second call's
// arguments in pieces.
func toolAnswer() []qwen.Delta {
	return []qwen.Delta{
		{Reasoning: "Two lookups.", IDs: []int32{1}},
		{Content: "Let me check.", IDs: []int32{2}},
		{ToolCalls: []qwen.ToolCallDelta{{Index: 0, ID: "call_a", Name: "weather", Arguments: `{"city": "Paris"}`}}, IDs: []int32{3}},
		{ToolCalls: []qwen.ToolCallDelta{{Index: 1, ID: "call_b", Name: "time", Arguments: `{"zone": `}}, IDs: []int32{4}},
		{ToolCalls: []qwen.ToolCallDelta{{Index: 1, Arguments: `"CET"`}}, IDs: []int32{5}},
		{ToolCalls: []qwen.ToolCallDelta{{Index: 1, Arguments: `}`}}, IDs: []int32{6}},
	}
}

// TestOpenAIToolCalls: the calls come as tool_calls with finish_reason
// "tool_calls"; streamed, each call has its own index, its id and name
// in its first piece, and openai-go's accumulator rebuilds the answer the
// non-streamed response gives.
func TestOpenAIToolCalls(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	rec := httptest.NewRecorder()
	ts.answerChat(rec, httptest.NewRequest("POST", "/v1/chat/completions", nil), ts.target(), forced(ts, toolAnswer()), false, false)
	var whole openai.ChatCompletion
	unmarshal(t, rec.Body.String(), &whole)
	m := whole.Choices[0].Message
	if whole.Choices[0].FinishReason != "tool_calls" || m.Content != "Let me check." || len(m.ToolCalls) != 2 ||
		m.ToolCalls[0].ID != "call_a" || m.ToolCalls[0].Function.Name != "weather" || m.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` ||
		m.ToolCalls[1].ID != "call_b" || m.ToolCalls[1].Type != "function" || m.ToolCalls[1].Function.Arguments != `{"zone": "CET"}` {
		t.Fatalf("answer %s", rec.Body.String())
	}
	// Calls alone: content null, as OpenAI's, which clients that test it
	// against null tell from a content left out.
	rec = httptest.NewRecorder()
	callsOnly := slices.DeleteFunc(toolAnswer(), func(d qwen.Delta) bool { return d.Content != "" })
	ts.answerChat(rec, httptest.NewRequest("POST", "/v1/chat/completions", nil), ts.target(), forced(ts, callsOnly), false, false)
	var raw struct {
		Choices []struct{ Message map[string]any }
	}
	unmarshal(t, rec.Body.String(), &raw)
	if content, ok := raw.Choices[0].Message["content"]; !ok || content != nil {
		t.Errorf("calls alone: %s; want content null", rec.Body.String())
	}

	rec = httptest.NewRecorder()
	ts.answerChat(rec, httptest.NewRequest("POST", "/v1/chat/completions", nil), ts.target(), forced(ts, toolAnswer()), true, false)
	var acc openai.ChatCompletionAccumulator
	firsts := map[int64]bool{}
	for _, ev := range sseEvents(t, rec.Body.String()) {
		if ev == "[DONE]" {
			break
		}
		var chunk openai.ChatCompletionChunk
		unmarshal(t, ev, &chunk)
		for _, c := range chunk.Choices {
			for _, tc := range c.Delta.ToolCalls {
				if !firsts[tc.Index] && (tc.ID == "" || tc.Function.Name == "" || tc.Type != "function") {
					t.Errorf("call %d's first piece %s lacks its id, type or name", tc.Index, ev)
				}
				if firsts[tc.Index] && (tc.ID != "" || tc.Function.Name != "") {
					t.Errorf("call %d: id or name again in %s", tc.Index, ev)
				}
				firsts[tc.Index] = true
			}
		}
		if !acc.AddChunk(chunk) {
			t.Fatalf("the accumulator refused %s", ev)
		}
	}
	sm := acc.Choices[0].Message
	if len(firsts) != 2 || acc.Choices[0].FinishReason != "tool_calls" || sm.Content != m.Content || len(sm.ToolCalls) != 2 {
		t.Fatalf("streamed: %+v", acc.Choices[0])
	}
	for i := range m.ToolCalls {
		a, b := sm.ToolCalls[i], m.ToolCalls[i]
		if a.ID != b.ID || a.Function.Name != b.Function.Name || a.Function.Arguments != b.Function.Arguments {
			t.Errorf("call %d streamed %+v, whole %+v", i, a, b)
		}
	}
}

// TestOllamaToolCalls: calls come as message.tool_calls, arguments as
// objects, each whole in a line of the stream with its id, and
// done_reason "stop".
func TestOllamaToolCalls(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	type line struct {
		Message struct {
			Content   string
			ToolCalls []struct {
				ID       string
				Function struct {
					Index     int
					Name      string
					Arguments map[string]any
				}
			} `json:"tool_calls"`
		}
		Done       bool
		DoneReason string `json:"done_reason"`
	}
	for _, stream := range []bool{false, true} {
		rec := httptest.NewRecorder()
		ts.ollamaAnswer(rec, httptest.NewRequest("POST", "/api/chat", nil), ts.target(), forced(ts, toolAnswer()), stream, true)
		var content strings.Builder
		var names, ids []string
		var last line
		for _, l := range strings.Split(strings.TrimSpace(rec.Body.String()), "\n") {
			var o line
			unmarshal(t, l, &o)
			content.WriteString(o.Message.Content)
			for _, c := range o.Message.ToolCalls {
				if c.Function.Index != len(names) {
					t.Errorf("stream %v: call %d has index %d", stream, len(names), c.Function.Index)
				}
				names, ids = append(names, c.Function.Name), append(ids, c.ID)
				if args, _ := json.Marshal(c.Function.Arguments); len(c.Function.Arguments) != 1 {
					t.Errorf("stream %v: call %s arguments %s", stream, c.Function.Name, args)
				}
			}
			last = o
		}
		if content.String() != "Let me check." || strings.Join(names, ",") != "weather,time" || strings.Join(ids, ",") != "call_a,call_b" ||
			!last.Done || last.DoneReason != "stop" {
			t.Errorf("stream %v: content %q, calls %q with ids %q, last %+v", stream, content.String(), names, ids, last)
		}
	}
}

// TestOllamaToolResults: an Ollama conversation given back, the
// assistant's tool_calls with their arguments as objects and each result
// a tool message with its tool_name, renders as Qwen3's template renders
// it: as the same conversation in OpenAI's shape does on /apply-template
// (checked against Jinja's above), the calls and the <tool_response>s in
// their order. /api/chat answers from that prompt.
func TestOllamaToolResults(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	const tools = `"tools":[{"type":"function","function":{"name":"weather","description":"The forecast.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
	const ask = `{"role":"user","content":"Weather in Paris and Oslo?"}`
	ollama := `{"model":"tiny-a","think":false,` + tools + `,"messages":[` + ask + `,` +
		`{"role":"assistant","content":"","tool_calls":[{"function":{"name":"weather","arguments":{"city":"Paris"}}},{"function":{"name":"weather","arguments":{"city":"Oslo"}}}]},` +
		`{"role":"tool","tool_name":"weather","content":"18C"},{"role":"tool","tool_name":"weather","content":"9C"}]`
	var cr ollamaChatRequest
	unmarshal(t, ollama+"}", &cr)
	req, e := ts.target().ollamaChatRequest(&cr)
	if e != nil {
		t.Fatal(e.msg)
	}
	got, err := ts.m.RenderPrompt(req)
	if err != nil {
		t.Fatal(err)
	}
	openAI := `{"chat_template_kwargs":{"enable_thinking":false},` + tools + `,"messages":[` + ask + `,` +
		`{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\": \"Paris\"}"}},{"id":"call_2","type":"function","function":{"name":"weather","arguments":"{\"city\": \"Oslo\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"18C"},{"role":"tool","tool_call_id":"call_2","content":"9C"}]}`
	_, out := ts.post(t, "/apply-template", openAI)
	var want struct{ Prompt string }
	unmarshal(t, out, &want)
	const tail = "<|im_start|>assistant\n" +
		"<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n" +
		"<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\n<tool_response>\n18C\n</tool_response>\n<tool_response>\n9C\n</tool_response><|im_end|>\n" +
		"<|im_start|>assistant\n<think>\n\n</think>\n\n"
	if got != want.Prompt || !strings.HasSuffix(got, tail) {
		t.Fatalf("ollama's rendering\n%q\nopenai's\n%q\nwant the end\n%q", got, want.Prompt, tail)
	}
	n, err := ts.m.Count(req)
	if err != nil {
		t.Fatal(err)
	}
	resp, text := ts.post(t, "/api/chat", ollama+`,"stream":false,"options":{"num_predict":1}}`)
	if lines := ollamaLines(t, text); resp.StatusCode != 200 || *lines[0].PromptEvalCount != n {
		t.Fatalf("/api/chat: %d %s; want %d prompt tokens", resp.StatusCode, text, n)
	}
}

// TestToolResultsInCallOrder: parallel calls' results sent in another
// order than the calls (each naming its call) are put in the calls'
// order, which the template, printing no ids, pairs them by: OpenAI's
// and Ollama's tool_call_id, the Responses API's call_id and Anthropic's
// tool_use_id.
func TestToolResultsInCallOrder(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	prompt := func(first, second string) string {
		t.Helper()
		body := `{"model":"tiny-a","messages":[{"role":"user","content":"Weather in Paris and Oslo?"},` +
			`{"role":"assistant","content":"","tool_calls":[{"id":"call_p","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}},` +
			`{"id":"call_o","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}}]},` +
			first + `,` + second + `]}`
		resp, out := ts.post(t, "/apply-template", body)
		var got struct{ Prompt string }
		unmarshal(t, out, &got)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		return got.Prompt
	}
	paris, oslo := `{"role":"tool","tool_call_id":"call_p","content":"Paris: sun"}`, `{"role":"tool","tool_call_id":"call_o","content":"Oslo: snow"}`
	inOrder := prompt(paris, oslo)
	if got := prompt(oslo, paris); got != inOrder || strings.Index(inOrder, "Paris: sun") > strings.Index(inOrder, "Oslo: snow") {
		t.Errorf("results out of order:\n%s\nin order:\n%s", got, inOrder)
	}
	// The other protocols give their ids to the same messages.
	var anthropic []anthropicMessage
	unmarshal(t, `[{"role":"user","content":"Weather?"},`+
		`{"role":"assistant","content":[{"type":"tool_use","id":"p","name":"weather","input":{}},{"type":"tool_use","id":"o","name":"weather","input":{}}]},`+
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"o","content":"Oslo"},{"type":"tool_result","tool_use_id":"p","content":"Paris"}]}]`, &anthropic)
	fromAnthropic, e := anthropicMessages(nil, anthropic)
	if e != nil {
		t.Fatal(e)
	}
	fromResponses, e := responsesInput(json.RawMessage(`[{"role":"user","content":"Weather?"},` +
		`{"type":"function_call","call_id":"p","name":"weather","arguments":"{}"},{"type":"function_call","call_id":"o","name":"weather","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"o","output":"Oslo"},{"type":"function_call_output","call_id":"p","output":"Paris"}]`))
	if e != nil {
		t.Fatal(e)
	}
	var cr ollamaChatRequest
	unmarshal(t, `{"messages":[{"role":"user","content":"Weather?"},`+
		`{"role":"assistant","tool_calls":[{"id":"p","function":{"name":"weather","arguments":{}}},{"id":"o","function":{"name":"weather","arguments":{}}}]},`+
		`{"role":"tool","tool_name":"weather","tool_call_id":"o","content":"Oslo"},{"role":"tool","tool_name":"weather","tool_call_id":"p","content":"Paris"}]}`, &cr)
	fromOllama, e := ts.target().ollamaChatRequest(&cr)
	if e != nil {
		t.Fatal(e.msg)
	}
	for name, msgs := range map[string][]qwen.Message{"anthropic": fromAnthropic, "responses": fromResponses, "ollama": fromOllama.Messages} {
		var results []string
		for _, m := range chat.OrderToolResults(msgs) {
			if m.Role == "tool" {
				results = append(results, m.Content)
			}
		}
		if strings.Join(results, " ") != "Paris Oslo" {
			t.Errorf("%s: the results in the prompt %q, want Paris Oslo", name, results)
		}
	}
}

// TestToolRequestErrors: a bad tool definition, tool call or tool_choice
// is refused with the path of the field at fault.
func TestToolRequestErrors(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	const hi = `"messages":[{"role":"user","content":"Hi"}]`
	for _, c := range []struct{ path, body, param, msg string }{
		{"/v1/chat/completions", `{"model":"tiny-a",` + hi + `,"tools":[{"type":"function","function":{"name":"f"}},{"type":"function"}]}`, "tools[1].function", "tools[1].function: missing"},
		{"/v1/chat/completions", `{"model":"tiny-a",` + hi + `,"tools":[{"type":"function","function":{"name":"f","parameters":"x"}}]}`, "tools[0].function.parameters", "JSON Schema object"},
		{"/v1/chat/completions", `{"model":"tiny-a",` + hi + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"string"}}}]}`, "tools[0].function.parameters.type", `tools[0].function.parameters.type "string": want "object"`},
		{"/v1/chat/completions", `{"model":"tiny-a",` + hi + `,"tools":[{"type":"function","function":{"name":"say \"hi\""}}]}`, "tools[0].function.name", `a tool's name may not hold`},
		{"/v1/chat/completions", `{"model":"tiny-a",` + hi + `,"tool_choice":"sometimes"}`, "tool_choice", `tool_choice "sometimes"`},
		{"/v1/chat/completions", `{"model":"tiny-a",` + hi + `,"tool_choice":"required"}`, "tool_choice", "it needs tools"},
		{"/v1/chat/completions", `{"model":"tiny-a",` + hi + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}`,
			"tool_choice.function.name", `tool_choice.function.name "g": not among the tools`},
		{"/v1/chat/completions", `{"model":"tiny-a",` + hi + `,"response_format":{"type":"xml"}}`, "response_format.type", `"xml"`},
		{"/v1/chat/completions", `{"model":"tiny-a",` + hi + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"object","properties":{"a":{"type":"string","format":"regex"}}}}}}`,
			"response_format.json_schema.schema", `json schema /properties/a: format: "regex" is not supported`},
		{"/v1/chat/completions", `{"model":"tiny-a",` + hi + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","minProperties":"one"}}}]}`,
			"tools[0].function.parameters", `json schema #: minProperties`},
		{"/v1/chat/completions", `{"model":"tiny-a","messages":[{"role":"user","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}]}`,
			"messages[0].tool_calls", "only an assistant message"},
		{"/apply-template", `{"messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":"{}"}}]}]}`,
			"messages[0].tool_calls[0].function.name", "missing"},
	} {
		wantBadRequest(t, ts, c.path, c.body, c.param, c.msg)
	}
	// Without tools, "auto", "none" and parallel_tool_calls say nothing.
	for _, extra := range []string{`"tool_choice":"auto"`, `"tool_choice":"none","tools":[]`, `"parallel_tool_calls":false`} {
		resp, out := ts.post(t, "/v1/chat/completions", `{"model":"tiny-a",`+hi+`,"max_tokens":1,`+extra+`}`)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", extra, resp.StatusCode, out)
		}
	}
	for body, want := range map[string]string{
		`{"model":"tiny-a",` + hi + `,"format":"yaml"}`: `format \"yaml\": want \"json\" or a JSON Schema`,
		`{"model":"tiny-a",` + hi + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":["object","null"]}}}]}`: `tools[0].function.parameters.type [\"object\",\"null\"]: want \"object\"`,
	} {
		resp, out := ts.post(t, "/api/chat", body)
		if resp.StatusCode != 400 || !strings.Contains(out, want) {
			t.Errorf("ollama %s: %d %s", body, resp.StatusCode, out)
		}
	}
}

// TestOpenAIGoToolsAndSchema: openai-go against the real server, the
// random-weight model forced by the grammar: tool_choice required gives
// calls whose arguments fit the tool, the client's accumulator rebuilds
// the streamed answer as it was not streamed, and a json_schema
// response_format gives a valid object.
func TestOpenAIGoToolsAndSchema(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	c := ts.client()
	weather := openai.FunctionParameters{"type": "object", "properties": map[string]any{
		"city": map[string]any{"enum": []string{"Paris", "Oslo"}}, "days": map[string]any{"type": "integer", "minimum": 1, "maximum": 7}},
		"required": []string{"city", "days"}, "additionalProperties": false}
	p := openai.ChatCompletionNewParams{
		Model:      "tiny-a",
		Messages:   []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
		Tools:      []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "weather", Parameters: weather})},
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
		MaxTokens:  openai.Int(200), Temperature: openai.Float(1), Seed: openai.Int(5),
	}
	noThink := option.WithJSONSet("chat_template_kwargs", map[string]any{"enable_thinking": false})
	whole, err := c.Chat.Completions.New(t.Context(), p, noThink)
	if err != nil {
		t.Fatal(err)
	}
	calls := whole.Choices[0].Message.ToolCalls
	if whole.Choices[0].FinishReason != "tool_calls" || len(calls) == 0 {
		t.Fatalf("answer %+v", whole.Choices[0])
	}
	for _, call := range calls {
		var args struct {
			City string
			Days int
		}
		if call.Function.Name != "weather" || json.Unmarshal([]byte(call.Function.Arguments), &args) != nil ||
			(args.City != "Paris" && args.City != "Oslo") || args.Days < 1 || args.Days > 7 {
			t.Fatalf("call %+v", call)
		}
	}
	s := c.Chat.Completions.NewStreaming(t.Context(), p, noThink)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	got := acc.Choices[0].Message.ToolCalls
	if len(got) != len(calls) {
		t.Fatalf("streamed %d calls, whole %d", len(got), len(calls))
	}
	for i := range got {
		if got[i].Function.Name != calls[i].Function.Name || got[i].Function.Arguments != calls[i].Function.Arguments {
			t.Errorf("call %d streamed %+v, whole %+v", i, got[i], calls[i])
		}
	}

	schema := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": -3, "maximum": 3}},
		"required": []string{"n"}, "additionalProperties": false}
	r, err := c.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:    "tiny-a",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("A number?")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &openai.ResponseFormatJSONSchemaParam{
			JSONSchema: openai.ResponseFormatJSONSchemaJSONSchemaParam{Name: "n", Schema: schema, Strict: openai.Bool(true)}}},
		MaxTokens: openai.Int(100), Temperature: openai.Float(1), Seed: openai.Int(2),
	}, noThink)
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ N *int }
	dec := json.NewDecoder(strings.NewReader(r.Choices[0].Message.Content))
	dec.DisallowUnknownFields()
	if r.Choices[0].FinishReason != "stop" || dec.Decode(&v) != nil || v.N == nil || *v.N < -3 || *v.N > 3 {
		t.Fatalf("answer %q, %s", r.Choices[0].Message.Content, r.Choices[0].FinishReason)
	}
}

// TestFormatWithTools: a structured format and tools at once, as Codex's
// --output-schema and the Agents SDK's outputType with tools send them:
// with tool_choice auto each answer is tool calls or the value, never
// free text; required is calls.
func TestFormatWithTools(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	const schema = `{"type":"object","properties":{"k":{"enum":["go","if"]}},"required":["k"],"additionalProperties":false}`
	const tool = `{"type":"function","name":"f","parameters":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}}`
	kinds := map[string]int{}
	for seed := range 6 {
		resp, out := ts.post(t, "/v1/responses", fmt.Sprintf(`{"model":"tiny-a","input":"Hi","reasoning":{"effort":"none"},"max_output_tokens":60,"temperature":1,"seed":%d,`+
			`"tools":[%s],"text":{"format":{"type":"json_schema","name":"k","strict":true,"schema":%s}}}`, seed, tool, schema))
		var r struct {
			Status string
			Output []struct{ Type, Name, Arguments string }
		}
		unmarshal(t, out, &r)
		if resp.StatusCode != 200 || r.Status != "completed" || len(r.Output) == 0 {
			t.Fatalf("seed %d: %d %s", seed, resp.StatusCode, out)
		}
		kind := r.Output[0].Type
		kinds[kind]++
		for _, it := range r.Output {
			var args struct{ X *int }
			switch {
			case it.Type != kind:
				t.Errorf("seed %d: a %s and a %s: %s", seed, kind, it.Type, out)
			case kind == "function_call" && (it.Name != "f" || json.Unmarshal([]byte(it.Arguments), &args) != nil || args.X == nil):
				t.Errorf("seed %d: call %+v", seed, it)
			}
		}
		if kind == "message" {
			var m struct {
				Output []struct{ Content []struct{ Text string } }
			}
			unmarshal(t, out, &m)
			text := m.Output[0].Content[0].Text
			var v struct{ K string }
			dec := json.NewDecoder(strings.NewReader(text))
			dec.DisallowUnknownFields()
			if dec.Decode(&v) != nil || (v.K != "go" && v.K != "if") {
				t.Errorf("seed %d: the value %q", seed, text)
			}
		}
	}
	t.Logf("answers: %v", kinds)
	resp, out := ts.post(t, "/v1/chat/completions", `{"model":"tiny-a","messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"enable_thinking":false},"max_tokens":60,`+
		`"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","response_format":{"type":"json_schema","json_schema":{"name":"k","schema":`+schema+`}}}`)
	if resp.StatusCode != 200 || !strings.Contains(out, `"finish_reason":"tool_calls"`) {
		t.Errorf("required with a format: %d %s", resp.StatusCode, out)
	}
}

// TestQwen35PydanticTools: tools as pydantic v2 and the OpenAI Agents SDK
// declare them, on Qwen3.5 (calls in XML): an Optional[int] parameter
// (anyOf integer or null) takes integers, not only null, and a nested
// model ($ref) is accepted; every call's arguments are valid.
func TestQwen35PydanticTools(t *testing.T) {
	ts, _ := serveBundled(t, "tiny-q35")
	params := `{"$defs": {"Loc": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}},
		"type": "object", "properties": {"days": {"anyOf": [{"type": "integer"}, {"type": "null"}]}, "loc": {"$ref": "#/$defs/Loc"}},
		"required": ["days", "loc"], "additionalProperties": false}`
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(params))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("params.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("params.json")
	if err != nil {
		t.Fatal(err)
	}
	tools, _ := json.Marshal([]any{map[string]any{"type": "function", "function": map[string]any{"name": "weather", "parameters": json.RawMessage(params)}}})
	integers := 0
	for seed := range 6 {
		body := `{"model":"` + ts.Name() + `","messages":[{"role":"user","content":"Weather for 3 days?"}],"tool_choice":"required","max_tokens":160,` +
			`"chat_template_kwargs":{"enable_thinking":false},"temperature":1,"seed":` + itoa(seed) + `,"tools":` + string(tools) + `}`
		resp, out := ts.post(t, "/v1/chat/completions", body)
		var cc chatCompletion
		unmarshal(t, out, &cc)
		if resp.StatusCode != 200 || len(cc.Choices) == 0 || len(cc.Choices[0].Message.ToolCalls) == 0 {
			t.Fatalf("seed %d: %d %s", seed, resp.StatusCode, out)
		}
		if h := resp.Header.Get(relaxedHeader); h != "" {
			t.Errorf("seed %d: relaxed %q", seed, h)
		}
		args := cc.Choices[0].Message.ToolCalls[0].Function.Arguments
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
		if err != nil {
			t.Fatalf("seed %d: arguments %s: %v", seed, args, err)
		}
		if err := schema.Validate(v); err != nil {
			t.Errorf("seed %d: arguments %s: %v", seed, args, err)
		}
		if m, ok := v.(map[string]any); ok && m["days"] != nil {
			integers++
		}
	}
	if integers == 0 {
		t.Errorf("days was null in every call: the grammar allowed nothing else for Optional[int]")
	}
}
