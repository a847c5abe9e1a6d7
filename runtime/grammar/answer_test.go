package grammar

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format/chat"
)

// TestTextWithout: text the KMP rules allow never spells the marker,
// whatever the tokens, and the masks agree with the plain definition.
func TestTextWithout(t *testing.T) {
	v, _ := qwenVocab(t)
	b := NewBuilder()
	g, err := b.Build(b.New("root", []Elem{textWithout(b, "<tool_call>")}), v)
	if err != nil {
		t.Fatal(err)
	}
	m := g.NewMatcher()
	mask := v.NewMask()
	rng := rand.New(rand.NewPCG(3, 3))
	var text []byte
	// Lean on tokens that spell the marker's pieces, to try the rules.
	var pieces []int32
	for id, tx := range v.text {
		if len(tx) > 0 && strings.Contains("<tool_call>", string(tx)) {
			pieces = append(pieces, int32(id))
		}
	}
	for step := range 300 {
		m.Fill(mask)
		if step%50 == 0 {
			want := referenceMask(m)
			for i := range want {
				if mask[i] != want[i] {
					t.Fatalf("after %q: mask differs from the definition at word %d", text, i)
				}
			}
		}
		id := pieces[rng.IntN(len(pieces))]
		if !mask.Has(id) {
			continue
		}
		if err := m.Accept(id); err != nil {
			t.Fatal(err)
		}
		text = append(text, v.text[id]...)
	}
	if strings.Contains(string(text), "<tool_call>") || len(text) < 100 {
		t.Fatalf("%q", text)
	}
}

// callSyntax is the tool-call syntax of a chat format.
func callSyntax(t testing.TB, format string) chat.CallSyntax {
	t.Helper()
	f, err := chat.Lookup(format)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := f.CallSyntax()
	if !ok {
		t.Fatalf("%s has no tool format", format)
	}
	return s
}

// TestAnswerToolChoice: "none" never allows the call marker; "required"
// allows nothing else first; think opens with the think marker, unless
// the prompt opened it.
func TestAnswerToolChoice(t *testing.T) {
	v, tok := qwenVocab(t)
	id := func(s string) int32 {
		x, _ := tok.TokenID(s)
		return x
	}
	open, close := id("<tool_call>"), id("</tool_call>")
	think, thought := id("<think>"), id("</think>")
	tools := []Tool{{Name: "f", Parameters: json.RawMessage(`{"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}`)}}
	hermes := callSyntax(t, "qwen3")
	mask := v.NewMask()
	for _, c := range []struct {
		a    Answer
		want func(Mask) bool
	}{
		{Answer{Tools: tools, Call: hermes, CallOpen: open, CallClose: close, Choice: "none"}, func(m Mask) bool { return !m.Has(open) && m.Count() > 100000 }},
		{Answer{Tools: tools, Call: hermes, CallOpen: open, CallClose: close, Choice: "required"}, func(m Mask) bool { return m.Has(open) && m.Count() < 5 }},
		{Answer{Tools: tools, Call: hermes, CallOpen: open, CallClose: close}, func(m Mask) bool { return m.Has(open) && m.Count() > 100000 }},
		{Answer{Object: true, Think: true, ThinkOpen: think, ThinkClose: thought}, func(m Mask) bool { return m.Count() == 1 && m.Has(think) }},
		{Answer{Object: true, Think: true, ThinkOpened: true, ThinkOpen: think, ThinkClose: thought}, func(m Mask) bool {
			return !m.Has(think) && m.Has(thought) && m.Count() > 100000
		}},
	} {
		g, err := Compile(v, c.a)
		if err != nil {
			t.Fatal(err)
		}
		g.NewMatcher().Fill(mask)
		if !c.want(mask) {
			t.Errorf("%+v: first mask has %d tokens, the call marker %v", c.a, mask.Count(), mask.Has(open))
		}
	}
	for _, c := range []struct {
		a    Answer
		want string
	}{
		{Answer{Tools: tools, Call: hermes, Choice: "function", Function: "g"}, `"g", which is not among the tools`},
		{Answer{Tools: tools}, "without the syntax of their calls"},
	} {
		if _, err := Compile(v, c.a); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.a, err, c.want)
		}
	}
}

// TestAnswerValueAndTools: a schema and tools together, as agents send a
// structured final answer's format with their tools: with tool_choice
// auto the answer is the value or calls, never text; none is the value
// alone; required is calls alone. Every walk that completes is one of
// what its choice allows, each valid.
func TestAnswerValueAndTools(t *testing.T) {
	v, tok := qwenVocab(t)
	id := func(s string) int32 {
		x, _ := tok.TokenID(s)
		return x
	}
	open, close := id("<tool_call>"), id("</tool_call>")
	params := `{"type": "object", "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["x"], "additionalProperties": false}`
	schema := `{"type": "object", "properties": {"k": {"enum": ["go", "if"]}}, "required": ["k"], "additionalProperties": false}`
	tools := []Tool{{Name: "f", Parameters: json.RawMessage(params)}}
	value, args := validator(t, schema), validator(t, params)
	for _, choice := range []string{"auto", "none", "required"} {
		g, err := Compile(v, Answer{Schema: json.RawMessage(schema), Tools: tools, Call: callSyntax(t, "qwen3"), CallOpen: open, CallClose: close, Choice: choice})
		if err != nil {
			t.Fatalf("%s: %v", choice, err)
		}
		values, calls := 0, 0
		for seed := range uint64(40) {
			text, done := generate(t, g, rand.New(rand.NewPCG(seed, 7)), 200)
			if !done {
				continue
			}
			// The walk's text leaves the call markers out (special
			// tokens): a call is its JSON, which a value cannot begin as.
			body := strings.TrimSpace(text)
			if strings.HasPrefix(body, `{"name": `) {
				calls++
				dec := json.NewDecoder(strings.NewReader(body))
				for dec.More() {
					var c struct {
						Name      string
						Arguments json.RawMessage
					}
					if err := dec.Decode(&c); err != nil || c.Name != "f" {
						t.Fatalf("%s: calls %q: %v", choice, text, err)
					}
					validate(t, args, string(c.Arguments), choice+" arguments")
				}
				continue
			}
			values++
			validate(t, value, body, choice+" value")
		}
		switch {
		case choice == "none" && calls > 0, choice == "required" && values > 0:
			t.Errorf("%s: %d values, %d calls", choice, values, calls)
		case choice == "auto" && (values == 0 || calls == 0):
			t.Errorf("auto: %d values, %d calls: want both", values, calls)
		}
	}
}
