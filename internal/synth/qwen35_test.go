package synth_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/internal/synth"
)

// oddQwen35 returns small Qwen3.5 shapes of awkward sizes: no dimension a
// multiple of 32, value heads per key head 3 and 1, tied and untied, dense
// and MoE, every expert layout, with and without the vision stub, the
// multimodal and the text-only layout, one and two MTP layers.
func oddQwen35() map[string]synth.Shape {
	dense := synth.Shape{ModelType: "qwen3_5", Hidden: 40, Intermediate: 56, Layers: 5, Heads: 3, KVHeads: 1, HeadDim: 20,
		Vocab: 300, MaxPositions: 128, Tied: true, DType: "BF16", Seed: 5, EOS: synth.MiniEOS,
		Qwen35: synth.Qwen35{FullAttentionInterval: 3, LinearKeyHeads: 2, LinearValueHeads: 6, LinearKeyHeadDim: 12, LinearValueHeadDim: 10,
			ConvKernel: 3, PartialRotaryFactor: 0.4, MTPLayers: 1, Vision: true}}
	moe := synth.Shape{ModelType: "qwen3_5_moe", Hidden: 36, Layers: 4, Heads: 2, KVHeads: 2, HeadDim: 12,
		Vocab: 300, MaxPositions: 128, DType: "F16", Shards: 3, Seed: 6, EOS: synth.MiniEOS,
		Experts: 5, ExpertsPerToken: 2, MoEIntermediate: 20,
		Qwen35: synth.Qwen35{LayerTypes: []string{"full_attention", "linear_attention", "full_attention", "linear_attention"},
			LinearKeyHeads: 3, LinearValueHeads: 3, LinearKeyHeadDim: 9, LinearValueHeadDim: 7, ConvKernel: 4, PartialRotaryFactor: 0.5,
			RopeTheta: 5e4, SharedExpertIntermediate: 28, MTPLayers: 2, TextOnly: true, ExpertLayout: synth.PerExpert}}
	fused := moe
	fused.Hidden, fused.DType, fused.Shards, fused.Tied, fused.Seed = 33, "BF16", 0, true, 7
	fused.Qwen35.LayerTypes, fused.Layers, fused.FullAttentionInterval = nil, 5, 2
	fused.TextOnly, fused.Vision, fused.ExpertLayout, fused.MTPLayers = false, true, synth.FusedExperts, 1
	shipped := fused
	shipped.ExpertLayout, shipped.Vision, shipped.Seed = synth.ShippedExperts, false, 8
	return map[string]synth.Shape{"dense": dense, "moe-per-expert-text-only": moe, "moe-fused": fused, "moe-shipped": shipped}
}

// TestQwen35ReferenceRuns writes Qwen3.5 checkpoints of odd shapes and
// runs them through the independent forward pass, which refuses any
// missing, misnamed, misshaped or unexpected tensor: the logits and the MTP
// logits are finite, and the chunked delta rule agrees with the recurrence.
func TestQwen35ReferenceRuns(t *testing.T) {
	for name, s := range oddQwen35() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := writeAndLoad(t, s)
			c := m.Config
			if c.ModelType != s.ModelType || c.Hidden != s.Hidden || c.Layers != s.Layers || c.Tied != s.Tied ||
				c.LinearKeyHeads != s.LinearKeyHeads || c.LinearValueHeads != s.LinearValueHeads ||
				c.LinearKeyHeadDim != s.LinearKeyHeadDim || c.LinearValueHeadDim != s.LinearValueHeadDim ||
				c.ConvKernel != s.ConvKernel || c.PartialRotaryFactor != s.PartialRotaryFactor || c.MTPLayers != s.MTPLayers ||
				c.Experts != s.Experts || c.SharedExpertIntermediate != s.SharedExpertIntermediate || len(c.LayerTypes) != s.Layers {
				t.Errorf("config.json reads back as %+v for %+v", c, s)
			}
			if s.LayerTypes != nil && !slices.Equal(c.LayerTypes, s.LayerTypes) {
				t.Errorf("layer types %v, want %v", c.LayerTypes, s.LayerTypes)
			}
			ids := make([]int32, 70) // more than a chunk of 64
			for i := range ids {
				ids[i] = int32((i*37 + 11) % 261)
			}
			p, err := m.Forward(ids)
			if err != nil {
				t.Fatal(err)
			}
			finite(t, "logits", m.Head(p.Hidden[len(ids)-1]))
			if len(p.DeltaNet) == 0 {
				t.Fatal("no Gated DeltaNet layer ran")
			}
			if c.ModelType == "qwen3_5_moe" && len(p.Routes) != s.Layers {
				t.Errorf("%d sparse layers ran, want all %d", len(p.Routes), s.Layers)
			}
			h, err := m.MTP(ids, p.Hidden, 5)
			if err != nil {
				t.Fatal(err)
			}
			finite(t, "MTP logits", m.Head(h[len(h)-1]))
			for _, chunk := range []int{64, 5} {
				d, err := m.Diverge(ids, chunk)
				if err != nil {
					t.Fatal(err)
				}
				if !(max(d.LastLogits, d.CoreOutput, d.FinalState) <= 1e-12) {
					t.Errorf("chunks of %d: chunked and recurrent differ by %+v", chunk, d)
				}
			}
		})
	}
}

func finite(t *testing.T, what string, v []float64) {
	t.Helper()
	spread := slices.Max(v) - slices.Min(v)
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			t.Fatalf("%s: %g", what, x)
		}
	}
	if !(spread > 0.1) {
		t.Errorf("%s spread over %g only", what, spread)
	}
}

// TestQwen35Tensors checks the names, shapes and dtypes of section 3 of
// the design note, and the values drawn for A_log.
func TestQwen35Tensors(t *testing.T) {
	s := oddQwen35()["moe-fused"]
	s.ExpertLayout = synth.ShippedExperts
	dir := t.TempDir()
	if err := synth.WriteMini(dir, s); err != nil {
		t.Fatal(err)
	}
	header, data := readSafetensors(t, filepath.Join(dir, "model.safetensors"))
	conv := 2*3*9 + 3*7
	want := map[string]string{
		"model.language_model.embed_tokens.weight":                     "BF16 [300 33]",
		"model.language_model.layers.0.linear_attn.in_proj_qkv.weight": fmt.Sprintf("BF16 [%d 33]", conv),
		"model.language_model.layers.0.linear_attn.conv1d.weight":      fmt.Sprintf("BF16 [%d 1 4]", conv),
		"model.language_model.layers.0.linear_attn.A_log":              "F32 [3]",
		"model.language_model.layers.0.linear_attn.dt_bias":            "BF16 [3]",
		"model.language_model.layers.0.linear_attn.norm.weight":        "F32 [7]",
		"model.language_model.layers.0.linear_attn.out_proj.weight":    "BF16 [33 21]",
		"model.language_model.layers.1.self_attn.q_proj.weight":        "BF16 [48 33]",
		"model.language_model.layers.1.self_attn.q_norm.weight":        "BF16 [12]",
		"model.language_model.layers.1.mlp.experts.gate_up_proj":       "BF16 [5 40 33]",
		"model.language_model.layers.1.mlp.experts.down_proj":          "BF16 [5 33 20]",
		"model.language_model.layers.1.mlp.shared_expert_gate.weight":  "BF16 [1 33]",
		"model.language_model.norm.weight":                             "BF16 [33]",
		"mtp.fc.weight":                                                "BF16 [33 66]",
		"mtp.layers.0.self_attn.k_proj.weight":                         "BF16 [24 33]",
		"mtp.layers.0.mlp.experts.4.down_proj.weight":                  "BF16 [33 20]",
		"mtp.layers.0.mlp.shared_expert.up_proj.weight":                "BF16 [28 33]",
		"model.visual.patch_embed.proj.weight":                         "BF16 [32 3 2 16 16]",
		"model.visual.merger.linear_fc2.weight":                        "BF16 [33 128]",
	}
	for name, w := range want {
		h, ok := header[name]
		if got := fmt.Sprintf("%s %v", h.DType, h.Shape); !ok || got != w {
			t.Errorf("%s: %s, want %s", name, got, w)
		}
	}
	for _, absent := range []string{"lm_head.weight", "mtp.layers.0.mlp.experts.gate_up_proj", "model.language_model.layers.1.mlp.experts.0.up_proj.weight",
		"model.language_model.layers.0.self_attn.q_proj.weight", "model.language_model.layers.1.linear_attn.A_log"} {
		if _, ok := header[absent]; ok {
			t.Errorf("%s should not exist", absent)
		}
	}
	// A = exp(A_log) runs from 0.02 to 4 over each layer's value heads.
	for l := range s.Layers {
		h, ok := header[fmt.Sprintf("model.language_model.layers.%d.linear_attn.A_log", l)]
		if !ok {
			continue
		}
		var a []float64
		for i := h.Offsets[0]; i < h.Offsets[1]; i += 4 {
			a = append(a, math.Exp(float64(math.Float32frombits(binary.LittleEndian.Uint32(data[i:])))))
		}
		if math.Abs(slices.Min(a)-0.02) > 1e-6 || math.Abs(slices.Max(a)-4) > 1e-5 {
			t.Errorf("layer %d: A = exp(A_log) = %v, want 0.02 to 4", l, a)
		}
	}
}

type stHeader struct {
	DType   string `json:"dtype"`
	Shape   []int  `json:"shape"`
	Offsets [2]int `json:"data_offsets"`
}

// readSafetensors returns a safetensors file's header and its data area.
func readSafetensors(t *testing.T, path string) (map[string]stHeader, []byte) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	var header map[string]stHeader
	if err := json.Unmarshal(b[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	delete(header, "__metadata__")
	return header, b[8+n:]
}

// TestQwen35Presets holds the presets to the design note's table of the
// family, and their parameter counts to the models' names.
func TestQwen35Presets(t *testing.T) {
	for _, tc := range []struct {
		name                                                      string
		s                                                         synth.Shape
		layers, full, hidden, ffn, heads, kvHeads, kHeads, vHeads int
		experts, perToken                                         int
		tied                                                      bool
		params, active                                            float64 // billions, text model and MTP block
	}{
		{"0.8B", synth.Qwen35_08B(), 24, 6, 1024, 3584, 8, 2, 16, 16, 0, 0, true, 0.8, 0},
		{"2B", synth.Qwen35_2B(), 24, 6, 2048, 6144, 8, 2, 16, 16, 0, 0, true, 2, 0},
		{"4B", synth.Qwen35_4B(), 32, 8, 2560, 9216, 16, 4, 16, 32, 0, 0, true, 4, 0},
		{"9B", synth.Qwen35_9B(), 32, 8, 4096, 12288, 16, 4, 16, 32, 0, 0, false, 9, 0},
		{"27B", synth.Qwen35_27B(), 64, 16, 5120, 17408, 24, 4, 16, 48, 0, 0, false, 27, 0},
		{"35B-A3B", synth.Qwen35_35BA3B(), 40, 10, 2048, 512, 16, 2, 16, 32, 256, 8, false, 35, 3},
		{"122B-A10B", synth.Qwen35_122BA10B(), 48, 12, 3072, 1024, 32, 2, 16, 64, 256, 8, false, 122, 10},
	} {
		s := tc.s
		ffn := s.Intermediate
		if tc.experts > 0 {
			ffn = s.MoEIntermediate
			if s.SharedExpertIntermediate != ffn {
				t.Errorf("%s: shared expert width %d, want %d", tc.name, s.SharedExpertIntermediate, ffn)
			}
		}
		full := 0
		for l := range s.Layers {
			if (l+1)%s.FullAttentionInterval == 0 {
				full++
			}
		}
		if s.Layers != tc.layers || full != tc.full || s.Hidden != tc.hidden || ffn != tc.ffn || s.Heads != tc.heads || s.KVHeads != tc.kvHeads ||
			s.LinearKeyHeads != tc.kHeads || s.LinearValueHeads != tc.vHeads || s.Experts != tc.experts || s.ExpertsPerToken != tc.perToken ||
			s.Tied != tc.tied || s.HeadDim != 256 || s.LinearKeyHeadDim != 128 || s.LinearValueHeadDim != 128 || s.Vocab != 248320 ||
			s.ConvKernel != 4 || s.PartialRotaryFactor != 0.25 || s.MTPLayers != 1 || s.MaxPositions != 262144 {
			t.Errorf("%s: %+v, not the family table's", tc.name, s)
		}
		var total, experts float64
		for _, ts := range s.Tensors() {
			if strings.HasPrefix(ts.Name, "model.visual.") {
				continue
			}
			n := 1.0
			for _, d := range ts.Shape {
				n *= float64(d)
			}
			total += n
			if strings.Contains(ts.Name, ".mlp.experts.") {
				experts += n
			}
		}
		// The names count the vision tower too (0.1 to 0.6 billion): the
		// text model is within 10% of the name. The active parameters (the
		// kept experts' share of the experts) are within 20%: the names
		// round down, as Qwen3-30B-A3B's 3.3 billion did.
		total /= 1e9
		active := (total - experts/1e9) + experts/1e9*float64(s.ExpertsPerToken)/float64(max(s.Experts, 1))
		if math.Abs(total-tc.params) > 0.1*tc.params || tc.active > 0 && math.Abs(active-tc.active) > 0.2*tc.active {
			t.Errorf("%s: %.2f billion parameters, %.2f active", tc.name, total, active)
		}
	}
}

// TestQwen35ConfigKeys checks a preset's config.json against the keys of
// section 2 of the design note.
func TestQwen35ConfigKeys(t *testing.T) {
	dir := t.TempDir()
	if err := synth.WriteConfig(dir, synth.Qwen35_35BA3B()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string {
		var k []string
		for key := range m {
			k = append(k, key)
		}
		slices.Sort(k)
		return k
	}
	wantTop := []string{"architectures", "image_token_id", "language_model_only", "model_type", "text_config", "tie_word_embeddings",
		"transformers_version", "video_token_id", "vision_config", "vision_end_token_id", "vision_start_token_id"}
	if got := keys(cfg); !slices.Equal(got, wantTop) {
		t.Errorf("top-level keys %v, want %v", got, wantTop)
	}
	if cfg["model_type"] != "qwen3_5_moe" || fmt.Sprint(cfg["architectures"]) != "[Qwen3_5MoeForConditionalGeneration]" {
		t.Errorf("model_type %v, architectures %v", cfg["model_type"], cfg["architectures"])
	}
	text := cfg["text_config"].(map[string]any)
	wantText := []string{"attention_bias", "attention_dropout", "attn_output_gate", "bos_token_id", "dtype", "eos_token_id",
		"full_attention_interval", "head_dim", "hidden_act", "hidden_size", "initializer_range", "layer_types",
		"linear_conv_kernel_dim", "linear_key_head_dim", "linear_num_key_heads", "linear_num_value_heads", "linear_value_head_dim",
		"mamba_ssm_dtype", "max_position_embeddings", "model_type", "moe_intermediate_size", "mtp_num_hidden_layers",
		"mtp_use_dedicated_embeddings", "num_attention_heads", "num_experts", "num_experts_per_tok", "num_hidden_layers",
		"num_key_value_heads", "output_router_logits", "pad_token_id", "partial_rotary_factor", "rms_norm_eps", "rope_parameters",
		"router_aux_loss_coef", "shared_expert_intermediate_size", "tie_word_embeddings", "use_cache", "vocab_size"}
	if got := keys(text); !slices.Equal(got, wantText) {
		t.Errorf("text_config keys %v, want %v", got, wantText)
	}
	rope := text["rope_parameters"].(map[string]any)
	if fmt.Sprint(rope["mrope_section"]) != "[11 11 10]" || rope["rope_theta"] != 1e7 || rope["partial_rotary_factor"] != 0.25 ||
		rope["rope_type"] != "default" || rope["mrope_interleaved"] != true {
		t.Errorf("rope_parameters %v", rope)
	}
	types := text["layer_types"].([]any)
	if len(types) != 40 || types[2] != "linear_attention" || types[3] != "full_attention" || types[39] != "full_attention" {
		t.Errorf("layer_types %v", types)
	}
	if text["model_type"] != "qwen3_5_moe_text" || text["mamba_ssm_dtype"] != "float32" || text["dtype"] != "bfloat16" {
		t.Errorf("text_config %v", text)
	}
}

// TestQwen35OutputUnchanged pins the bytes of small Qwen3.5 checkpoints
// (all files but the tokenizer's), as TestDenseOutputUnchanged does the
// others': tests elsewhere depend on what a Shape and seed produce.
func TestQwen35OutputUnchanged(t *testing.T) {
	for name, want := range map[string]string{
		"dense":     "e9aa108d5e8319ea9d282b49958ac97b6615d99f2aa547ba6496074944e014d4",
		"moe-fused": "6e4f2c7da32270d5f2182410cf58487b00e43344f3417a3206e01b3665043705",
	} {
		dir := t.TempDir()
		if err := synth.WriteMini(dir, oddQwen35()[name]); err != nil {
			t.Fatal(err)
		}
		if got := hashDir(t, dir); got != want {
			t.Errorf("%s: files hash to %s, want %s", name, got, want)
		}
	}
}
