package arch

import (
	"fmt"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/graph"
)

// The blocks of the hybrid models (Qwen3.5: design note qwen35.md,
// section 4), each as its tensors and its ops side by side, as the
// blocks of blocks.go are: a Gated DeltaNet layer's linear attention, a
// full-attention layer's gated attention, and the shared expert beside
// the routed ones.

// deltaNetTensors is the Gated DeltaNet block of layer l: input norm, the
// projections of q | k | v, z, b and a, the causal convolution, the
// per-head A and dt_bias, the gated output norm and out_proj.
func deltaNetTensors(c *format.Config, lt layerTensors) []Tensor {
	hy := &c.Hybrid
	h, dk, dv, nv := c.Hidden, hy.KeyHeads*hy.KeyDim, hy.ValueHeads*hy.ValueDim, hy.ValueHeads
	mixed := 2*dk + dv
	return []Tensor{lt.vec(format.KindNorm, "input_layernorm", "input_layernorm.weight", h),
		lt.mat(format.KindProjection, "in_proj_qkv", "linear_attn.in_proj_qkv.weight", mixed, h),
		lt.mat(format.KindProjection, "in_proj_z", "linear_attn.in_proj_z.weight", dv, h),
		lt.mat(format.KindProjection, "in_proj_b", "linear_attn.in_proj_b.weight", nv, h),
		lt.mat(format.KindProjection, "in_proj_a", "linear_attn.in_proj_a.weight", nv, h),
		lt.mat(format.KindConv, "conv1d", "linear_attn.conv1d.weight", mixed, hy.ConvKernel),
		lt.vec(format.KindParam, "ssm_a", "linear_attn.A_log", nv),
		lt.vec(format.KindParam, "dt_bias", "linear_attn.dt_bias", nv),
		lt.vec(format.KindNorm, "linear_norm", "linear_attn.norm.weight", hy.ValueDim),
		lt.mat(format.KindProjection, "out_proj", "linear_attn.out_proj.weight", h, dv)}
}

// deltaNet adds x += out_proj(gated_norm(delta_rule(conv(qkv(n)), a(n),
// b(n)), z(n))) for layer l, n = norm(x). The four projections of n run
// as one task; the convolution's last inputs and the delta rule's
// matrices are the layer's two recurrent states.
func (b *Builder) deltaNet(l int) {
	g, c, T := b.G, b.C, b.T
	hy := &c.Hybrid
	w := func(s string) string { return format.LayerSection(l, s) }
	dk, dv, nv := hy.KeyHeads*hy.KeyDim, hy.ValueHeads*hy.ValueDim, hy.ValueHeads
	mixed := 2*dk + dv
	xn := g.NewTensor(tensorName(l, "attn_norm"), T, c.Hidden)
	g.AddOp(graph.Op{Kind: graph.RMSNorm, Layer: l, Weight: w("input_layernorm"), In: []int{b.X}, Out: xn})
	qkv := g.NewTensor(tensorName(l, "qkv"), T, mixed)
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: w("in_proj_qkv"), In: []int{xn}, Out: qkv})
	z := g.NewTensor(tensorName(l, "z"), T, dv)
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: w("in_proj_z"), In: []int{xn}, Out: z})
	beta := g.NewTensor(tensorName(l, "b"), T, nv)
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: w("in_proj_b"), In: []int{xn}, Out: beta})
	alpha := g.NewTensor(tensorName(l, "a"), T, nv)
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: w("in_proj_a"), In: []int{xn}, Out: alpha})
	window := g.AddState(graph.State{Kind: graph.Recurrent, Layer: l, Floats: (hy.ConvKernel - 1) * mixed})
	conv := g.NewTensor(tensorName(l, "conv"), T, mixed)
	g.AddOp(graph.Op{Kind: graph.CausalConv, Layer: l, State: window, Weight: w("conv1d"), In: []int{qkv}, Out: conv})
	// Per value head its [key_dim, value_dim] matrix and the pending
	// rank-1 term (key_dim + value_dim) the runtime's recurrence keeps
	// beside it, so that a token reads and writes the matrix once
	// (kernels.DeltaHead).
	matrices := g.AddState(graph.State{Kind: graph.Recurrent, Layer: l, Floats: nv * (hy.KeyDim*hy.ValueDim + hy.KeyDim + hy.ValueDim)})
	o := g.NewTensor(tensorName(l, "delta"), T, dv)
	g.AddOp(graph.Op{Kind: graph.GatedDeltaRule, Layer: l, State: matrices, Weight: w("ssm_a"), Weight2: w("dt_bias"),
		In: []int{conv, alpha, beta}, Out: o})
	g.AddOp(graph.Op{Kind: graph.GatedRMSNorm, Layer: l, Weight: w("linear_norm"), In: []int{z}, InOut: []int{o}, Out: graph.NoTensor})
	out := g.NewTensor(tensorName(l, "attn_out"), T, c.Hidden)
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: w("out_proj"), In: []int{o}, Out: out})
	g.AddOp(graph.Op{Kind: graph.AddInPlace, Layer: l, In: []int{out}, InOut: []int{b.X}, Out: graph.NoTensor})
}

// gatedAttentionTensors is the attention block of layer l with an output
// gate: q_proj's rows hold each head's query then its gate, which the
// compiler splits into q_proj and q_gate (Transform).
func gatedAttentionTensors(c *format.Config, lt layerTensors) []Tensor {
	ts := attentionTensors(c, lt)
	gate := lt.mat(format.KindProjection, "q_gate", "self_attn.q_proj.weight", c.QDim(), c.Hidden)
	return append(ts[:len(ts)-1:len(ts)-1], gate, ts[len(ts)-1])
}

// sharedExpertTensors is layer l's shared expert: its SwiGLU MLP and its
// gate [1, hidden].
func sharedExpertTensors(c *format.Config, lt layerTensors) []Tensor {
	h, s := c.Hidden, c.MoE.SharedWidth
	return []Tensor{lt.mat(format.KindProjection, "shared.gate_proj", "mlp.shared_expert.gate_proj.weight", s, h),
		lt.mat(format.KindProjection, "shared.up_proj", "mlp.shared_expert.up_proj.weight", s, h),
		lt.mat(format.KindProjection, "shared.down_proj", "mlp.shared_expert.down_proj.weight", h, s),
		lt.mat(format.KindProjection, "shared.gate", "mlp.shared_expert_gate.weight", 1, h)}
}

// sharedExpert adds to out, the routed experts' sum, layer l's shared
// expert's output times sigmoid(shared_expert_gate · n), n the MLP's
// normed input.
func (b *Builder) sharedExpert(l, n, out int) {
	g, c, T := b.G, b.C, b.T
	w := func(s string) string { return format.LayerSection(l, s) }
	s := c.MoE.SharedWidth
	gate := g.NewTensor(tensorName(l, "shared_gate_proj"), T, s)
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: w("shared.gate_proj"), In: []int{n}, Out: gate})
	up := g.NewTensor(tensorName(l, "shared_up"), T, s)
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: w("shared.up_proj"), In: []int{n}, Out: up})
	scale := g.NewTensor(tensorName(l, "shared_gate"), T, 1)
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: w("shared.gate"), In: []int{n}, Out: scale})
	g.AddOp(graph.Op{Kind: graph.SiLUMul, Layer: l, In: []int{up}, InOut: []int{gate}, Out: graph.NoTensor})
	down := g.NewTensor(tensorName(l, "shared_down"), T, c.Hidden)
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: w("shared.down_proj"), In: []int{gate}, Out: down})
	g.AddOp(graph.Op{Kind: graph.SigmoidScaleAdd, Layer: l, In: []int{down, scale}, InOut: []int{out}, Out: graph.NoTensor})
}

// fusedExperts names, for the stacked sections of layer l's experts, the
// fused checkpoint tensors they may come from instead of one tensor per
// expert (Qwen3.5-35B-A3B ships both layouts: gate_up_proj [experts,
// 2 x width, hidden], gate rows first, and down_proj [experts, hidden,
// width], with no ".weight").
func fusedExperts(ts []Tensor, prefix string, width int) {
	for i := range ts {
		switch ts[i].Role {
		case "experts.gate_proj":
			ts[i].Fused = Fused{Name: prefix + "mlp.experts.gate_up_proj", Rows: 2 * width}
		case "experts.up_proj":
			ts[i].Fused = Fused{Name: prefix + "mlp.experts.gate_up_proj", Rows: 2 * width, Row0: width}
		case "experts.down_proj":
			ts[i].Fused = Fused{Name: prefix + "mlp.experts.down_proj", Rows: int(ts[i].Shape[1])}
		}
	}
}

// layerPrefix is the checkpoint's prefix of layer l's tensors.
func layerPrefix(l int) string { return fmt.Sprintf("model.layers.%d.", l) }
