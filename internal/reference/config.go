package reference

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
)

// Config holds the fields of config.json that the forward pass reads, with
// transformers' defaults for those a checkpoint may leave out.
type Config struct {
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
		UseSlidingWindow bool `json:"use_sliding_window"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Config{}, fmt.Errorf("reference: %s: %w", path, err)
	}
	// transformers' defaults (configuration_qwen*.py).
	c := Config{RopeTheta: 10000, RMSNormEps: 1e-6, HiddenAct: "silu", DecoderSparseStep: 1}
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("reference: %s: %w", path, err)
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.HeadDim == 0 && c.Heads > 0 {
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
			return Config{}, fmt.Errorf("reference: %s: rope_scaling type %q is not supported", path, rs.RopeType)
		}
	}
	if raw.UseSlidingWindow {
		return Config{}, fmt.Errorf("reference: %s: use_sliding_window is not supported", path)
	}
	if err := c.check(); err != nil {
		return Config{}, fmt.Errorf("reference: %s: %w", path, err)
	}
	return c, nil
}

func (c Config) check() error {
	switch c.ModelType {
	case "qwen2", "qwen3", "qwen3_moe":
	default:
		return fmt.Errorf("model_type %q (want qwen2, qwen3 or qwen3_moe)", c.ModelType)
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
	if c.ModelType != "qwen3_moe" || c.Experts == 0 {
		return nil
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

// Sparse reports whether layer l has a sparse (mixture of experts) MLP, by
// the rule of Qwen3MoeDecoderLayer.
func (c Config) Sparse(l int) bool {
	return c.ModelType == "qwen3_moe" && c.Experts > 0 && !slices.Contains(c.MLPOnlyLayers, l) &&
		(l+1)%c.DecoderSparseStep == 0
}
