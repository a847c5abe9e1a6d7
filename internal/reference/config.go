package reference

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
)

// Config holds the fields of config.json that the forward pass reads, with
// transformers' defaults for those a checkpoint may leave out.
type Config struct {
	// ModelType is qwen2, qwen3, qwen3_moe, or for the Qwen3.5 family
	// qwen3_5 or qwen3_5_moe, whether config.json is the multimodal one
	// (text_config nested) or the text-only one (qwen3_5_text,
	// qwen3_5_moe_text).
	ModelType     string  `json:"model_type"`
	Hidden        int     `json:"hidden_size"`
	Intermediate  int     `json:"intermediate_size"`
	Layers        int     `json:"num_hidden_layers"`
	Heads         int     `json:"num_attention_heads"`
	KVHeads       int     `json:"num_key_value_heads"`
	HeadDim       int     `json:"head_dim"`
	Vocab         int     `json:"vocab_size"`
	RopeTheta     float64 `json:"rope_theta"`
	RMSNormEps    float64 `json:"rms_norm_eps"`
	Tied          bool    `json:"tie_word_embeddings"`
	AttentionBias bool    `json:"attention_bias"`
	HiddenAct     string  `json:"hidden_act"`

	// Qwen3-MoE only.
	Experts           int   `json:"num_experts"`
	ExpertsPerToken   int   `json:"num_experts_per_tok"`
	MoEIntermediate   int   `json:"moe_intermediate_size"`
	NormTopKProb      bool  `json:"norm_topk_prob"`
	DecoderSparseStep int   `json:"decoder_sparse_step"`
	MLPOnlyLayers     []int `json:"mlp_only_layers"`

	MaxPositions int `json:"max_position_embeddings"`
	// RopeScaling is rope_scaling (linear or yarn), nil when absent.
	RopeScaling *RopeScaling `json:"rope_scaling"`

	// Qwen3.5 and Qwen3.5-MoE only (see Hybrid and ReadConfig).
	// LayerTypes names each layer's token mixer, "linear_attention" (Gated
	// DeltaNet) or "full_attention" (gated attention).
	LayerTypes            []string `json:"layer_types"`
	FullAttentionInterval int      `json:"full_attention_interval"`
	ConvKernel            int      `json:"linear_conv_kernel_dim"`
	LinearKeyHeads        int      `json:"linear_num_key_heads"`
	LinearValueHeads      int      `json:"linear_num_value_heads"`
	LinearKeyHeadDim      int      `json:"linear_key_head_dim"`
	LinearValueHeadDim    int      `json:"linear_value_head_dim"`
	// PartialRotaryFactor is the share of each attention head's dimensions
	// that RoPE rotates (see RotaryDims).
	PartialRotaryFactor      float64 `json:"partial_rotary_factor"`
	SharedExpertIntermediate int     `json:"shared_expert_intermediate_size"`
	MTPLayers                int     `json:"mtp_num_hidden_layers"`
}

// RopeScaling holds rope_scaling's fields under transformers' names.
type RopeScaling struct {
	RopeType        string   `json:"rope_type"`
	Type            string   `json:"type"` // the older name of rope_type
	Factor          float64  `json:"factor"`
	OriginalMax     int      `json:"original_max_position_embeddings"`
	AttentionFactor *float64 `json:"attention_factor"`
	BetaFast        float64  `json:"beta_fast"`
	BetaSlow        float64  `json:"beta_slow"`
	Truncate        *bool    `json:"truncate"`
}

// ReadConfig reads and checks config.json. Features the forward pass does
// not implement (RoPE scaling, sliding windows, other activations) are
// refused rather than silently ignored.
func ReadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("reference: %w", err)
	}
	var raw struct {
		ModelType        string `json:"model_type"`
		UseSlidingWindow bool   `json:"use_sliding_window"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Config{}, fmt.Errorf("reference: %s: %w", path, err)
	}
	var c Config
	if family := qwen35Family(raw.ModelType); family != "" {
		c, err = readQwen35Config(b, family)
	} else {
		c, err = readQwenConfig(b, raw.UseSlidingWindow)
	}
	if err == nil {
		err = c.check()
	}
	if err != nil {
		return Config{}, fmt.Errorf("reference: %s: %w", path, err)
	}
	return c, nil
}

// readQwenConfig reads a Qwen2, Qwen3 or Qwen3-MoE config.json.
func readQwenConfig(b []byte, slidingWindow bool) (Config, error) {
	// transformers' defaults (configuration_qwen*.py).
	c := Config{RopeTheta: 10000, RMSNormEps: 1e-6, HiddenAct: "silu", DecoderSparseStep: 1}
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, err
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	switch {
	case c.HeadDim == 0 && c.ModelType == "qwen3":
		c.HeadDim = 128 // Qwen3Config's field; Qwen2's and Qwen3-MoE's configs have none
	case c.HeadDim == 0 && c.Heads > 0:
		c.HeadDim = c.Hidden / c.Heads
	}
	if c.ModelType == "qwen2" {
		c.AttentionBias = true // Qwen2Attention hard-codes q/k/v biases
	}
	if rs := c.RopeScaling; rs != nil {
		if rs.RopeType == "" {
			rs.RopeType = rs.Type
		}
		if rs.RopeType != "linear" && rs.RopeType != "yarn" {
			return Config{}, fmt.Errorf("rope_scaling type %q is not supported", rs.RopeType)
		}
	}
	if slidingWindow {
		return Config{}, errors.New("use_sliding_window is not supported")
	}
	return c, nil
}

// qwen35Family returns the ModelType of a model type of the Qwen3.5
// family, a multimodal one or its text config's, and "" for any other.
func qwen35Family(modelType string) string {
	switch modelType {
	case "qwen3_5", "qwen3_5_text":
		return "qwen3_5"
	case "qwen3_5_moe", "qwen3_5_moe_text":
		return "qwen3_5_moe"
	}
	return ""
}

// readQwen35Config reads a Qwen3.5 or Qwen3.5-MoE config.json: the text
// fields from text_config when it is present (Qwen3_5ForConditionalGeneration,
// as shipped), else from the top level (Qwen3_5ForCausalLM). Keys that
// transformers reads from two places must agree, and keys of Qwen3-MoE
// that Qwen3.5-MoE ignores (norm_topk_prob, decoder_sparse_step,
// mlp_only_layers) must not ask for anything else than what it does.
func readQwen35Config(b []byte, family string) (Config, error) {
	var top struct {
		Text json.RawMessage `json:"text_config"`
		Tied *bool           `json:"tie_word_embeddings"`
	}
	if err := json.Unmarshal(b, &top); err != nil {
		return Config{}, err
	}
	text, where := b, ""
	if len(top.Text) > 0 && string(top.Text) != "null" {
		text, where = top.Text, "text_config."
	}
	// transformers' defaults (configuration_qwen3_5.py) for the fields a
	// config may leave out; the sizes that make the model have none.
	c := Config{RMSNormEps: 1e-6, HiddenAct: "silu", HeadDim: 256, FullAttentionInterval: 4, ConvKernel: 4,
		LinearKeyHeads: 16, LinearValueHeads: 32, LinearKeyHeadDim: 128, LinearValueHeadDim: 128}
	if err := json.Unmarshal(text, &c); err != nil {
		return Config{}, fmt.Errorf("%s%w", where, err)
	}
	var x struct {
		ModelType           string          `json:"model_type"`
		Tied                *bool           `json:"tie_word_embeddings"`
		RopeTheta           *float64        `json:"rope_theta"`
		PartialRotaryFactor *float64        `json:"partial_rotary_factor"`
		RopeScaling         json.RawMessage `json:"rope_scaling"`
		Rope                *struct {
			RopeType            string   `json:"rope_type"`
			Type                string   `json:"type"` // some configs' name for rope_type
			RopeTheta           *float64 `json:"rope_theta"`
			PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
		} `json:"rope_parameters"`
		NormTopKProb      *bool `json:"norm_topk_prob"`
		DecoderSparseStep *int  `json:"decoder_sparse_step"`
		MLPOnlyLayers     []int `json:"mlp_only_layers"`
		DedicatedEmbed    bool  `json:"mtp_use_dedicated_embeddings"`
	}
	if err := json.Unmarshal(text, &x); err != nil {
		return Config{}, fmt.Errorf("%s%w", where, err)
	}
	if where != "" && x.ModelType != "" && qwen35Family(x.ModelType) != family {
		return Config{}, fmt.Errorf("text_config.model_type %q in a %s config", x.ModelType, family)
	}
	c.ModelType = family
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	tied, err := agree("tie_word_embeddings", top.Tied, x.Tied, false)
	if err != nil {
		return Config{}, err
	}
	c.Tied = *tied
	var ropeTheta, ropeFactor *float64
	if r := x.Rope; r != nil {
		kind := cmp.Or(r.RopeType, r.Type, "default")
		if kind != "default" {
			return Config{}, fmt.Errorf("%srope_parameters: rope type %q is not supported", where, kind)
		}
		ropeTheta, ropeFactor = r.RopeTheta, r.PartialRotaryFactor
	}
	theta, err := agree("rope_theta", ropeTheta, x.RopeTheta, 10000)
	if err != nil {
		return Config{}, err
	}
	factor, err := agree("partial_rotary_factor", ropeFactor, x.PartialRotaryFactor, 0.25)
	if err != nil {
		return Config{}, err
	}
	c.RopeTheta, c.PartialRotaryFactor = *theta, *factor
	switch {
	case len(x.RopeScaling) > 0 && string(x.RopeScaling) != "null":
		return Config{}, fmt.Errorf("%srope_scaling is not supported", where)
	case c.AttentionBias:
		return Config{}, fmt.Errorf("%sattention_bias true is not supported (no Qwen3.5 has biases)", where)
	case x.DedicatedEmbed:
		return Config{}, fmt.Errorf("%smtp_use_dedicated_embeddings true is not supported", where)
	case x.NormTopKProb != nil && !*x.NormTopKProb:
		return Config{}, fmt.Errorf("%snorm_topk_prob false: Qwen3.5-MoE always renormalises the kept experts' weights", where)
	case x.DecoderSparseStep != nil && *x.DecoderSparseStep != 1, len(x.MLPOnlyLayers) > 0:
		return Config{}, fmt.Errorf("%sdecoder_sparse_step or mlp_only_layers asks for dense layers: every Qwen3.5-MoE layer is sparse", where)
	}
	// Qwen3_5MoeTopKRouter renormalises unconditionally, and every layer
	// is sparse.
	c.NormTopKProb, c.DecoderSparseStep, c.MLPOnlyLayers = family == "qwen3_5_moe", 1, nil
	if c.LayerTypes == nil && c.FullAttentionInterval > 0 {
		// Qwen3_5TextConfig's rule when layer_types is absent.
		for i := range c.Layers {
			kind := "linear_attention"
			if (i+1)%c.FullAttentionInterval == 0 {
				kind = "full_attention"
			}
			c.LayerTypes = append(c.LayerTypes, kind)
		}
	}
	return c, nil
}

// agree returns the value of a key that config.json may hold in two places
// (the top level and text_config, or rope_parameters and its text
// config), refusing two different values; def when neither has it.
func agree[T comparable](key string, a, b *T, def T) (*T, error) {
	switch {
	case a != nil && b != nil && *a != *b:
		return nil, fmt.Errorf("%s is %v in one place and %v in another", key, *a, *b)
	case a != nil:
		return a, nil
	case b != nil:
		return b, nil
	}
	return &def, nil
}

func (c Config) check() error {
	switch c.ModelType {
	case "qwen2", "qwen3", "qwen3_moe", "qwen3_5", "qwen3_5_moe":
	default:
		return fmt.Errorf("model_type %q (want qwen2, qwen3, qwen3_moe, qwen3_5 or qwen3_5_moe)", c.ModelType)
	}
	if c.HiddenAct != "silu" {
		return fmt.Errorf("hidden_act %q (want silu)", c.HiddenAct)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"hidden_size", c.Hidden}, {"num_hidden_layers", c.Layers}, {"num_attention_heads", c.Heads},
		{"num_key_value_heads", c.KVHeads}, {"head_dim", c.HeadDim}, {"vocab_size", c.Vocab}} {
		if f.v <= 0 {
			return fmt.Errorf("%s is %d", f.name, f.v)
		}
	}
	if c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.Heads, c.KVHeads)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("head_dim %d is odd", c.HeadDim)
	}
	if math.IsNaN(c.RopeTheta) || c.RopeTheta <= 0 || c.RMSNormEps < 0 {
		return fmt.Errorf("rope_theta %g or rms_norm_eps %g out of range", c.RopeTheta, c.RMSNormEps)
	}
	if c.Hybrid() {
		if err := c.checkHybrid(); err != nil {
			return err
		}
	}
	if c.ModelType == "qwen3_moe" && c.Experts == 0 || !c.sparseModel() {
		return nil // a Qwen3-MoE config may have no experts at all
	}
	// transformers would default num_experts to 128 and top-k to 8; a MoE
	// checkpoint without them is more likely broken than meant so.
	if c.ExpertsPerToken <= 0 || c.ExpertsPerToken > c.Experts {
		return fmt.Errorf("num_experts_per_tok %d with num_experts %d", c.ExpertsPerToken, c.Experts)
	}
	if c.MoEIntermediate <= 0 {
		return fmt.Errorf("moe_intermediate_size is %d", c.MoEIntermediate)
	}
	if c.DecoderSparseStep <= 0 {
		return fmt.Errorf("decoder_sparse_step is %d", c.DecoderSparseStep)
	}
	return nil
}

// checkHybrid checks the fields only Qwen3.5 has.
func (c Config) checkHybrid() error {
	if len(c.LayerTypes) != c.Layers {
		return fmt.Errorf("layer_types has %d entries for %d layers (full_attention_interval %d)", len(c.LayerTypes), c.Layers, c.FullAttentionInterval)
	}
	for i, t := range c.LayerTypes {
		if t != "linear_attention" && t != "full_attention" {
			return fmt.Errorf("layer_types[%d] is %q: only linear_attention and full_attention are supported", i, t)
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"linear_conv_kernel_dim", c.ConvKernel}, {"linear_num_key_heads", c.LinearKeyHeads}, {"linear_num_value_heads", c.LinearValueHeads},
		{"linear_key_head_dim", c.LinearKeyHeadDim}, {"linear_value_head_dim", c.LinearValueHeadDim}} {
		if f.v <= 0 {
			return fmt.Errorf("%s is %d", f.name, f.v)
		}
	}
	if c.LinearValueHeads%c.LinearKeyHeads != 0 {
		return fmt.Errorf("linear_num_value_heads %d is not a multiple of linear_num_key_heads %d", c.LinearValueHeads, c.LinearKeyHeads)
	}
	if rot := c.RotaryDims(); rot <= 0 || rot%2 != 0 || rot > c.HeadDim {
		return fmt.Errorf("partial_rotary_factor %g gives %d rotary dimensions of head_dim %d (want an even number, at least 2)", c.PartialRotaryFactor, rot, c.HeadDim)
	}
	if c.MTPLayers < 0 {
		return fmt.Errorf("mtp_num_hidden_layers is %d", c.MTPLayers)
	}
	if c.ModelType == "qwen3_5" && c.Intermediate <= 0 {
		return fmt.Errorf("intermediate_size is %d", c.Intermediate)
	}
	if c.ModelType == "qwen3_5_moe" && c.SharedExpertIntermediate <= 0 {
		return fmt.Errorf("shared_expert_intermediate_size is %d", c.SharedExpertIntermediate)
	}
	return nil
}

// Hybrid reports whether the model is of the Qwen3.5 family: Gated
// DeltaNet and gated attention layers, zero-centred norms, an MTP block.
func (c Config) Hybrid() bool { return c.ModelType == "qwen3_5" || c.ModelType == "qwen3_5_moe" }

// sparseModel reports whether the model type has mixture-of-experts layers.
func (c Config) sparseModel() bool { return c.ModelType == "qwen3_moe" || c.ModelType == "qwen3_5_moe" }

// Sparse reports whether layer l has a sparse (mixture of experts) MLP, by
// the rule of Qwen3MoeDecoderLayer; every layer of Qwen3.5-MoE is sparse
// (its MTP layer too).
func (c Config) Sparse(l int) bool {
	if c.ModelType == "qwen3_5_moe" {
		return true
	}
	return c.ModelType == "qwen3_moe" && c.Experts > 0 && !slices.Contains(c.MLPOnlyLayers, l) &&
		(l+1)%c.DecoderSparseStep == 0
}

// Linear reports whether layer l is a Gated DeltaNet layer (Qwen3.5's
// "linear_attention").
func (c Config) Linear(l int) bool { return c.Hybrid() && c.LayerTypes[l] == "linear_attention" }

// RotaryDims returns how many leading dimensions of each attention head
// RoPE rotates: head_dim, or for Qwen3.5 int(head_dim ·
// partial_rotary_factor), as transformers' compute_default_rope_parameters.
func (c Config) RotaryDims() int {
	if !c.Hybrid() {
		return c.HeadDim
	}
	return int(float64(c.HeadDim) * c.PartialRotaryFactor)
}
