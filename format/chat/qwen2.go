package chat

import "strings"

// qwen2System is the system prompt of Qwen2-Instruct's template.
const qwen2System = "You are a helpful assistant."

// qwen2 is the Qwen2-Instruct (and Qwen1.5) template: ChatML with a
// default system prompt.
var qwen2 = &Format{
	name:          "qwen2",
	detect:        func(t string) bool { return strings.Contains(t, qwen2System) },
	defaultSystem: qwen2System,
	render: func(b *builder, msgs []Message, _ Options) error {
		renderChatML(b, msgs, qwen2System)
		return nil
	},
}
