package compiler

import (
	"bufio"
	"bytes"
	"fmt"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/synth"
)

// TestExpertSections: a Qwen3-MoE checkpoint compiles to one stacked
// section per layer and projection, expert e's matrix at e times one
// matrix's size, byte for byte what the same matrix compiles to as a
// dense layer's; routers stay f16 and experts take the file's type (q4
// experts stay q4 in every layer), the dense layer its usual mix.
func TestExpertSections(t *testing.T) {
	s := synth.Shape{ModelType: "qwen3_moe", Hidden: 64, Intermediate: 96, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 300, MaxPositions: 512, Tied: true, DType: "BF16", Seed: 9, EOS: synth.MiniEOS,
		Experts: 5, ExpertsPerToken: 2, MoEIntermediate: 64, NormTopKProb: true, MLPOnlyLayers: []int{2}}
	model := writeModel(t, s)
	ck, err := OpenCheckpoint(model)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for _, typ := range []format.DType{format.F16, format.Q8, format.Q4} {
		f, err := format.Open(compileAs(t, model, typ))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, l := range []int{0, 1, 3} { // 3 is a use_more_bits layer
			if sec, _ := f.Header.Section(format.LayerSection(l, "router")); sec.DType != format.F16 || len(sec.Shape) != 2 {
				t.Errorf("%s: layer %d router is %s %v", typ, l, sec.DType, sec.Shape)
			}
			for _, p := range []string{"gate_proj", "up_proj", "down_proj"} {
				name := format.LayerSection(l, "experts."+p)
				sec, ok := f.Header.Section(name)
				if !ok || sec.DType != typ || len(sec.Shape) != 3 || sec.Shape[0] != 5 {
					t.Fatalf("%s: section %s: %+v", typ, name, sec)
				}
				b, _ := f.Bytes(name)
				one := len(b) / 5
				for e := range 5 {
					hf := fmt.Sprintf("model.layers.%d.mlp.experts.%d.%s.weight", l, e, p)
					want := compileMatrix(t, ck, hf, typ)
					if !bytes.Equal(b[e*one:(e+1)*one], want) {
						t.Fatalf("%s: %s expert %d differs from %s compiled alone", typ, name, e, hf)
					}
				}
			}
		}
		if _, ok := f.Header.Section("layers.2.experts.gate_proj"); ok {
			t.Errorf("%s: the dense layer 2 has experts", typ)
		}
		if sec, _ := f.Header.Section("layers.2.down_proj"); typ == format.Q4 && sec.DType != format.Q6 {
			t.Errorf("q4: layer 2 down_proj (a use_more_bits layer) is %s", sec.DType)
		}
	}
}

// compileMatrix converts one checkpoint matrix to a tile-major section of
// type typ, as writeTensor does for a dense layer.
func compileMatrix(t *testing.T, ck *Checkpoint, hf string, typ format.DType) []byte {
	t.Helper()
	ti := ck.Tensors[hf]
	shape := []uint64{uint64(ti.Shape[0]), uint64(ti.Shape[1])}
	size, _ := format.ExpectedSize(typ, format.TileMajor, shape)
	s := &section{Section: format.Section{Name: hf, DType: typ, Layout: format.TileMajor, Shape: shape, Size: size}, srcs: []*TensorInfo{ti}}
	var buf bytes.Buffer
	w := &sectionWriter{w: bufio.NewWriter(&buf)}
	if err := writeTensor(t.Context(), ck, newConverter(), w, s, []*blockSlot{{}, {}}); err != nil {
		t.Fatal(err)
	}
	w.w.Flush()
	return buf.Bytes()
}
