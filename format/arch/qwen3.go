package arch

import "github.com/qwenc/qwenc/format"

// qwen3 is dense Qwen3 (Qwen3ForCausalLM): a per-head RMSNorm of q and k
// before RoPE, q/k/v biases only if attention_bias says so, a dense SwiGLU
// MLP in every layer.
type qwen3 struct{}

func (qwen3) ModelType() string { return "qwen3" }

// Configure: a config without head_dim has transformers' Qwen3Config's
// 128, not the hidden size over the heads (Qwen2's and Qwen3-MoE's).
func (qwen3) Configure(c *format.Config, hf *HFConfig) error {
	c.QKNorm = true
	if _, ok := hf.present("head_dim"); !ok {
		c.HeadDim = 128
	}
	return hf.Bool("attention_bias", &c.QKVBias)
}

func (qwen3) Layer(c *format.Config, l int) []Tensor {
	return append(attentionTensors(c, layerTensors{l: l}), denseMLPTensors(c, layerTensors{l: l})...)
}

// Transform: the checkpoint's values are the file's.
func (qwen3) Transform(*format.Config, *Tensor) Transform { return Transform{} }

// Features: the common ones alone.
func (qwen3) Features() []string { return commonFeatures() }

func (qwen3) BuildLayer(b *Builder, l int) {
	b.attention(l)
	b.denseMLP(l)
}

// GGUFArch: llama.cpp's name of dense Qwen3.
func (qwen3) GGUFArch() string { return "qwen3" }

// ggufConfig: q/k/v biases when the file has them (attention_bias).
func (qwen3) ggufConfig(m GGUFMeta, f *ggufFields) error {
	f.set("attention_bias", f.has("blk.0.attn_q.bias"), "the presence of tensor \"blk.0.attn_q.bias\"")
	return nil
}

// GGUFTensor: llama.cpp stores Qwen3's tensors as the checkpoint has them.
func (qwen3) GGUFTensor(c *format.Config, t *Tensor) GGUFSource {
	return GGUFSource{Name: ggufName(c, t, ggufLayerNames)}
}
