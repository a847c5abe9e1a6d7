package chat

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/qwenc/qwenc/internal/testmodel"
)

// The tool-call cases of the shared tiny-q35 reference, copied into
// testdata so that the tests need no ../shared: what vLLM's qwen3_coder
// parser makes of a model's output.
const coderCasesFile = "testdata/qwen35/tool_call_cases.json"

type coderCases struct {
	Tools []json.RawMessage
	Cases []struct {
		Name        string
		ModelOutput string  `json:"model_output"`
		Content     *string `json:"content"`
		ToolCalls   []struct {
			Function struct{ Name, Arguments string }
			Parsed   json.RawMessage `json:"arguments_parsed"`
		} `json:"tool_calls"`
	}
}

func readCoderCases(t *testing.T) ([]Tool, coderCases) {
	t.Helper()
	var cs coderCases
	testmodel.ReadJSON(t, coderCasesFile, &cs)
	var tools []Tool
	for i, def := range cs.Tools {
		tool, err := ParseTool(def)
		if err != nil {
			t.Fatalf("tools[%d]: %v", i, err)
		}
		tools = append(tools, tool)
	}
	if len(cs.Cases) < 10 {
		t.Fatalf("%s: %d cases", coderCasesFile, len(cs.Cases))
	}
	return tools, cs
}

// TestCoderParserCases: every case of the reference, however the text is
// cut: the content, and each call's name and arguments byte for byte as
// vLLM's json.dumps wrote them.
func TestCoderParserCases(t *testing.T) {
	tools, cs := readCoderCases(t)
	for i, c := range cs.Cases {
		want := callResult{}
		if c.Content != nil {
			want.content = *c.Content
		}
		for j, tc := range c.ToolCalls {
			var a, b any
			if json.Unmarshal([]byte(tc.Function.Arguments), &a) != nil || json.Unmarshal(tc.Parsed, &b) != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("%s: call %d: arguments and arguments_parsed differ", c.Name, j)
			}
			want.calls = append(want.calls, CallDelta{Index: j, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		for how, pieces := range splits(c.ModelOutput, uint64(i)) {
			got := runCalls(qwen35, tools, pieces)
			ids := map[string]bool{}
			for k := range got.calls {
				if got.calls[k].ID == "" || ids[got.calls[k].ID] {
					t.Errorf("%s (%s): call %d has id %q", c.Name, how, k, got.calls[k].ID)
				}
				ids[got.calls[k].ID] = true
				got.calls[k].ID = ""
			}
			if got.content != want.content || !slices.Equal(got.calls, want.calls) {
				t.Errorf("%s (%s):\n got %q %+v\nwant %q %+v", c.Name, how, got.content, got.calls, want.content, want.calls)
			}
		}
	}
}

// TestCoderParserMore: what the reference does not cover, each as vLLM
// reads it.
func TestCoderParserMore(t *testing.T) {
	tool := func(params string) Tool {
		tl, err := NewTool("f", "", json.RawMessage(params))
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	typed := tool(`{"type": "object", "properties": {"i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"},
		"o": {"type": "object"}, "l": {"type": "list[str]"}, "s": {"type": " String "}, "u": {"type": ["integer", "null"]},
		"x": {"description": "no type"}, "t": {"type": "tuple"},
		"oi": {"anyOf": [{"type": "integer"}, {"type": "null"}]}, "on": {"oneOf": [{"type": "null"}, {"type": "number"}]},
		"sn": {"type": ["string", "null"]}, "r": {"$ref": "#/$defs/Loc"}, "ro": {"anyOf": [{"$ref": "#/$defs/Loc"}, {"type": "null"}]},
		"mix": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}}`)
	call := func(params ...string) string {
		s := "<tool_call>\n<function=f>\n"
		for i := 0; i < len(params); i += 2 {
			s += "<parameter=" + params[i] + ">\n" + params[i+1] + "\n</parameter>\n"
		}
		return s + "</function>\n</tool_call>"
	}
	cases := []struct {
		name  string
		tools []Tool
		text  string
		want  callResult
	}{
		{"integers as int() reads them", []Tool{typed}, call("i", " +0_1 ", "i", "٣"), // a repeated name keeps its first place
			callResult{calls: []CallDelta{{Name: "f", Arguments: `{"i": 3}`}}}},
		{"not an integer", []Tool{typed}, call("i", "1.0"), callResult{calls: []CallDelta{{Name: "f", Arguments: `{"i": "1.0"}`}}}},
		{"numbers", []Tool{typed}, call("n", "1e20", "i", "7", "n", "-2.50"),
			callResult{calls: []CallDelta{{Name: "f", Arguments: `{"n": -2.5, "i": 7}`}}}},
		{"integral numbers are integers, exactly", []Tool{typed}, call("n", "1e20"),
			callResult{calls: []CallDelta{{Name: "f", Arguments: `{"n": 100000000000000000000}`}}}},
		{"inf and nan stay strings", []Tool{typed}, call("n", "inf", "i", "NULL"),
			callResult{calls: []CallDelta{{Name: "f", Arguments: `{"n": "inf", "i": null}`}}}},
		{"booleans", []Tool{typed}, call("b", "TRUE"), callResult{calls: []CallDelta{{Name: "f", Arguments: `{"b": true}`}}}},
		{"not a boolean is false", []Tool{typed}, call("b", "yes"), callResult{calls: []CallDelta{{Name: "f", Arguments: `{"b": false}`}}}},
		{"JSON in Python's spelling", []Tool{typed}, call("o", `{"k": [1.0, 1e400, "é"], "k": 2}`),
			callResult{calls: []CallDelta{{Name: "f", Arguments: `{"o": {"k": 2}}`}}}},
		{"a Python literal where JSON fails", []Tool{typed}, call("l", "['a', (1, 2.50), {1: None, True: 'x'}]"),
			callResult{calls: []CallDelta{{Name: "f", Arguments: `{"l": ["a", [1, 2.5], {"1": "x"}]}`}}}},
		{"neither stays a string", []Tool{typed}, call("o", "{a: 1}"), callResult{calls: []CallDelta{{Name: "f", Arguments: `{"o": "{a: 1}"}`}}}},
		{"a list's items written bare", []Tool{typed}, call("l", "'a.go', 'b.go'"),
			callResult{calls: []CallDelta{{Name: "f", Arguments: `{"l": ["a.go", "b.go"]}`}}}},
		{"a type named with spaces and capitals", []Tool{typed}, call("s", "42"), callResult{calls: []CallDelta{{Name: "f", Arguments: `{"s": "42"}`}}}},
		{"a type or null reads as the type, another a Python literal", []Tool{typed}, call("u", "42", "t", "(1,)"),
			callResult{calls: []CallDelta{{Name: "f", Arguments: `{"u": 42, "t": [1]}`}}}},
		{"no type: a string", []Tool{typed}, call("x", "[1]"), callResult{calls: []CallDelta{{Name: "f", Arguments: `{"x": "[1]"}`}}}},
		// As vLLM reads them since its pull request 37831: pydantic's
		// Optional[T] is T, a nested model ($ref) JSON.
		{"one type beside null, as pydantic writes Optional", []Tool{typed},
			call("oi", "5", "on", "2.50", "sn", "42", "r", `{"city": "Paris"}`, "ro", "NULL", "mix", "7"),
			callResult{calls: []CallDelta{{Name: "f", Arguments: `{"oi": 5, "on": 2.5, "sn": "42", "r": {"city": "Paris"}, "ro": null, "mix": "7"}`}}}},
		{"a schema without properties: its members", []Tool{tool(`{"type": "object"}`)}, call("type", "1", "z", "2"),
			callResult{calls: []CallDelta{{Name: "f", Arguments: `{"type": "1", "z": "2"}`}}}},
		{"a parameter cut by the next one, values keep their spaces", nil,
			"<tool_call>\n<function=g>\n<parameter=a>\n x \n<parameter=b>\ny\n</function>\n</tool_call>",
			callResult{calls: []CallDelta{{Name: "g", Arguments: `{"a": " x ", "b": "y"}`}}}},
		{"a function without <tool_call>", nil, "Sure.\n<function=g>\n<parameter=a>\n1\n</parameter>\n</function>\nDone.",
			callResult{content: "Sure.\n", calls: []CallDelta{{Name: "g", Arguments: `{"a": "1"}`}}}},
		{"two functions in one call, text around them ignored", nil,
			"<tool_call>\nx<function=g>\n</function>y<function=h>\n<parameter=p>\n\n</parameter>\n</function>\n</tool_call>\ntail",
			callResult{calls: []CallDelta{{Name: "g", Arguments: `{}`}, {Name: "h", Arguments: `{"p": ""}`}}}},
		{"a function outside the calls is not one", nil,
			"<tool_call>\n<function=g>\n</function>\n</tool_call>\n<function=h>\n</function>",
			callResult{calls: []CallDelta{{Name: "g", Arguments: `{}`}}}},
		{"a call closed before its function", nil, "<tool_call>\n<function=g>\n<parameter=a>\nv\n</tool_call>",
			callResult{calls: []CallDelta{{Name: "g", Arguments: `{"a": "v"}`}}}},
		{"cut off: the last newlines go as Python's $ has it", nil, "<tool_call>\n<function=g>\n<parameter=a>\nv\n\n\n",
			callResult{calls: []CallDelta{{Name: "g", Arguments: `{"a": "v"}`}}}},
		{"cut off without <tool_call>: one newline fewer goes", nil, "<function=g>\n<parameter=a>\nv\n\n\n",
			callResult{calls: []CallDelta{{Name: "g", Arguments: `{"a": "v\n"}`}}}},
		{"white space alone before a call is not content", nil, "\n\n \t<tool_call>\n<function=g>\n</function>\n</tool_call>",
			callResult{calls: []CallDelta{{Name: "g", Arguments: `{}`}}}},
		{"white space alone, and no call: content", nil, "\n \n", callResult{content: "\n \n"}},
		{"white space before no function block: content", nil, "\n\n<tool_call>\nx", callResult{content: "\n\n<tool_call>\nx"}},
		{"no function: all content", nil, "a <tool_call>\n{\"name\": \"g\"}\n</tool_call> b",
			callResult{content: "a <tool_call>\n{\"name\": \"g\"}\n</tool_call> b"}},
		{"a marker-like text", nil, "a <tool b <function c <tool_cal", callResult{content: "a <tool b <function c <tool_cal"}},
		{"a name without its >", nil, "<tool_call>\n<function=g</function>\n</tool_call>",
			callResult{calls: []CallDelta{{Arguments: "g"}}}},
		{"a parameter without its >", nil, "<tool_call>\n<function=g>\n<parameter=a</parameter>\n</function>\n</tool_call>",
			callResult{calls: []CallDelta{{Name: "g", Arguments: "<parameter=a</parameter>"}}}},
	}
	for i, c := range cases {
		for how, pieces := range splits(c.text, uint64(i)) {
			got := runCalls(qwen35, c.tools, pieces)
			for k := range got.calls {
				got.calls[k].ID = ""
			}
			if got.content != c.want.content || !slices.Equal(got.calls, indexed(c.want.calls)) {
				t.Errorf("%s (%s):\n got %q %+v\nwant %q %+v", c.name, how, got.content, got.calls, c.want.content, indexed(c.want.calls))
			}
		}
	}
}

// TestCoderParserStreams: a call's name comes as soon as it is complete,
// before its arguments, and text before the call as it comes.
func TestCoderParserStreams(t *testing.T) {
	p := qwen35.NewCallParser(nil, func() string { return "id" })
	if c := p.Add("Let me see.\n\n<tool"); c != "Let me see.\n\n" || p.InCall() {
		t.Fatalf("content %q, in a call %v", c, p.InCall())
	}
	if c := p.Add("_call>\n<function=get_weather>\n<parameter=city>\nPa"); c != "" || !p.InCall() {
		t.Fatalf("content %q in the call, in a call %v", c, p.InCall())
	}
	if d := p.Take(); !slices.Equal(d, []CallDelta{{ID: "id", Name: "get_weather"}}) {
		t.Fatalf("first pieces %+v", d)
	}
	p.Add("ris\n</parameter>\n</function>")
	if d := p.Take(); !slices.Equal(d, []CallDelta{{Arguments: `{"city": "Paris"}`}}) {
		t.Fatalf("next pieces %+v", d)
	}
	if c := p.Add("\n</tool_call>\n"); c != "" || p.Flush() != "" || len(p.Take()) != 0 {
		t.Fatal("text after the call")
	}
}

// TestQwen35TestdataIsShared: the copies in testdata/qwen35 are the
// shared reference's, when there is one to compare.
func TestQwen35TestdataIsShared(t *testing.T) {
	shared := filepath.Join("..", "..", "..", "shared", "reference", "tiny-q35")
	cfg, err := os.ReadFile(filepath.Join(shared, "tokenizer_config.json"))
	if err != nil {
		t.Skipf("no shared reference: %v", err)
	}
	var c struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{"chat_template.jinja": []byte(c.ChatTemplate)}
	for _, name := range []string{"tool_call_cases.json", "chat_cases.json"} {
		if want[name], err = os.ReadFile(filepath.Join(shared, name)); err != nil {
			t.Fatal(err)
		}
	}
	for name, w := range want {
		own, err := os.ReadFile(filepath.Join("testdata", "qwen35", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(own, w) {
			t.Errorf("testdata/qwen35/%s differs from the shared reference's: copy it again", name)
		}
	}
}
