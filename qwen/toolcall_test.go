package qwen

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/format/tokenizer"
)

// TestForcedToolCalls runs a Qwen3 answer that thinks, says a sentence and
// makes two calls, as token ids of the real tokenizer with the markers as
// their added tokens: the reasoning and the sentence come apart from the
// calls, the calls stream in pieces that join to the arguments, and only
// the sentence's tokens have log-probabilities.
func TestForcedToolCalls(t *testing.T) {
	m := tinyModel(t)
	tok := m.m.Tokenizer
	ids := testTokens(t, tok,
		"<think>",
		"\nCall both.\n",
		"</think>",
		"\n\nI'll look both up.\n",
		"<tool_call>",
		"\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Zürich\", \"days\": [1, 2]}}\n",
		"</tool_call>",
		"\n",
		"<tool_call>",
		"\n{\"name\": \"time\", \"arguments\": {}}\n",
		"</tool_call>",
	)
	for _, stops := range [][]string{nil, {"Zürich"}} {
		s := forced(m, ids, stops, true, StopEOS)
		s.asm.calls = m.format.NewCallParser(nil, newCallID)
		var r, c strings.Builder
		var lps []byte
		var calls []ToolCallDelta
		pieces := 0
		for d, err := range s.Deltas() {
			if err != nil {
				t.Fatal(err)
			}
			r.WriteString(d.Reasoning)
			c.WriteString(d.Content)
			for _, lp := range d.Logprobs {
				lps = append(lps, lp.Bytes...)
			}
			for _, tc := range d.ToolCalls {
				pieces++
				if tc.Index == len(calls) {
					if tc.ID == "" || tc.Name == "" {
						t.Fatalf("call %d begins without its id and name: %+v", tc.Index, tc)
					}
					calls = append(calls, tc)
					continue
				}
				if tc.ID != "" || tc.Name != "" || tc.Index != len(calls)-1 {
					t.Fatalf("piece %+v after call %d began", tc, len(calls)-1)
				}
				calls[tc.Index].Arguments += tc.Arguments
			}
		}
		if r.String() != "\nCall both.\n" || c.String() != "I'll look both up." {
			t.Errorf("stops %q: reasoning %q, content %q", stops, r.String(), c.String())
		}
		// A token may hold the sentence's end and the newline before the
		// first call.
		if got := strings.TrimSpace(string(lps)); got != "I'll look both up." {
			t.Errorf("stops %q: log-probabilities of %q", stops, got)
		}
		if len(calls) != 2 || calls[0].Name != "weather" || calls[0].Arguments != `{"city": "Zürich", "days": [1, 2]}` ||
			calls[1].Name != "time" || calls[1].Arguments != "{}" || calls[0].ID == calls[1].ID {
			t.Errorf("stops %q: calls %+v", stops, calls)
		}
		if pieces < 4 {
			t.Errorf("stops %q: the calls came in %d pieces, not as generated", stops, pieces)
		}
		if stops == nil {
			roundTrip(t, m, ids, Message{Role: "assistant", Reasoning: r.String(), Content: c.String(),
				ToolCalls: []ToolCall{{Name: calls[0].Name, Arguments: calls[0].Arguments}, {Name: calls[1].Name, Arguments: calls[1].Arguments}}})
		}
	}
}

// roundTrip checks that an answer given back with its calls' results
// renders as the model wrote it, token for token, so the next request
// reuses its KV cache.
func roundTrip(t *testing.T, m *Model, ids []int32, answer Message) {
	t.Helper()
	tool, err := NewTool("weather", "The weather.", json.RawMessage(`{"type": "object"}`))
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Tools: []Tool{tool}, Messages: []Message{{Role: "user", Content: "Weather and time?"}, answer,
		{Role: "tool", Content: "18C"}, {Role: "tool", Content: "12:00"}}}
	text, err := m.RenderPrompt(req)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>assistant\n" + m.Detokenize(ids) + "<|im_end|>\n<|im_start|>user\n<tool_response>\n18C\n</tool_response>\n<tool_response>\n12:00\n</tool_response><|im_end|>\n"
	if !strings.Contains(text, want) {
		t.Fatalf("the prompt\n%q\ndoes not hold the answer as written\n%q", text, want)
	}
	prompt, _, err := m.encode(&req, true)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for i := range prompt {
		found = found || slices.Equal(prompt[i:min(i+len(ids), len(prompt))], ids)
	}
	if !found {
		t.Fatalf("the prompt's tokens do not hold the answer's")
	}
}

// TestForcedQwen35Answer runs an answer in Qwen3.5's chat format through
// the same assembler: the prompt opened the reasoning, so the answer
// begins in it; the sentence before the call is content, kept as it is;
// the call is qwen3_coder's XML, its values typed by the tool's schema,
// and its name comes before its arguments. Only the sentence's tokens
// have log-probabilities.
func TestForcedQwen35Answer(t *testing.T) {
	m := tinyModel(t)
	tok := m.m.Tokenizer
	f, err := chat.Lookup("qwen3.5")
	if err != nil {
		t.Fatal(err)
	}
	tool, err := NewTool("weather", "The weather.", json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	ids := testTokens(t, tok,
		"Zürich, then.\n",
		"</think>",
		"\n\nLet me look.\n\n",
		"<tool_call>",
		"\n<function=weather>\n<parameter=city>\nZürich\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n",
		"</tool_call>",
	)
	s := forced(m, ids, nil, true, StopEOS)
	s.asm.src = f.NewSplitter(tok, chat.Options{})
	s.asm.calls = f.NewCallParser([]Tool{tool}, newCallID)
	var r, c strings.Builder
	var lps []byte
	var pieces []ToolCallDelta
	for d, err := range s.Deltas() {
		if err != nil {
			t.Fatal(err)
		}
		r.WriteString(d.Reasoning)
		c.WriteString(d.Content)
		for _, lp := range d.Logprobs {
			lps = append(lps, lp.Bytes...)
		}
		pieces = append(pieces, d.ToolCalls...)
	}
	if r.String() != "Zürich, then.\n" || c.String() != "Let me look.\n\n" {
		t.Errorf("reasoning %q, content %q", r.String(), c.String())
	}
	if got := strings.TrimSpace(string(lps)); got != "Let me look." {
		t.Errorf("log-probabilities of %q", got)
	}
	if len(pieces) != 2 || pieces[0].ID == "" || pieces[0].Name != "weather" || pieces[0].Arguments != "" ||
		pieces[1].Index != 0 || pieces[1].Arguments != `{"city": "Zürich", "days": 3}` {
		t.Errorf("call pieces %+v", pieces)
	}
}

// TestTextBeforeCallInOrder: text before a tool call that could begin a
// stop string (held back while it might) goes out before the call's
// deltas, not at the end of the generation after them, which would make
// Anthropic's and the Responses API's adapters open a second text block
// after the call.
func TestTextBeforeCallInOrder(t *testing.T) {
	m := tinyModel(t)
	tok := m.m.Tokenizer
	ids := testTokens(t, tok,
		"I'll check the weather. Obs",
		"<tool_call>",
		"\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}\n",
		"</tool_call>",
	)
	s := forced(m, ids, []string{"Observation:"}, false, StopEOS)
	s.asm.calls = m.format.NewCallParser(nil, newCallID)
	var order []string
	content := ""
	for d, err := range s.Deltas() {
		if err != nil {
			t.Fatal(err)
		}
		if d.Content != "" {
			order = append(order, "content "+d.Content)
			content += d.Content
		}
		for _, c := range d.ToolCalls {
			order = append(order, "call "+c.Name+c.Arguments)
		}
	}
	call := slices.IndexFunc(order, func(o string) bool { return strings.HasPrefix(o, "call ") })
	if call < 0 || slices.ContainsFunc(order[call:], func(o string) bool { return strings.HasPrefix(o, "content ") }) ||
		strings.TrimSpace(content) != "I'll check the weather. Obs" {
		t.Errorf("deltas %q: want the whole text, then the call", order)
	}
}

// testTokens is the token ids of an answer: each piece that is an added
// token (a marker, "<tool_call>") its id, any other piece's text encoded.
func testTokens(t *testing.T, tok *tokenizer.Tokenizer, pieces ...string) []int32 {
	t.Helper()
	var ids []int32
	for _, p := range pieces {
		if strings.HasPrefix(p, "<") && strings.HasSuffix(p, ">") && !strings.ContainsAny(p, " \n") {
			id, ok := tok.TokenID(p)
			if !ok {
				t.Fatalf("no token %q", p)
			}
			ids = append(ids, id)
			continue
		}
		ids = append(ids, tok.Encode(p, false)...)
	}
	return ids
}
