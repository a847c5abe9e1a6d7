package sampling

import (
	"math"
	"math/bits"
	"slices"
)

// Tokens more than cutoffNats below the best (after temperature) get
// probability 0. Their total mass is under vocab*e^-32 ~ 2e-9 of the best
// token's, below float32 resolution of the normaliser, and skipping them
// avoids most exp calls on real logits.
const (
	cutoffNats    = 32
	bucketsPerNat = 32
	numBuckets    = cutoffNats * bucketsPerNat
)

// sampleFull handles TopK off: temperature, top-p and min-p over the whole
// row. Top-p needs the highest-probability tokens in order, but only up to
// the cut. A histogram of probability mass by log-probability (1/32 nat
// buckets) finds the bucket where the cumulative mass crosses TopP; tokens in
// better buckets are kept unsorted and only the boundary bucket is sorted,
// which is typically tens of tokens rather than 151936.
func (s *Sampler) sampleFull(logits []float32) int {
	z, ok := s.weighFull(logits)
	if !ok {
		return argmax(logits)
	}
	e := s.e[:len(logits)]
	if s.p.TopP >= 1 && s.p.MinP <= 0 {
		return s.drawDense(e, z)
	}
	return s.draw(s.filterFull(e, z))
}

// weighFull fills s.e with unnormalised tempered probabilities (the best
// token gets exactly 1) and, when top-p is on, the mass histogram. It
// returns the total mass, or false when no finite maximum exists.
func (s *Sampler) weighFull(logits []float32) (float64, bool) {
	top := float32(math.Inf(-1))
	for _, v := range logits {
		if v > top {
			top = v
		}
	}
	if math.IsInf(float64(top), 0) {
		return 0, false
	}
	n := len(logits)
	e := s.e[:n]
	invT := 1 / s.p.Temperature
	var z float64
	if s.p.TopP >= 1 {
		for i, v := range logits {
			x := (v - top) * invT
			if !(x > -cutoffNats) { // also catches NaN
				e[i] = 0
				continue
			}
			p := s.exp.neg(x)
			e[i] = p
			z += float64(p)
		}
		return z, true
	}
	clear(s.hist[:])
	b := s.bucket[:n]
	for i, v := range logits {
		x := (v - top) * invT
		if !(x > -cutoffNats) {
			e[i] = 0
			continue
		}
		p := s.exp.neg(x)
		e[i] = p
		z += float64(p)
		k := int(-x * bucketsPerNat)
		if k >= numBuckets {
			k = numBuckets - 1 // rounding at the cutoff edge
		}
		b[i] = uint16(k)
		s.hist[k] += float64(p)
	}
	return z, true
}

// filterFull applies top-p then min-p to the weights in e.
func (s *Sampler) filterFull(e []float32, z float64) []cand {
	var c []cand
	if s.p.TopP < 1 {
		c = s.nucleus(e, float64(s.p.TopP)*z)
	} else {
		c = s.cands[:0]
		for i, p := range e {
			if p > 0 {
				c = append(c, cand{int32(i), p})
			}
		}
	}
	if s.p.MinP > 0 {
		// The best token has e == 1 exactly, so p >= MinP*p_max is e >= MinP.
		k := 0
		for _, x := range c {
			if x.v >= s.p.MinP {
				c[k] = x
				k++
			}
		}
		c = c[:k]
	}
	return c
}

// nucleus returns the top-p survivors (in no particular order except that
// the boundary bucket is sorted) given e and the target mass TopP*z.
func (s *Sampler) nucleus(e []float32, target float64) []cand {
	boundary := numBuckets - 1
	var cum float64
	for k, m := range s.hist {
		if cum+m >= target {
			boundary = k
			break
		}
		cum += m
	}
	// Better buckets fill c from the front, the boundary bucket from the back.
	c := s.cands[:len(e)]
	front, back := 0, len(e)
	var kept float64
	b := s.bucket[:len(e)]
	for i, p := range e {
		if p == 0 {
			continue
		}
		switch k := int(b[i]); {
		case k < boundary:
			c[front] = cand{int32(i), p}
			front++
			kept += float64(p)
		case k == boundary:
			back--
			c[back] = cand{int32(i), p}
		}
	}
	edge := c[back:]
	m := 0
	if kept < target {
		m = s.prefixByMass(edge, kept, target)
	}
	copy(c[front:], edge[:m])
	return c[:front+m]
}

// lowestIDs is prefixByMass for tokens of one weight, which byProbDesc
// orders by id alone: it counts the tokens the mass needs (sums of equal
// terms, the same in any order) and puts that many of the lowest ids
// first, found by a bit per token rather than a sort (the exp table
// gives most of a demo model's untrained tokens the same weight).
func (s *Sampler) lowestIDs(edge []cand, kept, target float64) int {
	m := nucleusPrefix(edge, kept, target)
	if m == len(edge) {
		return m
	}
	clear(s.marks)
	for _, x := range edge {
		s.marks[x.id/64] |= 1 << (x.id % 64)
	}
	v, n := edge[0].v, 0
	for w, word := range s.marks {
		for ; word != 0 && n < m; word &= word - 1 {
			edge[n] = cand{int32(w*64 + bits.TrailingZeros64(word)), v}
			n++
		}
	}
	return m
}

// Boundary buckets of more than maxSortedEdge tokens are split by a
// histogram of subBuckets before anything is sorted.
const (
	maxSortedEdge = 2048
	subBuckets    = 1024
)

// prefixByMass rearranges edge so that its first m tokens are the
// shortest run, in byProbDesc order, whose mass added to kept reaches
// target, and returns m. A small edge is sorted. A large one (a model
// whose untrained tokens all sit at about one logit, as the small demo
// models' do: 113K tokens in one 1/32-nat bucket, whose sort was most of
// a step) is split by a histogram over its range of weights: the tokens
// of better sub-buckets are kept unsorted and only the sub-bucket where
// the mass crosses target is looked into, the same way.
func (s *Sampler) prefixByMass(edge []cand, kept, target float64) int {
	if len(edge) <= maxSortedEdge { // a real model's, of tens of tokens
		slices.SortFunc(edge, byProbDesc)
		return nucleusPrefix(edge, kept, target)
	}
	lo, hi := edge[0].v, edge[0].v
	for _, x := range edge {
		lo, hi = min(lo, x.v), max(hi, x.v)
	}
	if lo == hi {
		return s.lowestIDs(edge, kept, target)
	}
	// Heavier weights get lower indices, as the buckets of nucleus.
	scale := float64(subBuckets-1) / float64(hi-lo)
	index := func(v float32) int { return subBuckets - 1 - int(float64(v-lo)*scale) }
	h := s.sub[:]
	clear(h)
	for _, x := range edge {
		h[index(x.v)] += float64(x.v)
	}
	boundary := subBuckets - 1
	for k, m := range h {
		if kept+m >= target {
			boundary = k
			break
		}
		kept += m
	}
	// Better sub-buckets first, then the boundary, then the rest.
	lt, i, gt := 0, 0, len(edge)
	for i < gt {
		switch k := index(edge[i].v); {
		case k < boundary:
			edge[lt], edge[i] = edge[i], edge[lt]
			lt++
			i++
		case k == boundary:
			i++
		default:
			gt--
			edge[i], edge[gt] = edge[gt], edge[i]
		}
	}
	return lt + s.prefixByMass(edge[lt:gt], kept, target)
}

// drawDense samples straight from the unnormalised row when no filter needs
// a candidate list.
func (s *Sampler) drawDense(e []float32, z float64) int {
	u := s.rng.Float64() * z
	var acc float64
	last := 0
	for i, p := range e {
		if p == 0 {
			continue
		}
		acc += float64(p)
		if u < acc {
			return i
		}
		last = i
	}
	return last
}
