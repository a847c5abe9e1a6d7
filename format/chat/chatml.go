package chat

// chatML is plain ChatML: every message verbatim, whatever its role, and
// no default system prompt. A ChatML template no other format claims is
// this one.
var chatML = &Format{
	name:   "chatml",
	detect: func(string) bool { return true },
	render: func(b *builder, msgs []Message, _ Options) error {
		renderChatML(b, msgs, "")
		return nil
	},
}

// renderChatML renders every message verbatim, after defaultSystem's turn
// when it is not empty and the conversation does not open with a system
// message.
func renderChatML(b *builder, msgs []Message, defaultSystem string) {
	if defaultSystem != "" && len(msgs) > 0 && msgs[0].Role != "system" {
		b.turn("system", defaultSystem)
	}
	for _, m := range msgs {
		b.turn(m.Role, m.Content)
	}
}
