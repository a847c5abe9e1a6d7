package qwen

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// callResult is what the parser made of an answer: its content and its
// calls, each call's pieces joined.
type callResult struct {
	content string
	calls   []ToolCallDelta
}

func runCalls(pieces []string) callResult {
	n := 0
	p := callParser{newID: func() string { n++; return fmt.Sprint("id", n) }}
	var r callResult
	join := func(ds []ToolCallDelta) {
		for _, d := range ds {
			if d.Index == len(r.calls) {
				r.calls = append(r.calls, ToolCallDelta{Index: d.Index})
			}
			c := &r.calls[d.Index]
			if d.ID != "" {
				if c.ID != "" || c.Arguments != "" {
					panic("id after the call's first piece")
				}
				c.ID, c.Name = d.ID, d.Name
			}
			c.Arguments += d.Arguments
		}
	}
	for _, s := range pieces {
		r.content += p.add(s)
		join(p.take())
	}
	r.content += p.flush()
	join(p.take())
	return r
}

// bytewise splits s into one piece per byte, as the worst tokenization.
func bytewise(s string) []string {
	var out []string
	for i := range len(s) {
		out = append(out, s[i:i+1])
	}
	return out
}

func TestCallParser(t *testing.T) {
	call := func(id, name, args string) ToolCallDelta {
		return ToolCallDelta{ID: id, Name: name, Arguments: args}
	}
	cases := []struct {
		name, text string
		want       callResult
	}{
		{"no call", "Hello.\n\nBye.\n", callResult{content: "Hello.\n\nBye.\n"}},
		{"a marker-like text", "a <tool b <tool_cal", callResult{content: "a <tool b <tool_cal"}},
		{"one call", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			callResult{calls: []ToolCallDelta{call("id1", "get_weather", `{"city": "Paris"}`)}}},
		{"text, two calls, trailing newline", "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": \"}</tool_call>\\\"\", \"y\": [1, {\"z\": null}]}}\n</tool_call>\n<tool_call>\n{\"name\":\"b\",\"arguments\":{}}\n</tool_call>\n",
			callResult{content: "Let me check.", calls: []ToolCallDelta{
				call("id1", "a", `{"x": "}</tool_call>\"", "y": [1, {"z": null}]}`), call("id2", "b", "{}")}}},
		{"arguments first", "<tool_call>\n{\"arguments\": {\"q\": 1}, \"name\": \"s\"}\n</tool_call>",
			callResult{calls: []ToolCallDelta{call("id1", "s", `{"q": 1}`)}}},
		{"arguments as a string", "<tool_call>\n{\"name\": \"s\", \"arguments\": \"{\\\"q\\\": 1}\"}\n</tool_call>",
			callResult{calls: []ToolCallDelta{call("id1", "s", `"{\"q\": 1}"`)}}},
		{"not JSON", "<tool_call>\nnonsense\n</tool_call>", callResult{calls: []ToolCallDelta{call("id1", "", "nonsense")}}},
		{"cut off in the arguments", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"long",
			callResult{calls: []ToolCallDelta{call("id1", "f", `{"a": "long`)}}},
		{"cut off in the name", "<tool_call>\n{\"name\": \"f", callResult{calls: nil}},
	}
	for _, c := range cases {
		for _, split := range []struct {
			how    string
			pieces []string
		}{{"whole", []string{c.text}}, {"bytes", bytewise(c.text)}} {
			got := runCalls(split.pieces)
			if got.content != c.want.content || !slices.Equal(got.calls, indexed(c.want.calls)) {
				t.Errorf("%s (%s):\n got %q %+v\nwant %q %+v", c.name, split.how, got.content, got.calls, c.want.content, indexed(c.want.calls))
			}
		}
	}
}

func indexed(calls []ToolCallDelta) []ToolCallDelta {
	out := slices.Clone(calls)
	for i := range out {
		out[i].Index = i
	}
	return out
}

// TestCallParserStreamsArguments checks that arguments come as they are
// generated, not at the end of the call.
func TestCallParserStreamsArguments(t *testing.T) {
	p := callParser{newID: func() string { return "x" }}
	p.add("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": ")
	first := p.take()
	if len(first) != 1 || first[0].Name != "f" || first[0].Arguments != `{"a": ` {
		t.Fatalf("first pieces %+v", first)
	}
	p.add(`"b"`)
	if d := p.take(); len(d) != 1 || d[0].ID != "" || d[0].Arguments != `"b"` {
		t.Fatalf("next pieces %+v", d)
	}
	if c := p.add("}}\n</tool_call>"); c != "" || !strings.Contains(fmt.Sprint(p.take()), "}") {
		t.Fatal("the arguments' closing brace is missing")
	}
}

// TestForcedToolCalls runs a Qwen3 answer that thinks, says a sentence and
// makes two calls, as token ids of the real tokenizer with the markers as
// their added tokens: the reasoning and the sentence come apart from the
// calls, the calls stream in pieces that join to the arguments, and only
// the sentence's tokens have log-probabilities.
func TestForcedToolCalls(t *testing.T) {
	m := tinyModel(t)
	tok := m.m.Tokenizer
	var ids []int32
	mark := func(s string) {
		id, ok := tok.TokenID(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		ids = append(ids, id)
	}
	text := func(s string) { ids = append(ids, tok.Encode(s, false)...) }
	mark("<think>")
	text("\nCall both.\n")
	mark("</think>")
	text("\n\nI'll look both up.\n")
	mark("<tool_call>")
	text("\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Zürich\", \"days\": [1, 2]}}\n")
	mark("</tool_call>")
	text("\n")
	mark("<tool_call>")
	text("\n{\"name\": \"time\", \"arguments\": {}}\n")
	mark("</tool_call>")
	for _, stops := range [][]string{nil, {"Zürich"}} {
		s := forced(m, ids, stops, true, StopEOS)
		s.asm.calls = &callParser{newID: newCallID}
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
