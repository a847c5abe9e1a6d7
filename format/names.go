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

// Projections are the per-layer matrices, in file order within the layer.
var Projections = [...]string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// LayerSectionSpec describes one per-layer section the config requires.
type LayerSectionSpec struct {
	What   string
	DType  DType
	Layout Layout
	Shape  []uint64
}

// LayerSections lists the sections one layer has, in file order.
func LayerSections(c *Config) []LayerSectionSpec {
	h, q, kv, f, hd := uint64(c.Hidden), uint64(c.QDim()), uint64(c.KVDim()), uint64(c.Intermediate), uint64(c.HeadDim)
	mat := func(what string, n, k uint64) LayerSectionSpec {
		return LayerSectionSpec{what, F16, TileMajor, []uint64{n, k}}
	}
	vec := func(what string, n uint64) LayerSectionSpec {
		return LayerSectionSpec{what, F32, RowMajor, []uint64{n}}
	}
	s := []LayerSectionSpec{vec("input_layernorm", h), mat("q_proj", q, h), mat("k_proj", kv, h), mat("v_proj", kv, h)}
	if c.QKVBias {
		s = append(s, vec("q_bias", q), vec("k_bias", kv), vec("v_bias", kv))
	}
	if c.QKNorm {
		s = append(s, vec("q_norm", hd), vec("k_norm", hd))
	}
	return append(s, mat("o_proj", h, q), vec("post_attention_layernorm", h),
		mat("gate_proj", f, h), mat("up_proj", f, h), mat("down_proj", h, f))
}
