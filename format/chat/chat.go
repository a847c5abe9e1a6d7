package chat

import "strings"

// Message is one turn of a conversation.
type Message struct {
	Role    string // "system", "user", "assistant" or "tool"
	Content string
	// Reasoning is Qwen3's reasoning_content. When empty, the template's
	// fallback applies: a <think>...</think> block is split off Content.
	// (Jinja distinguishes an empty reasoning_content from a missing one;
	// we treat empty as missing, the only case a raw transcript produces.)
	Reasoning string
	// ToolCalls are the calls an assistant turn made, printed after its
	// content as Qwen's tool format.
	ToolCalls []ToolCall
}

// Segment is a piece of rendered prompt. Special segments are control
// markers to encode as their added-token ids; the others are plain text.
// Render never emits two plain segments in a row, because HF tokenizes each
// stretch between added tokens as one string and splitting it could change
// the BPE result.
type Segment struct {
	Text    string
	Special bool
}

// Markers the renderer emits as Special segments.
const (
	ImStart       = "<|im_start|>"
	ImEnd         = "<|im_end|>"
	ThinkOpen     = "<think>"
	ThinkClose    = "</think>"
	ToolRespOpen  = "<tool_response>"
	ToolRespClose = "</tool_response>"
)

// Text concatenates the segments: the exact string the Jinja template
// produces.
func Text(segs []Segment) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteString(s.Text)
	}
	return b.String()
}

// CommonPrefix returns the length of the longest common prefix of a and b.
// The interactive loop keeps its KV cache across turns and re-prefills from
// this position: Qwen3 drops earlier <think> blocks from the history once a
// new user turn arrives, and re-tokenized replies need not match the sampled
// ids, so the cache is only valid up to the first differing token.
func CommonPrefix[T comparable](a, b []T) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// builder accumulates segments, merging adjacent plain text.
type builder struct{ segs []Segment }

func (b *builder) special(s string) {
	b.segs = append(b.segs, Segment{Text: s, Special: true})
}

func (b *builder) text(parts ...string) {
	s := strings.Join(parts, "")
	if s == "" {
		return
	}
	if n := len(b.segs); n > 0 && !b.segs[n-1].Special {
		b.segs[n-1].Text += s
		return
	}
	b.segs = append(b.segs, Segment{Text: s})
}

// turn emits <|im_start|>{role}\n{content}<|im_end|>\n.
func (b *builder) turn(role, content string) {
	b.special(ImStart)
	b.text(role, "\n", content)
	b.special(ImEnd)
	b.text("\n")
}

// Render renders msgs for family f, with tools listed in the system turn
// when there are any (Qwen3 and Qwen2.5 only: the families without a tool
// format ignore them, so check SupportsTools first). addGenerationPrompt
// appends the opening of an assistant turn; enableThinking=false
// (--no-think) makes Qwen3's prompt carry an empty think block, as
// enable_thinking=false does, and is ignored by other families.
//
// Where the templates would fail (no messages at all) Render still returns
// the generation prompt alone.
func Render(f Family, msgs []Message, tools []Tool, addGenerationPrompt, enableThinking bool) []Segment {
	b := &builder{segs: make([]Segment, 0, 4*len(msgs)+8)}
	switch f {
	case Qwen3:
		renderQwen3(b, msgs, tools)
	case Qwen25:
		renderQwen25(b, msgs, tools)
	default:
		renderChatML(b, msgs, f.DefaultSystem())
	}
	if addGenerationPrompt {
		b.special(ImStart)
		b.text("assistant\n")
		if f == Qwen3 && !enableThinking {
			b.special(ThinkOpen)
			b.text("\n\n")
			b.special(ThinkClose)
			b.text("\n\n")
		}
	}
	return b.segs
}

// renderChatML is the Qwen2-Instruct/Qwen1.5 template (and plain ChatML when
// defaultSystem is empty): every message verbatim, whatever its role.
func renderChatML(b *builder, msgs []Message, defaultSystem string) {
	if defaultSystem != "" && len(msgs) > 0 && msgs[0].Role != "system" {
		b.turn("system", defaultSystem)
	}
	for _, m := range msgs {
		b.turn(m.Role, m.Content)
	}
}

// renderQwen25 is Qwen2.5's template: user, system, assistant and tool
// turns; other roles are dropped, as the template does.
func renderQwen25(b *builder, msgs []Message, tools []Tool) {
	hasSystem := len(msgs) > 0 && msgs[0].Role == "system"
	switch {
	case len(tools) > 0:
		system := Qwen25.DefaultSystem()
		if hasSystem {
			system = msgs[0].Content
		}
		toolsSystem(b, tools, system+"\n\n")
	case !hasSystem:
		b.turn("system", Qwen25.DefaultSystem())
	}
	for i, m := range msgs {
		switch {
		case m.Role == "system" && i == 0 && len(tools) > 0:
		case m.Role == "assistant" && len(m.ToolCalls) > 0:
			b.special(ImStart)
			b.text("assistant")
			if m.Content != "" {
				b.text("\n", m.Content)
			}
			for _, c := range m.ToolCalls {
				b.text("\n")
				toolCall(b, c, true)
			}
			b.special(ImEnd)
			b.text("\n")
		case m.Role == "system" || m.Role == "user" || m.Role == "assistant":
			b.turn(m.Role, m.Content)
		case m.Role == "tool":
			toolTurn(b, msgs, i)
		}
	}
}

// toolTurn renders a tool result; consecutive results share one user turn.
func toolTurn(b *builder, msgs []Message, i int) {
	if i == 0 || msgs[i-1].Role != "tool" {
		b.special(ImStart)
		b.text("user")
	}
	b.text("\n")
	b.special(ToolRespOpen)
	b.text("\n", msgs[i].Content, "\n")
	b.special(ToolRespClose)
	if i == len(msgs)-1 || msgs[i+1].Role != "tool" {
		b.special(ImEnd)
		b.text("\n")
	}
}
