package arch

import (
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/graph"
)

// Arch is one architecture.
type Arch interface {
	// ModelType is config.json's model_type.
	ModelType() string
	// Configure reads the architecture's own fields of config.json into c,
	// whose common fields are already set, and sets its flags (q/k norm,
	// biases, experts).
	Configure(c *format.Config, hf *HFConfig) error
	// Layer lists layer l's tensors in file order.
	Layer(c *format.Config, l int) []Tensor
	// Transform is what the compiler does to tensor t's checkpoint values
	// before converting them to the section's dtype (transform.go holds
	// the transforms); the zero Transform does nothing.
	Transform(c *format.Config, t *Tensor) Transform
	// BuildLayer appends layer l's ops to the step.
	BuildLayer(b *Builder, l int)
	// Features are the features (format.Features) the architecture's
	// units run. Validate refuses a file of the architecture whose keys
	// need another: Layer and BuildLayer would ignore them, or build a
	// step the file's sections and plans do not have.
	Features() []string
}

// commonFeatures are the features every built-in architecture runs: the
// blocks of blocks.go and the step's RoPE and output (Build) read them
// whatever the unit, and Tensors lists their sections.
func commonFeatures() []string {
	return []string{"embedding", "partial_rotary", "qk_norm", "qkv_bias", "rope_scaling.linear", "rope_scaling.yarn"}
}

// Registry is a set of architectures, found by model_type. The compiler
// and the runtime take one; Builtin is what they take by default, and a
// program (or a test) may add architectures of its own with With.
type Registry []Arch

// Builtin returns the architectures this build knows.
func Builtin() Registry {
	return Registry{qwen2{}, qwen3{}, qwen3MoE{}, qwen35{}, qwen35{moe: true}}
}

// comingSoon are model types people will try that this build does not
// run yet, and what they are, for a plain refusal.
var comingSoon = map[string]string{
	"qwen4_exp": "Qwen3.8-Flash-Next",
}

// With returns r and a, a new registry (r is not changed).
func (r Registry) With(a ...Arch) Registry { return append(slices.Clip(r), a...) }

// For returns the architecture of a model_type.
func (r Registry) For(modelType string) (Arch, error) {
	var known []string
	for _, a := range r {
		if a.ModelType() == modelType {
			return a, nil
		}
		known = append(known, a.ModelType())
	}
	if name, ok := comingSoon[modelType]; ok {
		return nil, fmt.Errorf("model_type %q (%s) is not supported yet; this build runs %s", modelType, name, strings.Join(known, ", "))
	}
	return nil, fmt.Errorf("model_type %q not supported (%s)", modelType, strings.Join(known, ", "))
}

// OrBuiltin returns r, or Builtin when r is empty: the zero Registry of an
// options struct means the built-in architectures.
func (r Registry) OrBuiltin() Registry {
	if len(r) == 0 {
		return Builtin()
	}
	return r
}

// Tensor is one section of the file and the checkpoint tensors it is made
// of.
type Tensor struct {
	Section string // its name in the file
	// HF are the checkpoint tensors, by Hugging Face name: one, or for
	// stacked experts one per expert in expert order.
	HF []string
	// Kind is what the section holds, stored in the file's directory: it
	// decides the dtype and layout (format.Kind.Admits; a matrix kind is
	// stored tile-major in the weight type the compiler picks, the others
	// in f32), and what the runtime and the memory report make of it.
	Kind format.Kind
	// Shape is [n] for a vector, [n, k] for a matrix and [experts, n, k]
	// for stacked experts.
	Shape []uint64
	// Role is the section's name without "layers.N." ("q_proj",
	// "experts.down_proj", "router", "lm_head", "embed_tokens", "norm"),
	// stored in the directory; the compiler chooses a matrix's weight type
	// by it.
	Role  string
	Layer int // -1 outside the layers
	// Fused, for stacked experts, is a fused checkpoint tensor that holds
	// the section when HF's per-expert tensors are not in the checkpoint.
	Fused Fused
}

// Fused is a checkpoint tensor [experts, Rows, k] whose rows [Row0, Row0 +
// n) of each expert are one stacked-experts section [experts, n, k].
type Fused struct {
	Name       string // "": none
	Rows, Row0 int
}

// K is a matrix's number of columns (its input width).
func (t *Tensor) K() int { return int(t.Shape[len(t.Shape)-1]) }

// Tensors yields every weight tensor of a model in file order: the
// embedding, the layers, the final norm and the LM head. It is an
// iterator because num_hidden_layers may come from a hostile file, and a
// list of every layer's tensors would be built before the first problem
// is found.
//
// An embedding model's checkpoint is the bare Qwen3Model, as
// Qwen3-Embedding ships: its tensors are named without "model.", and it
// has no LM head.
func Tensors(a Arch, c *format.Config) iter.Seq[Tensor] {
	all := tensors(a, c)
	if !c.Embedding {
		return all
	}
	return func(yield func(Tensor) bool) {
		for t := range all {
			if t.Section == format.SecLMHead {
				return
			}
			for i, name := range t.HF {
				t.HF[i] = strings.TrimPrefix(name, "model.")
			}
			if !yield(t) {
				return
			}
		}
	}
}

func tensors(a Arch, c *format.Config) iter.Seq[Tensor] {
	return func(yield func(Tensor) bool) {
		h, v := uint64(c.Hidden), uint64(c.Vocab)
		if !yield(Tensor{Section: format.SecEmbed, HF: []string{"model.embed_tokens.weight"}, Kind: format.KindEmbedding, Shape: []uint64{v, h}, Role: format.SecEmbed, Layer: -1}) {
			return
		}
		for l := 0; l < c.Layers; l++ {
			for _, t := range a.Layer(c, l) {
				if !yield(t) {
					return
				}
			}
		}
		if !yield(Tensor{Section: format.SecNorm, HF: []string{"model.norm.weight"}, Kind: format.KindNorm, Shape: []uint64{h}, Role: format.SecNorm, Layer: -1}) {
			return
		}
		head := "lm_head.weight"
		if c.TieEmbeddings {
			head = "model.embed_tokens.weight"
		}
		if !yield(Tensor{Section: format.SecLMHead, HF: []string{head}, Kind: format.KindLMHead, Shape: []uint64{v, h}, Role: format.SecLMHead, Layer: -1}) {
			return
		}
		if m, ok := a.(mtpArch); ok && c.MTPLayers > 0 {
			for _, t := range m.MTPTensors(c) {
				if !yield(t) {
					return
				}
			}
		}
	}
}

// mtpArch is an architecture with multi-token-prediction layers.
type mtpArch interface {
	// MTPTensors lists the MTP block's tensors, after the LM head.
	MTPTensors(c *format.Config) []Tensor
	// BuildMTPLayer appends MTP layer l's ops (l counts from
	// num_hidden_layers) to the MTP step.
	BuildMTPLayer(b *Builder, l int)
}

// layerTensors makes a layer's tensor constructors: vec and mat name the
// section "layers.L.<what>" after the Hugging Face tensor
// "model.layers.L.<hf>".
type layerTensors struct {
	l int
	// hf is the checkpoint's prefix of the layer's tensors; "" is
	// "model.layers.L." (an MTP layer's are under "mtp.layers.N.").
	hf string
}

// name is the checkpoint's name of the layer's tensor hf.
func (lt layerTensors) name(hf string) string {
	if lt.hf == "" {
		return layerPrefix(lt.l) + hf
	}
	return lt.hf + hf
}

func (lt layerTensors) vec(kind format.Kind, what, hf string, n int) Tensor {
	return Tensor{Section: format.LayerSection(lt.l, what), HF: []string{lt.name(hf)}, Kind: kind, Shape: []uint64{uint64(n)}, Role: what, Layer: lt.l}
}

func (lt layerTensors) mat(kind format.Kind, what, hf string, n, k int) Tensor {
	t := lt.vec(kind, what, hf, n)
	t.Shape = []uint64{uint64(n), uint64(k)}
	return t
}

// experts is the stacked section of every expert's hf matrix [n, k]:
// hf has a %d for the expert.
func (lt layerTensors) experts(what, hf string, experts, n, k int) Tensor {
	t := Tensor{Section: format.LayerSection(lt.l, what), Kind: format.KindExperts, Shape: []uint64{uint64(experts), uint64(n), uint64(k)}, Role: what, Layer: lt.l}
	for e := range experts {
		t.HF = append(t.HF, lt.name(fmt.Sprintf(hf, e)))
	}
	return t
}

// Builder is a forward step under construction: the graph, the config and
// the tensors every layer uses.
type Builder struct {
	G    *graph.Graph
	C    *format.Config
	T    int // tokens of the step
	Rope int // the step's RoPE table
	X    int // the residual stream, updated in place by each layer
}

// Build lists the ops of one forward step of architecture a over tokens
// tokens ("decode": 1, or "prefill"); types are the file's section dtypes
// (graph.New). A quantized file without an embed_tokens section looks
// tokens up in the (tied) LM head.
func Build(a Arch, c *format.Config, mode string, tokens int, types map[string]format.DType) *graph.Graph {
	g := graph.New(mode, tokens, types)
	b := &Builder{G: g, C: c, T: tokens}
	b.Rope = g.NewTensor("rope", tokens, c.Rotary())
	g.AddOp(graph.Op{Kind: graph.RopeTable, Out: b.Rope, Layer: -1})
	b.X = g.NewTensor("x", tokens, c.Hidden)
	embed := format.SecEmbed
	if !g.HasWeight(embed) && g.WeightType(format.SecLMHead).Quantized() {
		embed = format.SecLMHead
	}
	g.AddOp(graph.Op{Kind: graph.Embed, Weight: embed, Out: b.X, Layer: -1})
	for l := 0; l < c.Layers; l++ {
		a.BuildLayer(b, l)
	}
	fn := g.NewTensor("final_norm", 1, c.Hidden)
	g.AddOp(graph.Op{Kind: graph.RMSNorm, Layer: -1, Weight: format.SecNorm, LastRow: true, In: []int{b.X}, Out: fn})
	if c.Embedding {
		// The output is the last token's final-norm hidden state.
		g.Logits = fn
		return g
	}
	g.Logits = g.NewTensor("logits", 1, c.Vocab)
	g.AddMatMul(graph.Op{Kind: graph.MatMul, Layer: -1, Weight: format.SecLMHead, In: []int{fn}, Out: g.Logits})
	return g
}

// States lists what each sequence of a model keeps between steps, as its
// forward step declares them: the state inspect sizes and the runtime
// allocates are the same list.
func States(a Arch, c *format.Config) []graph.State { return Build(a, c, "decode", 1, nil).States }

// tensorName names layer l's activation.
func tensorName(l int, what string) string { return fmt.Sprintf("layers.%d.%s", l, what) }
