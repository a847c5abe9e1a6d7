package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, n := range []int{0, 1, 63, 64, 65, 127, 128, 1000, 4096, 100003} {
		x := make([]float32, n)
		var want float64
		for i := range x {
			x[i] = float32(rng.NormFloat64())
			want += float64(x[i])
		}
		for _, p := range SupportedPaths() {
			if got := p.Sum(x); math.Abs(float64(got)-want) > 1e-4*math.Sqrt(float64(n)+1) {
				t.Errorf("%s n=%d: %v, want %v", p, n, got, want)
			}
		}
	}
}

func BenchmarkSum(b *testing.B) {
	x := make([]float32, 1<<26) // 256 MiB, far beyond the caches
	for i := range x {
		x[i] = 1 // untouched pages all map the shared zero page, which stays in cache
	}
	for _, p := range SupportedPaths() {
		b.Run(fmt.Sprint(p), func(b *testing.B) {
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				p.Sum(x)
			}
		})
	}
}
