package infer

import (
	"math"
	"testing"

	"github.com/qwenc/qwenc/kernels"
)

// TestHeadLogitsMatchReference checks the logits FeedHidden and HeadLogits give at every
// listed position of the float64 reference (top logits within 0.05, and
// the log-sum-exp, which perplexity depends on), with batches that end at
// odd places (MaxBatch 100) and scoring that starts mid-batch.
func TestHeadLogitsMatchReference(t *testing.T) {
	for _, name := range []string{"tiny-a", "qwen3-go-demo"} {
		path := compileBundled(t, name)
		m := openModel(t, path, kernels.Detect(), 2)
		for _, c := range loadReference(t, name) {
			if kernels.Detect() == kernels.Generic && len(c.PromptIDs) > 64 {
				continue // the portable kernels (arm64 under qemu) take the short prompts
			}
			from := 0
			if len(c.PromptIDs) > 3 {
				from = 1
			}
			s, _ := m.NewSession(0)
			s.MaxBatch = 100
			want := map[int]int{} // position -> index in c.Positions
			for i, p := range c.Positions {
				if p.Pos >= from {
					want[p.Pos] = i
				}
			}
			hidden := make([]float32, (len(c.PromptIDs)-from)*m.Config.Hidden)
			if err := s.FeedHidden(c.PromptIDs, from, hidden); err != nil {
				t.Fatal(err)
			}
			next := from
			err := m.HeadLogits(hidden, func(r int, logits []float32) error {
				i := from + r
				if i != next {
					t.Fatalf("%s/%s: position %d scored, want %d", name, c.Name, i, next)
				}
				next++
				k, ok := want[i]
				if !ok {
					return nil
				}
				delete(want, i)
				p := c.Positions[k]
				for _, tv := range p.Top {
					if d := math.Abs(float64(logits[int(tv[0])]) - tv[1]); d > 0.05 {
						t.Errorf("%s/%s: position %d logit of %d off by %.4f", name, c.Name, i, int(tv[0]), d)
					}
				}
				if d := math.Abs(logSumExp(logits) - p.LogSumExp); d > 0.05 {
					t.Errorf("%s/%s: position %d logsumexp %.4f, want %.4f", name, c.Name, i, logSumExp(logits), p.LogSumExp)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if next != len(c.PromptIDs) || len(want) != 0 {
				t.Errorf("%s/%s: scored up to %d of %d positions, %d listed positions not seen", name, c.Name, next, len(c.PromptIDs), len(want))
			}
			if s.Len() != len(c.PromptIDs) {
				t.Errorf("%s/%s: session holds %d tokens after scoring %d", name, c.Name, s.Len(), len(c.PromptIDs))
			}
		}
	}
}

func logSumExp(x []float32) float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = max(mx, float64(v))
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - mx)
	}
	return mx + math.Log(s)
}
