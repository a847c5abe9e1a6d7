package bench

import (
	"math"
	"testing"
)

// TestBreakEven: the acceptance rate at which k rows yield their cost in
// tokens: E = 1 + a + ... + a^(k-1).
func TestBreakEven(t *testing.T) {
	for _, tc := range []struct {
		k          int
		cost, want float64
	}{
		{2, 1.5, 0.5},  // 1 + a = 1.5
		{3, 1.75, 0.5}, // 1 + a + a^2 = 1.75
		{1, 1, 0},
		{2, 0.9, 0}, // a step of two cheaper than one always pays
		{2, 2.5, math.NaN()},
	} {
		got := breakEven(tc.k, tc.cost)
		if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tc.want) > 1e-9) {
			t.Errorf("k %d, cost %g: %g, want %g", tc.k, tc.cost, got, tc.want)
		}
	}
}

// TestProject: with free drafts and a step of k+1 rows costing one, a
// draft always kept gives k+1 tokens a step; never kept, one token for
// the step's cost.
func TestProject(t *testing.T) {
	rows := []DraftRow{{Rows: 1, Cost: 1}, {Rows: 4, Cost: 1}, {Rows: 8, Cost: 2}}
	ps := Project(rows, 0, []float64{1, 0})
	if len(ps) != 2 || ps[0].Drafted != 3 || ps[0].Speedup[0] != 4 || ps[0].Speedup[1] != 1 || ps[1].Speedup[0] != 4 || ps[1].Speedup[1] != 0.5 {
		t.Errorf("%+v", ps)
	}
	if ps := Project(rows[1:2], 0.5, []float64{0}); ps[0].Speedup[0] != 1/2.5 {
		t.Errorf("a draft ratio of 0.5, 3 drafted, none kept: %+v", ps)
	}
}
