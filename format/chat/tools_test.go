package chat

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/internal/testmodel"
)

// The golden files are jinja2's renderings (testdata/gen_tools.py); the
// tests need no Python.

func TestToJSONAgainstPython(t *testing.T) {
	var cases []struct{ In, Out string }
	testmodel.ReadJSON(t, "testdata/tojson_golden.json", &cases)
	for _, c := range cases {
		got, err := ToJSON([]byte(c.In))
		if err != nil {
			t.Errorf("%s: %v", c.In, err)
			continue
		}
		if got != c.Out {
			t.Errorf("%s:\n got %s\nwant %s", c.In, got, c.Out)
		}
	}
	for _, bad := range []string{"", "{", `{"a" 1}`, "[1,]", "1 2", `{"a": tru}`} {
		if _, err := ToJSON([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// caseMessage is a message as an OpenAI client sends it; arguments may be
// a string or, as Ollama sends them, an object.
type caseMessage struct {
	Role      string
	Content   *string
	Reasoning *string `json:"reasoning_content"`
	ToolCalls []struct {
		ID       string
		Function struct {
			Name      string
			Arguments json.RawMessage
		}
	} `json:"tool_calls"`
}

func TestToolsAgainstJinja(t *testing.T) {
	var cases []struct {
		Name     string
		Tools    []json.RawMessage
		Messages []caseMessage
	}
	testmodel.ReadJSON(t, "testdata/tools_cases.json", &cases)
	var golden []struct {
		Case, Family, Text string
		GenerationPrompt   bool `json:"generation_prompt"`
		Thinking           bool
		PreserveThinking   bool `json:"preserve_thinking"`
	}
	testmodel.ReadJSON(t, "testdata/tools_golden.json", &golden)
	byName := map[string]int{}
	for i, c := range cases {
		byName[c.Name] = i
	}
	for _, g := range golden {
		c := cases[byName[g.Case]]
		f, err := Lookup(g.Family)
		if err != nil {
			t.Fatal(err)
		}
		tools, msgs := caseTools(t, c.Name, c.Tools), caseMessages(t, c.Name, c.Messages)
		o := Options{Tools: tools, GenerationPrompt: g.GenerationPrompt, NoThinking: !g.Thinking, PreserveThinking: g.PreserveThinking}
		segs := render(t, f, msgs, o)
		if got := Text(segs); got != g.Text {
			t.Errorf("%s (%s, %+v):\n got %q\nwant %q", g.Case, g.Family, o, got, g.Text)
		}
		checkSegments(t, segs)
		// The template's own tool markers are Special; the tools' JSON and
		// the calls' arguments are text.
		var specials []string
		for _, s := range segs {
			if s.Special {
				specials = append(specials, s.Text)
			}
		}
		if n := strings.Count(strings.Join(specials, ""), ToolCallOpen); n < 2 {
			t.Errorf("%s: %d %s markers are Special, want the system turn's two at least", g.Case, n, ToolCallOpen)
		}
	}
}

// caseTools reads a case's tool definitions.
func caseTools(t *testing.T, name string, defs []json.RawMessage) []Tool {
	t.Helper()
	var tools []Tool
	for i, raw := range defs {
		tool, err := ParseTool(raw)
		if err != nil {
			t.Fatalf("%s: tools[%d]: %v", name, i, err)
		}
		tools = append(tools, tool)
	}
	return tools
}

// caseMessages reads a case's messages as a server reads a client's.
func caseMessages(t *testing.T, name string, cms []caseMessage) []Message {
	t.Helper()
	var msgs []Message
	for _, cm := range cms {
		m := Message{Role: cm.Role}
		if cm.Content != nil {
			m.Content = *cm.Content
		}
		if cm.Reasoning != nil {
			m.Reasoning = *cm.Reasoning
		}
		for _, tc := range cm.ToolCalls {
			args := string(tc.Function.Arguments)
			var s string
			if json.Unmarshal(tc.Function.Arguments, &s) == nil {
				args = s // OpenAI's string, printed verbatim by Qwen3
			} else if a, err := ToJSON(tc.Function.Arguments); err == nil {
				args = a // Ollama's object, printed through tojson
			} else {
				t.Fatal(err)
			}
			if err := CheckArguments(args); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
		}
		msgs = append(msgs, m)
	}
	return msgs
}

func TestParseToolErrors(t *testing.T) {
	for def, want := range map[string]string{
		`[]`:                           "want an object",
		`{"function": {"name": "f"}}`:  "type: missing",
		`{"type": "code_interpreter"}`: `type: "code_interpreter" is not supported`,
		`{"type": "function"}`:         "function: missing",
		`{"type": "function", "function": {"description": "d"}}`:            "function.name: missing",
		`{"type": "function", "function": {"name": ""}}`:                    "function.name: missing",
		`{"type": "function", "function": {"name": "f", "parameters": []}}`: "function.parameters: want a JSON Schema object",
		// Names the model could not write in its call.
		`{"type": "function", "function": {"name": "say \"hi\""}}`: `function.name: "say \"hi\"": a tool's name may not hold`,
		`{"type": "function", "function": {"name": "a b"}}`:        "function.name: \"a b\"",
		`{"type": "function", "function": {"name": "a>b"}}`:        "function.name: \"a>b\"",
		`{"type": "function", "function": {"name": "a\\b"}}`:       "function.name",
		`{"type": "function", "function": {"name": "a\nb"}}`:       "function.name",
	} {
		_, err := ParseTool([]byte(def))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", def, err, want)
		}
	}
	// Names as the agents give them are taken.
	for _, name := range []string{"mcp__github__create_issue", "browser.search", "Bash", "apply_patch", "ツール"} {
		if _, err := NewTool(name, "", nil); err != nil {
			t.Errorf("NewTool(%q): %v", name, err)
		}
	}
	tool, err := NewTool("f", "", nil)
	if err != nil || tool.def != `{"type": "function", "function": {"name": "f"}}` {
		t.Errorf("NewTool: %q, %v", tool.def, err)
	}
	for args, ok := range map[string]bool{`{}`: true, `{"a": [1]}`: true, `[]`: false, `"{}"`: false, `{`: false} {
		if err := CheckArguments(args); (err == nil) != ok {
			t.Errorf("CheckArguments(%s): %v", args, err)
		}
	}
}

// TestPyStr: values printed as a template's string filter prints them,
// the wants from Python's str() of json.loads of each.
func TestPyStr(t *testing.T) {
	for _, c := range [][2]string{
		{"[\"it's\", \"say \\\"hi\\\"\", \"both ' and \\\"\", \"a\\\\b\", \"\\u0000\\u001f\\u007f\\u0085\\u00a0\\u00ad\\u2028\\u200b\\ue000\\ud83d\\ude80e\\u0301\", \"tab\\tnl\\ncr\\r\"]", "[\"it's\", 'say \"hi\"', 'both \\' and \"', 'a\\\\b', '\\x00\\x1f\\x7f\\x85\\xa0\\xad\\u2028\\u200b\\ue000\U0001f680e\u0301', 'tab\\tnl\\ncr\\r']"},
		{"{\"k\": [true, false, null, 1, 2.0, 1e400, -1e400, 12345678901234567890, 1E2], \"\\u00e9\": {}, \"k\": 3}", "{'k': 3, '\u00e9': {}}"},
		{"true", "True"},
		{"null", "None"},
		{"2.5e-7", "2.5e-07"},
		{"\"plain \\u00e9\"", "plain \u00e9"},
		{"-0.0", "-0.0"},
		{"[1e400, -1e400, 1E2, 12345678901234567890]", "[inf, -inf, 100.0, 12345678901234567890]"},
	} {
		got, err := pyStr(json.RawMessage(c[0]))
		if err != nil || got != c[1] {
			t.Errorf("pyStr(%s) = %q, %v; want %q", c[0], got, err, c[1])
		}
	}
}
