package infer

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/reference"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
	"github.com/qwenc/qwenc/internal/testmodel"
	"github.com/qwenc/qwenc/kernels"
)

// TestPickExperts checks the routing of one token against values worked
// out by hand: the softmax over all experts, the top k by probability with
// the lower index first on ties (also at the k boundary), and the weights
// with and without renormalisation.
func TestPickExperts(t *testing.T) {
	for _, c := range []struct {
		name   string
		logits []float32
		k      int
		norm   bool
		want   []int32
	}{
		{"all tied", []float32{0, 0, 0, 0, 0, 0}, 3, false, []int32{0, 1, 2}},
		{"all tied, renormalised", []float32{0, 0, 0, 0, 0, 0}, 3, true, []int32{0, 1, 2}},
		{"descending", []float32{0.5, 3, -1, 2, 2.5}, 3, true, []int32{1, 4, 3}},
		{"tie at the boundary", []float32{1, 3, 2, 2, 0}, 2, false, []int32{1, 2}},
		{"tie inside", []float32{1, 3, 2, 3, 0}, 3, true, []int32{1, 3, 2}},
		{"k = experts", []float32{-2, 7, 1}, 3, false, []int32{1, 2, 0}},
	} {
		chosen := make([]int32, c.k)
		weights := make([]float32, c.k)
		pickExperts(c.logits, make([]float64, len(c.logits)), chosen, weights, c.norm)
		if !slices.Equal(chosen, c.want) {
			t.Errorf("%s: experts %v, want %v", c.name, chosen, c.want)
		}
		var z, kept float64
		for _, v := range c.logits {
			z += math.Exp(float64(v))
		}
		for _, e := range c.want {
			kept += math.Exp(float64(c.logits[e])) / z
		}
		for j, e := range c.want {
			want := math.Exp(float64(c.logits[e])) / z
			if c.norm {
				want /= kept
			}
			if math.Abs(float64(weights[j])-want) > 1e-7 {
				t.Errorf("%s: weight of expert %d = %v, want %v", c.name, e, weights[j], want)
			}
		}
	}
}

// moeShapes are random Qwen3-MoE models for the layer patterns: every
// layer sparse (hidden 64, so the experts' gate and up quantize, but a
// width of 40 keeps down f16), every layer dense (a qwen3_moe config that
// routes nowhere), and decoder_sparse_step 2 with k = 1.
func moeShapes() map[string]synth.Shape {
	base := synth.Shape{ModelType: "qwen3_moe", Hidden: 64, Intermediate: 72, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 300, MaxPositions: 1024, Tied: true, DType: "BF16", Seed: 41, EOS: synth.MiniEOS,
		Experts: 5, ExpertsPerToken: 2, MoEIntermediate: 40, NormTopKProb: true}
	dense := base
	dense.MLPOnlyLayers, dense.Seed = []int{0, 1, 2}, 42
	step := base
	step.DecoderSparseStep, step.ExpertsPerToken, step.NormTopKProb, step.MoEIntermediate, step.Seed = 2, 1, false, 64, 43
	return map[string]synth.Shape{"all-sparse": base, "all-dense": dense, "sparse-step-2": step}
}

// TestMoELayerPatterns runs each pattern against the float64 reference
// computed here from the same checkpoint: the last-position logits of a
// prompt that crosses a KV chunk and runs as two prefill batches, on every
// kernel path, f16 within the dense models' 0.05 (measured: 0.0016-0.0022)
// and q8 within twice its own error (measured: 0.23-0.36).
func TestMoELayerPatterns(t *testing.T) {
	for name, s := range moeShapes() {
		prompt := randomTokens(270, s.Vocab, 9)
		all := referenceLogits(t, s, prompt)
		want := all[len(all)-1]
		for _, typ := range []format.DType{format.F16, format.Q8} {
			path := synthtest.CompileAs(t, s, 200, typ)
			for _, kp := range kernels.SupportedPaths() {
				m := openModel(t, path, kp, 2)
				sparse := 0
				for l := range m.Config.Layers {
					if m.Config.SparseLayer(l) {
						sparse++
					}
				}
				if wantSparse := map[string]int{"all-sparse": 3, "all-dense": 0, "sparse-step-2": 1}[name]; sparse != wantSparse {
					t.Fatalf("%s: %d sparse layers, want %d", name, sparse, wantSparse)
				}
				got := lastLogits(t, m, prompt, 0)
				var worst float64
				for i := range want {
					worst = max(worst, math.Abs(float64(got[i])-want[i]))
				}
				if bound := map[format.DType]float64{format.F16: 0.05, format.Q8: 0.8}[typ]; worst > bound {
					t.Errorf("%s %s/%s: last logits off by %.4f > %.2f", name, typ, kp, worst, bound)
				}
			}
		}
	}
}

// TestTinyMoeBCoversRouting: the reference data of tiny-moe-b exercises
// what its logits test is for: layer 0 (an all-zero router) sends every
// token of every prompt to experts 0, 1 and 2 by ties alone, and the long
// prompts reach every expert of layer 3. The engine matches those logits
// (TestReferenceLogits), which a different choice of experts would move.
func TestTinyMoeBCoversRouting(t *testing.T) {
	for _, c := range loadMoEReference(t, "tiny-moe-b") {
		for _, r := range c.Router {
			switch {
			case r.Layer == 0 && (!slices.Equal(r.ExpertsUsed, []int{0, 1, 2}) || r.Ties != len(c.PromptIDs)):
				t.Errorf("%s: layer 0 uses experts %v with %d ties over %d positions", c.Name, r.ExpertsUsed, r.Ties, len(c.PromptIDs))
			case r.Layer == 3 && len(c.PromptIDs) >= 300 && len(r.ExpertsUsed) != 6:
				t.Errorf("%s: layer 3 uses only experts %v", c.Name, r.ExpertsUsed)
			}
		}
	}
}

func loadMoEReference(t *testing.T, name string) []reference.Case {
	e, err := reference.ReadExpected(testmodel.Testdata(t, name, "expected"))
	if err != nil {
		t.Fatal(err)
	}
	return e.Cases
}

// referenceLogits writes the checkpoint of shape s and returns the float64
// reference's logits of every position of prompt.
func referenceLogits(t *testing.T, s synth.Shape, prompt []int32) [][]float64 {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	if err := synth.WriteMini(dir, s); err != nil {
		t.Fatal(err)
	}
	ref, err := reference.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	all, err := ref.Logits(prompt)
	if err != nil {
		t.Fatal(err)
	}
	return all
}
