package format_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
)

// rewrite re-encodes a valid file's header after edit, keeping its
// sections in place (the edits keep the header's length).
func rewrite(t *testing.T, b []byte, edit func(h *format.Header)) []byte {
	t.Helper()
	hb := headerOf(t, b)
	h, err := format.UnmarshalHeader(hb)
	if err != nil {
		t.Fatal(err)
	}
	edit(h)
	nh := format.MarshalHeader(h)
	if len(nh) != len(hb) {
		t.Fatal("header length changed")
	}
	return append(append(format.MarshalPreamble(nh, uint64(len(b))), nh...), b[format.PreambleSize+len(nh):]...)
}

func quantFile(t *testing.T, tied bool) []byte {
	s := synth.Shape{ModelType: "qwen3", Hidden: 32, Intermediate: 64, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 16,
		Vocab: 270, MaxPositions: 64, Tied: tied, DType: "BF16", Seed: 3, EOS: synth.MiniEOS}
	b, err := os.ReadFile(synthtest.CompileAs(t, s, 4, format.Q4))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestQuantizedFilesValidate: the quantized layouts' sizes are checked like
// f16's, and a dtype this build does not know is named.
func TestQuantizedFilesValidate(t *testing.T) {
	for _, tied := range []bool{true, false} {
		b := quantFile(t, tied)
		if _, err := format.ReadHeader(bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatalf("tied=%v: %v", tied, err)
		}
		for _, c := range []struct {
			name string
			edit func(h *format.Header)
			want string
		}{
			{"unknown dtype", func(h *format.Header) { sec(h, "layers.0.q_proj").DType = 9 },
				`section "layers.0.q_proj": dtype 9 is unknown to this build (was the file written by a newer qwenc?)`},
			{"q8 sized as q4", func(h *format.Header) { sec(h, "layers.0.gate_proj").DType = format.Q8 },
				`section "layers.0.gate_proj": size 1408, but q8 tile-major [64 32] needs 2176`},
			{"quantized vector", func(h *format.Header) { sec(h, "norm").DType = format.Q8 },
				`section "norm": q8 row-major with shape [32] is not a valid combination`},
		} {
			nb := rewrite(t, b, c.edit)
			if _, err := format.ReadHeader(bytes.NewReader(nb), int64(len(nb))); err == nil || err.Error() != c.want {
				t.Errorf("tied=%v %s: %v, want %q", tied, c.name, err, c.want)
			}
		}
	}
}

func sec(h *format.Header, name string) *format.Section {
	s, _ := h.Section(name)
	return s
}

// readHeaderBytes reads a header block as ReadHeader does, in a file of
// the given size (sparse: only the header is real).
func readHeaderBytes(hb []byte, fileSize int64) (*format.Header, error) {
	return format.ReadHeader(sparseFile{append(format.MarshalPreamble(hb, uint64(fileSize)), hb...), fileSize}, fileSize)
}

// patchKey renames a key in a header block, or sets the type byte after
// it when name is "".
func patchKey(t *testing.T, hb []byte, key, name string, typ byte) []byte {
	t.Helper()
	var k []byte
	k = binary.LittleEndian.AppendUint32(k, uint32(len(key)))
	k = append(k, key...)
	i := bytes.Index(hb, k)
	if i < 0 {
		t.Fatalf("key %q not in the header", key)
	}
	if name == "" {
		hb = bytes.Clone(hb)
		hb[i+len(k)] = typ
		return hb
	}
	n := binary.LittleEndian.AppendUint32(nil, uint32(len(name)))
	return slices.Concat(hb[:i], n, []byte(name), hb[i+len(k):])
}

// TestKeyValueBlock: keys this build does not know are kept through a
// read and a write; a known key of the wrong type, a required key
// missing, keys out of order or listed twice, a malformed key, an unknown
// value type, counts beyond the bytes left and values out of range are
// refused, naming the key.
func TestKeyValueBlock(t *testing.T) {
	b := quantFile(t, true)
	size := int64(len(b))
	hb := headerOf(t, b)
	h, err := format.UnmarshalHeader(hb)
	if err != nil {
		t.Fatal(err)
	}

	unknown := []format.Entry{{Key: "config.linear_num_value_heads", Value: uint32(32)}, {Key: "zeta.note", Value: []string{"a", "b"}},
		{Key: "zeta.scales", Value: []float32{0.5, float32(math.Inf(1))}}, {Key: "zeta.z", Value: format.RawValue{Type: 12, Bytes: []byte{1, 2, 3}}}}
	withUnknown := *h
	withUnknown.Unknown = unknown
	got, err := readHeaderBytes(format.MarshalHeader(&withUnknown), size)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Unknown, unknown) || !bytes.Equal(format.MarshalHeader(got), format.MarshalHeader(&withUnknown)) {
		t.Errorf("unknown keys: read back %v", got.Unknown)
	}

	count := bytes.Clone(hb)
	binary.LittleEndian.PutUint32(count, 0xffffffff)
	for _, c := range []struct {
		name string
		hb   []byte
		want string
	}{
		{"wrong type", patchKey(t, hb, "config.head_dim", "", 3), `header: key "config.head_dim": a i32, want a u32`},
		{"required key missing", patchKey(t, hb, "config.head_dim", "config.head_dix", 0), `header: key "config.head_dim": missing`},
		{"out of order", patchKey(t, hb, "config.head_dim", "config.zzzz_dim", 0), `header: key "config.hidden_size": after "config.zzzz_dim", out of order or listed twice`},
		{"listed twice", patchKey(t, hb, "config.hidden_size", "config.head_dim", 0), `header: key "config.head_dim": after "config.head_dim", out of order or listed twice`},
		{"too long", patchKey(t, hb, "config.head_dim", "config.h"+strings.Repeat("e", 121), 0), `header: key "config.heeee`},
		{"not a key", patchKey(t, hb, "config.head_dim", "Config.head_dim", 0), `header: key "Config.head_dim": not a valid key`},
		{"empty segment", patchKey(t, hb, "config.head_dim", "config..ead_dim", 0), `header: key "config..ead_dim": not a valid key`},
		{"unknown type", patchKey(t, hb, "config.head_dim", "", 9), `header: key "config.head_dim": a type(9), want a u32`},
		{"array of an unknown type", patchKey(t, hb, "config.head_dim", "", 0x89), `header: key "config.head_dim": a type(137), want a u32`},
		{"value larger than its type", patchKey(t, hb, "config.head_dim", "", 1), `header: key "config.head_dim": a u8 takes 1 of its 4 bytes`},
		{"value smaller than its type", patchKey(t, hb, "config.head_dim", "", 4), `header: key "config.head_dim": a u64 does not fit in its 4 bytes`},
		{"count past the end", count, "header: keys: count 4294967295 does not fit in the"},
	} {
		_, err := readHeaderBytes(c.hb, size)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}

	// A negative int is out of range, though it would be written as 0.
	c := h.Config
	c.MoE = format.MoE{Experts: 2, ExpertsPerToken: 1, ExpertWidth: -3, Sparse: []bool{true}}
	if err := c.Validate(); err == nil || err.Error() != "moe.moe_intermediate_size = -3, want in [1, 16777216]" {
		t.Errorf("a negative expert width: %v", err)
	}

	for _, c := range []struct {
		name string
		edit func(h *format.Header)
		want string
	}{
		{"NaN", func(h *format.Header) { h.Config.RopeTheta = math.NaN() }, "config.rope_theta = NaN, want positive and finite"},
		{"zero", func(h *format.Header) { h.Config.RMSNormEps = 0 }, "config.rms_norm_eps = 0, want positive and finite"},
		{"too large", func(h *format.Header) { h.Config.Hidden = 1<<24 + 1 }, "config.hidden_size = 16777217, want in [1, 16777216]"},
		{"too many eos ids", func(h *format.Header) { h.Generation.EOS = make([]int32, 17) }, "generation.eos_token_id: 17 elements, want at most 16 long"},
		{"negative temperature", func(h *format.Header) { h.Generation.Temperature = -1 }, "generation.temperature = -1, want at least 0 and finite"},
		{"infinite top_p", func(h *format.Header) { h.Generation.TopP = float32(math.Inf(1)) }, "generation.top_p = +Inf, want in [0, 1]"},
		// The sampler's ranges: a default outside them fails every request.
		{"top_p over 1", func(h *format.Header) { h.Generation.TopP = 1.5 }, "generation.top_p = 1.5, want in [0, 1]"},
		{"min_p over 1", func(h *format.Header) { h.Generation.MinP = 1.5 }, "generation.min_p = 1.5, want in [0, 1]"},
		{"presence_penalty over 2", func(h *format.Header) { h.Generation.PresencePenalty = 2.5 }, "generation.presence_penalty = 2.5, want in [0, 2]"},
		{"rope scaling without a factor", func(h *format.Header) {
			h.Config.RopeScaling = format.RopeScaling{Type: "linear", OriginalMax: 64, AttentionFactor: 1}
		},
			"config: rope_scaling linear needs factor, original_max_position_embeddings and attention_factor"},
		{"experts out of range", func(h *format.Header) { h.Config.MoE.Experts = 1<<16 + 1 }, "moe.num_experts = 65537, want in [1, 65536]"},
		{"a shared expert without experts", func(h *format.Header) { h.Config.MoE.SharedWidth = 64 }, "config: expert fields set without num_experts"},
		{"a norm in f16", func(h *format.Header) {
			s := sec(h, "norm")
			s.DType, s.Size = format.F16, s.Size/2
		}, `section "norm": a norm section of f16 row-major [32]; a norm is f32 row-major of rank 1`},
		{"no kind", func(h *format.Header) { sec(h, "norm").Kind = format.KindNone }, `header: section "norm": no kind`},
	} {
		e := *h
		e.Config.MoE.Sparse = nil
		e.Generation.EOS = slices.Clone(h.Generation.EOS)
		e.Sections = slices.Clone(h.Sections)
		c.edit(&e)
		_, err := readHeaderBytes(format.MarshalHeader(&e), size)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestFeatures: a file that needs a feature this build does not know is
// refused with the message every reader prints, before anything else of
// its header is read; an optional one is kept and otherwise ignored; the
// features this build knows must be the ones the config needs.
func TestFeatures(t *testing.T) {
	b := quantFile(t, true)
	size := int64(len(b))
	h, err := format.UnmarshalHeader(headerOf(t, b))
	if err != nil {
		t.Fatal(err)
	}
	if fs := format.Features(&h.Config); !reflect.DeepEqual(fs, []format.Feature{{Name: "qk_norm", Required: true}}) {
		t.Fatalf("a qwen3 file's features: %v", fs)
	}
	all := format.Config{Embedding: true, QKNorm: true, QKVBias: true, MoE: format.MoE{Experts: 2}, RopeScaling: format.RopeScaling{Type: "yarn"}}
	var names []string
	for _, f := range format.Features(&all) {
		names = append(names, f.Name)
		if !f.Required || !format.KnownFeature(f.Name) {
			t.Errorf("feature %q: required %v, known %v", f.Name, f.Required, format.KnownFeature(f.Name))
		}
	}
	if want := []string{"embedding", "moe", "qk_norm", "qkv_bias", "rope_scaling.yarn"}; !slices.Equal(names, want) {
		t.Errorf("features %v, want %v in name order", names, want)
	}
	all.RopeScaling.Type = "linear"
	if fs := format.Features(&all); fs[len(fs)-1].Name != "rope_scaling.linear" {
		t.Errorf("linear RoPE scaling: features %v", fs)
	}

	needs := *h
	needs.UnknownFeatures = []format.Feature{{Name: "retention", Required: true}, {Name: "vision"}}
	// What the feature changes may be nothing this build can read.
	needs.Config.Hidden = 0
	needs.Sections = append(slices.Clone(h.Sections), format.Section{Name: "layers.0.conv", Kind: 99, DType: 77})
	_, err = readHeaderBytes(format.MarshalHeader(&needs), size)
	var fe *format.FeatureError
	if err == nil || err.Error() != `this file needs feature "retention": update qwenrun` || !errors.As(err, &fe) || fe.Feature != "retention" {
		t.Errorf("a required feature this build lacks: %v", err)
	}

	optional := *h
	optional.UnknownFeatures = []format.Feature{{Name: "vision"}, {Name: "a.b"}}
	got, err := readHeaderBytes(format.MarshalHeader(&optional), size)
	if err != nil {
		t.Fatal(err)
	}
	if want := []format.Feature{{Name: "a.b"}, {Name: "vision"}}; !reflect.DeepEqual(got.UnknownFeatures, want) {
		t.Errorf("optional features this build lacks: read back %v, want %v", got.UnknownFeatures, want)
	}

	for _, c := range []struct {
		name string
		edit func(h *format.Header)
		want string
	}{
		{"a feature the config does not need", func(h *format.Header) {
			h.UnknownFeatures = []format.Feature{{Name: "moe", Required: true}}
		}, "header: features [moe, qk_norm] listed, but the config needs [qk_norm]"},
		{"a required feature listed as optional", func(h *format.Header) {
			h.UnknownFeatures = []format.Feature{{Name: "embedding"}}
		}, "header: features [embedding (optional), qk_norm] listed, but the config needs [qk_norm]"},
		{"a feature listed twice", func(h *format.Header) {
			h.UnknownFeatures = []format.Feature{{Name: "x", Required: true}, {Name: "x", Required: true}}
		}, `header: key "features.required": feature "x" listed twice`},
	} {
		e := *h
		c.edit(&e)
		_, err := readHeaderBytes(format.MarshalHeader(&e), size)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestArenaLargerThanItsTensors: an arena plan may not ask for more
// bytes than its tensors take laid end to end, each 64-byte aligned (no
// placement needs more), since the runtime allocates the size the plan
// gives: a terabyte arena is refused by name, not allocated.
func TestArenaLargerThanItsTensors(t *testing.T) {
	b := quantFile(t, true)
	h, err := format.ReadHeader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var end uint64
	for _, x := range h.Plans[0].Tensors {
		end += format.AlignUp(x.Size, format.ArenaAlign)
	}
	for _, c := range []struct {
		size uint64
		ok   bool
	}{{end, true}, {end + format.ArenaAlign, false}, {1 << 40, false}} {
		nb := rewrite(t, b, func(h *format.Header) { h.Plans[0].Size = c.size })
		_, err := format.ReadHeader(bytes.NewReader(nb), int64(len(nb)))
		want := fmt.Sprintf(`arena plan "decode": size %d, more than the %d bytes its tensors take laid end to end`, c.size, end)
		if c.ok && err != nil || !c.ok && (err == nil || err.Error() != want) {
			t.Errorf("a decode arena of %d bytes: %v, want ok %v (%q)", c.size, err, c.ok, want)
		}
	}
}
