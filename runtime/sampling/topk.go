package sampling

import (
	"math"
	"slices"
)

// selectTopK returns the k best logits, sorted by descending logit and then
// ascending id, using a size-k min-heap: one comparison per token for the
// vast majority of a 151936-entry row, instead of sorting it.
func (s *Sampler) selectTopK(logits []float32, k int) []cand {
	h := s.cands[:k]
	for i := range h {
		v := logits[i]
		if v != v {
			v = float32(math.Inf(-1)) // NaN would break the heap order
		}
		h[i] = cand{int32(i), v}
	}
	for i := k/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	floor := h[0].v
	for i := k; i < len(logits); i++ {
		// Strictly greater: on equal logits the earlier (lower) id stays,
		// matching argmax. NaN compares false and is skipped.
		if v := logits[i]; v > floor {
			h[0] = cand{int32(i), v}
			siftDown(h, 0)
			floor = h[0].v
		}
	}
	slices.SortFunc(h, byProbDesc)
	return h
}

// worse orders the heap: lower value first, and on ties the higher id, which
// is the one evicted first.
func worse(a, b cand) bool {
	return a.v < b.v || (a.v == b.v && a.id > b.id)
}

func siftDown(h []cand, i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && worse(h[r], h[l]) {
			m = r
		}
		if !worse(h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// byProbDesc sorts by descending value, ties by ascending id, so that every
// cut (top-k, top-p, min-p) is deterministic.
func byProbDesc(a, b cand) int {
	switch {
	case a.v > b.v:
		return -1
	case a.v < b.v:
		return 1
	case a.id < b.id:
		return -1
	case a.id > b.id:
		return 1
	}
	return 0
}
