package chat

import "strings"

// qwen25System is the system prompt of Qwen2.5's template.
const qwen25System = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

// qwen25 is Qwen2.5's template: ChatML with a default system prompt,
// Hermes tool calls with their arguments printed through tojson, tool
// results wrapped in <tool_response>, and turns of other roles dropped.
var qwen25 = &Format{
	name:          "qwen2.5",
	detect:        func(t string) bool { return strings.Contains(t, "You are Qwen, created by Alibaba Cloud") },
	defaultSystem: qwen25System,
	calls:         hermesCalls,
	render:        renderQwen25,
}

func renderQwen25(b *builder, msgs []Message, o Options) error {
	hasSystem := len(msgs) > 0 && msgs[0].Role == "system"
	switch {
	case len(o.Tools) > 0:
		system := qwen25System
		if hasSystem {
			system = msgs[0].Content
		}
		hermesSystem(b, o.Tools, system+"\n\n")
	case !hasSystem:
		b.turn("system", qwen25System)
	}
	for i, m := range msgs {
		switch {
		case m.Role == "system" && i == 0 && len(o.Tools) > 0:
		case m.Role == "assistant" && len(m.ToolCalls) > 0:
			b.special(ImStart)
			b.text("assistant")
			if m.Content != "" {
				b.text("\n", m.Content)
			}
			for _, c := range m.ToolCalls {
				b.text("\n")
				hermesCall(b, c, true)
			}
			b.special(ImEnd)
			b.text("\n")
		case m.Role == "system" || m.Role == "user" || m.Role == "assistant":
			b.turn(m.Role, m.Content)
		case m.Role == "tool":
			toolTurn(b, msgs, i, m.Content, true)
		}
	}
	return nil
}
