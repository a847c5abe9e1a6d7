package chat

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// callResult is what the parser made of an answer: its content and its
// calls, each call's pieces joined.
type callResult struct {
	content string
	calls   []CallDelta
}

// runCalls parses an answer given in pieces with the format's parser.
func runCalls(f *Format, tools []Tool, pieces []string) callResult {
	n := 0
	p := f.NewCallParser(tools, func() string { n++; return fmt.Sprint("id", n) })
	var r callResult
	join := func(ds []CallDelta) {
		for _, d := range ds {
			if d.Index == len(r.calls) {
				r.calls = append(r.calls, CallDelta{Index: d.Index})
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
		r.content += p.Add(s)
		join(p.Take())
	}
	r.content += p.Flush()
	join(p.Take())
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

// splits are the ways the tests feed an answer to a parser: whole, a
// byte at a time (the worst tokenization), and in random pieces.
func splits(s string, seed uint64) map[string][]string {
	rng := rand.New(rand.NewPCG(seed, 1))
	var random []string
	for rest := s; rest != ""; {
		n := min(len(rest), 1+rng.IntN(7))
		random = append(random, rest[:n])
		rest = rest[n:]
	}
	return map[string][]string{"whole": {s}, "bytes": bytewise(s), "random": random}
}

func TestHermesParser(t *testing.T) {
	call := func(id, name, args string) CallDelta {
		return CallDelta{ID: id, Name: name, Arguments: args}
	}
	cases := []struct {
		name, text string
		want       callResult
	}{
		{"no call", "Hello.\n\nBye.\n", callResult{content: "Hello.\n\nBye.\n"}},
		{"a marker-like text", "a <tool b <tool_cal", callResult{content: "a <tool b <tool_cal"}},
		{"one call", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			callResult{calls: []CallDelta{call("id1", "get_weather", `{"city": "Paris"}`)}}},
		{"text, two calls, trailing newline", "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": \"}</tool_call>\\\"\", \"y\": [1, {\"z\": null}]}}\n</tool_call>\n<tool_call>\n{\"name\":\"b\",\"arguments\":{}}\n</tool_call>\n",
			callResult{content: "Let me check.", calls: []CallDelta{
				call("id1", "a", `{"x": "}</tool_call>\"", "y": [1, {"z": null}]}`), call("id2", "b", "{}")}}},
		{"arguments first", "<tool_call>\n{\"arguments\": {\"q\": 1}, \"name\": \"s\"}\n</tool_call>",
			callResult{calls: []CallDelta{call("id1", "s", `{"q": 1}`)}}},
		{"arguments as a string", "<tool_call>\n{\"name\": \"s\", \"arguments\": \"{\\\"q\\\": 1}\"}\n</tool_call>",
			callResult{calls: []CallDelta{call("id1", "s", `"{\"q\": 1}"`)}}},
		{"not JSON", "<tool_call>\nnonsense\n</tool_call>", callResult{calls: []CallDelta{call("id1", "", "nonsense")}}},
		{"cut off in the arguments", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"long",
			callResult{calls: []CallDelta{call("id1", "f", `{"a": "long`)}}},
		{"cut off in the name", "<tool_call>\n{\"name\": \"f", callResult{calls: nil}},
		// The white space before a later call is the template's too,
		// however the text comes.
		{"text between calls", "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\nThen b.\n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>",
			callResult{content: "\nThen b.", calls: []CallDelta{call("id1", "a", "{}"), call("id2", "b", "{}")}}},
	}
	for i, c := range cases {
		for how, pieces := range splits(c.text, uint64(i)) {
			got := runCalls(qwen3, nil, pieces)
			if got.content != c.want.content || !slices.Equal(got.calls, indexed(c.want.calls)) {
				t.Errorf("%s (%s):\n got %q %+v\nwant %q %+v", c.name, how, got.content, got.calls, c.want.content, indexed(c.want.calls))
			}
		}
	}
}

func indexed(calls []CallDelta) []CallDelta {
	out := slices.Clone(calls)
	for i := range out {
		out[i].Index = i
	}
	return out
}

// TestHermesParserStreamsArguments checks that arguments come as they are
// generated, not at the end of the call.
func TestHermesParserStreamsArguments(t *testing.T) {
	p := qwen3.NewCallParser(nil, func() string { return "x" })
	p.Add("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": ")
	first := p.Take()
	if len(first) != 1 || first[0].Name != "f" || first[0].Arguments != `{"a": ` {
		t.Fatalf("first pieces %+v", first)
	}
	p.Add(`"b"`)
	if d := p.Take(); len(d) != 1 || d[0].ID != "" || d[0].Arguments != `"b"` {
		t.Fatalf("next pieces %+v", d)
	}
	if c := p.Add("}}\n</tool_call>"); c != "" || !strings.Contains(fmt.Sprint(p.Take()), "}") {
		t.Fatal("the arguments' closing brace is missing")
	}
}
