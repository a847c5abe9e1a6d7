package chat

import (
	"slices"
	"strings"
)

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
	// ToolCallID, of a tool message, is the ToolCall.ID of the call it
	// answers (OpenAI's tool_call_id, Anthropic's tool_use_id). The
	// templates do not print it: the model pairs results with its calls
	// by their order, which OrderToolResults restores from these ids.
	ToolCallID string
}

// OrderToolResults puts the tool messages that answer an assistant turn
// in the order of its calls, when each names by ToolCallID a different
// call of that turn: a client may send parallel calls' results in the
// order they finished, and the template, which prints no ids, would pair
// them with the wrong calls. Otherwise it leaves them as they are. msgs
// is not modified; the result shares it when nothing moves.
func OrderToolResults(msgs []Message) []Message {
	out := msgs
	for i := 0; i < len(msgs); i++ {
		calls := msgs[i].ToolCalls
		if msgs[i].Role != "assistant" || len(calls) < 2 {
			continue
		}
		n := 0
		for i+1+n < len(msgs) && msgs[i+1+n].Role == "tool" {
			n++
		}
		results := msgs[i+1 : i+1+n]
		at := make(map[string]int, len(calls)) // a call's ID to its place
		for j, c := range calls {
			at[c.ID] = j
		}
		if n != len(calls) || len(at) != n {
			continue
		}
		ordered, moved := make([]Message, n), false
		for k, r := range results {
			j, ok := at[r.ToolCallID]
			if !ok || r.ToolCallID == "" || ordered[j].Role != "" {
				moved = false
				break
			}
			ordered[j], moved = r, moved || j != k
		}
		if !moved {
			continue
		}
		if &out[0] == &msgs[0] {
			out = slices.Clone(msgs)
		}
		copy(out[i+1:], ordered)
	}
	return out
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

// toolTurn renders the tool result msgs[i], whose text is content;
// consecutive results share one user turn. openFirst opens that turn for
// a result that is the conversation's first message too, as every
// template but Qwen3.5's does.
func toolTurn(b *builder, msgs []Message, i int, content string, openFirst bool) {
	if i == 0 && openFirst || i > 0 && msgs[i-1].Role != "tool" {
		b.special(ImStart)
		b.text("user")
	}
	b.text("\n")
	b.special(ToolRespOpen)
	b.text("\n", content, "\n")
	b.special(ToolRespClose)
	if i == len(msgs)-1 || msgs[i+1].Role != "tool" {
		b.special(ImEnd)
		b.text("\n")
	}
}

// firstOf finds the first of the markers in s: its index, or -1.
func firstOf(s string, markers ...string) (int, string) {
	at, which := -1, ""
	for _, m := range markers {
		if i := strings.Index(s, m); i >= 0 && (at < 0 || i < at) {
			at, which = i, m
		}
	}
	return at, which
}

// heldPrefix is the length of the longest end of s that begins one of
// the markers.
func heldPrefix(s string, markers ...string) int {
	longest := 0
	for _, m := range markers {
		longest = max(longest, len(m))
	}
	for n := min(len(s), longest-1); n > 0; n-- {
		for _, m := range markers {
			if n < len(m) && strings.HasPrefix(m, s[len(s)-n:]) {
				return n
			}
		}
	}
	return 0
}
