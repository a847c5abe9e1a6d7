// Package graph defines the forward step of a Qwen model as a list of ops
// over named activation tensors. It is the single definition both the
// compiler's arena planner and the runtime's executor walk, so the compiled
// plan and the execution cannot drift apart: the runtime rebuilds this list
// from the config and checks every tensor against the plan in the file.
package graph

import (
	"fmt"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/kernels"
)

// Kind says what an op computes; the runtime has one case per kind.
type Kind uint8

const (
	// RopeTable fills Out with the cos (first half) and sin (second half)
	// of every position of the step: [tokens, head_dim] f32.
	RopeTable Kind = iota
	// Embed looks the tokens up in the row-major embedding into Out.
	Embed
	// RMSNorm normalises In[0] with weight section Weight into Out. With
	// LastRow, only the step's last token is normalised (the LM head of a
	// prefill step needs no other row).
	RMSNorm
	// MatMul multiplies In[0] by the tile-major Weight into Out, adding the
	// Bias section when it is set (qwen2's q/k/v).
	MatMul
	// QKRope applies, per head, the q/k RMSNorm (qwen3: Weight for q,
	// Weight2 for k) and RoPE with In[0] (the table) to InOut[0] (q) and
	// InOut[1] (k), in place.
	QKRope
	// KVStore converts In[0] (k) and In[1] (v) to f16 into the layer's KV
	// cache at the step's positions.
	KVStore
	// Attention attends In[0] (q) over the layer's KV cache into Out.
	Attention
	// AddInPlace adds In[0] to InOut[0] (the residual stream).
	AddInPlace
	// SiLUMul replaces InOut[0] (gate) by silu(gate) * In[0] (up).
	SiLUMul
	// QuantizeRows quantizes the rows of In[0] into Out (int8 activation
	// blocks, kernels.QuantizeActs), the input of the products with
	// quantized weights that follow; one Out serves every such product of
	// the same input (q, k and v; gate and up).
	QuantizeRows
)

var kindNames = [...]string{"rope_table", "embed", "rmsnorm", "matmul", "qk_rope", "kv_store", "attention", "add", "silu_mul", "quantize_rows"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Tensor is one activation of shape [Rows, Cols], row-major: f32, or with
// Quantized the int8 blocks of kernels.QuantizeActs.
type Tensor struct {
	Name       string
	Rows, Cols int
	Quantized  bool
}

// Bytes is the tensor's size.
func (t Tensor) Bytes() uint64 {
	if t.Quantized {
		return uint64(t.Rows) * uint64(kernels.QActRowBytes(t.Cols))
	}
	return uint64(t.Rows) * uint64(t.Cols) * 4
}

// NoTensor marks an op without an output.
const NoTensor = -1

// Op is one step of the forward pass. In are read; InOut are read and
// modified in place (they keep their address); Out, when not NoTensor, is a
// new tensor the op writes.
type Op struct {
	Kind    Kind
	Layer   int // -1 outside the layers
	Weight  string
	Weight2 string
	Bias    string
	LastRow bool
	In      []int
	InOut   []int
	Out     int
}

// Graph is one forward step for a fixed number of tokens.
type Graph struct {
	Mode    string // "decode" or "prefill"
	Tokens  int
	Tensors []Tensor
	Ops     []Op
	// Logits is the tensor holding the step's output logits.
	Logits int

	types     map[string]format.DType
	quantized map[int]int // f32 tensor -> its quantized copy, while unchanged
}

// Build lists the ops of one forward step over tokens tokens. Mode is
// "decode" (tokens 1) or "prefill". types gives the dtype of each weight
// section of the file (format.Header.SectionTypes; nil means all f16): a
// product with a quantized weight takes its input quantized, and a
// quantized file without an embed_tokens section looks tokens up in the
// (tied) LM head.
func Build(c *format.Config, mode string, tokens int, types map[string]format.DType) *Graph {
	g := &Graph{Mode: mode, Tokens: tokens, types: types}
	T := tokens
	rope := g.tensor("rope", T, c.HeadDim)
	g.op(Op{Kind: RopeTable, Out: rope, Layer: -1})
	x := g.tensor("x", T, c.Hidden)
	embed := format.SecEmbed
	if _, ok := types[embed]; !ok && types[format.SecLMHead].Quantized() {
		embed = format.SecLMHead
	}
	g.op(Op{Kind: Embed, Weight: embed, Out: x, Layer: -1})
	for l := 0; l < c.Layers; l++ {
		name := func(s string) string { return fmt.Sprintf("layers.%d.%s", l, s) }
		w := func(s string) string { return format.LayerSection(l, s) }
		bias := func(s string) string {
			if c.QKVBias {
				return w(s)
			}
			return ""
		}
		xn := g.tensor(name("attn_norm"), T, c.Hidden)
		g.op(Op{Kind: RMSNorm, Layer: l, Weight: w("input_layernorm"), In: []int{x}, Out: xn})
		q := g.tensor(name("q"), T, c.QDim())
		g.matmul(Op{Kind: MatMul, Layer: l, Weight: w("q_proj"), Bias: bias("q_bias"), In: []int{xn}, Out: q})
		k := g.tensor(name("k"), T, c.KVDim())
		g.matmul(Op{Kind: MatMul, Layer: l, Weight: w("k_proj"), Bias: bias("k_bias"), In: []int{xn}, Out: k})
		v := g.tensor(name("v"), T, c.KVDim())
		g.matmul(Op{Kind: MatMul, Layer: l, Weight: w("v_proj"), Bias: bias("v_bias"), In: []int{xn}, Out: v})
		qk := Op{Kind: QKRope, Layer: l, In: []int{rope}, InOut: []int{q, k}, Out: NoTensor}
		if c.QKNorm {
			qk.Weight, qk.Weight2 = w("q_norm"), w("k_norm")
		}
		g.op(qk)
		g.op(Op{Kind: KVStore, Layer: l, In: []int{k, v}, Out: NoTensor})
		att := g.tensor(name("attn"), T, c.QDim())
		g.op(Op{Kind: Attention, Layer: l, In: []int{q}, Out: att})
		o := g.tensor(name("attn_out"), T, c.Hidden)
		g.matmul(Op{Kind: MatMul, Layer: l, Weight: w("o_proj"), In: []int{att}, Out: o})
		g.op(Op{Kind: AddInPlace, Layer: l, In: []int{o}, InOut: []int{x}, Out: NoTensor})
		hn := g.tensor(name("mlp_norm"), T, c.Hidden)
		g.op(Op{Kind: RMSNorm, Layer: l, Weight: w("post_attention_layernorm"), In: []int{x}, Out: hn})
		gate := g.tensor(name("gate"), T, c.Intermediate)
		g.matmul(Op{Kind: MatMul, Layer: l, Weight: w("gate_proj"), In: []int{hn}, Out: gate})
		up := g.tensor(name("up"), T, c.Intermediate)
		g.matmul(Op{Kind: MatMul, Layer: l, Weight: w("up_proj"), In: []int{hn}, Out: up})
		g.op(Op{Kind: SiLUMul, Layer: l, In: []int{up}, InOut: []int{gate}, Out: NoTensor})
		down := g.tensor(name("down"), T, c.Hidden)
		g.matmul(Op{Kind: MatMul, Layer: l, Weight: w("down_proj"), In: []int{gate}, Out: down})
		g.op(Op{Kind: AddInPlace, Layer: l, In: []int{down}, InOut: []int{x}, Out: NoTensor})
	}
	fn := g.tensor("final_norm", 1, c.Hidden)
	g.op(Op{Kind: RMSNorm, Layer: -1, Weight: format.SecNorm, LastRow: true, In: []int{x}, Out: fn})
	g.Logits = g.tensor("logits", 1, c.Vocab)
	g.matmul(Op{Kind: MatMul, Layer: -1, Weight: format.SecLMHead, In: []int{fn}, Out: g.Logits})
	return g
}

func (g *Graph) tensor(name string, rows, cols int) int {
	g.Tensors = append(g.Tensors, Tensor{Name: name, Rows: rows, Cols: cols})
	return len(g.Tensors) - 1
}

func (g *Graph) op(o Op) {
	if len(o.InOut) > 0 {
		clear(g.quantized) // an input changed in place must be quantized anew
	}
	g.Ops = append(g.Ops, o)
}

// matmul adds a product; with a quantized weight, its input is quantized
// first, once for every product of the same, unchanged input.
func (g *Graph) matmul(o Op) {
	if !g.types[o.Weight].Quantized() {
		g.op(o)
		return
	}
	in := o.In[0]
	q, ok := g.quantized[in]
	if !ok {
		t := g.Tensors[in]
		q = g.tensor(t.Name+".q", t.Rows, t.Cols)
		g.Tensors[q].Quantized = true
		g.op(Op{Kind: QuantizeRows, Layer: o.Layer, In: []int{in}, Out: q})
		if g.quantized == nil {
			g.quantized = map[int]int{}
		}
		g.quantized[in] = q
	}
	o.In = []int{q}
	g.op(o)
}

// QType is the kernels' quantized type for a quantized dtype of the file.
func QType(d format.DType) kernels.QType {
	switch d {
	case format.Q8:
		return kernels.Q8
	case format.Q4:
		return kernels.Q4
	}
	panic(fmt.Sprintf("graph: %s is not a quantized type", d))
}

// Uses returns every tensor an op reads: In then InOut.
func (o *Op) Uses() []int {
	u := make([]int, 0, len(o.In)+len(o.InOut))
	return append(append(u, o.In...), o.InOut...)
}
