package arch

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/qwenc/qwenc/format"
)

// qwen35 is the Qwen3.5 family (Qwen3.5, Qwen3.6, Qwen3.8: design note
// qwen35.md), dense (qwen3_5) or with routed experts and a shared one in
// every layer (qwen3_5_moe): a hybrid of Gated DeltaNet layers, which keep
// a fixed-size recurrent state, and gated full-attention layers (three to
// one in the shipped models), and one multi-token-prediction layer. Its
// checkpoints are multimodal (Qwen3_5ForConditionalGeneration): the text
// model's fields are under text_config (ParseConfig reads them), its
// weights under model.language_model. (the compiler reads them as the text
// model's model.), and the vision tower is kept out.
type qwen35 struct{ moe bool }

func (a qwen35) ModelType() string {
	if a.moe {
		return "qwen3_5_moe"
	}
	return "qwen3_5"
}

// Configure reads the hybrid fields. layer_types, when absent, is every
// full_attention_interval-th layer full attention (transformers'
// Qwen3_5TextConfig); the rotated dimensions are head_dim x
// partial_rotary_factor, from rope_parameters or the top level. The MoE
// has no norm_topk_prob: the chosen experts' weights are always
// renormalised, and every layer is sparse.
func (a qwen35) Configure(c *format.Config, hf *HFConfig) error {
	c.QKNorm, c.AttnGate = true, true
	if _, ok := hf.present("head_dim"); !ok {
		c.HeadDim = 256 // transformers' Qwen3_5TextConfig's
	}
	var bias bool
	if err := hf.Bool("attention_bias", &bias); err != nil {
		return err
	}
	if bias {
		return fmt.Errorf("field %q is true; Qwen3.5's attention has no biases", hf.name("attention_bias"))
	}
	hy := &c.Hybrid
	for _, f := range []struct {
		k   string
		dst *int
	}{{"linear_num_key_heads", &hy.KeyHeads}, {"linear_num_value_heads", &hy.ValueHeads},
		{"linear_key_head_dim", &hy.KeyDim}, {"linear_value_head_dim", &hy.ValueDim}, {"linear_conv_kernel_dim", &hy.ConvKernel}} {
		if err := hf.Int(f.k, f.dst, true); err != nil {
			return err
		}
	}
	if err := layerTypes(c, hf); err != nil {
		return err
	}
	if err := partialRotary(c, hf); err != nil {
		return err
	}
	// 0 is a model without the block, as transformers' config allows.
	if err := hf.Count("mtp_num_hidden_layers", &c.MTPLayers); err != nil {
		return err
	}
	var dedicated bool
	if err := hf.Bool("mtp_use_dedicated_embeddings", &dedicated); err != nil {
		return err
	}
	if dedicated && c.MTPLayers > 0 {
		return fmt.Errorf("field %q is true; an MTP layer with embeddings of its own is not supported", hf.name("mtp_use_dedicated_embeddings"))
	}
	if !a.moe {
		return nil
	}
	m := &c.MoE
	for _, f := range []struct {
		k   string
		dst *int
	}{{"num_experts", &m.Experts}, {"num_experts_per_tok", &m.ExpertsPerToken}, {"moe_intermediate_size", &m.ExpertWidth},
		{"shared_expert_intermediate_size", &m.SharedWidth}} {
		if err := hf.Int(f.k, f.dst, true); err != nil {
			return err
		}
	}
	if m.ExpertsPerToken > m.Experts {
		return fmt.Errorf("field %q = %d is more than num_experts = %d", hf.name("num_experts_per_tok"), m.ExpertsPerToken, m.Experts)
	}
	m.NormTopK = true
	m.Sparse = slices.Repeat([]bool{true}, c.Layers)
	return nil
}

// layerTypes reads layer_types into c.Hybrid.Linear.
func layerTypes(c *format.Config, hf *HFConfig) error {
	var types []string
	if err := hf.Strings("layer_types", &types); err != nil {
		return err
	}
	hy := &c.Hybrid
	hy.Linear = make([]bool, c.Layers)
	if types == nil {
		interval := 4
		if err := hf.Int("full_attention_interval", &interval, false); err != nil {
			return err
		}
		for l := range hy.Linear {
			hy.Linear[l] = (l+1)%interval != 0
		}
		return nil
	}
	if len(types) != c.Layers {
		return fmt.Errorf("field %q: %d entries for %d layers", hf.name("layer_types"), len(types), c.Layers)
	}
	for l, t := range types {
		switch t {
		case "linear_attention":
			hy.Linear[l] = true
		case "full_attention":
		default:
			return fmt.Errorf("field %q: layer %d is %q, a layer type this build does not support yet (it runs linear_attention and full_attention)", hf.name("layer_types"), l, t)
		}
	}
	return nil
}

// partialRotary sets the rotated dimensions from partial_rotary_factor,
// 0.25 where the config has none, as transformers' Qwen3.5 configs
// default it (a GGUF's fields always name it: see ggufConfig).
func partialRotary(c *format.Config, hf *HFConfig) error {
	factor := 0.25
	if err := hf.Float("partial_rotary_factor", &factor, false); err != nil {
		return err
	}
	if rp, ok, err := hf.Object("rope_parameters"); err != nil {
		return err
	} else if ok {
		if err := rp.Float("partial_rotary_factor", &factor, false); err != nil {
			return err
		}
	}
	rot := int(float64(c.HeadDim) * factor)
	if !(factor > 0 && factor <= 1) || rot%2 != 0 || rot == 0 {
		return fmt.Errorf("partial_rotary_factor %g of head_dim %d: want a factor in (0, 1] that rotates an even number of dimensions", factor, c.HeadDim)
	}
	if rot != c.HeadDim {
		c.RotaryDims = rot
	}
	return nil
}

func (a qwen35) Layer(c *format.Config, l int) []Tensor {
	return a.layer(c, layerTensors{l: l}, c.LinearLayer(l))
}

// layer is the tensors of a main layer or of an MTP layer (always full
// attention).
func (a qwen35) layer(c *format.Config, lt layerTensors, linear bool) []Tensor {
	var ts []Tensor
	if linear {
		ts = deltaNetTensors(c, lt)
	} else {
		ts = gatedAttentionTensors(c, lt)
	}
	if !a.moe {
		return append(ts, denseMLPTensors(c, lt)...)
	}
	moe := moeTensors(c, lt)
	fusedExperts(moe, lt.name(""), c.MoE.ExpertWidth)
	return slices.Concat(ts, moe, sharedExpertTensors(c, lt))
}

// MTPTensors are the MTP block's: the fc that joins a token's embedding to
// the hidden state before it, its norms, and its layers (gated attention
// and the MLP of the main layers), numbered after the main ones.
func (a qwen35) MTPTensors(c *format.Config) []Tensor {
	h := c.Hidden
	norm := func(name string) Tensor {
		return Tensor{Section: name, HF: []string{name + ".weight"}, Kind: format.KindNorm, Shape: []uint64{uint64(h)}, Role: name, Layer: -1}
	}
	// mtp.fc [hidden, 2 x hidden] multiplies the embedding's norm joined
	// to the hidden state's, embedding first: its two halves of columns
	// are two products (Transform).
	fc := func(name string) Tensor {
		return Tensor{Section: name, HF: []string{"mtp.fc.weight"}, Kind: format.KindProjection, Shape: []uint64{uint64(h), uint64(h)}, Role: name, Layer: -1}
	}
	ts := []Tensor{fc("mtp.fc_e"), fc("mtp.fc_h"), norm("mtp.pre_fc_norm_embedding"), norm("mtp.pre_fc_norm_hidden"), norm("mtp.norm")}
	for i := range c.MTPLayers {
		ts = append(ts, a.layer(c, layerTensors{l: c.Layers + i, hf: fmt.Sprintf("mtp.layers.%d.", i)}, false)...)
	}
	return ts
}

// Transform folds the 1 of the zero-centred norms into their weights (all
// but the DeltaNet's output norm, which scales by its weight alone),
// computes A = -exp(A_log), splits q_proj's interleaved query and gate
// rows, reads the convolution's [channels, 1, kernel] as [channels,
// kernel], and splits mtp.fc's columns in its embedding's and its hidden
// state's halves.
func (qwen35) Transform(c *format.Config, t *Tensor) Transform {
	switch {
	case t.Kind == format.KindNorm && t.Role != "linear_norm":
		return Transform{Values: OnePlus}
	case t.Role == "ssm_a":
		return Transform{Values: NegExp}
	case t.Role == "q_proj", t.Role == "q_gate":
		part := 0
		if t.Role == "q_gate" {
			part = 1
		}
		return Transform{SrcShape: []uint64{2 * uint64(c.QDim()), uint64(c.Hidden)}, Row: HeadPart(c.HeadDim, 2, part)}
	case t.Role == "conv1d":
		return Transform{SrcShape: []uint64{t.Shape[0], 1, t.Shape[1]}}
	case t.Role == "mtp.fc_e", t.Role == "mtp.fc_h":
		skip := 0
		if t.Role == "mtp.fc_h" {
			skip = c.Hidden
		}
		return Transform{SrcShape: []uint64{uint64(c.Hidden), 2 * uint64(c.Hidden)}, Col: func(col int) int { return skip + col }}
	}
	return Transform{}
}

// BuildMTPLayer is a full-attention layer with the main layers' MLP.
func (a qwen35) BuildMTPLayer(b *Builder, l int) {
	b.attention(l)
	if a.moe {
		b.moeMLP(l)
	} else {
		b.denseMLP(l)
	}
}

// Features: the hybrid layers, the attention's output gate and the MTP
// block; the MoE's experts and shared expert.
func (a qwen35) Features() []string {
	fs := append(commonFeatures(), "attn_output_gate", "hybrid", "mtp")
	if a.moe {
		fs = append(fs, "moe", "moe.shared_expert")
	}
	return fs
}

// Requires are what Configure sets on every Qwen3.5: its attention's
// output gate and q/k norms.
func (qwen35) Requires() []string { return []string{"attn_output_gate", "qk_norm"} }

func (a qwen35) BuildLayer(b *Builder, l int) {
	if b.C.LinearLayer(l) {
		b.deltaNet(l)
	} else {
		b.attention(l)
	}
	if !a.moe {
		b.denseMLP(l)
		return
	}
	b.moeMLP(l)
}

// GGUFArch: llama.cpp's names, qwen35 and qwen35moe.
func (a qwen35) GGUFArch() string {
	if a.moe {
		return "qwen35moe"
	}
	return "qwen35"
}

// ggufConfig reads the hybrid keys (design note qwen35.md, section 8):
// block_count counts the MTP layers (nextn_predict_layers), which follow
// the main ones; a layer with attn_qkv is a Gated DeltaNet one, the
// others full attention; the DeltaNet's heads and widths are the ssm.*
// keys, and the rotated dimensions rope.dimension_count.
func (a qwen35) ggufConfig(m GGUFMeta, f *ggufFields) error {
	blocks, err := f.layers()
	if err != nil {
		return err
	}
	layers := blocks
	if n, ok, err := f.number("nextn_predict_layers"); err != nil {
		return err
	} else if ok && n > 0 {
		layers = blocks - int(n)
		f.set("mtp_num_hidden_layers", n, f.key("nextn_predict_layers"))
		f.set("num_hidden_layers", layers, f.key("block_count")+" - "+f.key("nextn_predict_layers"))
		if layers < 1 {
			return fmt.Errorf("key %q = %d leaves no layer before the %v MTP layers", f.key("block_count"), blocks, n)
		}
	}
	f.copy("linear_num_key_heads", "ssm.group_count")
	f.copy("linear_num_value_heads", "ssm.time_step_rank")
	f.copy("linear_key_head_dim", "ssm.state_size")
	f.copy("linear_conv_kernel_dim", "ssm.conv_kernel")
	if err := f.ratio("linear_value_head_dim", "ssm.inner_size", "ssm.time_step_rank"); err != nil {
		return err
	}
	if d, ok, err := f.number("rope.dimension_count"); err != nil {
		return err
	} else if ok {
		if d < 1 || d != math.Trunc(d) {
			return fmt.Errorf("key %q = %v is not a number of dimensions", f.key("rope.dimension_count"), d)
		}
		if err := f.ratio("partial_rotary_factor", "rope.dimension_count", "attention.key_length"); err != nil {
			return err
		}
	} else {
		// llama.cpp rotates every dimension without the key.
		f.set("partial_rotary_factor", 1, "no key "+f.key("rope.dimension_count"))
	}
	types := make([]string, layers)
	for l := range types {
		types[l] = "full_attention"
		if f.has(fmt.Sprintf("blk.%d.attn_qkv.weight", l)) {
			types[l] = "linear_attention"
		}
	}
	f.set("layer_types", types, "the layers with a tensor \"blk.N.attn_qkv.weight\"")
	f.set("attention_bias", f.has("blk.0.attn_q.bias"), "the presence of tensor \"blk.0.attn_q.bias\"")
	if a.moe {
		f.copy("num_experts", "expert_count")
		f.copy("num_experts_per_tok", "expert_used_count")
		f.copy("moe_intermediate_size", "expert_feed_forward_length")
		f.copy("shared_expert_intermediate_size", "expert_shared_feed_forward_length")
		// Every layer is a mixture: the checkpoint has no dense width,
		// for which Ollama's converter writes 0.
		if n, ok, err := f.number("feed_forward_length"); err == nil && ok && n == 0 {
			delete(f.raw, "intermediate_size")
		}
	}
	return nil
}

// qwen35LayerNames are the GGUF names of Qwen3.5's layer sections.
var qwen35LayerNames = func() map[string]string {
	m := maps.Clone(ggufLayerNames)
	maps.Copy(m, map[string]string{
		"post_attention_layernorm": "post_attention_norm.weight",
		"q_gate":                   "attn_q.weight", // the query's rows and the gate's, interleaved by head
		"in_proj_qkv":              "attn_qkv.weight", "in_proj_z": "attn_gate.weight",
		"in_proj_b": "ssm_beta.weight", "in_proj_a": "ssm_alpha.weight",
		"conv1d": "ssm_conv1d.weight", "ssm_a": "ssm_a", "dt_bias": "ssm_dt.bias",
		"linear_norm": "ssm_norm.weight", "out_proj": "ssm_out.weight",
		"shared.gate_proj": "ffn_gate_shexp.weight", "shared.up_proj": "ffn_up_shexp.weight",
		"shared.down_proj": "ffn_down_shexp.weight", "shared.gate": "ffn_gate_inp_shexp.weight",
	})
	return m
}()

// GGUFTensor undoes what llama.cpp's converter did (qwen35.md, section
// 8): the norms are stored as 1 + w and ssm_a as -exp(A_log) already, as
// the file needs them, and the convolution as [channels, kernel]; the
// value heads of the DeltaNet, moved from the checkpoint's grouped order
// to a tiled one when there are more value heads than key heads, are put
// back in every tensor they index (the V rows of attn_qkv and of the
// convolution, attn_gate's rows, ssm_beta's, ssm_alpha's, ssm_a's and
// ssm_dt's, ssm_out's columns). attn_q holds each head's query and gate
// rows as q_proj does, and nextn.eh_proj is mtp.fc: both split as from
// the checkpoint.
func (a qwen35) GGUFTensor(c *format.Config, t *Tensor) GGUFSource {
	mtp := func(n string) string { return fmt.Sprintf("blk.%d.nextn.%s.weight", c.Layers, n) }
	src := GGUFSource{Name: ggufName(c, t, qwen35LayerNames)}
	switch t.Role {
	case "q_proj", "q_gate":
		src.Transform = a.Transform(c, t)
	case "mtp.fc_e", "mtp.fc_h":
		src.Name, src.Transform = mtp("eh_proj"), a.Transform(c, t)
	case "mtp.pre_fc_norm_embedding":
		src.Name = mtp("enorm")
	case "mtp.pre_fc_norm_hidden":
		src.Name = mtp("hnorm")
	case "mtp.norm":
		src.Name = mtp("shared_head_norm")
	}
	hy := &c.Hybrid
	if hy.ValueHeads == hy.KeyHeads || hy.KeyHeads == 0 {
		return src
	}
	perm, nv, dv := TiledFromGrouped(hy.KeyHeads, hy.ValueHeads), hy.ValueHeads, hy.ValueDim
	switch t.Role {
	case "in_proj_qkv", "conv1d":
		src.Transform.Row = HeadRows(2*hy.KeyHeads*hy.KeyDim, nv, dv, perm)
	case "in_proj_z":
		src.Transform.Row = HeadRows(0, nv, dv, perm)
	case "in_proj_b", "in_proj_a", "ssm_a", "dt_bias":
		src.Transform.Row = HeadRows(0, nv, 1, perm)
	case "out_proj":
		src.Transform.Col = HeadRows(0, nv, dv, perm)
	}
	return src
}
