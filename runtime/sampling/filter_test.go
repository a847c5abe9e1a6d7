package sampling

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// survivors returns the sorted ids that pass the filters, through whichever
// path Sample would take.
func survivors(s *Sampler, l []float32) []int {
	var c []cand
	if s.p.TopK > 0 && s.p.TopK < len(l) {
		c = s.filterTopK(l)
	} else {
		z, ok := s.weighFull(l)
		if !ok {
			return nil
		}
		c = s.filterFull(s.e[:len(l)], z)
	}
	ids := make([]int, len(c))
	for i, x := range c {
		ids[i] = int(x.id)
	}
	slices.Sort(ids)
	return ids
}

// logitsOf turns probabilities into logits so that softmax at T=1 gives
// them back.
func logitsOf(p ...float64) []float32 {
	l := make([]float32, len(p))
	for i, x := range p {
		l[i] = float32(math.Log(x))
	}
	return l
}

func TestCutsOnHandMadeDistributions(t *testing.T) {
	// Shuffled so that order in the row is not order of probability.
	l := logitsOf(0.05, 0.4, 0.02, 0.25, 0.15, 0.1, 0.03)
	cases := []struct {
		name string
		p    Params
		want []int
	}{
		{"top-p 0.5", Params{TopP: 0.5}, []int{1, 3}},            // .40 .65
		{"top-p 0.3", Params{TopP: 0.3}, []int{1}},               // .40
		{"top-p 0.85", Params{TopP: 0.85}, []int{1, 3, 4, 5}},    // .40 .65 .80 .90
		{"top-p 0.93", Params{TopP: 0.93}, []int{0, 1, 3, 4, 5}}, // ... .95
		{"min-p 0.3", Params{MinP: 0.3}, []int{1, 3, 4}},         // p >= .12
		{"min-p 0.2", Params{MinP: 0.2}, []int{1, 3, 4, 5}},      // p >= .08
		{"min-p 0.9", Params{MinP: 0.9}, []int{1}},
		{"top-p then min-p", Params{TopP: 0.85, MinP: 0.3}, []int{1, 3, 4}},
		{"min-p cannot widen top-p", Params{TopP: 0.5, MinP: 0.01}, []int{1, 3}},
		{"top-k 3", Params{TopK: 3}, []int{1, 3, 4}},
		{"top-k 4 then top-p 0.5", Params{TopK: 4, TopP: 0.5}, []int{1, 3}},
		// Within the top 3 the best has .4/.8 = .5 >= .45; unrenormalised
		// .4 would need a second token.
		{"top-p renormalises after top-k", Params{TopK: 3, TopP: 0.45}, []int{1}},
		{"top-k 5 then min-p 0.3", Params{TopK: 5, MinP: 0.3}, []int{1, 3, 4}},
	}
	for _, c := range cases {
		c.p.Temperature = 1
		if got := survivors(New(len(l), c.p), l); !slices.Equal(got, c.want) {
			t.Errorf("%s: kept %v, want %v", c.name, got, c.want)
		}
	}
	// Temperature comes before top-p: at T=0.5 p is proportional to p^2,
	// i.e. .16 .0625 .0225 .01 ... normalised: .62 .24 .09 .04, so 0.7
	// needs two tokens where T=1 needed three.
	if got := survivors(New(len(l), Params{Temperature: 0.5, TopP: 0.7}), l); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("top-p at T=0.5 kept %v, want [1 3]", got)
	}
}

// referenceNucleus is the textbook definition: sort everything, keep the
// shortest prefix reaching p.
func referenceNucleus(l []float32, temp, p float64) []int {
	m := math.Inf(-1)
	for _, v := range l {
		m = max(m, float64(v))
	}
	idx := make([]int, len(l))
	w := make([]float64, len(l))
	var z float64
	for i, v := range l {
		idx[i] = i
		w[i] = math.Exp((float64(v) - m) / temp)
		z += w[i]
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(w[b], w[a]) })
	var cum float64
	for k, i := range idx {
		cum += w[i]
		if cum >= p*z {
			out := slices.Clone(idx[:k+1])
			slices.Sort(out)
			return out
		}
	}
	return idx
}

func TestNucleusMatchesFullSort(t *testing.T) {
	for seed := range uint64(4) {
		l := randLogits(30000, seed)
		for _, tc := range []struct{ temp, p float64 }{{0.6, 0.95}, {1, 0.9}, {1.5, 0.5}, {2, 0.99}} {
			got := survivors(New(len(l), Params{Temperature: float32(tc.temp), TopP: float32(tc.p)}), l)
			want := referenceNucleus(l, tc.temp, tc.p)
			// Summation order may move the cut by one token when the
			// cumulative mass lands within rounding of p.
			if d := len(got) - len(want); d < -1 || d > 1 || !isPrefixSet(got, want) {
				t.Errorf("seed %d T=%g p=%g: kept %d tokens, full sort keeps %d", seed, tc.temp, tc.p, len(got), len(want))
			}
		}
	}
}

// plateauLogits is a row as the small trained demo models give: a few
// tokens well above the rest, and the untrained rest within spread of one
// logit, 5 nats lower, so that they hold most of the mass and top-p's cut
// falls among them. Spread 0 makes them equal.
func plateauLogits(n int, spread float64, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 2))
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(-5 + spread*r.Float64())
	}
	for range 20 {
		l[r.IntN(n)] = float32(r.Float64() * 2)
	}
	return l
}

// TestNucleusOnPlateau: when top-p's cut falls in a boundary bucket of
// far more tokens than are sorted (prefixByMass splits it by weight),
// the survivors are those of the whole row sorted by the same weights:
// spread over the bucket, over a few of its sub-buckets, all equal (the
// cut then by id), and three runs of equal weights (spread -1).
func TestNucleusOnPlateau(t *testing.T) {
	// Three weights taking turns: each a run of equal weights in a
	// sub-bucket of its own.
	levels := plateauLogits(120000, 0, 7)
	for i := range levels {
		if levels[i] == -5 {
			levels[i] += float32(i%3) * 0.01
		}
	}
	for _, spread := range []float64{0.02, 1e-5, 0, -1} {
		l := levels
		if spread >= 0 {
			l = plateauLogits(120000, spread, 7)
		}
		for _, p := range []float64{0.3, 0.9, 0.95, 0.999} {
			s := New(len(l), Params{Temperature: 1, TopP: float32(p)})
			z, _ := s.weighFull(l)
			if edge := edgeSize(s, z*p); edge <= maxSortedEdge {
				t.Fatalf("spread %g p=%g: the boundary bucket holds %d tokens, not more than %d", spread, p, edge, maxSortedEdge)
			}
			// The weights sorted whole, as the boundary bucket was.
			var all []cand
			for i, w := range s.e[:len(l)] {
				if w > 0 {
					all = append(all, cand{int32(i), w})
				}
			}
			slices.SortFunc(all, byProbDesc)
			want := make([]int, nucleusPrefix(all, 0, z*p))
			for i := range want {
				want[i] = int(all[i].id)
			}
			slices.Sort(want)
			got := survivors(s, l)
			// Summation order may move the cut by one token when the
			// cumulative mass lands within rounding of p.
			if d := len(got) - len(want); d < -1 || d > 1 || !isPrefixSet(got, want) {
				t.Errorf("spread %g p=%g: kept %d tokens, the sort keeps %d", spread, p, len(got), len(want))
			}
		}
	}
}

// edgeSize is the number of tokens in the bucket where the mass crosses
// target.
func edgeSize(s *Sampler, target float64) int {
	var cum float64
	for k, m := range s.hist {
		if cum+m >= target {
			n := 0
			for i, b := range s.bucket[:len(s.e)] {
				if int(b) == k && s.e[i] > 0 {
					n++
				}
			}
			return n
		}
		cum += m
	}
	return 0
}

// isPrefixSet reports whether the smaller set is contained in the larger.
func isPrefixSet(a, b []int) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); !ok {
			return false
		}
	}
	return true
}

func TestTopKMatchesFullSort(t *testing.T) {
	l := randLogits(151936, 3)
	copy(l[100:110], l[5000:5010]) // ties across ids
	idx := make([]int, len(l))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(l[b], l[a]) })
	s := New(len(l), Params{Temperature: 1})
	for _, k := range []int{2, 20, 40, 1000} {
		c := s.selectTopK(l, k)
		for i := range c {
			if int(c[i].id) != idx[i] {
				t.Fatalf("k=%d: position %d holds %d, full sort has %d", k, i, c[i].id, idx[i])
			}
		}
	}
}
