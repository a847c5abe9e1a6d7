package infer

import (
	"fmt"
	"testing"

	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/kernels"
)

// qwen35Odd is a small Qwen3.5 of awkward sizes: key and value head dims
// off the register widths (36 = 2x16+4, 20 = 16+4), three value heads per
// key head, a convolution of 3 taps, one full-attention layer in three.
func qwen35Odd() synth.Shape {
	return synth.Shape{ModelType: "qwen3_5", Hidden: 40, Intermediate: 56, Layers: 4, Heads: 3, KVHeads: 1, HeadDim: 20,
		Vocab: 300, MaxPositions: 1024, Tied: true, DType: "BF16", Seed: 31, EOS: synth.MiniEOS,
		Qwen35: synth.Qwen35{FullAttentionInterval: 3, LinearKeyHeads: 2, LinearValueHeads: 6, LinearKeyHeadDim: 36, LinearValueHeadDim: 20,
			ConvKernel: 3, PartialRotaryFactor: 0.4, MTPLayers: 1}}
}

// deltaForm forces the delta rule's form on a model's own runner: chunked
// for every run of tokens, or token by token.
func deltaForm(m *Model, chunked bool) {
	if chunked {
		m.runner().tasks.delta.chunkMin = 1
	} else {
		m.runner().tasks.delta.chunkMin = 1 << 30
	}
}

// TestDeltaChunkedMatchesRecurrent holds the two forms of the delta rule to
// the 1e-3 on the logits, on every path: a prompt of several
// chunks and a ragged last one in one step, the same prompt in steps that
// cut chunks (the state carried across steps), and decode after a
// chunked prefill, against the recurrence alone.
func TestDeltaChunkedMatchesRecurrent(t *testing.T) {
	paths := map[string]string{"qwen35-odd": synthModel(t, qwen35Odd(), 512)}
	for _, name := range []string{"tiny-q35", "tiny-q35-moe", "qwen35-go-demo"} {
		paths[name] = compileBundled(t, name)
	}
	for name, path := range paths {
		for _, kp := range kernels.SupportedPaths() {
			t.Run(fmt.Sprintf("%s/%s", name, kp), func(t *testing.T) {
				m := openModel(t, path, kp, 2)
				prompt := randomTokens(200, min(m.Config.Vocab, 5000), 17)
				run := func(chunked bool, steps ...int) []float32 {
					deltaForm(m, chunked)
					s, _ := m.NewSession(0)
					var logits []float32
					at := 0
					for _, n := range steps {
						var err error
						if logits, err = s.Feed(prompt[at : at+n]); err != nil {
							t.Fatal(err)
						}
						at += n
					}
					return append([]float32(nil), logits...)
				}
				want := run(false, 200)
				for _, steps := range [][]int{{200}, {130, 70}, {100, 1, 99}} {
					if d := maxDiff(run(true, steps...), want); d > 1e-3 {
						t.Errorf("chunked prefill in steps %v: logits off the recurrence's by %g", steps, d)
					}
				}
				// A chunked prefill, then decode token by token.
				deltaForm(m, true)
				s, _ := m.NewSession(0)
				if _, err := s.Feed(prompt[:190]); err != nil {
					t.Fatal(err)
				}
				deltaForm(m, false)
				var logits []float32
				for _, id := range prompt[190:] {
					var err error
					if logits, err = s.Feed([]int32{id}); err != nil {
						t.Fatal(err)
					}
				}
				if d := maxDiff(logits, want); d > 1e-3 {
					t.Errorf("decode after a chunked prefill: logits off the recurrence's by %g", d)
				}
			})
		}
	}
}

// TestDeltaSnapshotMidStep: a Qwen3.5 session's snapshot taken after a
// decode step (the delta rule's pending term in the state) and restored
// continues as the straight run does, by either form.
func TestDeltaSnapshotMidStep(t *testing.T) {
	m := openModel(t, synthModel(t, qwen35Odd(), 64), kernels.Detect(), 2)
	prompt := randomTokens(100, m.Config.Vocab, 23)
	for _, chunked := range []bool{false, true} {
		deltaForm(m, false)
		s, _ := m.NewSession(0)
		if _, err := s.Feed(prompt[:40]); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Feed(prompt[40:41]); err != nil {
			t.Fatal(err)
		}
		sn := s.Snapshot()
		deltaForm(m, chunked)
		want, err := s.Feed(prompt[41:])
		if err != nil {
			t.Fatal(err)
		}
		want = append([]float32(nil), want...)
		if _, err := s.Feed(prompt[:5]); err != nil { // move the state on
			t.Fatal(err)
		}
		if err := s.Restore(sn); err != nil {
			t.Fatal(err)
		}
		got, err := s.Feed(prompt[41:])
		if err != nil {
			t.Fatal(err)
		}
		if d := maxDiff(got, want); d != 0 {
			t.Errorf("chunked %v: from the snapshot the logits differ by %g", chunked, d)
		}
	}
}

func TestQwen35DecodeDoesNotAllocate(t *testing.T) {
	checkDecodeDoesNotAllocate(t, openModel(t, synthModel(t, qwen35Odd(), 16), kernels.Detect(), 2))
}
