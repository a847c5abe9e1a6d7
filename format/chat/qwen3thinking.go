package chat

import "strings"

// qwen3Thinking is the template of Qwen3's thinking-only releases
// (Qwen3-4B-Thinking-2507, Qwen3-30B-A3B-Thinking-2507): Qwen3's, but its
// generation prompt opens the think block itself, so the answer begins in
// the reasoning and holds only the close marker. Read as Qwen3's, the
// prompt lacked the open marker and the reasoning came back as content.
var qwen3Thinking = &Format{
	name: "qwen3-thinking",
	detect: func(t string) bool {
		return qwen3.detect(t) && strings.Contains(t, `'<|im_start|>assistant\n<think>\n'`)
	},
	thinking: &Thinking{Open: ThinkOpen, Close: ThinkClose, Opened: true, Always: true},
	calls:    hermesCalls,
	render:   renderQwen3,
}
