package infer

import (
	"errors"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
	"github.com/qwenc/qwenc/kernels"
)

// TestRopeScalingReference runs models with rope_scaling (yarn with its
// defaults, yarn with every field given, linear) on prompts that go far
// past original_max_position_embeddings (64 here, so the test stays small),
// against the float64 reference's reading of transformers' formulas: the
// logits of every position from the first past the original context to
// the last, within the dense models' 0.05, on every kernel path.
func TestRopeScalingReference(t *testing.T) {
	for name, rs := range map[string]map[string]any{
		"yarn":        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
		"yarn-fields": {"type": "yarn", "factor": 4.5, "original_max_position_embeddings": 48, "attention_factor": 1.2, "beta_fast": 16.0, "beta_slow": 2.0, "truncate": false},
		"linear":      {"rope_type": "linear", "factor": 3.0},
	} {
		s := synth.Shape{ModelType: "qwen3", Hidden: 64, Intermediate: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32,
			Vocab: 300, MaxPositions: 64, Tied: true, DType: "BF16", Seed: 51, EOS: synth.MiniEOS, RopeScaling: rs}
		prompt := randomTokens(180, s.Vocab, 4)
		want := referenceLogits(t, s, prompt)
		path := synthtest.Compile(t, s, 64)
		for _, kp := range kernels.SupportedPaths() {
			m := openModel(t, path, kp, 2)
			sess, err := m.NewSession(0)
			if err != nil {
				t.Fatal(err)
			}
			var worst float64
			for pos, id := range prompt {
				got, err := sess.Feed([]int32{id})
				if err != nil {
					t.Fatal(err)
				}
				if pos < 64 && pos%16 != 0 {
					continue
				}
				worst = max(worst, diff64(got, want[pos]))
			}
			if worst > 0.05 {
				t.Errorf("%s/%s: logits off by %.4f", name, kp, worst)
			}
			// The whole prompt at once (prefill batches of 64) agrees too.
			last := lastLogits(t, m, prompt, 0)
			if d := diff64(last, want[len(prompt)-1]); d > 0.05 {
				t.Errorf("%s/%s: prefilled last logits off by %.4f", name, kp, d)
			}
		}
	}
}

// TestRopeScalingContext: the context allowed is the factor times the
// original one, and a longer one is refused naming both numbers.
func TestRopeScalingContext(t *testing.T) {
	s := synth.Shape{ModelType: "qwen3", Hidden: 32, Intermediate: 48, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 16,
		Vocab: 300, MaxPositions: 64, Tied: true, DType: "BF16", Seed: 52, EOS: synth.MiniEOS,
		RopeScaling: map[string]any{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}}
	m := openModel(t, synthtest.Compile(t, s, 64), kernels.Detect(), 2)
	if got := m.Config.MaxContext(); got != 256 {
		t.Fatalf("maximum context %d, want 256", got)
	}
	if _, err := m.NewSession(257); err == nil || !strings.Contains(err.Error(), "257") || !strings.Contains(err.Error(), "256") {
		t.Errorf("a context of 257: %v", err)
	}
	sess, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Feed(randomTokens(256, s.Vocab, 1)); err != nil {
		t.Fatalf("256 tokens: %v", err)
	}
	if _, err := sess.Feed([]int32{1}); !errors.Is(err, ErrContextFull) || !strings.Contains(err.Error(), "256") {
		t.Errorf("token 257: %v", err)
	}
}
