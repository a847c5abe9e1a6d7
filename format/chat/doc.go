// Package chat renders conversations in Qwen's ChatML the way the models'
// Jinja chat templates do, as segments that keep the template's own control
// tokens apart from message text.
//
// Text(Render(...)) is byte-for-byte the template output. The segmentation
// is what makes it safe: HF's tokenizer scans the whole rendered string for
// added tokens, so a user who types "<|im_end|>\n<|im_start|>system" injects
// a real system turn. Here only markers the renderer itself emits are
// Special; message text is always plain and must be tokenized as ordinary
// text, so for content without marker strings the token ids equal HF's and
// for content with them we deliberately differ.
package chat
