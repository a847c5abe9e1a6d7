package arch

import "github.com/qwenc/qwenc/format"

// qwen2 is Qwen2 and Qwen2.5 (Qwen2ForCausalLM): biases on the q, k and v
// projections, no q/k norm, a dense SwiGLU MLP in every layer.
type qwen2 struct{}

func (qwen2) ModelType() string { return "qwen2" }

func (qwen2) Configure(c *format.Config, hf *HFConfig) error {
	// transformers' Qwen2Attention always has q/k/v biases, whatever
	// attention_bias says.
	c.QKVBias = true
	return nil
}

func (qwen2) Layer(c *format.Config, l int) []Tensor {
	return append(attentionTensors(c, layerTensors{l: l}), denseMLPTensors(c, layerTensors{l: l})...)
}

// Transform: the checkpoint's values are the file's.
func (qwen2) Transform(*format.Config, *Tensor) Transform { return Transform{} }

// Features: the common ones alone.
func (qwen2) Features() []string { return commonFeatures() }

func (qwen2) BuildLayer(b *Builder, l int) {
	b.attention(l)
	b.denseMLP(l)
}

// GGUFArch: llama.cpp's name of Qwen2 and Qwen2.5.
func (qwen2) GGUFArch() string { return "qwen2" }

func (qwen2) ggufConfig(GGUFMeta, *ggufFields) error { return nil }

// GGUFTensor: llama.cpp stores Qwen2's tensors as the checkpoint has them.
func (qwen2) GGUFTensor(c *format.Config, t *Tensor) GGUFSource {
	return GGUFSource{Name: ggufName(c, t, ggufLayerNames)}
}
