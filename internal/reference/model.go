package reference

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Model is a loaded checkpoint, every weight in float64.
type Model struct {
	Config Config
	embed  matrix // [vocab, hidden]
	head   matrix // embed when the head is tied
	norm   []float64
	layers []layer
	mtp    *mtpBlock // Qwen3.5's MTP block, nil when config.json has none
}

// matrix is a row-major [rows, cols] weight, as nn.Linear stores it
// ([out, in]), so that mul is y = W·x.
type matrix struct {
	rows, cols int
	data       []float64
}

func (m matrix) row(r int) []float64 { return m.data[r*m.cols : (r+1)*m.cols] }

func (m matrix) mul(x []float64) []float64 {
	y := make([]float64, m.rows)
	for r := range y {
		y[r] = dot(m.row(r), x)
	}
	return y
}

// layer is one decoder layer. Its norm weights are the scales the norms
// multiply by: for Qwen3.5, whose RMSNorm is zero-centred
// (Qwen3_5RMSNorm: output * (1.0 + weight)), Load stores 1 + w.
type layer struct {
	inputNorm, postNorm []float64
	// Attention: every layer of Qwen2/Qwen3, the full_attention layers of
	// Qwen3.5.
	q, k, v, o          matrix
	qBias, kBias, vBias []float64 // when the config has attention biases (always in Qwen2)
	oBias               []float64 // Qwen3's attention_bias also gives o_proj one; Qwen2's never has
	qNorm, kNorm        []float64 // Qwen3 and later: RMSNorm over each head
	// gated marks Qwen3.5's gated attention: q_proj gives each head's
	// query and then its output gate (see attention).
	gated bool
	// deltaNet is a Qwen3.5 linear_attention layer's token mixer, which
	// then has no attention weights.
	deltaNet *deltaNet
	mlp      mlp    // a dense layer
	router   matrix // a sparse layer: [experts, hidden]
	experts  []mlp
	// Qwen3.5-MoE's shared expert, added to the routed ones with the
	// weight sigmoid(sharedGate·x).
	shared     *mlp
	sharedGate matrix // [1, hidden]
}

// sparse reports whether the layer routes to experts.
func (l *layer) sparse() bool { return l.experts != nil }

type mlp struct{ gate, up, down matrix }

// deltaNet holds a Gated DeltaNet layer (Qwen3_5GatedDeltaNet).
type deltaNet struct {
	qkv    matrix    // in_proj_qkv [2·Dk + Dv, hidden]: rows q | k | v
	z      matrix    // in_proj_z [Dv, hidden]: the output gate
	b, a   matrix    // in_proj_b, in_proj_a [nv, hidden]: beta and the decay, per value head
	conv   matrix    // conv1d.weight [2·Dk + Dv, 1, K] as [2·Dk + Dv, K]
	dtBias []float64 // [nv]
	aLog   []float64 // [nv]
	norm   []float64 // [dv], a plain scale (Qwen3_5RMSNormGated multiplies by w, not 1 + w)
	out    matrix    // out_proj [hidden, Dv]
}

// mtpBlock is Qwen3.5's multi-token prediction block (mtp.*), norms
// stored as 1 + w like the decoder's.
type mtpBlock struct {
	normEmbedding, normHidden []float64
	fc                        matrix // [hidden, 2·hidden]: input [embedding ; hidden]
	layers                    []layer
	norm                      []float64
}

// Load reads config.json and the safetensors weights of the Hugging Face
// model directory dir. Every tensor must have the name and shape
// transformers expects, and no other tensor may be present: a checkpoint
// that transformers would load with missing or unexpected weights is an
// error here. (For Qwen3.5 the vision tower, model.visual.*, is the one
// exception: it is skipped, whatever it holds.)
func Load(dir string) (*Model, error) {
	c, err := ReadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	ts, err := readTensors(dir)
	if err != nil {
		return nil, err
	}
	w := weights{tensors: ts, used: map[string]bool{}}
	m := &Model{Config: c}
	if c.Hybrid() {
		w.loadQwen35(m)
	} else {
		w.loadQwen(m)
	}
	if err := w.finish(); err != nil {
		return nil, fmt.Errorf("reference: %s: %w", dir, err)
	}
	return m, nil
}

// loadQwen reads a Qwen2, Qwen3 or Qwen3-MoE checkpoint.
func (w *weights) loadQwen(m *Model) {
	c := m.Config
	h, q, kv := c.Hidden, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	m.embed = w.matrix("model.embed_tokens.weight", c.Vocab, h)
	m.head = m.embed
	if !c.Tied {
		m.head = w.matrix("lm_head.weight", c.Vocab, h)
	}
	m.norm = w.vector("model.norm.weight", h)
	for i := range c.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		l := layer{
			inputNorm: w.vector(p+"input_layernorm.weight", h),
			postNorm:  w.vector(p+"post_attention_layernorm.weight", h),
			q:         w.matrix(p+"self_attn.q_proj.weight", q, h),
			k:         w.matrix(p+"self_attn.k_proj.weight", kv, h),
			v:         w.matrix(p+"self_attn.v_proj.weight", kv, h),
			o:         w.matrix(p+"self_attn.o_proj.weight", h, q),
		}
		if c.AttentionBias {
			l.qBias = w.vector(p+"self_attn.q_proj.bias", q)
			l.kBias = w.vector(p+"self_attn.k_proj.bias", kv)
			l.vBias = w.vector(p+"self_attn.v_proj.bias", kv)
			if c.ModelType != "qwen2" {
				l.oBias = w.vector(p+"self_attn.o_proj.bias", h)
			}
		}
		if c.ModelType != "qwen2" {
			l.qNorm = w.vector(p+"self_attn.q_norm.weight", c.HeadDim)
			l.kNorm = w.vector(p+"self_attn.k_norm.weight", c.HeadDim)
		}
		if c.Sparse(i) {
			l.router = w.matrix(p+"mlp.gate.weight", c.Experts, h)
			for e := range c.Experts {
				l.experts = append(l.experts, w.mlp(fmt.Sprintf("%smlp.experts.%d.", p, e), h, c.MoEIntermediate))
			}
		} else {
			l.mlp = w.mlp(p+"mlp.", h, c.Intermediate)
		}
		m.layers = append(m.layers, l)
	}
}

// loadQwen35 reads a Qwen3.5 or Qwen3.5-MoE checkpoint (section 3 of the
// design note): the text model under model.language_model. as shipped
// (Qwen3_5ForConditionalGeneration), or under model. (Qwen3_5ForCausalLM),
// the MTP block under mtp., and a vision tower under model.visual. that is
// skipped.
func (w *weights) loadQwen35(m *Model) {
	c := m.Config
	h := c.Hidden
	p := "model."
	if _, ok := w.tensors["model.language_model.embed_tokens.weight"]; ok {
		p = "model.language_model."
	}
	for name := range w.tensors {
		if strings.HasPrefix(name, "model.visual.") {
			w.used[name] = true
		}
	}
	m.embed = w.matrix(p+"embed_tokens.weight", c.Vocab, h)
	m.head = m.embed
	if !c.Tied {
		m.head = w.matrix("lm_head.weight", c.Vocab, h)
	}
	m.norm = w.norm1p(p+"norm.weight", h)
	for i := range c.Layers {
		m.layers = append(m.layers, w.qwen35Layer(fmt.Sprintf("%slayers.%d.", p, i), c, c.Linear(i)))
	}
	if c.MTPLayers == 0 {
		return
	}
	m.mtp = &mtpBlock{
		normEmbedding: w.norm1p("mtp.pre_fc_norm_embedding.weight", h),
		normHidden:    w.norm1p("mtp.pre_fc_norm_hidden.weight", h),
		fc:            w.matrix("mtp.fc.weight", h, 2*h),
		norm:          w.norm1p("mtp.norm.weight", h),
	}
	for i := range c.MTPLayers {
		m.mtp.layers = append(m.mtp.layers, w.qwen35Layer(fmt.Sprintf("mtp.layers.%d.", i), c, false))
	}
}

// qwen35Layer reads one Qwen3.5 decoder layer (Qwen3_5DecoderLayer),
// a Gated DeltaNet one when linear, else a gated attention one.
func (w *weights) qwen35Layer(p string, c Config, linear bool) layer {
	h, hd := c.Hidden, c.HeadDim
	l := layer{inputNorm: w.norm1p(p+"input_layernorm.weight", h), postNorm: w.norm1p(p+"post_attention_layernorm.weight", h)}
	if linear {
		nv, dk, dv := c.LinearValueHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim
		conv := 2*c.LinearKeyHeads*dk + nv*dv
		a := p + "linear_attn."
		l.deltaNet = &deltaNet{
			qkv:    w.matrix(a+"in_proj_qkv.weight", conv, h),
			z:      w.matrix(a+"in_proj_z.weight", nv*dv, h),
			b:      w.matrix(a+"in_proj_b.weight", nv, h),
			a:      w.matrix(a+"in_proj_a.weight", nv, h),
			conv:   matrix{rows: conv, cols: c.ConvKernel, data: w.get(a+"conv1d.weight", conv, 1, c.ConvKernel)},
			dtBias: w.vector(a+"dt_bias", nv),
			aLog:   w.vector(a+"A_log", nv),
			norm:   w.vector(a+"norm.weight", dv),
			out:    w.matrix(a+"out_proj.weight", h, nv*dv),
		}
	} else {
		q, kv := c.Heads*hd, c.KVHeads*hd
		l.gated = true
		l.q = w.matrix(p+"self_attn.q_proj.weight", 2*q, h)
		l.k = w.matrix(p+"self_attn.k_proj.weight", kv, h)
		l.v = w.matrix(p+"self_attn.v_proj.weight", kv, h)
		l.o = w.matrix(p+"self_attn.o_proj.weight", h, q)
		l.qNorm = w.norm1p(p+"self_attn.q_norm.weight", hd)
		l.kNorm = w.norm1p(p+"self_attn.k_norm.weight", hd)
	}
	if c.ModelType == "qwen3_5" {
		l.mlp = w.mlp(p+"mlp.", h, c.Intermediate)
		return l
	}
	l.router = w.matrix(p+"mlp.gate.weight", c.Experts, h)
	if _, fused := w.tensors[p+"mlp.experts.gate_up_proj"]; fused {
		l.experts = w.fusedExperts(p+"mlp.experts.", c.Experts, h, c.MoEIntermediate)
	} else {
		for e := range c.Experts {
			l.experts = append(l.experts, w.mlp(fmt.Sprintf("%smlp.experts.%d.", p, e), h, c.MoEIntermediate))
		}
	}
	shared := w.mlp(p+"mlp.shared_expert.", h, c.SharedExpertIntermediate)
	l.shared = &shared
	l.sharedGate = w.matrix(p+"mlp.shared_expert_gate.weight", 1, h)
	return l
}

// weights hands out the checkpoint's tensors by name, recording the first
// problem and which tensors were taken, so Load reads as a list of names.
type weights struct {
	tensors map[string]tensor
	used    map[string]bool
	err     error
}

func (w *weights) get(name string, shape ...int) []float64 {
	t, ok := w.tensors[name]
	switch {
	case w.err != nil:
		return nil
	case !ok:
		w.err = fmt.Errorf("tensor %s is missing", name)
	case !slices.Equal(t.shape, shape):
		w.err = fmt.Errorf("tensor %s has shape %v, want %v", name, t.shape, shape)
	}
	w.used[name] = true
	return t.data
}

func (w *weights) vector(name string, n int) []float64 { return w.get(name, n) }

// norm1p returns 1 + w for a zero-centred norm weight w (Qwen3_5RMSNorm);
// 1 + w is exact in float64 for any BF16, F16 or F32 w.
func (w *weights) norm1p(name string, n int) []float64 {
	v := w.get(name, n)
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = 1 + x
	}
	return out
}

func (w *weights) matrix(name string, rows, cols int) matrix {
	return matrix{rows: rows, cols: cols, data: w.get(name, rows, cols)}
}

func (w *weights) mlp(prefix string, hidden, ffn int) mlp {
	return mlp{gate: w.matrix(prefix+"gate_proj.weight", ffn, hidden), up: w.matrix(prefix+"up_proj.weight", ffn, hidden),
		down: w.matrix(prefix+"down_proj.weight", hidden, ffn)}
}

// fusedExperts splits the 3-D expert tensors of Qwen3_5MoeExperts:
// gate_up_proj [experts, 2·ffn, hidden], each expert's gate rows then its
// up rows, and down_proj [experts, hidden, ffn].
func (w *weights) fusedExperts(prefix string, experts, hidden, ffn int) []mlp {
	gateUp := w.get(prefix+"gate_up_proj", experts, 2*ffn, hidden)
	down := w.get(prefix+"down_proj", experts, hidden, ffn)
	if w.err != nil {
		return nil
	}
	out := make([]mlp, experts)
	for e := range out {
		gu := gateUp[e*2*ffn*hidden : (e+1)*2*ffn*hidden]
		out[e] = mlp{gate: matrix{rows: ffn, cols: hidden, data: gu[:ffn*hidden]},
			up:   matrix{rows: ffn, cols: hidden, data: gu[ffn*hidden:]},
			down: matrix{rows: hidden, cols: ffn, data: down[e*hidden*ffn : (e+1)*hidden*ffn]}}
	}
	return out
}

func (w *weights) finish() error {
	if w.err != nil {
		return w.err
	}
	var extra []string
	for name := range w.tensors {
		if !w.used[name] {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return fmt.Errorf("%d unexpected tensors, first %s", len(extra), extra[0])
	}
	return nil
}
