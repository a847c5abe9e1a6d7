package engine

import (
	"slices"

	"github.com/qwenc/qwenc/kernels"
	"github.com/qwenc/qwenc/runtime/infer"
)

// logprobs computes log-probabilities of a logits row before the sampler
// changes it (penalties are applied in place). The engine's loop owns it.
type logprobs struct {
	k       kernels.Path
	raw     []float32 // the row as the model gave it
	scratch []float32
	lse     float64
}

func newLogprobs(m *infer.Model) *logprobs {
	return &logprobs{k: m.Kernels(), raw: make([]float32, m.Config.Vocab), scratch: make([]float32, m.Config.Vocab)}
}

// before keeps a copy of the row and its log-sum-exp.
func (lp *logprobs) before(l []float32) []float32 {
	raw := lp.raw[:len(l)]
	copy(raw, l)
	lp.lse, _ = lp.k.LogSumExp(raw, lp.scratch)
	return raw
}

// after returns the chosen token's log-probability and the n most likely
// tokens', most likely first (ties: lower id first).
func (lp *logprobs) after(raw []float32, id int32, n int) (float32, []TokenLogprob) {
	chosen := float32(float64(raw[id]) - lp.lse)
	if n <= 0 {
		return chosen, nil
	}
	// No more than the row holds: n is the request's, which callers
	// bound but need not.
	n = min(n, len(raw))
	top := make([]TokenLogprob, 0, n+1)
	for i, v := range raw {
		if len(top) < n || v > top[len(top)-1].Logprob {
			t := TokenLogprob{int32(i), v}
			// After those of an equal logit: ids come in order, so a tie
			// lists the lower id first, the one greedy sampling picks.
			at, _ := slices.BinarySearchFunc(top, t, func(a, b TokenLogprob) int {
				if a.Logprob >= b.Logprob {
					return -1
				}
				return 1
			})
			top = slices.Insert(top, at, t)
			if len(top) > n {
				top = top[:n]
			}
		}
	}
	for i := range top {
		top[i].Logprob = float32(float64(top[i].Logprob) - lp.lse)
	}
	return chosen, top
}
