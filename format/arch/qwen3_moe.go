package arch

import (
	"fmt"
	"slices"

	"github.com/qwenc/qwenc/format"
)

// qwen3MoE is Qwen3-MoE (Qwen3MoeForCausalLM, Qwen3-30B-A3B and its
// family): Qwen3's attention, and in the sparse layers an MLP of routed
// experts (transformers' Qwen3MoeSparseMoeBlock); the others keep a dense
// MLP of intermediate_size.
type qwen3MoE struct{}

func (qwen3MoE) ModelType() string { return "qwen3_moe" }

// Configure reads the expert fields with transformers' Qwen3MoeConfig
// defaults. A layer is sparse when it is not in mlp_only_layers and
// (index+1) is a multiple of decoder_sparse_step, as in
// Qwen3MoeDecoderLayer; indices in mlp_only_layers past the last layer
// mean nothing there either.
func (qwen3MoE) Configure(c *format.Config, hf *HFConfig) error {
	c.QKNorm = true
	if err := hf.Bool("attention_bias", &c.QKVBias); err != nil {
		return err
	}
	m := &c.MoE
	m.Experts, m.ExpertsPerToken, m.ExpertWidth = 128, 8, 768
	step := 1
	for _, f := range []struct {
		k   string
		dst *int
	}{{"num_experts", &m.Experts}, {"num_experts_per_tok", &m.ExpertsPerToken}, {"moe_intermediate_size", &m.ExpertWidth}, {"decoder_sparse_step", &step}} {
		if err := hf.Int(f.k, f.dst, false); err != nil {
			return err
		}
	}
	if m.ExpertsPerToken > m.Experts {
		return fmt.Errorf("field \"num_experts_per_tok\" = %d is more than num_experts = %d", m.ExpertsPerToken, m.Experts)
	}
	if err := hf.Bool("norm_topk_prob", &m.NormTopK); err != nil {
		return err
	}
	var dense []int
	if err := hf.Ints("mlp_only_layers", &dense); err != nil {
		return err
	}
	m.Sparse = make([]bool, c.Layers)
	for l := range m.Sparse {
		m.Sparse[l] = !slices.Contains(dense, l) && (l+1)%step == 0
	}
	return nil
}

func (qwen3MoE) Layer(c *format.Config, l int) []Tensor {
	if c.SparseLayer(l) {
		return append(attentionTensors(c, layerTensors{l: l}), moeTensors(c, layerTensors{l: l})...)
	}
	return append(attentionTensors(c, layerTensors{l: l}), denseMLPTensors(c, layerTensors{l: l})...)
}

// Transform: the checkpoint's values are the file's.
func (qwen3MoE) Transform(*format.Config, *Tensor) Transform { return Transform{} }

// Features: the routed experts, without a shared expert (Layer lists no
// sections for one).
func (qwen3MoE) Features() []string { return append(commonFeatures(), "moe") }

func (qwen3MoE) BuildLayer(b *Builder, l int) {
	b.attention(l)
	if b.C.SparseLayer(l) {
		b.moeMLP(l)
	} else {
		b.denseMLP(l)
	}
}

// GGUFArch: llama.cpp's name of Qwen3-MoE.
func (qwen3MoE) GGUFArch() string { return "qwen3moe" }

// ggufConfig reads the experts' keys. A layer without a router
// (blk.N.ffn_gate_inp.weight) is dense, as mlp_only_layers says; the
// routing weights are renormalised unless expert_weights_norm says not,
// as llama.cpp's qwen3moe always does.
func (qwen3MoE) ggufConfig(m GGUFMeta, f *ggufFields) error {
	attention := qwen3{}
	if err := attention.ggufConfig(m, f); err != nil {
		return err
	}
	f.copy("num_experts", "expert_count")
	// llama.cpp asserts a MoE model's expert_used_count is there.
	if err := f.required("expert_used_count"); err != nil {
		return err
	}
	f.copy("num_experts_per_tok", "expert_used_count")
	f.copy("moe_intermediate_size", "expert_feed_forward_length")
	f.set("norm_topk_prob", true, "llama.cpp's qwen3moe")
	f.copy("norm_topk_prob", "expert_weights_norm")
	layers, err := f.layers()
	if err != nil {
		return err
	}
	dense := []int{}
	for l := range layers {
		if !f.has(fmt.Sprintf("blk.%d.ffn_gate_inp.weight", l)) {
			dense = append(dense, l)
		}
	}
	f.set("mlp_only_layers", dense, "the layers without a tensor \"blk.N.ffn_gate_inp.weight\"")
	return nil
}

// GGUFTensor: llama.cpp stores Qwen3-MoE's tensors as the checkpoint has
// them, each kind of expert matrix stacked in one tensor.
func (qwen3MoE) GGUFTensor(c *format.Config, t *Tensor) GGUFSource {
	return GGUFSource{Name: ggufName(c, t, ggufLayerNames)}
}
