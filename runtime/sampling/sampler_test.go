package sampling

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// randLogits mimics an LLM row: a Gaussian background (sd 4, as measured on
// a Qwen3 checkpoint) plus a few clear favourites.
func randLogits(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 4)
	}
	for range 5 {
		l[r.IntN(n)] += 15
	}
	return l
}

func TestGreedyIsArgmax(t *testing.T) {
	for seed := range uint64(20) {
		l := randLogits(1000, seed)
		want := 0
		for i, v := range l {
			if v > l[want] {
				want = i
			}
		}
		s := New(len(l), Params{Temperature: 0, TopK: 40, TopP: 0.9, Seed: seed})
		if got := s.Sample(l, nil); int(got) != want {
			t.Fatalf("seed %d: greedy picked %d, argmax is %d", seed, got, want)
		}
	}
	tie := []float32{1, 3, 2, 3, 3}
	if got := New(5, Params{}).Sample(tie, nil); got != 1 {
		t.Fatalf("tie: got %d, want lowest index 1", got)
	}
	nan := []float32{float32(math.NaN()), 1, 2, float32(math.NaN())}
	if got := New(4, Params{}).Sample(nan, nil); got != 2 {
		t.Fatalf("NaN row: got %d, want 2", got)
	}
}

func TestDegenerateParams(t *testing.T) {
	l := []float32{0, 5, 5, -1}
	for _, p := range []Params{
		{Temperature: 1e-40},
		{Temperature: float32(math.NaN())},
		{Temperature: 1, MinP: 2},
		{Temperature: 1, TopK: 3, MinP: 2},
	} {
		for seed := range uint64(20) {
			p.Seed = seed
			if got := New(len(l), p).Sample(l, nil); got != 1 && !(p.MinP > 1 && got == 2) {
				t.Fatalf("%+v: got %d, want the best token", p, got)
			}
		}
	}
	// All tokens masked: any answer is acceptable, but no panic.
	inf := float32(math.Inf(-1))
	New(3, Params{Temperature: 1, TopP: 0.9}).Sample([]float32{inf, inf, inf}, nil)
	New(3, Params{Temperature: 1, TopK: 2}).Sample([]float32{inf, inf, inf}, nil)
}

func TestTopK1IsGreedy(t *testing.T) {
	for _, temp := range []float32{0.01, 0.6, 1, 5, 100} {
		for seed := range uint64(10) {
			l := randLogits(5000, seed)
			l[4000] = l[argmax(l)] // a tie the selection must break towards the lower id
			want := argmax(l)
			s := New(len(l), Params{Temperature: temp, TopK: 1, Seed: seed})
			for range 5 {
				if got := s.Sample(l, nil); int(got) != want {
					t.Fatalf("T=%g seed %d: top-k 1 gave %d, argmax %d", temp, seed, got, want)
				}
			}
		}
	}
}

func sequence(s *Sampler, l []float32, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = int(s.Sample(l, nil))
	}
	return out
}

func TestSeedReproducible(t *testing.T) {
	l := randLogits(20000, 7)
	for _, p := range []Params{
		{Temperature: 1.5, TopK: 50},
		{Temperature: 1.5, TopP: 0.99},
		{Temperature: 1.5, MinP: 0.001},
		{Temperature: 1.5},
	} {
		p.Seed = 42
		a := sequence(New(len(l), p), l, 64)
		b := sequence(New(len(l), p), l, 64)
		if !slices.Equal(a, b) {
			t.Fatalf("%+v: same seed, different sequences", p)
		}
		s := New(len(l), p)
		sequence(s, l, 10)
		s.Reset(42)
		if c := sequence(s, l, 64); !slices.Equal(a, c) {
			t.Fatalf("%+v: Reset(42) does not replay the sequence", p)
		}
		p.Seed = 43
		if d := sequence(New(len(l), p), l, 64); slices.Equal(a, d) {
			t.Fatalf("%+v: seeds 42 and 43 gave the same sequence", p)
		}
	}
}

// chiSquare draws n samples and returns Pearson's statistic against want
// (probabilities, summing to 1) and the number of categories with want > 0.
func chiSquare(t *testing.T, s *Sampler, l []float32, want []float64, n int) (float64, int) {
	t.Helper()
	got := make([]int, len(l))
	row := make([]float32, len(l))
	for range n {
		copy(row, l)
		got[s.Sample(row, nil)]++
	}
	var chi float64
	cats := 0
	for i, p := range want {
		if p == 0 {
			if got[i] != 0 {
				t.Fatalf("token %d should be filtered out, drawn %d times", i, got[i])
			}
			continue
		}
		cats++
		exp := p * float64(n)
		d := float64(got[i]) - exp
		chi += d * d / exp
	}
	return chi, cats
}

func softmax(l []float32, temp float64, keep func(i int) bool) []float64 {
	m := math.Inf(-1)
	for _, v := range l {
		m = max(m, float64(v))
	}
	p := make([]float64, len(l))
	var z float64
	for i, v := range l {
		if keep(i) {
			p[i] = math.Exp((float64(v) - m) / temp)
			z += p[i]
		}
	}
	for i := range p {
		p[i] /= z
	}
	return p
}

func TestFrequenciesMatchSoftmax(t *testing.T) {
	l := []float32{2.0, 1.5, 1.2, 0.3, 0, -0.5, -1, -3}
	all := func(int) bool { return true }
	cases := []struct {
		name string
		p    Params
		want []float64
	}{
		{"full T0.7", Params{Temperature: 0.7}, softmax(l, 0.7, all)},
		{"full T1.3", Params{Temperature: 1.3}, softmax(l, 1.3, all)},
		{"topk5 T0.7", Params{Temperature: 0.7, TopK: 5}, softmax(l, 0.7, func(i int) bool { return i < 5 })},
		// With T=1, p = .398 .241 .179 .073 ...: cumulative .818 >= 0.8 at three.
		{"topp0.8", Params{Temperature: 1, TopP: 0.8}, softmax(l, 1, func(i int) bool { return i < 3 })},
		{"topk7 topp0.8", Params{Temperature: 1, TopK: 7, TopP: 0.8}, softmax(l, 1, func(i int) bool { return i < 3 })},
		// min-p 0.2 keeps p >= 0.2*p_max: relative weights 1 .61 .45 .18 ...
		{"minp0.2", Params{Temperature: 1, MinP: 0.2}, softmax(l, 1, func(i int) bool { return i < 3 })},
		{"topk6 minp0.2", Params{Temperature: 1, TopK: 6, MinP: 0.2}, softmax(l, 1, func(i int) bool { return i < 3 })},
	}
	const n = 200000
	for _, c := range cases {
		c.p.Seed = 1
		chi, cats := chiSquare(t, New(len(l), c.p), l, c.want, n)
		// The 0.999 quantile of chi-square is 24.3 for 7 degrees of freedom;
		// a wrong temperature or a missing renormalisation gives thousands.
		if bound := 3 * float64(cats+3); chi > bound {
			t.Errorf("%s: chi-square %.1f over %d categories exceeds %.0f", c.name, chi, cats, bound)
		}
	}
	// The bound must be able to fail: T=1 frequencies against T=0.7.
	chi, _ := chiSquare(t, New(len(l), Params{Temperature: 1, Seed: 1}), l, softmax(l, 0.7, all), n)
	if chi < 100 {
		t.Errorf("chi-square cannot tell T=1 from T=0.7 (%.1f); the test is toothless", chi)
	}
}
