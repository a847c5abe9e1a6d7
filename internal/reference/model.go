package reference

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
)

// Model is a loaded checkpoint, every weight in float64.
type Model struct {
	Config Config
	embed  matrix // [vocab, hidden]
	head   matrix // embed when the head is tied
	norm   []float64
	layers []layer
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

type layer struct {
	inputNorm, postNorm []float64
	q, k, v, o          matrix
	qBias, kBias, vBias []float64 // when the config has attention biases (always in Qwen2)
	oBias               []float64 // Qwen3's attention_bias also gives o_proj one; Qwen2's never has
	qNorm, kNorm        []float64 // Qwen3 and Qwen3-MoE: RMSNorm over each head
	mlp                 mlp       // a dense layer
	router              matrix    // a sparse layer: [experts, hidden]
	experts             []mlp
}

// sparse reports whether the layer routes to experts.
func (l *layer) sparse() bool { return l.experts != nil }

type mlp struct{ gate, up, down matrix }

// Load reads config.json and the safetensors weights of the Hugging Face
// model directory dir. Every tensor must have the name and shape
// transformers expects, and no other tensor may be present: a checkpoint
// that transformers would load with missing or unexpected weights is an
// error here.
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
	if err := w.finish(); err != nil {
		return nil, fmt.Errorf("reference: %s: %w", dir, err)
	}
	return m, nil
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

func (w *weights) matrix(name string, rows, cols int) matrix {
	return matrix{rows: rows, cols: cols, data: w.get(name, rows, cols)}
}

func (w *weights) mlp(prefix string, hidden, ffn int) mlp {
	return mlp{gate: w.matrix(prefix+"gate_proj.weight", ffn, hidden), up: w.matrix(prefix+"up_proj.weight", ffn, hidden),
		down: w.matrix(prefix+"down_proj.weight", hidden, ffn)}
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
