package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// qwen35 is Qwen3.5's template: qwen3_coder's XML tool calls, and
// reasoning in a think block the generation prompt opens, kept only after
// the last user query. Every message's text is trimmed; the template
// refuses a conversation without a user query, and a system message
// anywhere but first (Options.LaterSystem renders one as a system turn).
var qwen35 = &Format{
	name:     "qwen3.5",
	detect:   func(t string) bool { return strings.Contains(t, "<function=") && strings.Contains(t, ThinkOpen) },
	thinking: &Thinking{Open: ThinkOpen, Close: ThinkClose, Opened: true},
	calls:    coderCalls,
	render: func(b *builder, msgs []Message, o Options) error {
		return renderQwen35(b, msgs, o, false)
	},
}

// qwen36 is Qwen3.6's template, Qwen3.5's with two lines changed:
// preserve_thinking keeps the reasoning of every earlier turn, and a call's
// argument values other than strings are printed as JSON (true, null)
// rather than as Python prints them (True, None).
var qwen36 = &Format{
	name:     "qwen3.6",
	detect:   func(t string) bool { return qwen35.detect(t) && strings.Contains(t, "preserve_thinking") },
	thinking: qwen35.thinking,
	calls:    coderCalls,
	render: func(b *builder, msgs []Message, o Options) error {
		return renderQwen35(b, msgs, o, true)
	},
}

// The Qwen3.5 template's instructions after the tools' list, split at
// the tool-call markers it writes (added tokens).
var qwen35ToolsText = []string{
	"\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n",
	ToolCallOpen,
	"\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n" +
		"<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n",
	ToolCallClose,
	"\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within ",
	ToolCallOpen,
	ToolCallClose,
	" XML tags\n- Required parameters MUST be specified\n" +
		"- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after\n" +
		"- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>",
}

// renderQwen35 mirrors Qwen3.5's chat_template, and Qwen3.6's with v36.
func renderQwen35(b *builder, msgs []Message, o Options, v36 bool) error {
	if len(msgs) == 0 {
		return errors.New("the conversation has no messages")
	}
	content := make([]string, len(msgs))
	for i, m := range msgs {
		content[i] = pyStrip(m.Content)
	}
	hasSystem := msgs[0].Role == "system"
	switch {
	case len(o.Tools) > 0:
		b.special(ImStart)
		b.text("system\n# Tools\n\nYou have access to the following functions:\n\n<tools>")
		for _, t := range o.Tools {
			b.text("\n", t.def)
		}
		for _, s := range qwen35ToolsText {
			if s == ToolCallOpen || s == ToolCallClose {
				b.special(s)
			} else {
				b.text(s)
			}
		}
		if hasSystem && content[0] != "" {
			b.text("\n\n", content[0])
		}
		b.special(ImEnd)
		b.text("\n")
	case hasSystem:
		b.turn("system", content[0])
	}
	last := -1 // ns.last_query_index: the last user message that is no wrapped tool response
	for i := len(msgs) - 1; i >= 0 && last < 0; i-- {
		c := content[i]
		if msgs[i].Role == "user" && !(strings.HasPrefix(c, ToolRespOpen) && strings.HasSuffix(c, ToolRespClose)) {
			last = i
		}
	}
	if last < 0 {
		return errors.New("the conversation has no user query (a user message that is not a tool response), which the chat template requires")
	}
	for i, m := range msgs {
		switch m.Role {
		case "system":
			switch {
			case i == 0:
			case o.LaterSystem:
				b.turn("system", content[i])
			default:
				return fmt.Errorf("messages[%d]: a system message comes first or not at all in this chat template", i)
			}
		case "user":
			b.turn("user", content[i])
		case "assistant":
			if err := qwen35Assistant(b, m, content[i], v36 && o.PreserveThinking || i > last, v36); err != nil {
				return fmt.Errorf("messages[%d]: %w", i, err)
			}
		case "tool":
			toolTurn(b, msgs, i, content[i], false)
		default:
			return fmt.Errorf("messages[%d]: role %q: this chat template knows system, user, assistant and tool", i, m.Role)
		}
	}
	return nil
}

// qwen35Assistant renders an assistant turn whose trimmed text is content,
// with its reasoning when think is set.
func qwen35Assistant(b *builder, m Message, content string, think, v36 bool) error {
	reasoning := m.Reasoning
	if reasoning == "" {
		content, reasoning = splitThink(content)
	}
	b.special(ImStart)
	if think {
		b.text("assistant\n")
		b.special(ThinkOpen)
		b.text("\n", pyStrip(reasoning), "\n")
		b.special(ThinkClose)
		b.text("\n\n", content)
	} else {
		b.text("assistant\n", content)
	}
	s := coderCalls.syntax
	for j, c := range m.ToolCalls {
		switch {
		case j > 0:
			b.text(s.Sep)
		case pyStrip(content) != "":
			b.text("\n\n")
		}
		if err := coderCall(b, c, v36); err != nil {
			return fmt.Errorf("tool_calls[%d].%w", j, err)
		}
	}
	b.special(ImEnd)
	b.text("\n")
	return nil
}

// coderCall writes a call as qwen3_coder's templates do, its values as
// coderValue prints them.
func coderCall(b *builder, c ToolCall, v36 bool) error {
	s := coderCalls.syntax
	b.special(s.Open)
	b.text(s.Head, c.Name, s.Mid)
	keys, vals, err := jsonItems(c.Arguments)
	if err != nil {
		return fmt.Errorf("arguments: %w", err)
	}
	for _, k := range keys {
		v, err := coderValue(vals[k], v36)
		if err != nil {
			return fmt.Errorf("arguments.%s: %w", k, err)
		}
		b.text(CoderParameter, k, ">\n", v, "\n"+CoderParameterEnd+"\n")
	}
	b.text(s.Tail)
	b.special(s.Close)
	return nil
}

// jsonItems reads the members of the JSON object text as the template
// iterates the dict Python parsed it to: a repeated key keeps its first
// place and its last value.
func jsonItems(text string) (keys []string, vals map[string]json.RawMessage, err error) {
	d := json.NewDecoder(strings.NewReader(text))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, errors.New("want a JSON object")
	}
	vals = map[string]json.RawMessage{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("invalid JSON: %w", err)
		}
		k := t.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, nil, fmt.Errorf("invalid JSON: %w", err)
		}
		if _, seen := vals[k]; !seen {
			keys = append(keys, k)
		}
		vals[k] = v
	}
	if _, err := d.Token(); err != nil {
		return nil, nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, nil, errors.New("invalid JSON: text after the object")
	}
	return keys, vals, nil
}

// coderValue prints an argument's value as the template does: a string
// as it is; a dict or a list through tojson; other values, by Qwen3.5's,
// as Python's str() prints them (True, None, 2.5) and by Qwen3.6's
// through tojson (true, null).
func coderValue(raw json.RawMessage, v36 bool) (string, error) {
	raw = bytes.TrimSpace(raw)
	if raw[0] == '{' || raw[0] == '[' || v36 && raw[0] != '"' {
		return ToJSON(raw)
	}
	return pyStr(raw)
}
