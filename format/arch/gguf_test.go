package arch

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// fakeGGUF is a GGUF's metadata and tensor dimensions.
type fakeGGUF struct {
	kv   map[string]any
	dims map[string][]uint64
}

func (f *fakeGGUF) Value(k string) (any, bool) { v, ok := f.kv[k]; return v, ok }

func (f *fakeGGUF) TensorDims(n string) ([]uint64, bool) { d, ok := f.dims[n]; return d, ok }

// qwen35GGUF is the metadata of a Qwen3.5 GGUF of 4 layers and an MTP
// layer, 2 key heads and 4 value heads, tied.
func qwen35GGUF() *fakeGGUF {
	f := &fakeGGUF{kv: map[string]any{
		"general.architecture": "qwen35", "qwen35.context_length": uint32(4096), "qwen35.embedding_length": uint32(64),
		"qwen35.block_count": uint32(5), "qwen35.feed_forward_length": uint32(128), "qwen35.attention.head_count": uint32(4),
		"qwen35.attention.head_count_kv": uint32(2), "qwen35.attention.key_length": uint32(32), "qwen35.attention.value_length": uint32(32),
		"qwen35.rope.freq_base": float32(1e7), "qwen35.attention.layer_norm_rms_epsilon": float32(1e-6),
		"qwen35.rope.dimension_count": uint32(8), "qwen35.ssm.conv_kernel": uint32(4), "qwen35.ssm.state_size": uint32(16),
		"qwen35.ssm.group_count": uint32(2), "qwen35.ssm.time_step_rank": uint32(4), "qwen35.ssm.inner_size": uint32(64),
		"qwen35.nextn_predict_layers": uint32(1),
	}, dims: map[string][]uint64{"token_embd.weight": {64, 300}}}
	for l := range 4 {
		if l != 3 {
			f.dims[fmt.Sprintf("blk.%d.attn_qkv.weight", l)] = []uint64{64, 128}
		}
	}
	return f
}

// TestParseGGUF: the config comes from the keys and the tensors present,
// as config.json would give it.
func TestParseGGUF(t *testing.T) {
	c, a, err := Builtin().ParseGGUF(qwen35GGUF())
	if err != nil {
		t.Fatal(err)
	}
	hy := c.Hybrid
	if a.ModelType() != "qwen3_5" || c.Layers != 4 || c.MTPLayers != 1 || c.Vocab != 300 || !c.TieEmbeddings || c.RotaryDims != 8 ||
		c.RMSNormEps != 1e-6 || c.RopeTheta != 1e7 || hy.KeyHeads != 2 || hy.ValueHeads != 4 || hy.KeyDim != 16 || hy.ValueDim != 16 ||
		!slices.Equal(hy.Linear, []bool{true, true, true, false}) {
		t.Errorf("config %+v", c)
	}
}

// TestParseGGUFErrors: an error names the key it is about.
func TestParseGGUFErrors(t *testing.T) {
	for _, c := range []struct {
		edit func(f *fakeGGUF)
		want string
	}{
		{func(f *fakeGGUF) { f.kv["general.architecture"] = "llama" }, `general.architecture "llama" is not supported`},
		{func(f *fakeGGUF) { delete(f.kv, "general.architecture") }, "general.architecture: missing"},
		{func(f *fakeGGUF) { delete(f.kv, "qwen35.embedding_length") }, `"qwen35.embedding_length" missing`},
		{func(f *fakeGGUF) { f.kv["qwen35.attention.head_count"] = "4" }, `"qwen35.attention.head_count"`},
		{func(f *fakeGGUF) { f.kv["qwen35.attention.value_length"] = uint32(16) }, `"qwen35.attention.value_length" = 16`},
		{func(f *fakeGGUF) { delete(f.dims, "token_embd.weight") }, `tensor "token_embd.weight": missing`},
		{func(f *fakeGGUF) { f.kv["qwen35.ssm.inner_size"] = uint32(66) }, "qwen35.ssm.inner_size / qwen35.ssm.time_step_rank"},
		{func(f *fakeGGUF) { f.kv["qwen35.rope.scaling.type"] = "longrope" }, `"qwen35.rope.scaling.type" = "longrope"`},
		{func(f *fakeGGUF) { f.kv["qwen35.block_count"] = uint32(1) }, "leaves no layer"},
		// Not read as absent (every dimension rotated) nor truncated.
		{func(f *fakeGGUF) { f.kv["qwen35.rope.dimension_count"] = "8" }, `"qwen35.rope.dimension_count" = 8 (string) is not a number`},
		{func(f *fakeGGUF) { f.kv["qwen35.rope.dimension_count"] = float32(8.5) }, `"qwen35.rope.dimension_count" = 8.5 is not a number of dimensions`},
	} {
		f := qwen35GGUF()
		c.edit(f)
		_, _, err := Builtin().ParseGGUF(f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
}

// TestGGUFValueHeads: with more value heads than key heads, each tensor
// the value heads index reads head h of the checkpoint's order from
// where llama.cpp's tiled order put it; the others are read as they
// are.
func TestGGUFValueHeads(t *testing.T) {
	c, a, err := Builtin().ParseGGUF(qwen35GGUF())
	if err != nil {
		t.Fatal(err)
	}
	tiled := GroupedToTiled(2, 4) // tiled position -> the checkpoint's head
	dk, dv := 2*16, 16
	for tn := range Tensors(a, &c) {
		if tn.Layer != 0 {
			continue
		}
		src, _ := GGUFTensor(a, &c, &tn)
		tr := src.Transform
		switch tn.Role {
		case "in_proj_qkv", "conv1d":
			for r := range 2*dk + 4*dv {
				want := r
				if r >= 2*dk {
					h, i := (r-2*dk)/dv, (r-2*dk)%dv
					for p := range 4 {
						if tiled(p) == h {
							want = 2*dk + p*dv + i
						}
					}
				}
				if got := tr.Row(r); got != want {
					t.Fatalf("%s: row %d read from %d, want %d", tn.Section, r, got, want)
				}
			}
		case "out_proj":
			for col := range 4 * dv {
				if h := tiled(tr.Col(col) / dv); h != col/dv {
					t.Fatalf("%s: column %d read from head %d's place", tn.Section, col, h)
				}
			}
		case "ssm_a", "dt_bias", "in_proj_a", "in_proj_b":
			for h := range 4 {
				if tiled(tr.Row(h)) != h {
					t.Fatalf("%s: head %d read from %d", tn.Section, h, tr.Row(h))
				}
			}
		case "input_layernorm", "linear_norm", "post_attention_layernorm":
			if !tr.Identity() {
				t.Errorf("%s: a norm is read as it is (stored as 1 + w already), got a transform", tn.Section)
			}
		}
		if err := tr.Check(&tn); err != nil {
			t.Error(err)
		}
	}
}
