package arch_test

import (
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/arch"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
)

func compiledHeader(t *testing.T, s synth.Shape, typ format.DType) *format.Header {
	t.Helper()
	f, err := format.Open(synthtest.CompileAs(t, s, 4, typ))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := arch.Builtin().Validate(f.Header); err != nil {
		t.Fatal(err)
	}
	return f.Header
}

func smallShape(tied bool) synth.Shape {
	return synth.Shape{ModelType: "qwen3", Hidden: 32, Intermediate: 64, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 16,
		Vocab: 270, MaxPositions: 64, Tied: tied, DType: "BF16", Seed: 3, EOS: synth.MiniEOS}
}

// TestHugeLayerCountIsCheap: num_hidden_layers comes from the file and may
// be up to 2^24. Validation once listed every section such a config
// requires (2^24 layers x 14 names) before finding the first missing one:
// minutes and gigabytes for a 90 KB file. It must stop at the first
// missing section, allocating about as much as the header itself.
func TestHugeLayerCountIsCheap(t *testing.T) {
	h := compiledHeader(t, smallShape(true), format.F16)
	h.Config.Layers = 1 << 24
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := arch.Builtin().Validate(h)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), `section "layers.2.input_layernorm": missing`) {
		t.Fatalf("Validate = %v, want the first missing layer section", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("Validate allocated %d bytes", n)
	}
}

// TestValidateNamesWhatIsWrong: a missing or mistyped section is named
// with what the config needs; the embedding may be absent only in a
// quantized file with a tied head.
func TestValidateNamesWhatIsWrong(t *testing.T) {
	for _, c := range []struct {
		name string
		tied bool
		typ  format.DType
		edit func(h *format.Header)
		want string
	}{
		{"missing", true, format.F16, func(h *format.Header) { sec(h, "layers.1.o_proj").Name = "x" }, `section "layers.1.o_proj": missing`},
		{"tokenizer", true, format.F16, func(h *format.Header) { sec(h, format.SecTokenizer).Name = "x" }, `section "tokenizer": missing`},
		{"shape", true, format.F16, func(h *format.Header) { sec(h, "layers.0.k_norm").Shape = []uint64{8} },
			`section "layers.0.k_norm": f32 row-major [8], the config needs f32 row-major [16]`},
		{"vector as matrix", true, format.F16, func(h *format.Header) { sec(h, "norm").DType = format.F16 },
			`section "norm": f16 row-major [32], the config needs f32 row-major [32]`},
		{"row-major matrix", false, format.Q8, func(h *format.Header) { sec(h, "layers.0.up_proj").Layout = format.RowMajor },
			`section "layers.0.up_proj": q8 row-major [64 32], the config needs f16, q8, q4 or q6 tile-major [64 32]`},
		{"untied without embedding", true, format.Q4, func(h *format.Header) { h.Config.TieEmbeddings = false },
			`section "embed_tokens": missing`},
		{"unknown model type", true, format.F16, func(h *format.Header) { h.Config.ModelType = "llama" },
			`config: model_type "llama" not supported (qwen2, qwen3, qwen3_moe, qwen3_5, qwen3_5_moe)`},
	} {
		h := compiledHeader(t, smallShape(c.tied), c.typ)
		c.edit(h)
		if err := arch.Builtin().Validate(h); err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func sec(h *format.Header, name string) *format.Section {
	s, _ := h.Section(name)
	return s
}

// TestValidateMoE: a MoE file's expert sections are checked like the
// others, and a header whose layer flags disagree with its sections (a
// dense layer marked sparse) is refused by name.
func TestValidateMoE(t *testing.T) {
	s := synth.Shape{ModelType: "qwen3_moe", Hidden: 64, Intermediate: 48, Layers: 3, Heads: 2, KVHeads: 1, HeadDim: 32,
		Vocab: 270, MaxPositions: 64, Tied: true, DType: "BF16", Seed: 5, EOS: synth.MiniEOS,
		Experts: 4, ExpertsPerToken: 2, MoEIntermediate: 40, MLPOnlyLayers: []int{1}}
	for _, c := range []struct {
		name string
		edit func(h *format.Header)
		want string
	}{
		{"dense layer marked sparse", func(h *format.Header) { h.Config.MoE.Sparse[1] = true }, `section "layers.1.router": missing`},
		{"experts of another width", func(h *format.Header) { h.Config.MoE.ExpertWidth = 32 },
			`section "layers.0.experts.gate_proj": q4 tile-major [4 40 64], the config needs f16, q8, q4 or q6 tile-major [4 32 64]`},
		{"experts flattened", func(h *format.Header) { sec(h, "layers.2.experts.up_proj").Shape = []uint64{160, 64} },
			`section "layers.2.experts.up_proj": q4 tile-major [160 64], the config needs f16, q8, q4 or q6 tile-major [4 40 64]`},
	} {
		h := compiledHeader(t, s, format.Q4)
		c.edit(h)
		if err := arch.Builtin().Validate(h); err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestLegacyKinds: a directory without kinds (a version 1 to 4 file) gets
// each section's kind and role from the architecture, the same the
// compiler writes; a section the architecture does not list is refused,
// since nothing says what it holds.
func TestLegacyKinds(t *testing.T) {
	for _, typ := range []format.DType{format.F16, format.Q4} {
		h := compiledHeader(t, smallShape(true), typ)
		want := slices.Clone(h.Sections)
		for i := range h.Sections {
			h.Sections[i].Kind, h.Sections[i].Role = format.KindNone, ""
		}
		if err := arch.Builtin().Validate(h); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(h.Sections, want) {
			t.Errorf("%s: kinds and roles set from the architecture differ from the compiler's", typ)
		}
		for i := range h.Sections {
			h.Sections[i].Kind, h.Sections[i].Role = format.KindNone, ""
		}
		h.Sections = append(h.Sections, format.Section{Name: "layers.0.extra", DType: format.F32, Layout: format.RowMajor, Shape: []uint64{4}})
		if err := arch.Builtin().Validate(h); err == nil || err.Error() != `section "layers.0.extra": not a section of a qwen3 model` {
			t.Errorf("%s: an extra section: %v", typ, err)
		}
	}
}

// TestValidateRefusesForeignKeys: a file whose keys ask for a block its
// architecture does not run (Qwen3.5's, or the experts on a dense model)
// is read by format, whose keys are each in range, and refused by
// Validate with the key and the architecture named; a key the
// architecture honours passes.
func TestValidateRefusesForeignKeys(t *testing.T) {
	moe := synth.Shape{ModelType: "qwen3_moe", Hidden: 64, Intermediate: 48, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 32,
		Vocab: 270, MaxPositions: 64, Tied: true, DType: "BF16", Seed: 5, EOS: synth.MiniEOS,
		Experts: 4, ExpertsPerToken: 2, MoEIntermediate: 40}
	qwen2 := smallShape(true)
	qwen2.ModelType = "qwen2"
	q35 := synth.Shape{ModelType: "qwen3_5", Hidden: 40, Intermediate: 56, Layers: 4, Heads: 3, KVHeads: 1, HeadDim: 20,
		Vocab: 300, MaxPositions: 64, Tied: true, DType: "BF16", Seed: 31, EOS: synth.MiniEOS,
		Qwen35: synth.Qwen35{FullAttentionInterval: 2, LinearKeyHeads: 1, LinearValueHeads: 2, LinearKeyHeadDim: 16, LinearValueHeadDim: 16,
			ConvKernel: 4, PartialRotaryFactor: 0.4, MTPLayers: 1}}
	for _, c := range []struct {
		shape synth.Shape
		key   string
		edit  func(c *format.Config)
	}{
		{smallShape(true), "config.attn_output_gate", func(c *format.Config) { c.AttnGate = true }},
		{smallShape(true), "hybrid.linear_layers", func(c *format.Config) {
			c.Hybrid = format.Hybrid{Linear: []bool{true, false}, KeyHeads: 1, ValueHeads: 2, KeyDim: 16, ValueDim: 16, ConvKernel: 4}
		}},
		{smallShape(true), "moe.num_experts", func(c *format.Config) {
			c.MoE = format.MoE{Experts: 2, ExpertsPerToken: 1, ExpertWidth: 16, Sparse: []bool{true, false}}
		}},
		{smallShape(true), "config.mtp_num_hidden_layers", func(c *format.Config) { c.MTPLayers = 1 }},
		{qwen2, "config.attn_output_gate", func(c *format.Config) { c.AttnGate = true }},
		{moe, "moe.shared_expert_intermediate_size", func(c *format.Config) { c.MoE.SharedWidth = 16 }},
		{moe, "", func(c *format.Config) {
			c.RopeScaling = format.RopeScaling{Type: "linear", Factor: 2, OriginalMax: 64, AttentionFactor: 1}
		}},
		// What every Qwen3.5 has, missing: the model would run without it.
		{q35, "config.attn_output_gate", func(c *format.Config) { c.AttnGate = false }},
		{q35, "config.qk_norm", func(c *format.Config) { c.QKNorm = false }},
		{q35, "", func(c *format.Config) {}},
	} {
		h := compiledHeader(t, c.shape, format.F16)
		c.edit(&h.Config)
		h, err := format.UnmarshalHeader(format.MarshalHeader(h))
		if err != nil {
			t.Fatalf("%s with %s: format refuses it: %v", c.shape.ModelType, c.key, err)
		}
		err = arch.Builtin().Validate(h)
		switch {
		case c.key == "" && err != nil:
			t.Errorf("%s: a key it honours is refused: %v", c.shape.ModelType, err)
		case c.key != "" && (err == nil || !strings.Contains(err.Error(), `key "`+c.key+`"`) || !strings.Contains(err.Error(), "a "+c.shape.ModelType+" model")):
			t.Errorf("%s with %s: %v, want it refused by key and architecture", c.shape.ModelType, c.key, err)
		}
	}
}
