package format

import (
	"fmt"
	"math"

	"github.com/qwenc/qwenc/format/wtype"
)

const (
	// Magic opens every .qbin file.
	Magic = "QWENBIN\x00"
	// Version is the format version this code writes: a header of typed
	// keys and values. It also reads the positional headers of versions 1
	// to 4 (SPEC.md, "Older versions").
	Version = 5
	// PreambleSize is the fixed size of the preamble at offset 0.
	PreambleSize = 64
	// Alignment is the boundary every section starts on.
	Alignment = 4096
	// TileRows is the number of matrix rows in one tile-major tile.
	TileRows = wtype.TileRows
	// ArenaAlign is the alignment of every tensor offset in an arena plan.
	ArenaAlign = 64
	// KVChunkTokens is the number of positions in one KV cache chunk.
	KVChunkTokens = 256
	// MaxHeaderSize bounds the header a reader accepts before reading it
	// (a 100-layer model's header is well under 100 KB).
	MaxHeaderSize = 64 << 20
	// maxString bounds every string in the header.
	maxString = 1 << 16
)

// DType is the element type of a section: f32, opaque bytes, or one of
// the weight types of package wtype, whose values are their codes.
type DType uint8

const (
	F32   DType = 2
	Bytes DType = 3
	// The weight types, whose codes package wtype holds. Q8, Q4 and Q6
	// are quantized matrix types, tile-major only (SPEC.md, "Quantized
	// tile-major layouts").
	F16 = DType(wtype.F16)
	Q8  = DType(wtype.Q8)
	Q4  = DType(wtype.Q4)
	Q6  = DType(wtype.Q6)
)

// Weight returns the weight type d stores, if it is one.
func (d DType) Weight() (wtype.Type, bool) {
	t := wtype.Type(d)
	return t, t.Valid()
}

// Known reports whether this build knows the dtype.
func (d DType) Known() bool {
	_, weight := d.Weight()
	return weight || d == F32 || d == Bytes
}

// Quantized reports whether d is a quantized matrix type.
func (d DType) Quantized() bool {
	t, _ := d.Weight()
	return t.Quantized()
}

// Size returns the size of one element in bytes; 0 for the quantized
// types, whose elements are not whole bytes.
func (d DType) Size() int {
	switch d {
	case F16:
		return 2
	case F32:
		return 4
	case Bytes:
		return 1
	}
	return 0
}

func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case Bytes:
		return "u8"
	}
	if t, ok := d.Weight(); ok {
		return t.String()
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Layout is how a section's elements are ordered.
type Layout uint8

const (
	RowMajor  Layout = 0
	TileMajor Layout = 1
	Raw       Layout = 2
)

func (l Layout) String() string {
	switch l {
	case RowMajor:
		return "row-major"
	case TileMajor:
		return "tile-major"
	case Raw:
		return "bytes"
	}
	return fmt.Sprintf("layout(%d)", uint8(l))
}

// Config is the model configuration the runtime needs. Which sections and
// ops a model type implies is package arch's business; the format only
// stores the numbers and checks they are in range.
type Config struct {
	ModelType     string // Hugging Face model_type: "qwen3", "qwen2", "qwen3_moe"
	Hidden        int
	Intermediate  int
	Layers        int
	Heads         int
	KVHeads       int
	HeadDim       int
	Vocab         int
	MaxPositions  int
	RopeTheta     float64
	RMSNormEps    float64
	TieEmbeddings bool
	QKNorm        bool // qwen3: per-head RMSNorm of q and k before RoPE
	QKVBias       bool // qwen2: biases on the q, k and v projections
	MoE           MoE
	RopeScaling   RopeScaling
	// Embedding says the model embeds text: it has no LM head, and its
	// output is the final-norm hidden state of an input's last token
	// (Qwen3-Embedding).
	Embedding bool
	// Append is the tokens the tokenizer's post-processor appends to every
	// input (Qwen3-Embedding's <|endoftext|>).
	Append []int32
	// RotaryDims is how many of each head's first dimensions RoPE rotates
	// (head_dim x partial_rotary_factor: 64 of Qwen3.5's 256); 0 is all.
	RotaryDims int
	// AttnGate says q_proj also gives each head a gate, and the attention
	// output is multiplied by its sigmoid before o_proj (Qwen3.5).
	AttnGate bool
	// Hybrid describes the linear-attention layers of a hybrid model
	// (Qwen3.5's Gated DeltaNet); it is zero for a model of attention
	// alone.
	Hybrid Hybrid
	// MTPLayers is the multi-token-prediction layers the file holds
	// (Qwen3.5's one), which guess the token after the next.
	MTPLayers int
}

// Hybrid describes the Gated DeltaNet layers of a hybrid model: each
// keeps a fixed-size recurrent state per sequence instead of a KV cache.
type Hybrid struct {
	// Linear says, per layer, whether it is a Gated DeltaNet layer (else
	// full attention): config.json's layer_types.
	Linear []bool
	// KeyHeads and ValueHeads are the DeltaNet's heads (value head j reads
	// key head j / (ValueHeads/KeyHeads)); KeyDim and ValueDim their
	// widths.
	KeyHeads, ValueHeads, KeyDim, ValueDim int
	// ConvKernel is the causal convolution's width (linear_conv_kernel_dim).
	ConvKernel int
}

// LinearLayer reports whether layer l is a Gated DeltaNet layer.
func (c *Config) LinearLayer(l int) bool { return l < len(c.Hybrid.Linear) && c.Hybrid.Linear[l] }

// Rotary is how many of a head's dimensions RoPE rotates.
func (c *Config) Rotary() int {
	if c.RotaryDims == 0 {
		return c.HeadDim
	}
	return c.RotaryDims
}

// RopeScaling stretches RoPE beyond the trained context (config.json's
// rope_scaling); a zero Type means none.
type RopeScaling struct {
	Type   string  // "", "linear" or "yarn"
	Factor float64 // the stretch, > 1
	// OriginalMax is the trained context (original_max_position_embeddings):
	// yarn's frequency ramp is computed from it, and the context allowed is
	// Factor times it.
	OriginalMax int
	// AttentionFactor multiplies cos and sin (yarn; 1 for linear), resolved
	// at compile time: attention_factor, else 0.1 ln(factor) + 1.
	AttentionFactor float64
	// BetaFast and BetaSlow bound yarn's ramp, in rotations (32 and 1
	// unless given); Truncate rounds its ends to whole dimensions.
	BetaFast, BetaSlow float64
	Truncate           bool
}

// MaxContext is the longest context the model allows: max_position_embeddings,
// or with RoPE scaling the factor times the original context if that is
// more.
func (c *Config) MaxContext() int {
	rs := &c.RopeScaling
	if rs.Type == "" {
		return c.MaxPositions
	}
	return max(c.MaxPositions, int(math.Round(rs.Factor*float64(rs.OriginalMax))))
}

// MoE describes the routed experts of a mixture-of-experts model; it is
// zero for a dense one.
type MoE struct {
	Experts         int  // experts per sparse layer (num_experts)
	ExpertsPerToken int  // experts each token is routed to (num_experts_per_tok)
	ExpertWidth     int  // each expert's intermediate size (moe_intermediate_size)
	NormTopK        bool // renormalise the chosen experts' weights to sum 1 (norm_topk_prob)
	// SharedWidth is the intermediate size of a shared expert every token
	// goes through beside its routed ones, scaled by the sigmoid of a
	// gate of its own (shared_expert_intermediate_size; 0: none).
	SharedWidth int
	// Sparse says, per layer, whether its MLP is the routed experts (else
	// the dense MLP of Config.Intermediate).
	Sparse []bool
}

// SparseLayer reports whether layer l routes to experts.
func (c *Config) SparseLayer(l int) bool { return l < len(c.MoE.Sparse) && c.MoE.Sparse[l] }

// QDim is the width of the query projection (heads * head_dim).
func (c *Config) QDim() int { return c.Heads * c.HeadDim }

// KVDim is the width of the key and value projections.
func (c *Config) KVDim() int { return c.KVHeads * c.HeadDim }

// KVType is how a KV cache stores keys and values.
type KVType uint8

const (
	// KVF16 stores keys and values in f16.
	KVF16 KVType = iota
	// KVQ8 stores them in 8 bits, each chunk's K and transposed V as q8
	// tile-major matrices (the weights' layout), so attention's products
	// are int8 dot products: K with an f16 scale per position and 32 head
	// dimensions; V with unit block scales and one f32 scale per position
	// and head, which attention multiplies into the probabilities (a
	// block's 32 positions arrive one at a time). About half the bytes of
	// f16.
	KVQ8
)

// String is the name qwenrun's --kv-type takes.
func (t KVType) String() string {
	switch t {
	case KVF16:
		return "f16"
	case KVQ8:
		return "q8"
	}
	return fmt.Sprintf("KVType(%d)", uint8(t))
}

// ParseKVType reads a KV cache type name: f16 or q8.
func ParseKVType(s string) (KVType, error) {
	switch s {
	case "f16":
		return KVF16, nil
	case "q8":
		return KVQ8, nil
	}
	return 0, fmt.Errorf("KV cache type %q: want f16 or q8", s)
}

// Validate checks that the dimensions are in range (each field's range is
// its header key's) and consistent.
func (c *Config) Validate() error {
	if err := checkRanges(&Header{Config: *c}, configKeys); err != nil {
		return err
	}
	if c.ModelType == "" {
		return fmt.Errorf("config: model_type is empty")
	}
	if c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("config: num_attention_heads %d is not a multiple of num_key_value_heads %d", c.Heads, c.KVHeads)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("config: head_dim %d is odd (RoPE needs pairs)", c.HeadDim)
	}
	if r := c.RotaryDims; r < 0 || r > c.HeadDim || r%2 != 0 {
		return fmt.Errorf("config: %d rotary dimensions of head_dim %d (want an even number up to it)", r, c.HeadDim)
	}
	if err := c.RopeScaling.validate(); err != nil {
		return err
	}
	if err := c.Hybrid.validate(c.Layers); err != nil {
		return err
	}
	if c.Intermediate == 0 && !c.allSparse() {
		return fmt.Errorf("config: intermediate_size is needed by the dense layers")
	}
	return c.MoE.validate(c.Layers)
}

// allSparse reports whether every layer routes to experts (the dense
// width is then of no use).
func (c *Config) allSparse() bool {
	for l := range c.Layers {
		if !c.SparseLayer(l) {
			return false
		}
	}
	return c.Layers > 0
}

func (h *Hybrid) validate(layers int) error {
	if len(h.Linear) == 0 {
		if h.KeyHeads != 0 || h.ValueHeads != 0 || h.KeyDim != 0 || h.ValueDim != 0 || h.ConvKernel != 0 {
			return fmt.Errorf("config: linear attention fields set without layer_types")
		}
		return nil
	}
	switch {
	case len(h.Linear) != layers:
		return fmt.Errorf("config: %d layer types for %d layers", len(h.Linear), layers)
	case h.KeyHeads < 1 || h.ValueHeads < 1 || h.KeyDim < 1 || h.ValueDim < 1 || h.ConvKernel < 1:
		return fmt.Errorf("config: linear attention of %d key heads x %d and %d value heads x %d, kernel %d: all must be positive",
			h.KeyHeads, h.KeyDim, h.ValueHeads, h.ValueDim, h.ConvKernel)
	case h.ValueHeads%h.KeyHeads != 0:
		return fmt.Errorf("config: linear_num_value_heads %d is not a multiple of linear_num_key_heads %d", h.ValueHeads, h.KeyHeads)
	}
	return nil
}

func (r *RopeScaling) validate() error {
	switch r.Type {
	case "":
		if *r != (RopeScaling{}) {
			return fmt.Errorf("config: rope_scaling fields set without a type")
		}
		return nil
	case "linear", "yarn":
	default:
		return fmt.Errorf("config: rope_scaling type %q not supported (linear, yarn)", r.Type)
	}
	switch {
	case r.Factor == 0 || r.OriginalMax == 0 || r.AttentionFactor == 0:
		return fmt.Errorf("config: rope_scaling %s needs factor, original_max_position_embeddings and attention_factor", r.Type)
	case r.Factor*float64(r.OriginalMax) > maxDim:
		return fmt.Errorf("config: rope_scaling factor %g times original_max_position_embeddings %d is over %d", r.Factor, r.OriginalMax, maxDim)
	case r.Type == "yarn" && (r.BetaFast == 0 || r.BetaSlow == 0):
		return fmt.Errorf("config: rope_scaling beta_fast %g and beta_slow %g must be positive", r.BetaFast, r.BetaSlow)
	}
	return nil
}

func (m *MoE) validate(layers int) error {
	if m.Experts == 0 {
		if m.ExpertsPerToken != 0 || m.ExpertWidth != 0 || m.NormTopK || m.SharedWidth != 0 || len(m.Sparse) != 0 {
			return fmt.Errorf("config: expert fields set without num_experts")
		}
		return nil
	}
	switch {
	case m.ExpertsPerToken < 1 || m.ExpertsPerToken > m.Experts:
		return fmt.Errorf("config: num_experts_per_tok = %d, want 1..num_experts (%d)", m.ExpertsPerToken, m.Experts)
	case m.ExpertWidth == 0:
		return fmt.Errorf("config: moe_intermediate_size missing")
	case len(m.Sparse) != layers:
		return fmt.Errorf("config: %d sparse-layer flags for %d layers", len(m.Sparse), layers)
	}
	return nil
}

// Generation holds the sampling defaults from generation_config.json; in
// JSON (qwenc inspect --json) under that file's names.
type Generation struct {
	EOS               []int32 `json:"eos_token_id"`
	BOS               int32   `json:"bos_token_id"` // -1 when absent
	Pad               int32   `json:"pad_token_id"` // -1 when absent
	DoSample          bool    `json:"do_sample"`
	Temperature       float32 `json:"temperature"`
	TopK              uint32  `json:"top_k"`
	TopP              float32 `json:"top_p"`
	MinP              float32 `json:"min_p"`
	RepetitionPenalty float32 `json:"repetition_penalty"`
	PresencePenalty   float32 `json:"presence_penalty"`
}

// Validate checks the defaults against the ranges a file's keys take
// (format/SPEC.md), the sampler's: the compiler refuses what a file
// could not be opened with.
func (g Generation) Validate() error { return checkRanges(&Header{Generation: g}, otherKeys) }

// DefaultGeneration is what a checkpoint without generation_config.json gets.
func DefaultGeneration() Generation {
	return Generation{BOS: -1, Pad: -1, Temperature: 1, TopP: 1, RepetitionPenalty: 1}
}

// ArenaTensor is one activation's place in an arena.
type ArenaTensor struct {
	Name   string
	Offset uint64
	Size   uint64
}

// ArenaPlan is the compile-time placement of one step's activations.
type ArenaPlan struct {
	Mode     string // "decode" or "prefill"
	Tokens   int
	Size     uint64 // arena bytes
	Naive    uint64 // sum of every tensor's size
	PeakLive uint64 // most bytes live at any one op (a lower bound on Size)
	Tensors  []ArenaTensor
}

// Section is one entry of the directory.
type Section struct {
	Name string
	// Kind is what the section holds, and Role the architecture's name for
	// it: the name without "layers.N." ("q_proj", "experts.down_proj",
	// "tokenizer"). A version 5 file stores both; for an older file package
	// arch sets them from the architecture's tensor list.
	Kind   Kind
	Role   string
	DType  DType
	Layout Layout
	Shape  []uint64
	Offset uint64
	Size   uint64
	CRC    uint32
}

// Header is everything before the first section.
type Header struct {
	Config     Config
	Generation Generation
	ChatFamily string
	Plans      []ArenaPlan
	Sections   []Section
	// Unknown are the keys of the file's key/value block that this build
	// does not know (a newer writer's), in key order: kept, so that a
	// header written again has them, and shown by qwenc inspect.
	Unknown []Entry
	// UnknownFeatures are the features the file lists that this build
	// does not know, kept likewise: optional ones (a file that needs one
	// is refused), unless a header is made by hand. The features this
	// build knows are not stored: they follow from Config (Features).
	UnknownFeatures []Feature
}

// Section returns the directory entry with the given name.
func (h *Header) Section(name string) (*Section, bool) {
	for i := range h.Sections {
		if h.Sections[i].Name == name {
			return &h.Sections[i], true
		}
	}
	return nil, false
}

// WeightType is the type a file was compiled to: the narrowest weight
// type of its sections (q4 if any matrix is q4: a q4 file keeps some at
// q8), f16 if none.
func (h *Header) WeightType() DType {
	t := wtype.F16
	for _, s := range h.Sections {
		if w, ok := s.DType.Weight(); ok && w.BitsPerWeight() < t.BitsPerWeight() {
			t = w
		}
	}
	return DType(t)
}

// SectionTypes maps every section's name to its dtype.
func (h *Header) SectionTypes() map[string]DType {
	m := make(map[string]DType, len(h.Sections))
	for _, s := range h.Sections {
		m[s.Name] = s.DType
	}
	return m
}

// Plan returns the arena plan for a mode.
func (h *Header) Plan(mode string) (*ArenaPlan, bool) {
	for i := range h.Plans {
		if h.Plans[i].Mode == mode {
			return &h.Plans[i], true
		}
	}
	return nil, false
}

// AlignUp rounds n up to a multiple of a (a power of two).
func AlignUp(n, a uint64) uint64 { return (n + a - 1) &^ (a - 1) }
