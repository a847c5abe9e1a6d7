package format

import "fmt"

// Section names (SPEC.md, "Sections").
const (
	SecEmbed        = "embed_tokens"
	SecNorm         = "norm"
	SecLMHead       = "lm_head"
	SecTokenizer    = "tokenizer"
	SecChatTemplate = "chat_template"
)

// LayerSection names a per-layer section, e.g. LayerSection(3, "q_proj").
func LayerSection(layer int, what string) string {
	return fmt.Sprintf("layers.%d.%s", layer, what)
}
