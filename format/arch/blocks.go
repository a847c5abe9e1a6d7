package arch

import (
	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/graph"
)

// The blocks the Qwen architectures share, each as its tensors and its
// ops side by side. An architecture unit composes them; the config's
// flags that vary within a block (q/k norm, q/k/v biases) are set by the
// unit's Configure.

// attentionTensors is the attention block of layer l: input norm, q/k/v
// (with biases or q/k norms, as the config says) and o.
func attentionTensors(c *format.Config, lt layerTensors) []Tensor {
	h, q, kv := c.Hidden, c.QDim(), c.KVDim()
	ts := []Tensor{lt.vec(format.KindNorm, "input_layernorm", "input_layernorm.weight", h),
		lt.mat(format.KindProjection, "q_proj", "self_attn.q_proj.weight", q, h),
		lt.mat(format.KindProjection, "k_proj", "self_attn.k_proj.weight", kv, h),
		lt.mat(format.KindProjection, "v_proj", "self_attn.v_proj.weight", kv, h)}
	if c.QKVBias {
		ts = append(ts, lt.vec(format.KindBias, "q_bias", "self_attn.q_proj.bias", q),
			lt.vec(format.KindBias, "k_bias", "self_attn.k_proj.bias", kv),
			lt.vec(format.KindBias, "v_bias", "self_attn.v_proj.bias", kv))
	}
	if c.QKNorm {
		ts = append(ts, lt.vec(format.KindNorm, "q_norm", "self_attn.q_norm.weight", c.HeadDim),
			lt.vec(format.KindNorm, "k_norm", "self_attn.k_norm.weight", c.HeadDim))
	}
	return append(ts, lt.mat(format.KindProjection, "o_proj", "self_attn.o_proj.weight", h, q))
}

// attention adds x += o_proj(attention(norm(x))) for layer l; with the
// config's AttnGate, attention's output is first multiplied by
// sigmoid(q_gate(norm(x))).
func (b *Builder) attention(l int) {
	g, c, T := b.G, b.C, b.T
	w := func(s string) string { return format.LayerSection(l, s) }
	bias := func(s string) string {
		if c.QKVBias {
			return w(s)
		}
		return ""
	}
	xn := g.NewTensor(tensorName(l, "attn_norm"), T, c.Hidden)
	g.AddOp(graph.Op{Kind: graph.RMSNorm, Layer: l, Weight: w("input_layernorm"), In: []int{b.X}, Out: xn})
	q := g.NewTensor(tensorName(l, "q"), T, c.QDim())
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: w("q_proj"), Bias: bias("q_bias"), In: []int{xn}, Out: q})
	k := g.NewTensor(tensorName(l, "k"), T, c.KVDim())
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: w("k_proj"), Bias: bias("k_bias"), In: []int{xn}, Out: k})
	v := g.NewTensor(tensorName(l, "v"), T, c.KVDim())
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: w("v_proj"), Bias: bias("v_bias"), In: []int{xn}, Out: v})
	gate := graph.NoTensor
	if c.AttnGate {
		gate = g.NewTensor(tensorName(l, "q_gate"), T, c.QDim())
		g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: w("q_gate"), In: []int{xn}, Out: gate})
	}
	qk := graph.Op{Kind: graph.QKRope, Layer: l, In: []int{b.Rope}, InOut: []int{q, k}, Out: graph.NoTensor}
	if c.QKNorm {
		qk.Weight, qk.Weight2 = w("q_norm"), w("k_norm")
	}
	g.AddOp(qk)
	kv := g.AddState(graph.State{Kind: graph.AttentionKV, Layer: l, KVHeads: c.KVHeads, HeadDim: c.HeadDim})
	g.AddOp(graph.Op{Kind: graph.KVStore, Layer: l, State: kv, In: []int{k, v}, Out: graph.NoTensor})
	att := g.NewTensor(tensorName(l, "attn"), T, c.QDim())
	g.AddOp(graph.Op{Kind: graph.Attention, Layer: l, State: kv, In: []int{q}, Out: att})
	if gate != graph.NoTensor {
		g.AddOp(graph.Op{Kind: graph.SigmoidMul, Layer: l, In: []int{gate}, InOut: []int{att}, Out: graph.NoTensor})
	}
	o := g.NewTensor(tensorName(l, "attn_out"), T, c.Hidden)
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: w("o_proj"), In: []int{att}, Out: o})
	g.AddOp(graph.Op{Kind: graph.AddInPlace, Layer: l, In: []int{o}, InOut: []int{b.X}, Out: graph.NoTensor})
}

// mlpNormTensor is the norm before a layer's MLP, dense or sparse.
func mlpNormTensor(c *format.Config, lt layerTensors) Tensor {
	return lt.vec(format.KindNorm, "post_attention_layernorm", "post_attention_layernorm.weight", c.Hidden)
}

// mlpNorm adds the norm before layer l's MLP and returns its output.
func (b *Builder) mlpNorm(l int) int {
	hn := b.G.NewTensor(tensorName(l, "mlp_norm"), b.T, b.C.Hidden)
	b.G.AddOp(graph.Op{Kind: graph.RMSNorm, Layer: l, Weight: format.LayerSection(l, "post_attention_layernorm"), In: []int{b.X}, Out: hn})
	return hn
}

// denseMLPTensors is the SwiGLU MLP of layer l, intermediate_size wide.
func denseMLPTensors(c *format.Config, lt layerTensors) []Tensor {
	h, f := c.Hidden, c.Intermediate
	return []Tensor{mlpNormTensor(c, lt),
		lt.mat(format.KindProjection, "gate_proj", "mlp.gate_proj.weight", f, h),
		lt.mat(format.KindProjection, "up_proj", "mlp.up_proj.weight", f, h),
		lt.mat(format.KindProjection, "down_proj", "mlp.down_proj.weight", h, f)}
}

// denseMLP adds x += down(silu(gate(norm(x))) * up(norm(x))).
func (b *Builder) denseMLP(l int) {
	g, c, T := b.G, b.C, b.T
	w := func(s string) string { return format.LayerSection(l, s) }
	hn := b.mlpNorm(l)
	gate := g.NewTensor(tensorName(l, "gate"), T, c.Intermediate)
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: w("gate_proj"), In: []int{hn}, Out: gate})
	up := g.NewTensor(tensorName(l, "up"), T, c.Intermediate)
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: w("up_proj"), In: []int{hn}, Out: up})
	g.AddOp(graph.Op{Kind: graph.SiLUMul, Layer: l, In: []int{up}, InOut: []int{gate}, Out: graph.NoTensor})
	down := g.NewTensor(tensorName(l, "down"), T, c.Hidden)
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: w("down_proj"), In: []int{gate}, Out: down})
	g.AddOp(graph.Op{Kind: graph.AddInPlace, Layer: l, In: []int{down}, InOut: []int{b.X}, Out: graph.NoTensor})
}

// moeTensors is the routed-experts MLP of layer l: the router [experts,
// hidden] and every expert's gate, up and down, each kind stacked in one
// section so that an expert's matrix is one contiguous run of bytes.
func moeTensors(c *format.Config, lt layerTensors) []Tensor {
	m := &c.MoE
	h, w, e := c.Hidden, m.ExpertWidth, m.Experts
	return []Tensor{mlpNormTensor(c, lt),
		lt.mat(format.KindRouter, "router", "mlp.gate.weight", e, h),
		lt.experts("experts.gate_proj", "mlp.experts.%d.gate_proj.weight", e, w, h),
		lt.experts("experts.up_proj", "mlp.experts.%d.up_proj.weight", e, w, h),
		lt.experts("experts.down_proj", "mlp.experts.%d.down_proj.weight", e, h, w)}
}

// moeMLP adds x += Σ weight_e · down_e(silu(gate_e(n)) * up_e(n)) over
// the experts each token's router picks, n = norm(x), and with a shared
// expert (Qwen3.5) its gated output too. The tokens are
// gathered by expert so that each chosen expert's matrices are one
// product over all of its tokens: a prefill reads every used expert once.
func (b *Builder) moeMLP(l int) {
	g, c, T := b.G, b.C, b.T
	m := &c.MoE
	w := func(s string) string { return format.LayerSection(l, s) }
	hn := b.mlpNorm(l)
	logits := g.NewTensor(tensorName(l, "router"), T, m.Experts)
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: w("router"), In: []int{hn}, Out: logits})
	rt := graph.Routing{Tokens: T, Experts: m.Experts, K: m.ExpertsPerToken}
	routing := g.NewTensor(tensorName(l, "routing"), 1, rt.Words())
	g.AddOp(graph.Op{Kind: graph.Route, Layer: l, In: []int{logits}, Out: routing})
	// Gather the quantized rows when the experts take them: quantizing
	// after the gather would quantize each token k times.
	src := hn
	gateQ, upQ := g.WeightType(w("experts.gate_proj")).Quantized(), g.WeightType(w("experts.up_proj")).Quantized()
	if gateQ && upQ {
		src = g.QuantizedCopy(hn, l)
	}
	k := m.ExpertsPerToken
	xg := g.NewRowsTensor(tensorName(l, "expert_in"), k, c.Hidden)
	g.Tensors[xg].Quantized = g.Tensors[src].Quantized
	g.AddOp(graph.Op{Kind: graph.GatherRows, Layer: l, In: []int{src, routing}, Out: xg})
	gate := g.NewRowsTensor(tensorName(l, "expert_gate"), k, m.ExpertWidth)
	g.AddMatMul(graph.Op{Kind: graph.ExpertMatMul, Layer: l, Weight: w("experts.gate_proj"), In: []int{xg, routing}, Out: gate})
	up := g.NewRowsTensor(tensorName(l, "expert_up"), k, m.ExpertWidth)
	g.AddMatMul(graph.Op{Kind: graph.ExpertMatMul, Layer: l, Weight: w("experts.up_proj"), In: []int{xg, routing}, Out: up})
	g.AddOp(graph.Op{Kind: graph.SiLUMul, Layer: l, In: []int{up}, InOut: []int{gate}, Out: graph.NoTensor})
	down := g.NewRowsTensor(tensorName(l, "expert_down"), k, c.Hidden)
	g.AddMatMul(graph.Op{Kind: graph.ExpertMatMul, Layer: l, Weight: w("experts.down_proj"), In: []int{gate, routing}, Out: down})
	out := g.NewTensor(tensorName(l, "moe_out"), T, c.Hidden)
	g.AddOp(graph.Op{Kind: graph.ExpertSum, Layer: l, In: []int{down, routing}, Out: out})
	if c.MoE.SharedWidth > 0 {
		b.sharedExpert(l, hn, out)
	}
	g.AddOp(graph.Op{Kind: graph.AddInPlace, Layer: l, In: []int{out}, InOut: []int{b.X}, Out: graph.NoTensor})
}
