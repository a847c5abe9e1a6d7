package arch

import (
	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/graph"
)

// The multi-token-prediction (MTP) block (design note qwen35.md, section
// 5): a layer that guesses the token after the next from the main
// model's hidden state at a position and the next token's embedding. It
// is a program of its own, beside the main step's, with an arena planned
// at compile time as theirs are (the modes MTPDecode and MTPPrefill); its
// rows are the main model's positions, and its one attention layer (layer
// num_hidden_layers) keeps a KV cache of its own over them.

// The MTP programs' modes.
const (
	MTPDecode  = "mtp_decode"
	MTPPrefill = "mtp_prefill"
)

// BuildMTP lists the ops of one step of architecture a's first MTP layer
// over tokens rows: row j takes the main model's hidden state at position
// j after its final norm (graph.HiddenIn; a chained guess takes the MTP
// layer's own output after mtp.norm in its place, as vLLM's drafter
// does), and the token that follows position j (the step's tokens), and
// the step's output is the logits of its last row, which guess the token
// after that one. Rows are pre_fc_norm_hidden of the hidden state and
// pre_fc_norm_embedding of the embedding, joined by mtp.fc (its two
// halves, mtp.fc_e and mtp.fc_h, as two products), then the MTP layer,
// mtp.norm and the main LM head. It returns nil for an architecture or a
// config without MTP.
func BuildMTP(a Arch, c *format.Config, mode string, tokens int, types map[string]format.DType) *graph.Graph {
	if _, ok := a.(mtpArch); !ok || c.MTPLayers == 0 {
		return nil
	}
	l := c.Layers // the MTP layer, numbered after the main ones
	g := graph.New(mode, tokens, types)
	b := &Builder{G: g, C: c, T: tokens}
	b.Rope = g.NewTensor("rope", tokens, c.Rotary())
	g.AddOp(graph.Op{Kind: graph.RopeTable, Out: b.Rope, Layer: -1})
	hidden := g.NewTensor("mtp.hidden", tokens, c.Hidden)
	g.AddOp(graph.Op{Kind: graph.HiddenIn, Layer: l, Out: hidden})
	norm := func(in int, name, weight string) int {
		out := g.NewTensor(name, tokens, c.Hidden)
		g.AddOp(graph.Op{Kind: graph.RMSNorm, Layer: l, Weight: weight, In: []int{in}, Out: out})
		return out
	}
	hn := norm(hidden, "mtp.hidden_norm", "mtp.pre_fc_norm_hidden")
	emb := g.NewTensor("mtp.embed", tokens, c.Hidden)
	embed := format.SecEmbed
	if !g.HasWeight(embed) && g.WeightType(format.SecLMHead).Quantized() {
		embed = format.SecLMHead
	}
	g.AddOp(graph.Op{Kind: graph.Embed, Weight: embed, Out: emb, Layer: l})
	en := norm(emb, "mtp.embed_norm", "mtp.pre_fc_norm_embedding")
	b.X = g.NewTensor("mtp.x", tokens, c.Hidden)
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: "mtp.fc_e", In: []int{en}, Out: b.X})
	fh := g.NewTensor("mtp.fc_hidden", tokens, c.Hidden)
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: l, Weight: "mtp.fc_h", In: []int{hn}, Out: fh})
	g.AddOp(graph.Op{Kind: graph.AddInPlace, Layer: l, In: []int{fh}, InOut: []int{b.X}, Out: graph.NoTensor})
	// The first MTP layer guesses the token after the next; a second would
	// guess one further from the first's output. Qwen3.5 ships one, and
	// the file holds any more for an engine that chains them.
	a.(mtpArch).BuildMTPLayer(b, l)
	fn := g.NewTensor("mtp.norm", 1, c.Hidden)
	g.AddOp(graph.Op{Kind: graph.RMSNorm, Layer: -1, Weight: "mtp.norm", LastRow: true, In: []int{b.X}, Out: fn})
	g.Logits = g.NewTensor("logits", 1, c.Vocab)
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: -1, Weight: format.SecLMHead, In: []int{fn}, Out: g.Logits})
	return g
}
