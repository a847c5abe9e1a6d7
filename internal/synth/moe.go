package synth

import (
	"fmt"
	"slices"
)

// Qwen3_30BA3B is the real Qwen3-30B-A3B shape: 48 layers, each routing
// every token to 8 of 128 experts; about 30.5 billion parameters, 3.3
// billion of them active per token. Reduce Layers for a smaller file with
// the real tensor shapes: in BF16 each layer takes 1.25 GB, the embedding
// and the untied head 1.2 GB together.
func Qwen3_30BA3B() Shape {
	return Shape{ModelType: "qwen3_moe", Hidden: 2048, Intermediate: 6144, Layers: 48, Heads: 32, KVHeads: 4, HeadDim: 128,
		Vocab: 151936, MaxPositions: 40960, Tied: false, DType: "BF16", Seed: 1,
		Experts: 128, ExpertsPerToken: 8, MoEIntermediate: 768, NormTopKProb: true, DecoderSparseStep: 1, MLPOnlyLayers: []int{}}
}

// Sparse reports whether layer l has a sparse (mixture of experts) MLP, by
// transformers' rule in Qwen3MoeDecoderLayer.
func (s Shape) Sparse(l int) bool {
	return s.ModelType == "qwen3_moe" && s.Experts > 0 && !slices.Contains(s.MLPOnlyLayers, l) &&
		(l+1)%s.sparseStep() == 0
}

func (s Shape) sparseStep() int { return max(s.DecoderSparseStep, 1) }

// checkMoE refuses MoE fields that would make a checkpoint transformers
// cannot load, and MoE fields on a dense model type.
func (s Shape) checkMoE() error {
	if s.ModelType != "qwen3_moe" {
		if s.Experts != 0 || s.ExpertsPerToken != 0 || s.MoEIntermediate != 0 || len(s.MLPOnlyLayers) != 0 {
			return fmt.Errorf("synth: experts given for model type %s (want qwen3_moe)", s.ModelType)
		}
		return nil
	}
	switch {
	case s.Experts < 0:
		return fmt.Errorf("synth: %d experts", s.Experts)
	case s.Experts > 0 && (s.ExpertsPerToken < 1 || s.ExpertsPerToken > s.Experts):
		return fmt.Errorf("synth: %d experts per token of %d", s.ExpertsPerToken, s.Experts)
	case s.Experts > 0 && s.MoEIntermediate < 1:
		return fmt.Errorf("synth: expert width (moe_intermediate_size) %d", s.MoEIntermediate)
	case s.DecoderSparseStep < 0:
		return fmt.Errorf("synth: decoder_sparse_step %d", s.DecoderSparseStep)
	}
	for _, l := range s.MLPOnlyLayers {
		if l < 0 || l >= s.Layers {
			return fmt.Errorf("synth: mlp_only_layers names layer %d of %d", l, s.Layers)
		}
	}
	return nil
}

// addMoEConfig adds the Qwen3-MoE fields to config.json, under
// transformers' names.
func (s Shape) addMoEConfig(cfg map[string]any) {
	only := s.MLPOnlyLayers
	if only == nil {
		only = []int{} // [] as real checkpoints write it, not null
	}
	cfg["num_experts"] = s.Experts
	cfg["num_experts_per_tok"] = s.ExpertsPerToken
	cfg["moe_intermediate_size"] = s.MoEIntermediate
	cfg["norm_topk_prob"] = s.NormTopKProb
	cfg["decoder_sparse_step"] = s.sparseStep()
	cfg["mlp_only_layers"] = only
	cfg["attention_bias"] = false
	cfg["output_router_logits"] = false
	cfg["router_aux_loss_coef"] = 0.001
}
