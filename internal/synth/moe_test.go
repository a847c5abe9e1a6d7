package synth_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/qwenc/qwenc/internal/reference"
	"github.com/qwenc/qwenc/internal/synth"
)

func smallMoE() synth.Shape {
	return synth.Shape{ModelType: "qwen3_moe", Hidden: 32, Intermediate: 40, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 8,
		Vocab: 300, MaxPositions: 64, DType: "BF16", Seed: 3, EOS: synth.MiniEOS,
		Experts: 4, ExpertsPerToken: 2, MoEIntermediate: 24, NormTopKProb: true, MLPOnlyLayers: []int{1}}
}

func TestMoETensors(t *testing.T) {
	s := smallMoE()
	got := map[string][]int{}
	for _, ts := range s.Tensors() {
		got[ts.Name] = ts.Shape
	}
	want := map[string][]int{
		"model.layers.0.mlp.gate.weight":                {4, 32},
		"model.layers.0.mlp.experts.3.gate_proj.weight": {24, 32},
		"model.layers.0.mlp.experts.3.up_proj.weight":   {24, 32},
		"model.layers.0.mlp.experts.3.down_proj.weight": {32, 24},
		"model.layers.1.mlp.gate_proj.weight":           {40, 32},
		"model.layers.1.mlp.down_proj.weight":           {32, 40},
		"model.layers.2.self_attn.q_norm.weight":        {8},
		"model.layers.2.mlp.experts.0.up_proj.weight":   {24, 32},
		"lm_head.weight": {300, 32},
	}
	for name, shape := range want {
		if !slices.Equal(got[name], shape) {
			t.Errorf("%s: shape %v, want %v", name, got[name], shape)
		}
	}
	for _, absent := range []string{"model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.gate.weight", "model.layers.2.mlp.experts.4.up_proj.weight"} {
		if _, ok := got[absent]; ok {
			t.Errorf("%s should not exist", absent)
		}
	}
	// embed, final norm, head; per layer 2 norms, 4 projections, 2 head norms;
	// per sparse layer a router and 3 per expert, per dense layer 3.
	if n := 3 + 3*8 + 2*(1+3*4) + 3; len(got) != n {
		t.Errorf("%d tensors, want %d", len(got), n)
	}
}

// TestMoEReferenceRuns writes Qwen3-MoE checkpoints and runs them through
// the independent forward pass, which refuses any missing, misnamed,
// misshaped or unexpected tensor.
func TestMoEReferenceRuns(t *testing.T) {
	stepped := smallMoE()
	stepped.MLPOnlyLayers, stepped.DecoderSparseStep, stepped.NormTopKProb = nil, 2, false
	stepped.DType, stepped.Shards, stepped.Tied = "F16", 3, true
	for _, s := range []synth.Shape{smallMoE(), stepped} {
		t.Run(fmt.Sprintf("%s-%d-shards", s.DType, s.Shards), func(t *testing.T) {
			m := writeAndLoad(t, s)
			c := m.Config
			if c.Experts != s.Experts || c.ExpertsPerToken != s.ExpertsPerToken || c.MoEIntermediate != s.MoEIntermediate ||
				c.NormTopKProb != s.NormTopKProb || c.DecoderSparseStep != max(s.DecoderSparseStep, 1) ||
				!slices.Equal(c.MLPOnlyLayers, s.MLPOnlyLayers) || c.Tied != s.Tied {
				t.Errorf("config.json reads back as %+v for %+v", c, s)
			}
			p, err := m.Forward([]int32{5, 200, 17, 263, 42})
			if err != nil {
				t.Fatal(err)
			}
			var sparse []int
			for l := range s.Layers {
				if s.Sparse(l) {
					sparse = append(sparse, l)
				}
			}
			if len(p.Routes) != len(sparse) {
				t.Fatalf("%d sparse layers ran, want %v", len(p.Routes), sparse)
			}
			for i, r := range p.Routes {
				if r.Layer != sparse[i] {
					t.Errorf("routes of layer %d, want %d", r.Layer, sparse[i])
				}
				for _, kept := range r.Experts {
					if len(kept) != s.ExpertsPerToken || kept[0] == kept[1] || slices.Max(kept) >= s.Experts {
						t.Errorf("layer %d kept experts %v", r.Layer, kept)
					}
				}
			}
			for _, v := range m.Head(p.Hidden[4]) {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("logit %g", v)
				}
			}
		})
	}
}

// writeAndLoad writes a checkpoint of shape s with the small tokenizer
// and loads it in the reference forward pass.
func writeAndLoad(t *testing.T, s synth.Shape) *reference.Model {
	t.Helper()
	dir := t.TempDir()
	if err := synth.WriteMini(dir, s); err != nil {
		t.Fatal(err)
	}
	m, err := reference.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestZeroExpertsAreHoles: with ZeroExperts the experts read as zeros but
// take no disk space, and the other tensors are the same bytes as without,
// in Qwen3-MoE and in Qwen3.5-MoE (fused experts in the main layers, per
// expert in the MTP layer, and F32 tensors among the BF16 ones).
func TestZeroExpertsAreHoles(t *testing.T) {
	qwen3 := synth.Shape{ModelType: "qwen3_moe", Hidden: 256, Intermediate: 64, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 16,
		Vocab: 300, MaxPositions: 64, DType: "BF16", Seed: 3, EOS: synth.MiniEOS,
		Experts: 16, ExpertsPerToken: 2, MoEIntermediate: 512, DecoderSparseStep: 1}
	qwen35 := synth.Qwen35_35BA3B()
	qwen35.Hidden, qwen35.Layers, qwen35.Vocab, qwen35.Heads, qwen35.HeadDim, qwen35.EOS = 256, 2, 300, 2, 16, synth.MiniEOS
	qwen35.Experts, qwen35.LinearKeyHeads, qwen35.LinearValueHeads, qwen35.LinearKeyHeadDim, qwen35.LinearValueHeadDim = 16, 2, 4, 16, 16
	for _, s := range []synth.Shape{qwen3, qwen35} {
		t.Run(s.ModelType, func(t *testing.T) { checkZeroExperts(t, s) })
	}
}

func checkZeroExperts(t *testing.T, s synth.Shape) {
	full, zero := filepath.Join(t.TempDir(), "full"), filepath.Join(t.TempDir(), "zero")
	if err := synth.WriteMini(full, s); err != nil {
		t.Fatal(err)
	}
	s.ZeroExperts = true
	if err := synth.WriteMini(zero, s); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(full, "model.safetensors"))
	b, _ := os.ReadFile(filepath.Join(zero, "model.safetensors"))
	if len(a) != len(b) {
		t.Fatalf("sizes %d and %d", len(a), len(b))
	}
	hb, _, _ := synth.SafetensorsHeader(s.Tensors(), s.DType)
	var off, experts int
	for _, ts := range s.Tensors() {
		n := 2
		if ts.DType == "F32" {
			n = 4
		}
		for _, d := range ts.Shape {
			n *= d
		}
		got := b[len(hb)+off : len(hb)+off+n]
		if strings.Contains(ts.Name, ".experts.") {
			experts += n
			if !bytes.Equal(got, make([]byte, n)) {
				t.Fatalf("%s is not zero", ts.Name)
			}
		} else if !bytes.Equal(got, a[len(hb)+off:len(hb)+off+n]) {
			t.Fatalf("%s differs from the full checkpoint's", ts.Name)
		}
		off += n
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(zero, "model.safetensors"), &st); err != nil {
		t.Fatal(err)
	}
	// The experts are 25 MB or more; what is left is well under 1 MB. (A
	// file system without holes stores them.)
	if used := st.Blocks * 512; used > 4<<20 {
		t.Logf("%d bytes on disk for %d bytes of experts: this file system does not keep holes", used, experts)
	}
}
