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
