package chat

import "strings"

// qwen3 is Qwen3's template: Hermes tool calls, and reasoning in a think
// block the model opens itself, kept only after the last user query and
// switched off (enable_thinking=false) by an empty block in the
// generation prompt.
var qwen3 = &Format{
	name:     "qwen3",
	detect:   func(t string) bool { return strings.Contains(t, ThinkOpen) },
	thinking: &Thinking{Open: ThinkOpen, Close: ThinkClose},
	calls:    hermesCalls,
	render:   renderQwen3,
}

func renderQwen3(b *builder, msgs []Message, o Options) error {
	if len(o.Tools) > 0 {
		system := ""
		if len(msgs) > 0 && msgs[0].Role == "system" {
			system = msgs[0].Content + "\n\n"
		}
		hermesSystem(b, o.Tools, system)
	}
	last := lastQueryIndex(msgs)
	for i, m := range msgs {
		switch m.Role {
		case "system", "user":
			if i == 0 && m.Role == "system" && len(o.Tools) > 0 {
				continue
			}
			b.turn(m.Role, m.Content)
		case "assistant":
			qwen3Assistant(b, m, i > last, i == len(msgs)-1)
		case "tool":
			toolTurn(b, msgs, i, m.Content, true)
		}
	}
	return nil
}

// lastQueryIndex is the template's ns.last_query_index: the last user message
// that is not a wrapped tool response, or the last message if there is none.
func lastQueryIndex(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		c := msgs[i].Content
		if msgs[i].Role == "user" && !(strings.HasPrefix(c, ToolRespOpen) && strings.HasSuffix(c, ToolRespClose)) {
			return i
		}
	}
	return len(msgs) - 1
}

// qwen3Assistant renders an assistant turn. Reasoning survives only after the
// last user query (the current agentic step); earlier turns lose their think
// block, which is why a new user turn invalidates the KV cache from the
// previous answer on.
func qwen3Assistant(b *builder, m Message, afterLastQuery, isLast bool) {
	content, reasoning := m.Content, m.Reasoning
	if reasoning == "" {
		content, reasoning = splitThink(content)
	}
	b.special(ImStart)
	// Jinja tests the reasoning for truthiness before stripping it, so a
	// reasoning of "\n" still produces an (empty) think block.
	if afterLastQuery && (isLast || reasoning != "") {
		b.text("assistant\n")
		b.special(ThinkOpen)
		b.text("\n", strings.Trim(reasoning, "\n"), "\n")
		b.special(ThinkClose)
		b.text("\n\n", strings.TrimLeft(content, "\n"))
	} else {
		b.text("assistant\n", content)
	}
	for i, c := range m.ToolCalls {
		if i > 0 || content != "" {
			b.text("\n")
		}
		hermesCall(b, c, false)
	}
	b.special(ImEnd)
	b.text("\n")
}

// splitThink is the template's fallback when reasoning_content is absent:
//
//	content   = content.split('</think>')[-1].lstrip('\n')
//	reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
//
// Note the asymmetry: the answer follows the last </think>, the reasoning
// precedes the first one.
func splitThink(content string) (answer, reasoning string) {
	first := strings.Index(content, ThinkClose)
	if first < 0 {
		return content, ""
	}
	lastEnd := strings.LastIndex(content, ThinkClose) + len(ThinkClose)
	answer = strings.TrimLeft(content[lastEnd:], "\n")
	reasoning = strings.TrimRight(content[:first], "\n")
	if i := strings.LastIndex(reasoning, ThinkOpen); i >= 0 {
		reasoning = reasoning[i+len(ThinkOpen):]
	}
	return answer, strings.TrimLeft(reasoning, "\n")
}
