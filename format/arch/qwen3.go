package arch

import "github.com/qwenc/qwenc/format"

// qwen3 is dense Qwen3 (Qwen3ForCausalLM): a per-head RMSNorm of q and k
// before RoPE, q/k/v biases only if attention_bias says so, a dense SwiGLU
// MLP in every layer.
type qwen3 struct{}

func (qwen3) ModelType() string { return "qwen3" }

func (qwen3) Configure(c *format.Config, hf *HFConfig) error {
	c.QKNorm = true
	return hf.Bool("attention_bias", &c.QKVBias)
}

func (qwen3) Layer(c *format.Config, l int) []Tensor {
	return append(attentionTensors(c, layerTensors{l: l}), denseMLPTensors(c, layerTensors{l: l})...)
}

// Transform: the checkpoint's values are the file's.
func (qwen3) Transform(*format.Config, *Tensor) Transform { return Transform{} }

func (qwen3) BuildLayer(b *Builder, l int) {
	b.attention(l)
	b.denseMLP(l)
}
