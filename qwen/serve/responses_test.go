package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/qwenc/qwenc/qwen"
)

// TestResponsesPlain: openai-go's Responses client, not streamed and
// streamed: the output is what tiny-a answers greedily alone, its
// reasoning a reasoning item and its text a message, cut by
// max_output_tokens (incomplete); the stream's events come in the order
// the SDKs parse, numbered in sequence, each item's deltas adding up to
// its done event, and its last event is the response not streamed.
func TestResponsesPlain(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	c := ts.client()
	// Effort medium thinks within half of max_output_tokens: 6 tokens.
	p := responses.ResponseNewParams{Model: "tiny-a", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(question)},
		Instructions: openai.String("Be brief."), MaxOutputTokens: openai.Int(12), Temperature: openai.Float(0),
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortMedium}, Include: []responses.ResponseIncludable{"reasoning.encrypted_content"}}
	msgs := []qwen.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: question}}
	prompt, _, reasoning, content := greedyAlone(t, ts, qwen.Request{Messages: msgs, ThinkBudget: 6, MaxTokens: 12})
	if reasoning == "" || content == "" {
		t.Fatalf("alone: reasoning %q, content %q: want both", reasoning, content)
	}
	r, err := c.Responses.New(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	var gotReasoning, gotText string
	for i, it := range r.Output {
		switch it.Type {
		case "reasoning":
			gotReasoning += it.Content[0].Text
			if it.EncryptedContent != it.Content[0].Text {
				t.Errorf("encrypted_content %q, text %q", it.EncryptedContent, it.Content[0].Text)
			}
		case "message":
			gotText += it.Content[0].Text
		default:
			t.Errorf("an item of type %s", it.Type)
		}
		// The answer ran out in its last item; the others are complete.
		if want := map[bool]string{true: "incomplete", false: "completed"}[i == len(r.Output)-1]; it.Status != want {
			t.Errorf("item %s: status %s, want %s", it.ID, it.Status, want)
		}
	}
	if gotReasoning != reasoning || gotText != content || r.OutputText() != content {
		t.Errorf("reasoning %q text %q; alone %q %q", gotReasoning, gotText, reasoning, content)
	}
	if r.Status != "incomplete" || r.IncompleteDetails.Reason != "max_output_tokens" || r.Model != "tiny-a" || r.Object != "response" ||
		!strings.HasPrefix(r.ID, "resp_") || r.Usage.InputTokens != int64(len(prompt)) || r.Usage.OutputTokens != 12 ||
		r.Usage.TotalTokens != int64(len(prompt))+12 || r.Usage.OutputTokensDetails.ReasoningTokens != 8 {
		t.Errorf("response %s", r.RawJSON())
	}

	s := c.Responses.NewStreaming(t.Context(), p)
	var types []string
	var last responses.Response
	deltas := map[string]string{}
	for n := 0; s.Next(); n++ {
		ev := s.Current()
		if ev.SequenceNumber != int64(n) {
			t.Fatalf("event %d (%s) has sequence_number %d", n, ev.Type, ev.SequenceNumber)
		}
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta", "response.reasoning_text.delta":
			deltas[ev.ItemID] += ev.Delta
		case "response.output_text.done", "response.reasoning_text.done":
			if ev.Text != deltas[ev.ItemID] {
				t.Errorf("%s: text %q, deltas %q", ev.Type, ev.Text, deltas[ev.ItemID])
			}
		case "response.incomplete":
			last = ev.Response
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"response.created", "response.in_progress"}
	for _, kind := range []string{"reasoning", "output"} {
		want = append(want, "response.output_item.added", "response.content_part.added", "response."+kind+"_text.delta",
			"response."+kind+"_text.done", "response.content_part.done", "response.output_item.done")
	}
	if !isSubsequence(want, types) || types[len(types)-1] != "response.incomplete" {
		t.Errorf("events %v; want in order %v, last response.incomplete", types, want)
	}
	if last.OutputText() != content || len(last.Output) != len(r.Output) || last.Usage.OutputTokens != 12 || last.Status != "incomplete" {
		t.Errorf("streamed %s\nnot streamed %s", last.RawJSON(), r.RawJSON())
	}

	// Stored: GET gives it back; DELETE forgets it.
	got, err := c.Responses.Get(t.Context(), r.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != content || got.ID != r.ID {
		t.Fatalf("GET %s: %v %+v", r.ID, err, got)
	}
	if err := c.Responses.Delete(t.Context(), r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Responses.Get(t.Context(), r.ID, responses.ResponseGetParams{}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("GET after DELETE: %v", err)
	}
	// store: false keeps nothing.
	p.Store = openai.Bool(false)
	r, err = c.Responses.New(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Responses.Get(t.Context(), r.ID, responses.ResponseGetParams{}); err == nil {
		t.Errorf("a response with store false was stored")
	}
}

// isAPIError reports whether err is the OpenAI client's error of that
// status, param and a message with msg.
func isAPIError(err error, status int, param, msg string) bool {
	var e *openai.Error
	return errors.As(err, &e) && e.StatusCode == status && e.Param == param && strings.Contains(e.Message, msg)
}

// isSubsequence reports whether want appear in got, in order.
func isSubsequence(want, got []string) bool {
	for _, g := range got {
		if len(want) > 0 && g == want[0] {
			want = want[1:]
		}
	}
	return len(want) == 0
}

// TestResponsesToolsRoundTrip: a forced tool call, its arguments valid
// for the tool, streamed as the SDK accumulates it; its result sent back
// with previous_response_id, whose conversation the server kept: the new
// prompt reuses the cache of the first, and counts the tokens of the
// whole conversation, as the same history sent in input does.
func TestResponsesToolsRoundTrip(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	c := ts.client()
	weather := map[string]any{"type": "object", "properties": map[string]any{
		"city": map[string]any{"enum": []string{"Paris", "Oslo"}}, "days": map[string]any{"type": "integer", "minimum": 1, "maximum": 7}},
		"required": []string{"city", "days"}, "additionalProperties": false}
	p := responses.ResponseNewParams{Model: "tiny-a", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Paris?")},
		Tools:           []responses.ToolUnionParam{responses.ToolParamOfFunction("weather", weather, true)},
		ToolChoice:      responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)},
		Reasoning:       shared.ReasoningParam{Effort: shared.ReasoningEffortNone},
		MaxOutputTokens: openai.Int(200), Temperature: openai.Float(1), ParallelToolCalls: openai.Bool(false)}
	r, err := c.Responses.New(t.Context(), p, option.WithJSONSet("seed", 3))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "completed" || len(r.Output) != 1 || r.Output[0].Type != "function_call" {
		t.Fatalf("response %s", r.RawJSON())
	}
	call := r.Output[0]
	var args struct {
		City string
		Days int
	}
	if call.Name != "weather" || !strings.HasPrefix(call.CallID, "call_") || !strings.HasPrefix(call.ID, "fc_") ||
		json.Unmarshal([]byte(call.Arguments.OfString), &args) != nil || (args.City != "Paris" && args.City != "Oslo") || args.Days < 1 || args.Days > 7 {
		t.Fatalf("call %s", call.RawJSON())
	}
	s := c.Responses.NewStreaming(t.Context(), p, option.WithJSONSet("seed", 3))
	var argDeltas string
	var done responses.ResponseStreamEventUnion
	for s.Next() {
		switch ev := s.Current(); ev.Type {
		case "response.function_call_arguments.delta":
			argDeltas += ev.Delta
		case "response.function_call_arguments.done":
			done = ev
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if argDeltas != call.Arguments.OfString || done.Arguments != call.Arguments.OfString {
		t.Errorf("streamed arguments %q, done %q; not streamed %q", argDeltas, done.Arguments, call.Arguments.OfString)
	}

	output := responses.ResponseInputItemParamOfFunctionCallOutput("18C")
	output.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	next, err := c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "tiny-a", PreviousResponseID: openai.String(r.ID),
		Input:           responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{output}},
		MaxOutputTokens: openai.Int(2), Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortNone}})
	if err != nil {
		t.Fatal(err)
	}
	if next.PreviousResponseID != r.ID || next.Usage.InputTokensDetails.CachedTokens == 0 {
		t.Errorf("next: %s", next.RawJSON())
	}
	// The same conversation sent whole: the same prompt.
	whole, err := c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "tiny-a",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("Weather in Paris?", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfFunctionCall(call.Arguments.OfString, call.CallID, call.Name),
			output}},
		MaxOutputTokens: openai.Int(2), Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortNone}})
	if err != nil {
		t.Fatal(err)
	}
	if whole.Usage.InputTokens != next.Usage.InputTokens {
		t.Errorf("the conversation sent whole has %d prompt tokens, continued by previous_response_id %d", whole.Usage.InputTokens, next.Usage.InputTokens)
	}
	if _, err := c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "tiny-a", PreviousResponseID: openai.String("resp_none"),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hi")}}); !isAPIError(err, 400, "previous_response_id", `no response "resp_none"`) {
		t.Errorf("an unknown previous_response_id: %v", err)
	}
}

// TestResponsesStructured: text.format json_schema holds the answer to
// the schema, streamed or not, and a schema the grammar cannot enforce
// is refused naming text.format.
func TestResponsesStructured(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	c := ts.client()
	schema := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": -3, "maximum": 3}},
		"required": []string{"n"}, "additionalProperties": false}
	p := responses.ResponseNewParams{Model: "tiny-a", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("A number?")},
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
			OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "n", Schema: schema, Strict: openai.Bool(true)}}},
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortNone}, MaxOutputTokens: openai.Int(100), Temperature: openai.Float(1)}
	for seed := range 3 {
		r, err := c.Responses.New(t.Context(), p, option.WithJSONSet("seed", seed))
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ N *int }
		dec := json.NewDecoder(strings.NewReader(r.OutputText()))
		dec.DisallowUnknownFields()
		if r.Status != "completed" || dec.Decode(&v) != nil || v.N == nil || *v.N < -3 || *v.N > 3 {
			t.Fatalf("seed %d: %s", seed, r.RawJSON())
		}
		s := c.Responses.NewStreaming(t.Context(), p, option.WithJSONSet("seed", seed))
		text := ""
		for s.Next() {
			if ev := s.Current(); ev.Type == "response.output_text.delta" {
				text += ev.Delta
			}
		}
		if s.Err() != nil || text != r.OutputText() {
			t.Errorf("seed %d: streamed %q (%v), not streamed %q", seed, text, s.Err(), r.OutputText())
		}
	}
	p.Text.Format.OfJSONSchema.Schema = map[string]any{"type": "object", "not": map[string]any{}}
	if _, err := c.Responses.New(t.Context(), p); !isAPIError(err, 400, "text.format.schema", "not") {
		t.Errorf("a schema that cannot be enforced: %v", err)
	}
}

// TestResponsesInput: the input items a client gives back, a reasoning,
// a message, a call whose arguments were cut off, its output, a
// developer message, make the conversation qwen renders (the prompt
// counts its tokens), and the reasoning effort bounds the thinking.
func TestResponsesInput(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	body := `{"model":"tiny-a","max_output_tokens":1,"instructions":"Be brief.","input":[
		{"role":"user","content":"Weather?"},
		{"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"Call it."}]},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Calling."}]},
		{"type":"function_call","call_id":"call_1","name":"weather","arguments":"{\"city\": \"Par"},
		{"type":"function_call","call_id":"call_2","name":"now","arguments":""},
		{"type":"function_call_output","call_id":"call_1","output":"18C"},
		{"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"12:00"}]},
		{"role":"developer","content":[{"type":"input_text","text":"Answer."}]},
		{"type":"reasoning","id":"rs_2","summary":[{"type":"summary_text","text":"a summary"}]}]}`
	resp, out := ts.post(t, "/v1/responses", body)
	var r responseObject
	unmarshal(t, out, &r)
	want := []qwen.Message{
		{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Weather?"},
		{Role: "assistant", Content: "Calling.", Reasoning: "Call it.", ToolCalls: []qwen.ToolCall{
			{ID: "call_1", Name: "weather", Arguments: `{"city": "Par`}, {ID: "call_2", Name: "now", Arguments: "{}"}}},
		{Role: "tool", Content: "18C"}, {Role: "tool", Content: "12:00"}, {Role: "system", Content: "Answer."}}
	n, err := ts.m.Count(qwen.Request{Messages: want})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || r.Usage == nil || r.Usage.InputTokens != n {
		t.Fatalf("%d %s; want %d prompt tokens", resp.StatusCode, out, n)
	}
	rendered, _ := ts.m.RenderPrompt(qwen.Request{Messages: want})
	if !strings.Contains(rendered, `{"name": "weather", "arguments": {"city": "Par}`) {
		t.Errorf("the call cut off is not rendered as it was: %s", rendered)
	}

	// The reasoning efforts: none answers without thinking, low within
	// a budget of a quarter of max_output_tokens, medium half.
	tg := ts.target()
	for effort, check := range map[string]func(qwen.Request) bool{
		"none":   func(r qwen.Request) bool { return r.NoThinking && r.ThinkBudget == 0 },
		"low":    func(r qwen.Request) bool { return !r.NoThinking && r.ThinkBudget == 25 },
		"xhigh":  func(r qwen.Request) bool { return !r.NoThinking && r.ThinkBudget == 0 },
		"medium": func(r qwen.Request) bool { return r.ThinkBudget == 50 },
	} {
		rr := responsesRequest{Input: json.RawMessage(`"Hi"`), MaxOutputTokens: new(100)}
		rr.Reasoning.Effort = &effort
		c, e := tg.responsesRequest(&rr, nil)
		if e != nil || !check(c.req) {
			t.Errorf("effort %s: %+v %v", effort, c.req, e)
		}
	}
	resp, out = ts.post(t, "/v1/responses", `{"model":"tiny-a","input":"Hi","max_output_tokens":40,"reasoning":{"effort":"medium"},"temperature":0}`)
	unmarshal(t, out, &r)
	// tiny-a thinks as long as it may: <think>, 20 tokens, </think>.
	if resp.StatusCode != 200 || r.Usage.OutputTokensDetails.ReasoningTokens != 22 || r.Output[0].Type != "reasoning" {
		t.Errorf("effort medium, 40 tokens: %d %s; want 22 tokens of thinking", resp.StatusCode, out)
	}
}

// TestResponsesErrors: what the Responses API cannot do here is refused
// in OpenAI's shape, naming the field.
func TestResponsesErrors(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	const m = `"model":"tiny-a"`
	for _, c := range []struct{ body, param, msg string }{
		{`{` + m + `}`, "input", "input: missing"},
		{`{` + m + `,"input":7}`, "input", "want a string or a list of items"},
		{`{"input":"Hi"}`, "model", "you must provide a model"},
		{`{` + m + `,"input":"Hi","tools":[{"type":"web_search"}]}`, "tools[0].type", `"web_search": a built-in tool of OpenAI's`},
		{`{` + m + `,"input":"Hi","tools":[{"type":"function"}]}`, "tools[0].name", "missing"},
		{`{` + m + `,"input":"Hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","minProperties":"two"}}]}`, "tools[0].parameters", "tools[0].parameters: json schema #: minProperties"},
		{`{` + m + `,"input":"Hi","tool_choice":"required"}`, "tool_choice", "it needs tools"},
		{`{` + m + `,"input":"Hi","tool_choice":{"type":"web_search_preview"}}`, "tool_choice.type", "built-in"},
		{`{` + m + `,"input":"Hi","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"g"}]}}`,
			"tool_choice.tools[0].name", `"g": not among the tools`},
		{`{` + m + `,"input":"Hi","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`, "tool_choice.name", `"g": not among the tools`},
		{`{` + m + `,"input":"Hi","tools":[{"type":"function","name":"f","parameters":{"type":"string"}}]}`, "tools[0].parameters.type", `want "object"`},
		{`{` + m + `,"input":[{"role":"user","content":[{"type":"input_text","text":"Look"},{"type":"input_image","image_url":"data:"}]}]}`,
			"input[0].content[1]", "this model has no vision"},
		{`{` + m + `,"input":[{"type":"web_search_call","id":"ws_1"}]}`, "input[0].type", `"web_search_call": not supported here`},
		{`{` + m + `,"input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].id", `no stored item "msg_1"`},
		{`{` + m + `,"input":[{"type":"item_reference"}]}`, "input[0].id", "input[0].id: missing"},
		{`{` + m + `,"input":[{"role":"robot","content":"Hi"}]}`, "input[0].role", `"robot"`},
		{`{` + m + `,"input":[{"type":"function_call","call_id":7,"name":"f"}]}`, "input[0].call_id", "want a string, got number"},
		{`{` + m + `,"input":[{"type":"function_call","call_id":"c"}]}`, "input[0].name", "missing"},
		{`{` + m + `,"input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, "input[0].call_id", "input[0].call_id: missing"},
		{`{` + m + `,"input":[{"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":5}]}]}`, "input[0].content[0].text", "input[0].content[0].text: want a string, got number"},
		{`{` + m + `,"input":[{"type":"reasoning","summary":[{"type":"summary_text","text":"a"},{"type":"summary_text","text":{}}]}]}`, "input[0].summary[1].text", "want a string"},
		{`{` + m + `,"input":[{"type":"reasoning","summary":"thought"}]}`, "input[0].summary", "input[0].summary: want a list of parts"},
		{`{` + m + `,"input":[{"type":"function_call_output","output":"18C"}]}`, "input[0].call_id", "input[0].call_id: missing"},
		{`{` + m + `,"input":[{"type":"function_call_output","call_id":"c"}]}`, "input[0].output", "input[0].output: missing"},
		{`{` + m + `,"input":[{"type":"function_call_output","call_id":"c","output":null}]}`, "input[0].output", "input[0].output: missing"},
		{`{` + m + `,"input":"Hi","include":["everything"]}`, "include[0]", `"everything"`},
		{`{` + m + `,"input":"Hi","reasoning":{"effort":"extreme"}}`, "reasoning.effort", `"extreme"`},
		{`{` + m + `,"input":"Hi","max_output_tokens":1,"metadata":{` + strings.Repeat(`"k":"v",`, 0) + manyKeys(17) + `}}`, "metadata", "17 keys: at most 16"},
		{`{` + m + `,"input":"Hi","max_output_tokens":1,"metadata":{"` + strings.Repeat("k", 65) + `":"v"}}`, "metadata", "has 65 characters: at most 64"},
		{`{` + m + `,"input":"Hi","max_output_tokens":1,"metadata":{"note":"` + strings.Repeat("v", 513) + `"}}`, "metadata.note", "513 characters: at most 512"},
		{`{` + m + `,"input":"Hi","max_output_tokens":1,"metadata":{"n":1}}`, "metadata.n", "want a string"},
		{`{` + m + `,"input":"Hi","max_output_tokens":1,"reasoning":{"summary":"verbose"}}`, "reasoning.summary", `"verbose": want auto, concise or detailed`},
		{`{` + m + `,"input":"Hi","max_output_tokens":1,"reasoning":{"summary":""}}`, "reasoning.summary", `"": want auto, concise or detailed`},
		{`{` + m + `,"input":"Hi","text":{"format":{"type":"yaml"}}}`, "text.format.type", `"yaml"`},
		{`{` + m + `,"input":"Hi","text":{"format":{"type":"json_schema","name":"x"}}}`, "text.format.schema", "missing"},
		{`{` + m + `,"input":"Hi","max_output_tokens":1,"text":{"format":{"type":"json_schema","schema":{"type":"object"}}}}`, "text.format.name", "missing"},
		{`{` + m + `,"input":"Hi","max_output_tokens":1,"text":{"format":{"type":"json_schema","name":"","schema":{"type":"object"}}}}`, "text.format.name", "missing"},
		{`{` + m + `,"input":"Hi","max_output_tokens":1,"text":{"format":{"type":"json_schema","name":"an answer","schema":{"type":"object"}}}}`, "text.format.name", "letters, digits"},
		{`{` + m + `,"input":"Hi","max_output_tokens":1,"text":{"format":{"type":"json_schema","name":"` + strings.Repeat("n", 65) + `","schema":{"type":"object"}}}}`, "text.format.name", "at most 64"},
		{`{` + m + `,"input":"Hi","max_output_tokens":0}`, "max_output_tokens", "at least 1"},
		{`{` + m + `,"input":"Hi","temperature":-1}`, "temperature", "outside"},
		{`{` + m + `,"input":"Hi","top_logprobs":21}`, "top_logprobs", "outside"},
		{`{` + m + `,"input":"Hi","conversation":"conv_1"}`, "conversation", "not supported"},
		{`{` + m + `,"input":"Hi","background":true,"stream":true}`, "background", "poll"},
		{`{` + m + `,"input":"Hi","background":true,"store":false}`, "background", "needs store"},
		{`{` + m + `,"input":"Hi","truncation":"middle"}`, "truncation", `"middle"`},
		{`{` + m + `,"input":"Hi","previous_response_id":"resp_x"}`, "previous_response_id", `no response "resp_x" is stored`},
		{`{` + m + `,"input":"Hi","tools":[{"type":"custom","name":"apply_patch","format":{"type":"text"}}]}`, "tools[0].type", "custom tools"},
		{`{` + m + `,"input":"Hi","tools":[{"type":"function","name":"f"},{"type":"namespace","name":"ns","tools":[{"type":"function","name":"f"}]}]}`,
			"tools[1].tools[0].name", `"f": another tool has that name`},
		{`{` + m + `,"input":"Hi","tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"g","parameters":{"type":"object","minProperties":"one"}}]}]}`,
			"tools[0].tools[0].parameters", "tools[0].tools[0].parameters: json schema #: minProperties"},
		{`{` + m + `,"input":"Hi","tools":[{"type":"namespace","name":"ns","tools":[{"type":"web_search"}]}]}`, "tools[0].tools[0].type", "built-in"},
		{`{` + m + `,"input":"Hi","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"custom","name":"f"}}`, "tool_choice.type", `"custom": custom tools`},
		{`{` + m + `,"input":"Hi","tools":[{"type":"namespace","name":"a","tools":[{"type":"namespace","name":"b","tools":[]}]}]}`, "tools[0].tools[0].type", `"namespace": a namespace in a namespace`},
		{`{` + m + `,"input":"Hi","tools":[{"type":"function","name":"f","strict":"yes"}]}`, "tools[0].strict", "tools[0].strict: want true or false"},
		{`{` + m + `,"input":"Hi","tools":[{"type":"function","name":"get weather"}]}`, "tools[0].name", `tools[0].name: "get weather": a tool's name may not hold spaces`},
		{`{` + m + `,"input":"Hi","tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"a\"b"}]}]}`, "tools[0].tools[0].name", `tools[0].tools[0].name: "a\"b"`},
	} {
		wantBadRequest(t, ts, "/v1/responses", c.body, c.param, c.msg)
	}
	// OpenAI's limits, in characters: 16 keys of 64, values of 512.
	if resp, body := ts.post(t, "/v1/responses", `{`+m+`,"input":"Hi","max_output_tokens":1,"metadata":{`+manyKeys(15)+`,"`+strings.Repeat("é", 64)+`":"`+strings.Repeat("é", 512)+`"}}`); resp.StatusCode != 200 {
		t.Errorf("metadata at its limits: %d %s", resp.StatusCode, body)
	}
	for _, summary := range []string{`"auto"`, `"concise"`, `"detailed"`, `null`} {
		if resp, body := ts.post(t, "/v1/responses", `{`+m+`,"input":"Hi","max_output_tokens":1,"reasoning":{"summary":`+summary+`}}`); resp.StatusCode != 200 {
			t.Errorf("reasoning.summary %s: %d %s", summary, resp.StatusCode, body)
		}
	}
	for _, c := range []struct{ method, path string }{{"GET", "/v1/responses/resp_x"}, {"DELETE", "/v1/responses/resp_x"}, {"POST", "/v1/responses/resp_x/cancel"}} {
		req, _ := http.NewRequest(c.method, ts.url+c.path, nil)
		if resp, body := do(t, req); resp.StatusCode != 404 || !strings.Contains(body, `no response \"resp_x\" is stored`) {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, body)
		}
	}
	// A response not in background cannot be cancelled.
	_, body := ts.post(t, "/v1/responses", `{`+m+`,"input":"Hi","max_output_tokens":1}`)
	var r responseObject
	unmarshal(t, body, &r)
	if resp, body := ts.post(t, "/v1/responses/"+r.ID+"/cancel", ``); resp.StatusCode != 400 || !strings.Contains(body, "only a background response") {
		t.Errorf("cancel a response not in background: %d %s", resp.StatusCode, body)
	}
}

// TestResponsesInputItems: GET /v1/responses/{id}/input_items lists a
// stored response's own input as OpenAI does: a string as a user message,
// a message's string content as a text part (output_text in an
// assistant's), the other items as given, each with its id (given, or
// assigned once: two calls agree) and status; newest first unless order
// asc, in pages of limit after an item's id, as openai-go's auto-pager
// reads them; reasoning's encrypted_content only when include asks. A
// response continued by previous_response_id lists its own input alone;
// one not stored, or unknown, is a 404; bad parameters are 400s naming
// them.
func TestResponsesInputItems(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	c := ts.client()
	create := func(body string) string {
		t.Helper()
		resp, out := ts.post(t, "/v1/responses", body)
		var r responseObject
		unmarshal(t, out, &r)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", body, resp.StatusCode, out)
		}
		return r.ID
	}
	type page struct {
		Object  string           `json:"object"`
		Data    []map[string]any `json:"data"`
		FirstID *string          `json:"first_id"`
		LastID  *string          `json:"last_id"`
		HasMore bool             `json:"has_more"`
	}
	list := func(id, query string) page {
		t.Helper()
		resp, out := ts.get(t, "/v1/responses/"+id+"/input_items"+query)
		if resp.StatusCode != 200 {
			t.Fatalf("%s%s: %d %s", id, query, resp.StatusCode, out)
		}
		var p page
		unmarshal(t, out, &p)
		if p.Object != "list" || p.Data == nil || len(p.Data) > 0 && (p.FirstID == nil || *p.FirstID != p.Data[0]["id"] ||
			p.LastID == nil || *p.LastID != p.Data[len(p.Data)-1]["id"]) || len(p.Data) == 0 && (p.FirstID != nil || p.LastID != nil) {
			t.Errorf("%s%s: %s", id, query, out)
		}
		return p
	}
	ids := func(p page) []string {
		var out []string
		for _, it := range p.Data {
			out = append(out, it["id"].(string))
		}
		return out
	}
	// want checks items against the JSON of each, its id aside: given, or
	// one with the prefix of its type.
	want := func(items []map[string]any, wantJSON ...string) {
		t.Helper()
		if len(items) != len(wantJSON) {
			t.Fatalf("%d items %v; want %d", len(items), items, len(wantJSON))
		}
		for i, it := range items {
			var w map[string]any
			unmarshal(t, wantJSON[i], &w)
			id, _ := it["id"].(string)
			if wid, ok := w["id"]; ok && id != wid || !ok && !strings.HasPrefix(id, map[string]string{
				"message": "msg_", "function_call": "fc_", "function_call_output": "fco_", "reasoning": "rs_"}[it["type"].(string)]) {
				t.Errorf("item %d: id %q", i, id)
			}
			got := maps.Clone(it)
			delete(got, "id")
			delete(w, "id")
			if !reflect.DeepEqual(got, w) {
				g, _ := json.Marshal(got)
				t.Errorf("item %d: %s\nwant %s", i, g, wantJSON[i])
			}
		}
	}

	// A string: one user message.
	hi := create(`{"model":"tiny-a","input":"Hi","max_output_tokens":1}`)
	p := list(hi, "")
	want(p.Data, `{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi"}],"status":"completed"}`)
	if p.HasMore {
		t.Errorf("one item: has_more")
	}

	id := create(`{"model":"tiny-a","max_output_tokens":1,"input":[
		{"role":"developer","content":"Be brief."},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"Weather?"}]},
		{"type":"reasoning","id":"rs_given","summary":[],"content":[{"type":"reasoning_text","text":"Call it."}],"encrypted_content":"Call it."},
		{"role":"assistant","content":"Calling."},
		{"type":"function_call","call_id":"call_1","name":"weather","arguments":"{\"city\":\"Paris\"}"},
		{"type":"function_call","id":"fc_given","call_id":"call_2","name":"now","arguments":"{}","status":"incomplete"},
		{"type":"function_call_output","call_id":"call_1","output":"18C"},
		{"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"12:00"}]},
		{"role":"user","content":[{"type":"text","text":"Thanks."}]}]}`)
	all := []string{
		`{"type":"message","role":"developer","content":[{"type":"input_text","text":"Be brief."}],"status":"completed"}`,
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"Weather?"}],"status":"completed"}`,
		`{"type":"reasoning","id":"rs_given","summary":[],"content":[{"type":"reasoning_text","text":"Call it."}],"status":"completed"}`,
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Calling.","annotations":[]}],"status":"completed"}`,
		`{"type":"function_call","call_id":"call_1","name":"weather","arguments":"{\"city\":\"Paris\"}","status":"completed"}`,
		`{"type":"function_call","id":"fc_given","call_id":"call_2","name":"now","arguments":"{}","status":"incomplete"}`,
		`{"type":"function_call_output","call_id":"call_1","output":"18C","status":"completed"}`,
		`{"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"12:00"}],"status":"completed"}`,
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"Thanks."}],"status":"completed"}`,
	}
	asc := list(id, "?order=asc")
	want(asc.Data, all...)
	// The ids assigned are the same each time; desc, the default, is
	// the same items newest first.
	if again := list(id, "?order=asc"); !slices.Equal(ids(again), ids(asc)) {
		t.Errorf("ids %v, then %v", ids(asc), ids(again))
	}
	desc := ids(list(id, ""))
	reversed := slices.Clone(desc)
	slices.Reverse(reversed)
	if !slices.Equal(reversed, ids(asc)) || !slices.Equal(ids(list(id, "?order=desc")), desc) {
		t.Errorf("desc %v; asc %v", desc, ids(asc))
	}
	// Pages of 4 after the last id of each: 4, 4, 1, the last without more.
	var paged []string
	after := ""
	for i, n := range []int{4, 4, 1} {
		p := list(id, "?order=asc&limit=4"+after)
		if len(p.Data) != n || p.HasMore != (i < 2) {
			t.Fatalf("page %d: %d items, has_more %v", i, len(p.Data), p.HasMore)
		}
		paged = append(paged, ids(p)...)
		after = "&after=" + *p.LastID
	}
	if !slices.Equal(paged, ids(asc)) {
		t.Errorf("paged %v; whole %v", paged, ids(asc))
	}
	// The default limit is 20; the SDK's auto-pager reads them all, newest
	// first, and include asks for the encrypted_content.
	if p := list(id, "?limit=100&include[]=message.input_image.image_url&include=reasoning.encrypted_content"); p.HasMore ||
		len(p.Data) != 9 || p.Data[6]["encrypted_content"] != "Call it." {
		t.Errorf("include reasoning.encrypted_content: %v", p.Data)
	}
	var sdk []string
	pager := c.Responses.InputItems.ListAutoPaging(t.Context(), id, responses.InputItemListParams{Limit: openai.Int(2),
		Include: []responses.ResponseIncludable{"reasoning.encrypted_content"}})
	for pager.Next() {
		it := pager.Current()
		sdk = append(sdk, it.ID)
		if it.Type == "reasoning" && it.EncryptedContent != "Call it." {
			t.Errorf("the SDK's reasoning item: %s", it.RawJSON())
		}
	}
	if err := pager.Err(); err != nil || !slices.Equal(sdk, desc) {
		t.Errorf("openai-go's pages: %v %v; want %v", err, sdk, desc)
	}

	// Continued by previous_response_id: its own input alone.
	next := create(`{"model":"tiny-a","previous_response_id":"` + id + `","input":"More?","max_output_tokens":1}`)
	want(list(next, "").Data, `{"type":"message","role":"user","content":[{"type":"input_text","text":"More?"}],"status":"completed"}`)

	for _, c := range []struct{ query, param, msg string }{
		{"?limit=0", "limit", `limit "0": want 1 to 100`},
		{"?limit=101", "limit", `limit "101"`},
		{"?limit=ten", "limit", `limit "ten"`},
		{"?order=up", "order", `order "up": want asc or desc`},
		{"?after=msg_none", "after", `after "msg_none": no item`},
		{"?include[]=everything", "include", `include "everything"`},
	} {
		resp, out := ts.get(t, "/v1/responses/"+id+"/input_items"+c.query)
		var e openAIError
		unmarshal(t, out, &e)
		if resp.StatusCode != 400 || e.Error == nil || e.Error.Param == nil || *e.Error.Param != c.param || !strings.Contains(e.Error.Message, c.msg) {
			t.Errorf("%s: %d %s; want 400, param %s, %q", c.query, resp.StatusCode, out, c.param, c.msg)
		}
	}
	// Unknown, not stored, deleted: 404, as GET of the response.
	unstored := create(`{"model":"tiny-a","input":"Hi","max_output_tokens":1,"store":false}`)
	if err := c.Responses.Delete(t.Context(), hi); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"resp_x", unstored, hi} {
		if resp, out := ts.get(t, "/v1/responses/"+id+"/input_items"); resp.StatusCode != 404 || !strings.Contains(out, `no response \"`+id+`\" is stored`) {
			t.Errorf("%s: %d %s", id, resp.StatusCode, out)
		}
	}
}

// TestResponsesStoreInputBytes: a response's input items count toward the
// stored bytes, running in background as when done.
func TestResponsesStoreInputBytes(t *testing.T) {
	input := inputItems(json.RawMessage(`[{"role":"user","content":"` + strings.Repeat("x", 1000) + `"}]`))
	head := &responseObject{ID: "resp_1", Output: []outputItem{}}
	b, _ := json.Marshal(head)
	st := newResponseStore()
	st.begin(head, input, func() {}, make(chan struct{}))
	if st.bytes < 1000 || st.bytes != itemsSize(input) {
		t.Errorf("running: %d bytes; its input has %d", st.bytes, itemsSize(input))
	}
	st.end(head, nil)
	if e, ok := st.find("resp_1"); !ok || st.bytes != int64(len(b))+itemsSize(input) || len(e.input) != 1 {
		t.Errorf("ended: %d bytes, want %d; found %v", st.bytes, int64(len(b))+itemsSize(input), ok)
	}
}

// TestResponsesBackground: background: true answers at once with the
// response in progress, GET reads it, and cancel stops it: cancelled,
// with the output so far; one left to run completes.
func TestResponsesBackground(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	c := ts.client()
	r := backgroundQuestion(t, c)
	var err error
	if r.Status != "in_progress" || !r.Background {
		t.Fatalf("background: %s", r.RawJSON())
	}
	got, err := c.Responses.Get(t.Context(), r.ID, responses.ResponseGetParams{})
	if err != nil || got.Status != "in_progress" {
		t.Fatalf("GET: %v %s", err, got.RawJSON())
	}
	// Its input is listed while it runs, and once it has ended.
	items, err := c.Responses.InputItems.List(t.Context(), r.ID, responses.InputItemListParams{})
	if err != nil || len(items.Data) != 1 || items.Data[0].Content.OfInputItemContentList[0].Text != question {
		t.Fatalf("input_items: %v %+v", err, items)
	}
	cancelled, err := c.Responses.Cancel(t.Context(), r.ID)
	if err != nil || cancelled.Status != "cancelled" {
		t.Fatalf("cancel: %v %s", err, cancelled.RawJSON())
	}
	waitFor(t, func() bool { return ts.m.Stats().Active == 0 })
	if got, err := c.Responses.Get(t.Context(), r.ID, responses.ResponseGetParams{}); err != nil || got.Status != "cancelled" {
		t.Errorf("GET after cancel: %v %s", err, got.RawJSON())
	}
	if after, err := c.Responses.InputItems.List(t.Context(), r.ID, responses.InputItemListParams{}); err != nil ||
		len(after.Data) != 1 || after.Data[0].ID != items.Data[0].ID {
		t.Errorf("input_items after cancel: %v %+v", err, after)
	}
	// Left to run, it completes, and can be continued.
	r, err = c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "tiny-a", Background: openai.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(question)}, MaxOutputTokens: openai.Int(3)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		got, err := c.Responses.Get(t.Context(), r.ID, responses.ResponseGetParams{})
		return err == nil && got.Status == "incomplete" && got.Usage.OutputTokens == 3
	})
	if _, err := c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "tiny-a", PreviousResponseID: openai.String(r.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("And?")}, MaxOutputTokens: openai.Int(1)}); err != nil {
		t.Errorf("continuing a background response: %v", err)
	}
	for _, it := range cancelled.Output {
		if it.Status != "incomplete" {
			t.Errorf("a cancelled response's item %s is %s", it.ID, it.Status)
		}
	}
}

// TestResponsesBackgroundFails: a background response whose generation
// the engine fails is read back failed, with the error and the output so
// far, not as cancelled, which nobody asked.
func TestResponsesBackgroundFails(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	head := &responseObject{ID: itemID("resp"), Object: "response", Status: "in_progress", Background: true, Output: []outputItem{}}
	ts.responses.begin(head, nil, func() {}, make(chan struct{}))
	ts.runBackground(failing(ts), responsesCall{}, head)
	req, _ := http.NewRequest("GET", ts.url+"/v1/responses/"+head.ID, nil)
	resp, body := do(t, req)
	var r responseObject
	unmarshal(t, body, &r)
	if resp.StatusCode != http.StatusOK || r.Status != "failed" || r.Error == nil || !strings.Contains(r.Error.Message, "the kernel failed") ||
		len(r.Output) != 1 || r.Output[0].Content[0].Text != "Hello" || r.Output[0].Status != "incomplete" {
		t.Errorf("%d %s; want failed, with the error and the text so far", resp.StatusCode, body)
	}
}

// TestResponsesStreamFails: a streamed response whose generation the
// engine fails ends the item being written (its done events, status
// incomplete) and fails with the error and the output so far, as the
// same failure of a background response is read back.
func TestResponsesStreamFails(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	head := &responseObject{ID: itemID("resp"), Object: "response", Status: "in_progress", Output: []outputItem{}}
	rec := httptest.NewRecorder()
	ts.streamResponse(rec, failing(ts), responsesCall{}, head, &responseItems{})
	var types []string
	var last responseEvent
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var ev responseEvent
			unmarshal(t, data, &ev)
			types = append(types, ev.Type)
			last = ev
		}
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.failed"
	r := last.Response
	if strings.Join(types, " ") != want || r == nil || r.Status != "failed" || r.Error == nil || !strings.Contains(r.Error.Message, "the kernel failed") ||
		len(r.Output) != 1 || r.Output[0].Content[0].Text != "Hello" || r.Output[0].Status != "incomplete" {
		t.Errorf("events %s\nwant %s\nthe last %+v", types, want, r)
	}
}

// TestResponsesNamespace: the functions of a namespace (Codex groups its
// sub-agent tools so) are tools as the others are, and a call of one
// names its namespace.
func TestResponsesNamespace(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	resp, out := ts.post(t, "/v1/responses", `{"model":"tiny-a","input":"Go","max_output_tokens":100,"reasoning":{"effort":"none"},`+
		`"tools":[{"type":"namespace","name":"agents","description":"Sub-agents.","tools":[{"type":"function","name":"spawn","parameters":{"type":"object","properties":{},"additionalProperties":false}}]}],`+
		`"tool_choice":{"type":"function","name":"spawn"}}`)
	var r responseObject
	unmarshal(t, out, &r)
	if resp.StatusCode != 200 || len(r.Output) != 1 || r.Output[0].Name != "spawn" || r.Output[0].Namespace != "agents" || !strings.Contains(out, `"namespace":"agents"`) {
		t.Errorf("%d %s", resp.StatusCode, out)
	}
}

// TestResponsesParallelToolCalls: the response gives parallel_tool_calls
// back as the request set it, with tools or without (where it bounds
// nothing).
func TestResponsesParallelToolCalls(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	const tools = `,"tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{},"additionalProperties":false}}]`
	for _, c := range []struct {
		fields string
		want   bool
	}{{``, true}, {`,"parallel_tool_calls":false`, false}, {`,"parallel_tool_calls":false` + tools, false}, {`,"parallel_tool_calls":true` + tools, true}} {
		resp, out := ts.post(t, "/v1/responses", `{"model":"tiny-a","input":"Hi","max_output_tokens":1`+c.fields+`}`)
		var r responseObject
		unmarshal(t, out, &r)
		if resp.StatusCode != http.StatusOK || r.ParallelToolCalls != c.want {
			t.Errorf("%s: %d %s; want parallel_tool_calls %v", c.fields, resp.StatusCode, out, c.want)
		}
	}
}

// TestResponsesSystemMessages: instructions with system and developer
// messages first in input (Codex sends two developer messages), or with
// a previous response whose history begins with them, make one system
// message: Qwen3.5's template takes one, first, and refused the request.
// A developer message later in the conversation (Codex adds one when its
// permissions change) is a system turn where it comes.
func TestResponsesSystemMessages(t *testing.T) {
	ts, _ := serveBundled(t, "tiny-q35")
	first := ""
	for name, body := range map[string]string{
		"two developer messages": `{"model":"tiny-q35","max_output_tokens":2,"input":[
			{"type":"message","role":"developer","content":[{"type":"input_text","text":"You are a coding agent."}]},
			{"type":"message","role":"developer","content":[{"type":"input_text","text":"<skills_instructions>none</skills_instructions>"}]},
			{"type":"message","role":"user","content":[{"type":"input_text","text":"Name a Go keyword."}]}]}`,
		"instructions, a system and a developer message": `{"model":"tiny-q35","max_output_tokens":2,"instructions":"Be brief.","input":[
			{"role":"system","content":"Answer in English."},{"role":"developer","content":"Use Go."},{"role":"user","content":"hi"}]}`,
		"a developer message mid-conversation": `{"model":"tiny-q35","max_output_tokens":2,"instructions":"Be brief.","input":[
			{"role":"user","content":"hi"},{"role":"assistant","content":"Hello."},
			{"role":"developer","content":"Approval policy is now never."},{"role":"user","content":"list the files"}]}`,
	} {
		resp, b := ts.post(t, "/v1/responses", body)
		var r struct{ ID string }
		unmarshal(t, b, &r)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s", name, resp.StatusCode, b)
		}
		first = r.ID
	}
	resp, b := ts.post(t, "/v1/responses", `{"model":"tiny-q35","max_output_tokens":2,"instructions":"Be terse.","previous_response_id":"`+first+`","input":"and another?"}`)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("continued with new instructions: %d %s", resp.StatusCode, b)
	}
	msgs := withInstructions(new("I."), []qwen.Message{{Role: "system", Content: "A."}, {Role: "system", Content: "B."}, {Role: "user", Content: "u"}, {Role: "system", Content: "C."}})
	if len(msgs) != 3 || msgs[0].Content != "I.\n\nA.\n\nB." || msgs[2].Content != "C." {
		t.Errorf("withInstructions: %+v", msgs)
	}
}

// TestResponsesTruncationAuto: truncation "auto" drops the oldest turns
// of a conversation past the context, as OpenAI's does ("dropping items
// from the beginning of the conversation"), keeping the system message;
// "disabled" refuses it.
func TestResponsesTruncationAuto(t *testing.T) {
	ts := newTestServer(t, modelOpts{Ctx: 256}, ServerOptions{})
	items := []string{`{"role":"system","content":"You keep lists."}`}
	for i := range 12 {
		items = append(items, `{"role":"user","content":"Tell me about item number `+itoa(i)+` in the list of things we talked about before."}`,
			`{"role":"assistant","content":"Item `+itoa(i)+` is a thing we talked about before, in some detail."}`)
	}
	items = append(items, `{"role":"user","content":"And now?"}`)
	body := func(truncation string) string {
		return `{"model":"tiny-a","max_output_tokens":8,"truncation":"` + truncation + `","input":[` + strings.Join(items, ",") + `]}`
	}
	if resp, b := ts.post(t, "/v1/responses", body("disabled")); resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, "more than the context of 256") {
		t.Errorf("truncation disabled: %d %s", resp.StatusCode, b)
	}
	resp, b := ts.post(t, "/v1/responses", body("auto"))
	var r struct {
		Truncation string
		Usage      struct {
			InputTokens int `json:"input_tokens"`
		}
	}
	unmarshal(t, b, &r)
	t.Logf("truncation auto: %d input tokens", r.Usage.InputTokens)
	if resp.StatusCode != http.StatusOK || r.Truncation != "auto" || r.Usage.InputTokens > 256-8 || r.Usage.InputTokens < 128 {
		t.Errorf("truncation auto: %d %s", resp.StatusCode, b)
	}
}

// TestUnnamedCallsLeftOut: a call the length cut before its name was
// complete has no name, which a function_call item and a tool_use block
// must have: both protocols leave it out (a client giving it back was
// refused), and a stored turn's cut arguments are rendered as none.
func TestUnnamedCallsLeftOut(t *testing.T) {
	cut := []qwen.Delta{{Content: "Let me look.", IDs: []int32{1}},
		{ToolCalls: []qwen.ToolCallDelta{{Index: 0, ID: "call_a", Name: "weather", Arguments: `{"city": "Par`}}, IDs: []int32{2}},
		{ToolCalls: []qwen.ToolCallDelta{{Index: 1, ID: "call_b", Arguments: "tim"}}, IDs: []int32{3}},
		{ToolCalls: []qwen.ToolCallDelta{{Index: 1, Arguments: "e"}}, IDs: []int32{4}}}
	items := &responseItems{}
	for _, d := range cut {
		if err := items.add(d); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for _, it := range items.items {
		names = append(names, it.Type+":"+it.Name)
	}
	turn := items.turn()
	if strings.Join(names, ",") != "message:,function_call:weather" || len(turn.ToolCalls) != 1 || turn.ToolCalls[0].Arguments != "{}" {
		t.Errorf("Responses items %v, stored turn %+v", names, turn)
	}
	var c collector
	b := blockWriter{out: c.apply}
	for _, d := range cut {
		if err := b.add(d); err != nil {
			t.Fatal(err)
		}
	}
	b.close()
	names = nil
	for _, blk := range c.content {
		names = append(names, blk.Type+":"+blk.Name)
	}
	if strings.Join(names, ",") != "text:,tool_use:weather" {
		t.Errorf("Anthropic blocks %v", names)
	}
}

// manyKeys is n metadata entries, "k0":"v" on, for a JSON object.
func manyKeys(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	return strings.Join(keys, ",")
}

// TestResponsesContinueUnfinished: previous_response_id naming a stored
// response that has no answer to continue (a background one still
// running, or cancelled) is a 400 that says so, not one that says the
// response is not stored, which GET shows it is.
func TestResponsesContinueUnfinished(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	c := ts.client()
	r := backgroundQuestion(t, c)
	next := `{"model":"tiny-a","input":"And?","max_output_tokens":1,"previous_response_id":"` + r.ID + `"}`
	wantBadRequest(t, ts, "/v1/responses", next, "previous_response_id", `response "`+r.ID+`" is in_progress`)
	if _, err := c.Responses.Cancel(t.Context(), r.ID); err != nil {
		t.Fatal(err)
	}
	wantBadRequest(t, ts, "/v1/responses", next, "previous_response_id", `response "`+r.ID+`" is cancelled`)
}

// TestResponsesChatFields: chat completions' fields sent to the
// Responses API, which names them otherwise or has them not, would
// change the answer were they honoured: each is refused naming it (and
// the Responses API's own, where it has one), never ignored.
func TestResponsesChatFields(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	const m = `"model":"tiny-a","input":"Hi","max_output_tokens":1`
	for _, c := range []struct{ field, param, msg string }{
		{`"response_format":{"type":"json_object"}`, "response_format", "text.format"},
		{`"max_tokens":5`, "max_tokens", "max_output_tokens"},
		{`"max_completion_tokens":5`, "max_completion_tokens", "max_output_tokens"},
		{`"reasoning_effort":"low"`, "reasoning_effort", "reasoning.effort"},
		{`"messages":[{"role":"user","content":"Hi"}]`, "messages", "input"},
		{`"stop":["\n"]`, "stop", "not supported"},
		{`"n":2`, "n", "not supported"},
		{`"logprobs":true`, "logprobs", "message.output_text.logprobs"},
	} {
		wantBadRequest(t, ts, "/v1/responses", `{`+m+`,`+c.field+`}`, c.param, c.msg)
	}
	// Their defaults ask for nothing.
	for _, field := range []string{`"n":1`, `"logprobs":false`, `"stop":null`, `"response_format":null`} {
		if resp, body := ts.post(t, "/v1/responses", `{`+m+`,`+field+`}`); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s", field, resp.StatusCode, body)
		}
	}
}

// TestResponsesGetInclude: GET /v1/responses/{id} takes include as
// input_items does: a reasoning item's encrypted_content when
// reasoning.encrypted_content asks for it, as in the answer, and not
// otherwise; a name the API does not know is a 400 naming include.
func TestResponsesGetInclude(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	resp, out := ts.post(t, "/v1/responses", `{"model":"tiny-a","input":"`+question+`","max_output_tokens":12,"temperature":0,"reasoning":{"effort":"medium"}}`)
	var r responseObject
	unmarshal(t, out, &r)
	if resp.StatusCode != http.StatusOK || len(r.Output) == 0 || r.Output[0].Type != "reasoning" {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	text := r.Output[0].Content[0].Text
	for query, want := range map[string]*string{"": nil, "?include[]=reasoning.encrypted_content": &text,
		"?include=message.output_text.logprobs&include=reasoning.encrypted_content": &text, "?include[]=file_search_call.results": nil} {
		resp, out := ts.get(t, "/v1/responses/"+r.ID+query)
		var got struct {
			Output []struct {
				EncryptedContent *string `json:"encrypted_content"`
			}
		}
		unmarshal(t, out, &got)
		if resp.StatusCode != http.StatusOK || len(got.Output) != len(r.Output) {
			t.Fatalf("%s: %d %s", query, resp.StatusCode, out)
		}
		if enc := got.Output[0].EncryptedContent; (enc == nil) != (want == nil) || enc != nil && *enc != *want {
			t.Errorf("%s: %s; want encrypted_content %v", query, out, want)
		}
	}
	resp, out = ts.get(t, "/v1/responses/"+r.ID+"?include[]=everything")
	var e openAIError
	unmarshal(t, out, &e)
	if resp.StatusCode != http.StatusBadRequest || e.Error == nil || e.Error.Param == nil || *e.Error.Param != "include" {
		t.Errorf("include everything: %d %s", resp.StatusCode, out)
	}
}

// TestResponsesItemReference: items of stored responses come back as
// item_reference (the AI SDK sends its earlier answers' reasoning and
// messages so while it stores them, its default): each is the stored
// item, output or input, as if given whole; the next turn is answered.
func TestResponsesItemReference(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	resp, out := ts.post(t, "/v1/responses", `{"model":"tiny-a","input":"Hi","max_output_tokens":12,"temperature":0}`)
	var r responseObject
	unmarshal(t, out, &r)
	if resp.StatusCode != 200 || len(r.Output) == 0 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	var whole, refs []string
	for _, o := range r.Output {
		whole = append(whole, jsonOf(t, o))
		refs = append(refs, `{"type":"item_reference","id":"`+o.ID+`"}`)
	}
	_, items := ts.get(t, "/v1/responses/"+r.ID+"/input_items")
	var page struct {
		Data []json.RawMessage `json:"data"`
	}
	unmarshal(t, items, &page)
	var first struct {
		ID string `json:"id"`
	}
	unmarshal(t, string(page.Data[0]), &first)
	input := func(turn []string, user string) string {
		return `[` + strings.Join(append(append([]string{user}, turn...), `{"role":"user","content":"More."}`), ",") + `]`
	}
	given, e := responsesInput(json.RawMessage(input(whole, `{"role":"user","content":"Hi"}`)))
	if e != nil {
		t.Fatal(e.msg)
	}
	resolved, e := ts.responses.resolve(json.RawMessage(input(refs, `{"type":"item_reference","id":"`+first.ID+`"}`)))
	if e != nil {
		t.Fatal(e.msg)
	}
	got, e := responsesInput(resolved)
	if e != nil {
		t.Fatal(e.msg)
	}
	if jsonOf(t, got) != jsonOf(t, given) {
		t.Errorf("by reference\n%s\nwhole\n%s", jsonOf(t, got), jsonOf(t, given))
	}
	body := `{"model":"tiny-a","max_output_tokens":2,"input":` + input(refs, `{"role":"user","content":"Hi"}`) + `}`
	if resp, out := ts.post(t, "/v1/responses", body); resp.StatusCode != 200 {
		t.Errorf("the next turn by reference: %d %s", resp.StatusCode, out)
	}
	// A response not stored leaves nothing to refer to.
	resp, out = ts.post(t, "/v1/responses", `{"model":"tiny-a","input":"Hi","max_output_tokens":2,"store":false}`)
	unmarshal(t, out, &r)
	body = `{"model":"tiny-a","max_output_tokens":2,"input":[{"role":"user","content":"Hi"},{"type":"item_reference","id":"` + r.Output[0].ID + `"}]}`
	if resp, out := ts.post(t, "/v1/responses", body); resp.StatusCode != 400 || !strings.Contains(out, `"param":"input[1].id"`) {
		t.Errorf("a reference to an item not stored: %d %s", resp.StatusCode, out)
	}
	// The same item twice, as OpenAI refuses it.
	body = `{"model":"tiny-a","max_output_tokens":2,"input":[{"role":"user","content":"Hi"},` + refs[0] + `,` + refs[0] + `]}`
	if resp, out := ts.post(t, "/v1/responses", body); resp.StatusCode != 400 || !strings.Contains(out, `"param":"input[2].id"`) || !strings.Contains(out, "referred to already by input[1]") {
		t.Errorf("an item referred to twice: %d %s", resp.StatusCode, out)
	}
}

// TestResponsesItemReferenceMany: a request of many references to a
// full store is resolved in one pass over the store, not one pass per
// reference under the store's lock (20,000 references to 100,000 stored
// items were 2,000,000,000 comparisons, seconds of every other request
// waiting on the lock).
func TestResponsesItemReferenceMany(t *testing.T) {
	st := newResponseStore()
	for i := range 1000 {
		input := make([]inputItem, 100)
		for j := range input {
			id := fmt.Sprintf("msg_%d_%d", i, j)
			input[j] = inputItem{id: id, typ: "message", json: json.RawMessage(`{"type":"message","role":"user","id":"` + id + `","content":"Hi"}`)}
		}
		st.put(&responseObject{ID: fmt.Sprintf("resp_%d", i)}, nil, input)
	}
	refs := make([]string, 20000)
	for i := range refs {
		refs[i] = fmt.Sprintf(`{"type":"item_reference","id":"msg_%d_%d"}`, i/100, i%100)
	}
	start := time.Now()
	out, e := st.resolve(json.RawMessage("[" + strings.Join(refs, ",") + "]"))
	if e != nil {
		t.Fatal(e.msg)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("20,000 references resolved in %v", took)
	}
	var items []struct {
		ID string `json:"id"`
	}
	unmarshal(t, string(out), &items)
	if len(items) != len(refs) || items[0].ID != "msg_0_0" || items[len(items)-1].ID != "msg_199_99" {
		t.Errorf("resolved %d items, first %v", len(items), items[0])
	}
}

// TestResponsesItemReferenceBound: a reference of a few bytes may name
// an item of megabytes, and a body of 8 MiB holds 200,000 of them; as an
// item may be referred to once (OpenAI refuses one given twice), the
// references resolve to at most what the store holds, itself bounded.
func TestResponsesItemReferenceBound(t *testing.T) {
	st := newResponseStore()
	head := `{"type":"message","role":"user","id":"msg_big","content":"`
	item := head + strings.Repeat("a", 1<<20-len(head)-2) + `"}`
	st.put(&responseObject{ID: "resp_big"}, nil, []inputItem{{id: "msg_big", typ: "message", json: json.RawMessage(item)}})
	refs := make([]string, 100)
	for i := range refs {
		refs[i] = `{"type":"item_reference","id":"msg_big"}`
	}
	_, e := st.resolve(json.RawMessage("[" + strings.Join(refs, ",") + "]"))
	if e == nil || e.param != "input[1].id" || !strings.Contains(e.msg, "referred to already by input[0]") {
		t.Fatalf("100 references to one item of 1 MiB: %v", e)
	}
	if _, e := st.resolve(json.RawMessage("[" + refs[0] + "]")); e != nil {
		t.Errorf("one reference: %s", e.msg)
	}
}

// backgroundQuestion starts a background response to question, greedy,
// which tiny-a never ends: it runs until cancelled or the context is
// full.
func backgroundQuestion(t *testing.T, c openai.Client) *responses.Response {
	t.Helper()
	r, err := c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "tiny-a", Background: openai.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(question)}, Temperature: openai.Float(0)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
