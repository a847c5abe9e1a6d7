package infer

import (
	"math"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
	"github.com/qwenc/qwenc/internal/testmodel"
	"github.com/qwenc/qwenc/kernels"
)

// TestQuantizedReferenceLogits checks q8 and q4 files of the bundled models
// against the float64 reference. The tolerances come from the
// quantization itself, measured: a q8 weight or activation is off by up to
// half a step of max|block|/127, and on tiny-a (random weights, where
// errors add up rather than cancel) q8 weights alone move the last logits
// by 0.081 RMS, 0.34 at most (an f16 file of the dequantized weights);
// with the activations quantized too, 0.10 and 0.53. The trained demo
// model's logits move by 0.023 RMS, 0.24 at most. The bounds are twice
// those. q4 (4-bit layers, 8-bit head) moves tiny-a's logits by 0.9 RMS,
// the demo's by 0.15; its bounds only catch a broken scheme. On the MoE
// model q8 moves the logits by 0.06-0.15 RMS, 0.72 at most; q4 by 0.4-0.7
// RMS, except where its error changes an expert the router picks: the
// "hello" case then moves by 2.9 RMS, 14 at most (random weights at hidden
// 32 make one expert's output as large as the residual).
func TestQuantizedReferenceLogits(t *testing.T) {
	type bound struct{ rms, max float64 }
	bounds := map[string]map[format.DType]bound{
		"tiny-a":        {format.Q8: {0.2, 1.1}, format.Q4: {1.8, 8}},
		"tiny-q2b":      {format.Q8: {0.2, 1.1}, format.Q4: {1.8, 8}},
		"qwen3-go-demo": {format.Q8: {0.05, 0.5}, format.Q4: {0.3, 2.2}},
		"tiny-moe-a":    {format.Q8: {0.3, 1.5}, format.Q4: {4, 20}},
		// The random Qwen3.5 models have 8 layers where tiny-a has 2:
		// random layers compound the activations' rounding (no single
		// kind of weight kept in f16 changes it), while the trained
		// Qwen3.5 is as close as the trained Qwen3.
		"tiny-q35":       {format.Q8: {1.0, 5}, format.Q4: {4.5, 25}},
		"tiny-q35-moe":   {format.Q8: {2.7, 13}, format.Q4: {8, 37}},
		"qwen35-go-demo": {format.Q8: {0.03, 0.26}, format.Q4: {0.19, 2.1}},
	}
	for name, bs := range bounds {
		for typ, b := range bs {
			m := openModel(t, compileBundledAs(t, name, typ), kernels.Detect(), 2)
			for _, c := range loadReference(t, name) {
				if kernels.Detect() == kernels.Generic && len(c.PromptIDs) > 64 {
					continue // the portable kernels (arm64 under qemu) take the short prompts
				}
				s, _ := m.NewSession(0)
				logits, err := s.Feed(c.PromptIDs)
				if err != nil {
					t.Fatal(err)
				}
				want := readF32(t, testmodel.Testdata(t, name, "expected", c.LastLogitsFile))
				var maxErr, sum2 float64
				for i := range want {
					d := float64(logits[i] - want[i])
					maxErr = max(maxErr, math.Abs(d))
					sum2 += d * d
				}
				rms := math.Sqrt(sum2 / float64(len(want)))
				if rms > b.rms || maxErr > b.max {
					t.Errorf("%s %s %s: last logits off by %.4f RMS, %.4f at most; bounds %.2f, %.2f", name, typ, c.Name, rms, maxErr, b.rms, b.max)
				}
			}
		}
	}
}

// TestQ8GreedyFollowsReference: on the trained model, q8's greedy text is
// the reference's (which f16 follows through all 40 steps of every case)
// up to the first step where the reference's best two logits are closer
// than twice q8's largest logit error there (0.24): a near tie that the
// quantization may decide either way.
func TestQ8GreedyFollowsReference(t *testing.T) {
	const tie = 0.5
	m := openModel(t, compileBundledAs(t, "qwen3-go-demo", format.Q8), kernels.Detect(), 2)
	for _, c := range loadReference(t, "qwen3-go-demo") {
		s, _ := m.NewSession(0)
		logits, err := s.Feed(c.PromptIDs)
		if err != nil {
			t.Fatal(err)
		}
		same := 0
		for step, want := range c.Greedy {
			if id, _ := argmax(logits); int32(id) != want {
				if c.GreedyMargins[step] >= tie {
					t.Fatalf("%s: greedy step %d = %d, want %d (margin %.3f)", c.Name, step, id, want, c.GreedyMargins[step])
				}
				break
			}
			same++
			if logits, err = s.Feed([]int32{want}); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%s: the same %d of %d steps", c.Name, same, len(c.Greedy))
	}
}

// quantShapes are synthetic models for the quantized paths: every matrix
// quantizable; and one where some are not (a hidden size of 64 but an FFN
// of 100, so down_proj stays f16 in a quantized file), with Qwen2 biases
// and an untied head.
func quantShapes() map[string]synth.Shape {
	all := synth.Shape{ModelType: "qwen3", Hidden: 64, Intermediate: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 333, MaxPositions: 1024, Tied: true, DType: "BF16", Seed: 21, EOS: synth.MiniEOS}
	mixed := all
	mixed.ModelType, mixed.Intermediate, mixed.Tied, mixed.Seed = "qwen2", 100, false, 22
	return map[string]synth.Shape{"qwen3-q-all": all, "qwen2-q-mixed": mixed}
}

// TestQuantizedPathsAndBatching runs q8 and q4 files on every kernel path
// with one batch, batches of 37 and token by token. On one path the logits
// agree up to float32 rounding: the activations are quantized per row, so
// batching changes nothing else. Across paths the f32 kernels (norms,
// attention) round differently in the last bits, which now and then moves
// an activation across a rounding boundary of its quantization: a whole
// step, which random weights spread (the trained demo's 349-token prompt
// differs across paths by 0.012 RMS, these random models by up to 0.08).
// So across paths the logits must agree within the scale of q8's own
// error, which a kernel computing anything else misses by far; the
// kernels' own tests compare the paths exactly.
func TestQuantizedPathsAndBatching(t *testing.T) {
	for name, s := range quantShapes() {
		for _, typ := range []format.DType{format.Q8, format.Q4} {
			path := synthtest.CompileAs(t, s, 512, typ)
			prompt := randomTokens(300, s.Vocab, 5)
			run := func(m *Model, batch int) []float32 { return lastLogits(t, m, prompt, batch) }
			ref := run(openModel(t, path, kernels.Detect(), 2), 0)
			for _, kp := range kernels.SupportedPaths() {
				m := openModel(t, path, kp, 2)
				one := run(m, 0)
				if d := rmsDiff(ref, one); d > 0.15 {
					t.Errorf("%s %s/%s: logits differ from %s's by %.4f RMS", name, typ, kp, kernels.Detect(), d)
				}
				for _, batch := range []int{37, 1} {
					if d := maxDiff(one, run(m, batch)); d > 2e-3 {
						t.Errorf("%s %s/%s: batches of %d change the logits by %g", name, typ, kp, batch, d)
					}
				}
			}
		}
	}
}

func TestQuantizedDecodeStepDoesNotAllocate(t *testing.T) {
	for name, s := range quantShapes() {
		for _, typ := range []format.DType{format.Q8, format.Q4} {
			t.Run(name+"/"+typ.String(), func(t *testing.T) {
				checkDecodeDoesNotAllocate(t, openModel(t, synthtest.CompileAs(t, s, 16, typ), kernels.Detect(), 2))
			})
		}
	}
}

func rmsDiff(a, b []float32) float64 {
	var s float64
	for i := range a {
		d := float64(a[i] - b[i])
		s += d * d
	}
	return math.Sqrt(s / float64(len(a)))
}
