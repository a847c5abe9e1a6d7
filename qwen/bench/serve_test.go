package bench

import (
	"strings"
	"testing"
	"time"
)

// TestPercentile: the nearest rank, the ceil(p*n)-th smallest value, as
// the tables say: the p99 of 70 values is the largest (rank 69.3 rounds
// up), the p50 of 100 the 50th; the schema's mask times take the same.
func TestPercentile(t *testing.T) {
	values := func(n int) []time.Duration {
		d := make([]time.Duration, n)
		for i := range d {
			d[i] = time.Duration(n - i) // ranks 1..n, given in reverse
		}
		return d
	}
	for _, tc := range []struct {
		n    int
		p    float64
		want time.Duration
	}{
		{70, 0.99, 70}, {254, 0.99, 252}, {100, 0.99, 99}, {200, 0.99, 198}, {100, 0.5, 50}, {7, 0.5, 4},
		{1, 0.5, 1}, {3, 1, 3}, {10, 0.01, 1},
	} {
		if got := percentile(values(tc.n), tc.p); got != tc.want {
			t.Errorf("p%g of 1..%d: %d, want %d", 100*tc.p, tc.n, got, tc.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("no values: %v", got)
	}
	res := SchemaResult{Tokens: 100}
	for i := range 100 {
		res.Masks = append(res.Masks, time.Duration(100-i)*time.Microsecond)
	}
	var b strings.Builder
	res.Write(&b)
	if want := "p50 50.0 us, p99 99.0 us, max 100.0 us"; !strings.Contains(b.String(), want) {
		t.Errorf("the schema's masks: %q, want %q", b.String(), want)
	}
}
