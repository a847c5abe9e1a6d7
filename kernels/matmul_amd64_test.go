//go:build amd64 && !purego

package kernels

import (
	"math/rand/v2"
	"testing"
)

// TestMatmulGemmOneTile checks the one-tile AVX-512 kernels, which the
// dispatch only uses for odd tiles.
func TestMatmulGemmOneTile(t *testing.T) {
	if !AVX512.Supported() {
		t.Skip("no AVX-512")
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{32, 33, 64, 95, 100, 160} {
		for _, k := range []int{1, 17, 1000} {
			c := newMatCase(r, n, k)
			for _, m := range []int{2, 5, 6, 7, 13, 20} {
				ldx, ldy := k+1, n+2
				xs := randX(r, (m-1)*ldx+k)
				for _, tr := range tileRanges(c.numTiles) {
					dst := make([]float32, (m-1)*ldy+n+3)
					fillSentinel(dst)
					if tr[0] < tr[1] {
						gemmOneTile(dst, ldy, c.w, xs, ldx, m, n, k, tr[0], tr[1])
					}
					for i := range m {
						width := ldy
						if i == m-1 {
							width = n + 3
						}
						checkRows(t, c, dst, xs[i*ldx:i*ldx+k], i*ldy, n, tr[0], tr[1], width)
					}
				}
			}
		}
	}
}
