package synth

import (
	"fmt"
	"math"
	"reflect"
	"slices"
)

// Qwen35 holds the fields of a Shape that only the Qwen3.5 family has,
// under the names of the design note (qwen35.md, sections 1 to 3). The
// other dimensions are Shape's: Hidden, Layers, Heads, KVHeads, HeadDim
// (attention), Intermediate (dense FFN), Experts, ExpertsPerToken,
// MoEIntermediate (MoE).
type Qwen35 struct {
	// LayerTypes names each layer's token mixer, "linear_attention" (Gated
	// DeltaNet) or "full_attention"; nil means every
	// FullAttentionInterval-th layer is full attention (transformers' rule,
	// and what config.json's layer_types then says).
	LayerTypes            []string
	FullAttentionInterval int // 0 means 4
	// The Gated DeltaNet layers: key heads nk and value heads nv (a
	// multiple of nk) of dims dk and dv, and the causal conv's kernel.
	LinearKeyHeads     int
	LinearValueHeads   int
	LinearKeyHeadDim   int
	LinearValueHeadDim int
	ConvKernel         int
	// PartialRotaryFactor is the share of each attention head that RoPE
	// rotates; RopeTheta its base, 0 meaning the family's 1e7.
	PartialRotaryFactor float64
	RopeTheta           float64
	// SharedExpertIntermediate is the width of Qwen3.5-MoE's shared expert.
	SharedExpertIntermediate int
	// MTPLayers is mtp_num_hidden_layers: the layers of the MTP block
	// (mtp.*), which also has its own fc and norms when it is not 0.
	MTPLayers int
	// Vision adds a small vision tower (model.visual.*, one block of
	// width 32) and its vision_config, as every shipped checkpoint has a
	// tower that a text engine skips. It is not the real tower's size.
	Vision bool
	// TextOnly lays the checkpoint out as Qwen3_5ForCausalLM: config.json
	// without text_config nesting (model_type qwen3_5_text) and the text
	// model under model. rather than model.language_model.
	TextOnly bool
	// ExpertLayout chooses how Qwen3.5-MoE's expert weights are stored.
	ExpertLayout ExpertLayout
}

// ExpertLayout is how a Qwen3.5-MoE checkpoint stores its experts.
type ExpertLayout string

const (
	// ShippedExperts, the default, is Qwen3.5-35B-A3B's: fused in the
	// main layers, one set of tensors per expert in the MTP layer.
	ShippedExperts ExpertLayout = ""
	// FusedExperts stores every layer's experts as two 3-D tensors without
	// ".weight": mlp.experts.gate_up_proj [E, 2·M, H] (each expert's gate
	// rows, then its up rows) and mlp.experts.down_proj [E, H, M].
	FusedExperts ExpertLayout = "fused"
	// PerExpert stores mlp.experts.E.{gate,up,down}_proj.weight in every
	// layer, as Qwen3-MoE does.
	PerExpert ExpertLayout = "per-expert"
)

// Hybrid reports whether s is of the Qwen3.5 family.
func (s Shape) Hybrid() bool { return s.ModelType == "qwen3_5" || s.ModelType == "qwen3_5_moe" }

// qwen35 returns the shape of a Qwen3.5 text model with the family's
// constants (section 1 of the design note); the callers fill in the sizes.
func qwen35(modelType string) Shape {
	return Shape{ModelType: modelType, HeadDim: 256, Vocab: 248320, MaxPositions: 262144, DType: "BF16", Seed: 1,
		Qwen35: Qwen35{FullAttentionInterval: 4, LinearKeyHeads: 16, LinearKeyHeadDim: 128, LinearValueHeadDim: 128,
			ConvKernel: 4, PartialRotaryFactor: 0.25, RopeTheta: 1e7, MTPLayers: 1, Vision: true}}
}

// qwen35Dense returns a dense Qwen3.5 shape of the family table.
func qwen35Dense(layers, hidden, ffn, heads, kvHeads, valueHeads int, tied bool) Shape {
	s := qwen35("qwen3_5")
	s.Layers, s.Hidden, s.Intermediate, s.Heads, s.KVHeads, s.Tied = layers, hidden, ffn, heads, kvHeads, tied
	s.LinearValueHeads = valueHeads
	return s
}

// qwen35MoE returns a Qwen3.5-MoE shape of the family table.
func qwen35MoE(layers, hidden, expertFFN, heads, kvHeads, valueHeads, experts, perToken int) Shape {
	s := qwen35("qwen3_5_moe")
	s.Layers, s.Hidden, s.Heads, s.KVHeads = layers, hidden, heads, kvHeads
	s.LinearValueHeads = valueHeads
	s.Experts, s.ExpertsPerToken, s.MoEIntermediate, s.SharedExpertIntermediate = experts, perToken, expertFFN, expertFFN
	return s
}

// The real shapes of the Qwen3.5 family follow, from the design note's
// table (the Qwen3.6 models share the 27B's and the 35B-A3B's). Reduce
// Layers for a slice with the real tensor shapes; the embedding (and an
// untied head) is 248,320 rows of Hidden. Each has one MTP layer and the
// small vision stub.

// Qwen35_08B is Qwen3.5-0.8B's shape.
func Qwen35_08B() Shape { return qwen35Dense(24, 1024, 3584, 8, 2, 16, true) }

// Qwen35_2B is Qwen3.5-2B's shape.
func Qwen35_2B() Shape { return qwen35Dense(24, 2048, 6144, 8, 2, 16, true) }

// Qwen35_4B is Qwen3.5-4B's shape.
func Qwen35_4B() Shape { return qwen35Dense(32, 2560, 9216, 16, 4, 32, true) }

// Qwen35_9B is Qwen3.5-9B's shape.
func Qwen35_9B() Shape { return qwen35Dense(32, 4096, 12288, 16, 4, 32, false) }

// Qwen35_27B is Qwen3.5-27B's (and Qwen3.6-27B's) shape.
func Qwen35_27B() Shape { return qwen35Dense(64, 5120, 17408, 24, 4, 48, false) }

// Qwen35_35BA3B is Qwen3.5-35B-A3B's (and Qwen3.6-35B-A3B's) shape.
func Qwen35_35BA3B() Shape { return qwen35MoE(40, 2048, 512, 16, 2, 32, 256, 8) }

// Qwen35_122BA10B is Qwen3.5-122B-A10B's shape.
func Qwen35_122BA10B() Shape { return qwen35MoE(48, 3072, 1024, 32, 2, 64, 256, 8) }

// layerTypes returns the layer types config.json states.
func (s Shape) layerTypes() []string {
	if s.LayerTypes != nil {
		return s.LayerTypes
	}
	types := make([]string, s.Layers)
	for i := range types {
		types[i] = "linear_attention"
		if (i+1)%s.fullAttentionInterval() == 0 {
			types[i] = "full_attention"
		}
	}
	return types
}

func (s Shape) fullAttentionInterval() int {
	if s.FullAttentionInterval == 0 {
		return 4
	}
	return s.FullAttentionInterval
}

func (s Shape) ropeTheta() float64 {
	if s.RopeTheta == 0 {
		return 1e7
	}
	return s.RopeTheta
}

// rotaryDims is transformers' int(head_dim · partial_rotary_factor).
func (s Shape) rotaryDims() int { return int(float64(s.HeadDim) * s.PartialRotaryFactor) }

// check refuses a shape that would make a checkpoint transformers cannot
// load.
func (s Shape) check() error {
	if !s.Hybrid() {
		if !reflect.ValueOf(s.Qwen35).IsZero() {
			return fmt.Errorf("synth: Qwen3.5 fields given for model type %s (want qwen3_5 or qwen3_5_moe)", s.ModelType)
		}
		return s.checkMoE()
	}
	moe := s.ModelType == "qwen3_5_moe"
	for _, f := range []struct {
		name string
		v    int
	}{{"hidden", s.Hidden}, {"layers", s.Layers}, {"heads", s.Heads}, {"kv heads", s.KVHeads}, {"head dim", s.HeadDim},
		{"vocab", s.Vocab}, {"linear key heads", s.LinearKeyHeads}, {"linear value heads", s.LinearValueHeads},
		{"linear key head dim", s.LinearKeyHeadDim}, {"linear value head dim", s.LinearValueHeadDim}, {"conv kernel", s.ConvKernel}} {
		if f.v <= 0 {
			return fmt.Errorf("synth: %s %d", f.name, f.v)
		}
	}
	types := s.layerTypes()
	switch {
	case s.FullAttentionInterval < 0:
		return fmt.Errorf("synth: full_attention_interval %d", s.FullAttentionInterval)
	case len(types) != s.Layers:
		return fmt.Errorf("synth: %d layer types for %d layers", len(types), s.Layers)
	case s.Heads%s.KVHeads != 0:
		return fmt.Errorf("synth: %d heads are not a multiple of %d KV heads", s.Heads, s.KVHeads)
	case s.LinearValueHeads%s.LinearKeyHeads != 0:
		return fmt.Errorf("synth: %d linear value heads are not a multiple of %d key heads", s.LinearValueHeads, s.LinearKeyHeads)
	case s.rotaryDims() < 2 || s.rotaryDims()%2 != 0 || s.rotaryDims() > s.HeadDim:
		return fmt.Errorf("synth: partial rotary factor %g gives %d rotary dims of %d", s.PartialRotaryFactor, s.rotaryDims(), s.HeadDim)
	case s.MTPLayers < 0:
		return fmt.Errorf("synth: %d MTP layers", s.MTPLayers)
	case s.Vision && s.TextOnly:
		return fmt.Errorf("synth: the text-only layout (Qwen3_5ForCausalLM) has no vision tower")
	case s.Embedding || s.RopeScaling != nil || len(s.MLPOnlyLayers) > 0 || s.DecoderSparseStep > 1:
		return fmt.Errorf("synth: %s has no embedding layout, rope scaling or dense layers among sparse ones", s.ModelType)
	case !slices.Contains([]ExpertLayout{ShippedExperts, FusedExperts, PerExpert}, s.ExpertLayout):
		return fmt.Errorf("synth: expert layout %q (want %q or %q, or empty for the shipped one)", s.ExpertLayout, FusedExperts, PerExpert)
	case !moe && s.Intermediate <= 0:
		return fmt.Errorf("synth: intermediate size %d", s.Intermediate)
	case !moe && (s.Experts != 0 || s.SharedExpertIntermediate != 0):
		return fmt.Errorf("synth: experts given for model type %s (want qwen3_5_moe)", s.ModelType)
	case moe && (s.Experts < 1 || s.ExpertsPerToken < 1 || s.ExpertsPerToken > s.Experts):
		return fmt.Errorf("synth: %d experts per token of %d", s.ExpertsPerToken, s.Experts)
	case moe && (s.MoEIntermediate < 1 || s.SharedExpertIntermediate < 1):
		return fmt.Errorf("synth: expert width %d, shared expert width %d", s.MoEIntermediate, s.SharedExpertIntermediate)
	case moe && s.Intermediate != 0:
		return fmt.Errorf("synth: Qwen3.5-MoE has no dense intermediate size (got %d)", s.Intermediate)
	}
	for i, t := range types {
		if t != "linear_attention" && t != "full_attention" {
			return fmt.Errorf("synth: layer type %d is %q", i, t)
		}
	}
	return nil
}

// qwen35Tensors lists a Qwen3.5 checkpoint's tensors (section 3 of the
// design note), with values drawn so that mistakes show: zero-centred
// norm weights (applied as 1 + w) around 0, linear_attn.norm (applied as
// w) around 1, A_log spread over each layer's value heads so that
// A = exp(A_log) runs from 0.02 (the state persists) to 4 (it is
// forgotten within a few tokens).
func (s Shape) qwen35Tensors() []Tensor {
	h := s.Hidden
	text := "model.language_model."
	if s.TextOnly {
		text = "model."
	}
	ts := []Tensor{{Name: text + "embed_tokens.weight", Shape: []int{s.Vocab, h}, Std: 1}}
	for l, kind := range s.layerTypes() {
		ts = append(ts, s.qwen35Layer(fmt.Sprintf("%slayers.%d.", text, l), kind == "linear_attention", s.ExpertLayout == PerExpert)...)
	}
	ts = append(ts, normZero(text+"norm.weight", h))
	if !s.Tied {
		ts = append(ts, Tensor{Name: "lm_head.weight", Shape: []int{s.Vocab, h}, Std: 1 / math.Sqrt(float64(h))})
	}
	if s.MTPLayers > 0 {
		ts = append(ts, normZero("mtp.pre_fc_norm_embedding.weight", h), normZero("mtp.pre_fc_norm_hidden.weight", h),
			Tensor{Name: "mtp.fc.weight", Shape: []int{h, 2 * h}, Std: 1 / math.Sqrt(float64(2*h))})
		for l := range s.MTPLayers {
			ts = append(ts, s.qwen35Layer(fmt.Sprintf("mtp.layers.%d.", l), false, s.ExpertLayout != FusedExperts)...)
		}
		ts = append(ts, normZero("mtp.norm.weight", h))
	}
	if s.Vision {
		ts = append(ts, s.visionTensors()...)
	}
	return ts
}

// normZero is a zero-centred norm weight.
func normZero(name string, n int) Tensor { return Tensor{Name: name, Shape: []int{n}, Std: 0.1} }

// qwen35Layer lists one decoder layer's tensors under prefix p: a Gated
// DeltaNet one when linear, else gated attention; a MoE one, its experts
// per expert or fused, in Qwen3.5-MoE.
func (s Shape) qwen35Layer(p string, linear, perExpert bool) []Tensor {
	h, hd := s.Hidden, s.HeadDim
	mat := func(name string, n, k int) Tensor {
		return Tensor{Name: p + name, Shape: []int{n, k}, Std: 1 / math.Sqrt(float64(k))}
	}
	ts := []Tensor{normZero(p+"input_layernorm.weight", h)}
	if linear {
		nv, dv := s.LinearValueHeads, s.LinearValueHeadDim
		conv := 2*s.LinearKeyHeads*s.LinearKeyHeadDim + nv*dv
		a := "linear_attn."
		// The decay's input a is kept small, as in_proj_a's is in trained
		// models: A_log and dt_bias then decide which heads are fast.
		inA := mat(a+"in_proj_a.weight", nv, h)
		inA.Std /= 2
		ts = append(ts, mat(a+"in_proj_qkv.weight", conv, h), mat(a+"in_proj_z.weight", nv*dv, h), mat(a+"in_proj_b.weight", nv, h), inA,
			Tensor{Name: p + a + "conv1d.weight", Shape: []int{conv, 1, s.ConvKernel}, Std: 0.5},
			uniform(p+a+"dt_bias", nv, -0.3, 0.7),
			Tensor{Name: p + a + "A_log", Shape: []int{nv}, DType: "F32", Ramp: true,
				Mean: (math.Log(0.02) + math.Log(4)) / 2, Std: (math.Log(4) - math.Log(0.02)) / (2 * math.Sqrt(3))},
			Tensor{Name: p + a + "norm.weight", Shape: []int{dv}, DType: "F32", Std: 0.1, Mean: 1},
			mat(a+"out_proj.weight", h, nv*dv))
	} else {
		q, kv := s.Heads*hd, s.KVHeads*hd
		ts = append(ts, mat("self_attn.q_proj.weight", 2*q, h), mat("self_attn.k_proj.weight", kv, h), mat("self_attn.v_proj.weight", kv, h),
			mat("self_attn.o_proj.weight", h, q), normZero(p+"self_attn.q_norm.weight", hd), normZero(p+"self_attn.k_norm.weight", hd))
	}
	ts = append(ts, normZero(p+"post_attention_layernorm.weight", h))
	if s.ModelType == "qwen3_5" {
		return append(ts, mat("mlp.gate_proj.weight", s.Intermediate, h), mat("mlp.up_proj.weight", s.Intermediate, h),
			mat("mlp.down_proj.weight", h, s.Intermediate))
	}
	router := mat("mlp.gate.weight", s.Experts, h)
	router.Std *= 2 // wider gaps between router logits, so that an engine's rounding rarely changes the choice
	ts = append(ts, router)
	m := s.MoEIntermediate
	var experts []Tensor
	if perExpert {
		for e := range s.Experts {
			x := fmt.Sprintf("mlp.experts.%d.", e)
			experts = append(experts, mat(x+"gate_proj.weight", m, h), mat(x+"up_proj.weight", m, h), mat(x+"down_proj.weight", h, m))
		}
	} else {
		experts = []Tensor{{Name: p + "mlp.experts.gate_up_proj", Shape: []int{s.Experts, 2 * m, h}, Std: 1 / math.Sqrt(float64(h))},
			{Name: p + "mlp.experts.down_proj", Shape: []int{s.Experts, h, m}, Std: 1 / math.Sqrt(float64(m))}}
	}
	if s.ZeroExperts {
		for i := range experts {
			experts[i].Std = 0
		}
	}
	sh := s.SharedExpertIntermediate
	return append(append(ts, experts...), mat("mlp.shared_expert.gate_proj.weight", sh, h), mat("mlp.shared_expert.up_proj.weight", sh, h),
		mat("mlp.shared_expert.down_proj.weight", h, sh), mat("mlp.shared_expert_gate.weight", 1, h))
}

// uniform is a tensor of values uniform in [lo, hi].
func uniform(name string, n int, lo, hi float64) Tensor {
	return Tensor{Name: name, Shape: []int{n}, Mean: (lo + hi) / 2, Std: (hi - lo) / (2 * math.Sqrt(3))}
}

// visionShape is the vision tower's configuration (Qwen3_5VisionConfig's
// keys).
type visionShape struct{ depth, hidden, ffn, heads, channels, patch, temporal, merge, positions int }

// vision is the small vision tower's shape: one block, hidden 32, as the
// shared tiny models have.
func vision() visionShape {
	return visionShape{depth: 1, hidden: 32, ffn: 64, heads: 2, channels: 3, patch: 16, temporal: 2, merge: 2, positions: 16}
}

// visionTensors lists the vision tower's tensors (Qwen3_5VisionModel:
// patch embedding, position embedding, blocks, patch merger), for an
// engine to skip.
func (s Shape) visionTensors() []Tensor {
	v := vision()
	lin := func(name string, n, k int) []Tensor {
		return []Tensor{{Name: name + ".weight", Shape: []int{n, k}, Std: 1 / math.Sqrt(float64(k))}, {Name: name + ".bias", Shape: []int{n}, Std: 0.02}}
	}
	layerNorm := func(name string, n int) []Tensor {
		return []Tensor{{Name: name + ".weight", Shape: []int{n}, Std: 0.1, Mean: 1}, {Name: name + ".bias", Shape: []int{n}, Std: 0.02}}
	}
	p := "model.visual."
	ts := []Tensor{{Name: p + "patch_embed.proj.weight", Shape: []int{v.hidden, v.channels, v.temporal, v.patch, v.patch}, Std: 0.02},
		{Name: p + "patch_embed.proj.bias", Shape: []int{v.hidden}, Std: 0.02},
		{Name: p + "pos_embed.weight", Shape: []int{v.positions, v.hidden}, Std: 0.02}}
	for b := range v.depth {
		x := fmt.Sprintf("%sblocks.%d.", p, b)
		ts = slices.Concat(ts, layerNorm(x+"norm1", v.hidden), lin(x+"attn.qkv", 3*v.hidden, v.hidden), lin(x+"attn.proj", v.hidden, v.hidden),
			layerNorm(x+"norm2", v.hidden), lin(x+"mlp.linear_fc1", v.ffn, v.hidden), lin(x+"mlp.linear_fc2", v.hidden, v.ffn))
	}
	merged := v.hidden * v.merge * v.merge
	return slices.Concat(ts, layerNorm(p+"merger.norm", v.hidden), lin(p+"merger.linear_fc1", merged, merged),
		lin(p+"merger.linear_fc2", s.Hidden, merged))
}

// qwen35Config is config.json as Qwen3.5 ships it (section 2 of the
// design note): the multimodal Qwen3_5ForConditionalGeneration config with
// the text model's keys under text_config, or, for TextOnly, those keys
// alone (Qwen3_5ForCausalLM). The image and video token ids are those
// of the vocabulary the eos ids are in: Qwen3.5's (248056 and up) or the
// Qwen2/3 one the tests bundle (151655 and up).
func (s Shape) qwen35Config() map[string]any {
	moe := s.ModelType == "qwen3_5_moe"
	rot := s.rotaryDims()
	eos := s.eos()
	endOfText := eos[len(eos)-1] // <|endoftext|>
	visionStart := 151652        // <|vision_start|> of the Qwen2/3 vocabulary the tests bundle
	if endOfText == Qwen35AddedStart {
		visionStart = Qwen35AddedStart + 9 // Qwen3.5's (Qwen35Tokenizer)
	}
	dtype := map[string]string{"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[s.DType]
	text := map[string]any{
		"model_type": s.ModelType + "_text", "attention_bias": false, "attention_dropout": 0.0, "attn_output_gate": true,
		"bos_token_id": endOfText, "eos_token_id": endOfText, "pad_token_id": nil, "dtype": dtype,
		"full_attention_interval": s.fullAttentionInterval(), "layer_types": s.layerTypes(),
		"head_dim": s.HeadDim, "hidden_act": "silu", "hidden_size": s.Hidden, "initializer_range": 0.02,
		"linear_conv_kernel_dim": s.ConvKernel, "linear_key_head_dim": s.LinearKeyHeadDim, "linear_num_key_heads": s.LinearKeyHeads,
		"linear_num_value_heads": s.LinearValueHeads, "linear_value_head_dim": s.LinearValueHeadDim,
		"mamba_ssm_dtype": "float32", "max_position_embeddings": s.MaxPositions,
		"mtp_num_hidden_layers": s.MTPLayers, "mtp_use_dedicated_embeddings": false,
		"num_attention_heads": s.Heads, "num_hidden_layers": s.Layers, "num_key_value_heads": s.KVHeads,
		"partial_rotary_factor": s.PartialRotaryFactor, "rms_norm_eps": 1e-6,
		"rope_parameters": map[string]any{"mrope_interleaved": true, "mrope_section": mropeSection(rot / 2),
			"partial_rotary_factor": s.PartialRotaryFactor, "rope_theta": s.ropeTheta(), "rope_type": "default"},
		"tie_word_embeddings": s.Tied, "use_cache": true, "vocab_size": s.Vocab,
	}
	arch := "Qwen3_5"
	if moe {
		arch = "Qwen3_5Moe"
		text["num_experts"], text["num_experts_per_tok"] = s.Experts, s.ExpertsPerToken
		text["moe_intermediate_size"], text["shared_expert_intermediate_size"] = s.MoEIntermediate, s.SharedExpertIntermediate
		text["router_aux_loss_coef"], text["output_router_logits"] = 0.001, false
	} else {
		text["intermediate_size"] = s.Intermediate
	}
	if s.TextOnly {
		text["architectures"] = []string{arch + "ForCausalLM"}
		return text
	}
	cfg := map[string]any{
		"architectures": []string{arch + "ForConditionalGeneration"}, "model_type": s.ModelType, "text_config": text,
		"tie_word_embeddings": s.Tied, "language_model_only": false, "transformers_version": "4.57.1",
		"image_token_id": visionStart + 3, "video_token_id": visionStart + 4, "vision_start_token_id": visionStart, "vision_end_token_id": visionStart + 1,
	}
	if s.Vision {
		v := vision()
		cfg["vision_config"] = map[string]any{
			"model_type": s.ModelType, "depth": v.depth, "hidden_size": v.hidden, "intermediate_size": v.ffn, "num_heads": v.heads,
			"in_channels": v.channels, "patch_size": v.patch, "temporal_patch_size": v.temporal, "spatial_merge_size": v.merge,
			"num_position_embeddings": v.positions, "out_hidden_size": s.Hidden, "hidden_act": "gelu_pytorch_tanh",
			"initializer_range": 0.02, "deepstack_visual_indexes": []int{},
		}
	}
	return cfg
}

// mropeSection splits the rotary frequencies (half the rotary dims) over
// the time, height and width streams as Qwen3.5 does: 32 as [11, 11, 10],
// 4 as [2, 1, 1]. For text all three streams carry the same position.
func mropeSection(freqs int) []int {
	t := (freqs + 2) / 3
	h := (freqs - t + 1) / 2
	return []int{t, h, freqs - t - h}
}
