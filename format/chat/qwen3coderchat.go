package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// qwen3Coder is Qwen3-Coder's template (Qwen3-Coder-30B-A3B-Instruct,
// -480B-A35B): qwen3_coder's XML tool calls, as Qwen3.5's, with no
// reasoning, and its tools listed in XML of its own (each function's
// name, description and parameters as elements, the schema's other
// members as elements beside them). Messages are printed as they come,
// untrimmed, but for the text before an assistant's calls.
var qwen3Coder = &Format{
	name:   "qwen3-coder",
	detect: func(t string) bool { return strings.Contains(t, "<function=") && strings.Contains(t, "<parameters>") },
	calls:  coderCalls,
	render: renderQwen3Coder,
}

// qwen3CoderSystem is the system message the template writes when it
// lists tools and the conversation has none.
const qwen3CoderSystem = "You are Qwen, a helpful AI assistant that can interact with a computer to solve tasks."

// renderQwen3Coder mirrors Qwen3-Coder's chat_template.
func renderQwen3Coder(b *builder, msgs []Message, o Options) error {
	if len(msgs) == 0 {
		return errors.New("the conversation has no messages")
	}
	loop := msgs
	system, hasSystem := "", msgs[0].Role == "system"
	if hasSystem {
		system, loop = msgs[0].Content, msgs[1:]
	}
	if hasSystem || len(o.Tools) > 0 {
		if !hasSystem {
			system = qwen3CoderSystem
		}
		b.special(ImStart)
		b.text("system\n", system)
		if len(o.Tools) > 0 {
			b.text("\n\n# Tools\n\nYou have access to the following functions:\n\n<tools>")
			for i, t := range o.Tools {
				if err := coderTool(b, t); err != nil {
					return fmt.Errorf("tools[%d]: %w", i, err)
				}
			}
			// The instructions after the list are Qwen3.5's.
			for _, s := range qwen35ToolsText {
				if s == ToolCallOpen || s == ToolCallClose {
					b.special(s)
				} else {
					b.text(s)
				}
			}
		}
		b.special(ImEnd)
		b.text("\n")
	}
	for i, m := range loop {
		at := i
		if hasSystem {
			at++
		}
		switch {
		case m.Role == "assistant" && len(m.ToolCalls) > 0:
			if err := coderAssistant(b, m); err != nil {
				return fmt.Errorf("messages[%d]: %w", at, err)
			}
		case m.Role == "tool":
			// Results in a row share a user turn; one that comes first
			// after the system message opens none, as the template's
			// loop.previtem is then undefined.
			if i > 0 && loop[i-1].Role != "tool" {
				b.special(ImStart)
				b.text("user\n")
			}
			b.special(ToolRespOpen)
			b.text("\n", m.Content, "\n")
			b.special(ToolRespClose)
			b.text("\n")
			if i == len(loop)-1 || loop[i+1].Role != "tool" {
				b.special(ImEnd)
				b.text("\n")
			}
		default:
			b.turn(m.Role, m.Content)
		}
	}
	return nil
}

// coderAssistant renders an assistant turn with calls: its text trimmed,
// then each call.
func coderAssistant(b *builder, m Message) error {
	b.special(ImStart)
	b.text("assistant")
	if c := pyStrip(m.Content); c != "" {
		b.text("\n", c, "\n")
	}
	for j, c := range m.ToolCalls {
		b.text("\n")
		if err := coderCall(b, c, false); err != nil {
			return fmt.Errorf("tool_calls[%d].%w", j, err)
		}
	}
	b.special(ImEnd)
	b.text("\n")
	return nil
}

// coderTool lists a tool as the template does:
//
//	<function>
//	<name>NAME</name>
//	<description>...</description>
//	<parameters>
//	<parameter>
//	<name>P</name>
//	<type>...</type>
//	<description>...</description>
//	<KEY>VALUE</KEY>...
//	</parameter>...
//	<KEY>VALUE</KEY>...
//	</parameters>
//	<KEY>VALUE</KEY>...
//	</function>
//
// where the KEYs are the members the elements before them leave out,
// each value printed as coderExtra says.
func coderTool(b *builder, t Tool) error {
	keys, vals, err := jsonItems(t.def)
	if err != nil {
		return err
	}
	if f, ok := vals["function"]; ok && isObject(f) {
		if keys, vals, err = jsonItems(string(f)); err != nil {
			return fmt.Errorf("function: %w", err)
		}
	}
	name, err := pyStr(vals["name"])
	if err != nil {
		return fmt.Errorf("name: %w", err)
	}
	b.text("\n<function>\n<name>", name, "</name>")
	if err := coderDescription(b, vals); err != nil {
		return err
	}
	b.text("\n<parameters>")
	params := vals["parameters"]
	if isObject(params) {
		pkeys, pvals, err := jsonItems(string(params))
		if err != nil {
			return fmt.Errorf("parameters: %w", err)
		}
		if props := pvals["properties"]; isObject(props) {
			names, fields, err := jsonItems(string(props))
			if err != nil {
				return fmt.Errorf("parameters.properties: %w", err)
			}
			for _, n := range names {
				if err := coderParameter(b, n, fields[n]); err != nil {
					return fmt.Errorf("parameters.properties.%s: %w", n, err)
				}
			}
		}
		if err := coderExtra(b, pkeys, pvals, "type", "properties"); err != nil {
			return fmt.Errorf("parameters: %w", err)
		}
	}
	b.text("\n</parameters>")
	if err := coderExtra(b, keys, vals, "type", "name", "description", "parameters"); err != nil {
		return err
	}
	b.text("\n</function>")
	return nil
}

// coderParameter lists one of a tool's parameters, whose schema is raw.
func coderParameter(b *builder, name string, raw json.RawMessage) error {
	b.text("\n<parameter>\n<name>", name, "</name>")
	if isObject(raw) {
		keys, vals, err := jsonItems(string(raw))
		if err != nil {
			return err
		}
		if t, ok := vals["type"]; ok {
			s, err := pyStr(t)
			if err != nil {
				return fmt.Errorf("type: %w", err)
			}
			b.text("\n<type>", s, "</type>")
		}
		if err := coderDescription(b, vals); err != nil {
			return err
		}
		if err := coderExtra(b, keys, vals, "name", "type", "description"); err != nil {
			return err
		}
	}
	b.text("\n</parameter>")
	return nil
}

// coderDescription writes an object's description, trimmed, if it has
// one.
func coderDescription(b *builder, vals map[string]json.RawMessage) error {
	d, ok := vals["description"]
	if !ok {
		return nil
	}
	s, err := pyStr(d)
	if err != nil {
		return fmt.Errorf("description: %w", err)
	}
	b.text("\n<description>", pyStrip(s), "</description>")
	return nil
}

// coderExtra writes the template's render_extra_keys: each member of an
// object but the handled ones, as <KEY>VALUE</KEY>, printed by the rule
// of a call's values (coderValue): a dict or a list as tojson prints it,
// anything else as Python's str() does.
func coderExtra(b *builder, keys []string, vals map[string]json.RawMessage, handled ...string) error {
	for _, k := range keys {
		if slices.Contains(handled, k) {
			continue
		}
		s, err := coderValue(vals[k], false)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		b.text("\n<", k, ">", s, "</", k, ">")
	}
	return nil
}

// isObject reports whether a JSON text is an object.
func isObject(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return len(s) > 0 && s[0] == '{'
}
