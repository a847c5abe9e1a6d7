package chat

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/internal/testmodel"
)

// TestQwen35AgainstJinja renders the chat cases of the shared tiny-q35
// reference (copied into testdata): Hugging Face's renderings with
// Qwen3.5's template and Qwen3.6's.
func TestQwen35AgainstJinja(t *testing.T) {
	var cases []struct {
		Name, Template, Rendered string
		Messages                 []caseMessage
		Tools                    []json.RawMessage
		GenerationPrompt         bool  `json:"add_generation_prompt"`
		EnableThinking           *bool `json:"enable_thinking"`
		PreserveThinking         *bool `json:"preserve_thinking"`
	}
	testmodel.ReadJSON(t, "testdata/qwen35/chat_cases.json", &cases)
	if len(cases) < 8 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, c := range cases {
		f, err := Lookup(c.Template)
		if err != nil {
			t.Fatal(err)
		}
		o := Options{
			Tools:            caseTools(t, c.Name, c.Tools),
			GenerationPrompt: c.GenerationPrompt,
			NoThinking:       c.EnableThinking != nil && !*c.EnableThinking,
			PreserveThinking: c.PreserveThinking != nil && *c.PreserveThinking,
		}
		segs := render(t, f, caseMessages(t, c.Name, c.Messages), o)
		if got := Text(segs); got != c.Rendered {
			t.Errorf("%s (%s):\n got %q\nwant %q", c.Name, c.Template, got, c.Rendered)
		}
		checkSegments(t, segs)
	}
}

// TestQwen35Refuses: where the template raises an exception, Render
// fails, saying why.
func TestQwen35Refuses(t *testing.T) {
	for _, c := range []struct {
		msgs []Message
		want string
	}{
		{nil, "no messages"},
		{[]Message{{Role: "system", Content: "S"}}, "no user query"},
		{[]Message{{Role: "user", Content: " <tool_response>\nr\n</tool_response>\n"}}, "no user query"},
		{[]Message{{Role: "user", Content: "Q"}, {Role: "system", Content: "S"}}, "messages[1]: a system message comes first"},
		{[]Message{{Role: "user", Content: "Q"}, {Role: "narrator", Content: "N"}}, `messages[1]: role "narrator"`},
		{[]Message{{Role: "user", Content: "Q"}, {Role: "assistant", ToolCalls: []ToolCall{{Name: "f", Arguments: "[1]"}}}}, "messages[1]: tool_calls[0].arguments: want a JSON object"},
	} {
		for _, f := range []*Format{qwen35, qwen36} {
			_, err := f.Render(c.msgs, Options{GenerationPrompt: true})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %+v: error %v, want %q", f, c.msgs, err, c.want)
			}
		}
	}
	if _, err := chatML.Render([]Message{{Role: "user", Content: "Q"}}, Options{Tools: []Tool{{Name: "f"}}}); err == nil || !strings.Contains(err.Error(), "no tool format") {
		t.Errorf("tools given to plain ChatML: %v", err)
	}
}

// TestQwen35LaterSystem: with Options.LaterSystem a system message after
// the first is a system turn where it comes (its text trimmed, as every
// message's), with tools and without, and the first stays where the
// template puts it.
func TestQwen35LaterSystem(t *testing.T) {
	later := Message{Role: "system", Content: " Approval policy is now never.\n"}
	msgs := []Message{
		{Role: "system", Content: "S0"}, {Role: "user", Content: "Q"}, {Role: "assistant", Content: "A"},
		later, {Role: "user", Content: "Q2"},
	}
	without := append(append([]Message(nil), msgs[:3]...), msgs[4:]...)
	for _, f := range []*Format{qwen35, qwen36} {
		for _, tools := range [][]Tool{nil, {{Name: "f", def: `{"type":"function"}`}}} {
			o := Options{Tools: tools, GenerationPrompt: true, LaterSystem: true}
			base := Text(render(t, f, without, o))
			at := strings.Index(base, "<|im_start|>user\nQ2")
			if at < 0 {
				t.Fatalf("%s: no second query in %q", f, base)
			}
			want := base[:at] + "<|im_start|>system\nApproval policy is now never.<|im_end|>\n" + base[at:]
			segs := render(t, f, msgs, o)
			if got := Text(segs); got != want {
				t.Errorf("%s, %d tools:\n got %q\nwant %q", f, len(tools), got, want)
			}
			checkSegments(t, segs)
			if strings.Count(Text(segs), "S0") != 1 {
				t.Errorf("%s: the first system message rendered %d times", f, strings.Count(Text(segs), "S0"))
			}
		}
	}
}
