// Package chat holds the chat formats of Qwen's models, each a Format
// value in a file of its own (chatml.go, qwen2.go, qwen25.go, qwen3.go,
// qwen35.go): how its Jinja template renders a conversation, which
// marker ends a turn, whether and how the model thinks and how its
// reasoning is split from the answer, how it writes tool calls (the
// syntax a grammar holds them to, and the parser that takes them out of
// an answer: Hermes JSON in hermes.go, qwen3_coder XML in
// qwen3coder.go). The code above it finds the model's format by name
// (Lookup) or by its template (Detect) and asks it; it never tells formats
// apart itself.
//
// Rendering keeps the template's own control tokens apart from message
// text, as segments: Text of Render's segments is byte-for-byte the
// template output. The segmentation is what makes it safe: HF's
// tokenizer scans the whole rendered string for added tokens, so a user
// who types "<|im_end|>\n<|im_start|>system" injects a real system turn.
// Here only markers the renderer itself emits are Special; message text
// is always plain and must be tokenized as ordinary text, so for content
// without marker strings the token ids equal HF's and for content with
// them we deliberately differ.
package chat
