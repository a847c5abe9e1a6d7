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
	// of every position of the step: [tokens, rotated dims] f32.
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
	// InOut[1] (k), in place: the table's width is the rotated dimensions
	// (all of head_dim, or Qwen3.5's first quarter), the rest pass
	// through.
	QKRope
	// KVStore writes In[0] (k) and In[1] (v) into each sequence's
	// AttentionKV state State at the step's positions.
	KVStore
	// Attention attends In[0] (q) over each sequence's AttentionKV state
	// State into Out.
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
	// Route picks each token's experts from the router logits In[0]
	// ([tokens, experts]) into the routing table Out (see Routing):
	// softmax over all experts, the top k (lower index first on ties),
	// renormalised when the config says so.
	Route
	// GatherRows copies the rows of In[0] (f32 or quantized) into Out in
	// the routing table In[1]'s expert order: Out has tokens*k rows, the
	// tokens of expert 0 first.
	GatherRows
	// ExpertMatMul multiplies the gathered rows In[0] by their experts'
	// matrices in the stacked Weight [experts, n, k] into Out
	// ([tokens*k, n]), each expert one product over its rows.
	ExpertMatMul
	// ExpertSum writes each token's routing-weighted sum of its experts'
	// rows of In[0] ([tokens*k, hidden]) into Out ([tokens, hidden]).
	ExpertSum
	// CausalConv convolves each channel of In[0] ([tokens, channels]) over
	// time with the depthwise kernel Weight ([channels * width] f32, the
	// taps of channel c at [c*width, (c+1)*width), the last multiplying the
	// current token), then applies SiLU, into Out: out[t][c] =
	// silu(Σ_j w[c][j] · in[t-width+1+j][c]), where the inputs before a
	// sequence's first token are zero. Each sequence's Recurrent state
	// State holds its last width-1 inputs ([width-1, channels]).
	CausalConv
	// GatedDeltaRule is a Gated DeltaNet's recurrence (design note
	// qwen35.md 4.4) over the convolved q | k | v rows In[0] ([tokens,
	// 2*key_dim + value_dim]), the decay inputs a In[1] and the write
	// strengths b In[2] ([tokens, value heads]), with Weight the per-head
	// A = -exp(A_log) and Weight2 dt_bias, into Out ([tokens, value_dim]):
	// q and k L2-normalised per head, q scaled by key_head_dim^-0.5,
	// beta = sigmoid(b), g = A * softplus(a + dt_bias); per value head
	// (reading key head h / (value heads / key heads)) the state S
	// [key_head_dim, value_head_dim] decays by exp(g), takes
	// k (x) beta (v - S^T k), and the output is S^T q. Each sequence's
	// Recurrent state State holds S of every value head.
	GatedDeltaRule
	// GatedRMSNorm normalises each value_head_dim-wide head of InOut[0]
	// with the plain weight Weight and multiplies it by silu of the same
	// head of In[0] (Gated DeltaNet's output norm, gated by z).
	GatedRMSNorm
	// SigmoidMul multiplies InOut[0] by sigmoid(In[0]), elementwise (the
	// attention output gate).
	SigmoidMul
	// SigmoidScaleAdd adds In[0] times sigmoid(In[1][t][0]), each row
	// scaled by its token's one gate value, to InOut[0] (the shared
	// expert, gated by shared_expert_gate).
	SigmoidScaleAdd
	// HiddenIn fills Out ([tokens, hidden]) with the rows the caller hands
	// the step: the MTP block's input, the main model's residual stream at
	// the rows' positions.
	HiddenIn
)

var kindNames = [...]string{"rope_table", "embed", "rmsnorm", "matmul", "qk_rope", "kv_store", "attention", "add", "silu_mul",
	"quantize_rows", "route", "gather_rows", "expert_matmul", "expert_sum", "causal_conv", "gated_delta_rule",
	"gated_rmsnorm", "sigmoid_mul", "sigmoid_scale_add", "hidden_in"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Tensor is one activation of shape [Rows, Cols], row-major: f32, or with
// Quantized the int8 blocks of kernels.QuantizeActs. A routing table is
// one row of 32-bit words (Routing).
type Tensor struct {
	Name       string
	Rows, Cols int // as planned, for the graph's number of tokens
	Quantized  bool
	// PerToken is the tensor's rows per token of a step (1, or k for the
	// rows gathered for k experts per token); 0 for a tensor of fixed
	// size (the last row's norm and logits, a routing table).
	PerToken int
}

// RowsFor is how many rows of the tensor a step of tokens tokens uses.
func (t *Tensor) RowsFor(tokens int) int {
	if t.PerToken == 0 {
		return t.Rows
	}
	return t.PerToken * tokens
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
	Kind  Kind
	Layer int // -1 outside the layers
	// State is the index in Graph.States of the per-sequence state the op
	// reads and writes (KVStore, Attention, CausalConv).
	State   int
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
	// States are what each sequence keeps between steps, for the ops
	// that name them (Op.State).
	States []State

	types     map[string]format.DType
	quantized map[int]int // f32 tensor -> its quantized copy, while unchanged
}

// New starts an empty graph of one forward step over tokens tokens. Mode
// is "decode" (tokens 1) or "prefill". types gives the dtype of each
// weight section of the file (format.Header.SectionTypes; nil means all
// f16): a product with a quantized weight takes its input quantized.
// Package arch fills it, one architecture at a time.
func New(mode string, tokens int, types map[string]format.DType) *Graph {
	return &Graph{Mode: mode, Tokens: tokens, types: types}
}

// WeightType is the dtype of a weight section (f16 when types is nil or
// does not list it).
func (g *Graph) WeightType(section string) format.DType {
	if t, ok := g.types[section]; ok {
		return t
	}
	return format.F16
}

// HasWeight reports whether the file has the section (always, with nil
// types).
func (g *Graph) HasWeight(section string) bool {
	_, ok := g.types[section]
	return ok || g.types == nil
}

// NewTensor adds an f32 activation of rows rows (one per token when rows
// is the graph's tokens, else a fixed number) and cols columns.
func (g *Graph) NewTensor(name string, rows, cols int) int {
	per := 0
	if rows == g.Tokens {
		per = 1
	}
	g.Tensors = append(g.Tensors, Tensor{Name: name, Rows: rows, Cols: cols, PerToken: per})
	return len(g.Tensors) - 1
}

// NewRowsTensor adds an f32 activation of perToken rows per token.
func (g *Graph) NewRowsTensor(name string, perToken, cols int) int {
	g.Tensors = append(g.Tensors, Tensor{Name: name, Rows: perToken * g.Tokens, Cols: cols, PerToken: perToken})
	return len(g.Tensors) - 1
}

// AddOp appends an op.
func (g *Graph) AddOp(o Op) {
	if len(o.InOut) > 0 {
		clear(g.quantized) // an input changed in place must be quantized anew
	}
	g.Ops = append(g.Ops, o)
}

// AddMatMul appends a product (MatMul or ExpertMatMul); with a quantized
// weight, its input In[0] is quantized first, once for every product of
// the same, unchanged input.
func (g *Graph) AddMatMul(o Op) {
	if g.WeightType(o.Weight).Quantized() && !g.Tensors[o.In[0]].Quantized {
		o.In = append([]int{g.QuantizedCopy(o.In[0], o.Layer)}, o.In[1:]...)
	}
	g.AddOp(o)
}

// QuantizedCopy returns the int8 copy of f32 tensor in, adding the
// QuantizeRows op that makes it unless the unchanged tensor already has
// one.
func (g *Graph) QuantizedCopy(in, layer int) int {
	if q, ok := g.quantized[in]; ok {
		return q
	}
	q := len(g.Tensors)
	g.Tensors = append(g.Tensors, g.Tensors[in])
	g.Tensors[q].Name += ".q"
	g.Tensors[q].Quantized = true
	g.AddOp(Op{Kind: QuantizeRows, Layer: layer, In: []int{in}, Out: q})
	if g.quantized == nil {
		g.quantized = map[int]int{}
	}
	g.quantized[in] = q
	return q
}

// Routing is the layout of a routing table for tokens tokens, experts
// experts and k experts per token, in 32-bit words: for each token t and
// choice j (index t*k+j), its weight (f32) and expert (int32); per expert
// the first of its rows in gathered order (experts+1 int32, the last the
// total); and per choice the gathered row that holds it (int32). Gathered
// rows are ordered by expert, then by token.
type Routing struct{ Tokens, Experts, K int }

// Words is the table's size in 32-bit words.
func (r Routing) Words() int { return 3*r.Tokens*r.K + r.Experts + 1 }

// Offsets of each part of the table, in words.
func (r Routing) WeightAt() int { return 0 }
func (r Routing) ExpertAt() int { return r.Tokens * r.K }
func (r Routing) StartAt() int  { return 2 * r.Tokens * r.K }
func (r Routing) RowAt() int    { return 2*r.Tokens*r.K + r.Experts + 1 }

// Uses returns every tensor an op reads: In then InOut.
func (o *Op) Uses() []int {
	u := make([]int, 0, len(o.In)+len(o.InOut))
	return append(append(u, o.In...), o.InOut...)
}
