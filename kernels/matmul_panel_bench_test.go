//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// BenchmarkGemmPanel compares the AVX2 f16 prefill with the weights
// converted in every token block's sweep (gemmDriver) and once into a
// float32 panel (gemmPanelDriver), one thread, in one run: the choice
// gemmArch makes from gemmPanelMinM tokens on.
func BenchmarkGemmPanel(b *testing.B) {
	if !AVX2.Supported() {
		b.Skip("no AVX2")
	}
	for _, s := range [][2]int{{3072, 1024}, {1024, 3072}} {
		n, k := s[0], s[1]
		for _, m := range []int{12, 24, 64, 512} {
			c := benchWeights(n, k, false)[0]
			x := make([]float32, m*k)
			for i := range x {
				x[i] = float32(i%7) * 0.25
			}
			dst := make([]float32, m*n)
			for _, v := range []string{"sweep", "panel"} {
				b.Run(fmt.Sprintf("%s/m=%d/%dx%d", v, m, n, k), func(b *testing.B) {
					best := time.Duration(math.MaxInt64)
					for b.Loop() {
						start := time.Now()
						if v == "sweep" {
							gemmDriver(&gemmAVX2T1, nil, dst, n, c, k, x, k, m, n, k, 0, matTiles(n))
						} else {
							gemmPanelDriver(AVX2, &gemmAVX2T1, &gemmAVX2F32T1, dst, n, c, k, x, k, m, n, k, 0, matTiles(n))
						}
						best = min(best, time.Since(start))
					}
					b.ReportMetric(2*float64(m)*float64(n)*float64(k)/best.Seconds()/1e9, "best-GFLOP/s")
				})
			}
		}
	}
}
