package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// Qwen3-0.6B matrix shapes (n x k): q/o-sized, k/v, gate/up, down, lm head.
var benchMatVecShapes = [][2]int{{2048, 1024}, {1024, 1024}, {3072, 1024}, {1024, 3072}, {151936, 1024}}
var benchGemmShapes = [][2]int{{2048, 1024}, {1024, 1024}, {3072, 1024}, {1024, 3072}}

// benchWeights returns enough random tile-major copies of an [n, k] matrix
// that cycling through them streams at least 256 MiB, so matvec benchmarks
// measure DRAM bandwidth, not the 33 MiB L3 (decode streams 1.19 GB of
// distinct weights per token).
func benchWeights(n, k int, stream bool) [][]uint16 {
	r := rand.New(rand.NewPCG(7, 8))
	size := matTiles(n) * k * 32
	copies := 1
	if stream {
		copies = max(1, (256<<20)/(2*size))
	}
	ws := make([][]uint16, copies)
	for c := range ws {
		w := make([]uint16, size)
		for i := range w {
			w[i] = randF16(r)
		}
		ws[c] = w
	}
	return ws
}

// runSplit runs f over tiles [0, nt) split into `threads` contiguous parts.
func runSplit(threads, nt int, f func(t0, t1 int)) {
	if threads == 1 {
		f(0, nt)
		return
	}
	var wg sync.WaitGroup
	for th := range threads {
		t0, t1 := nt*th/threads, nt*(th+1)/threads
		wg.Go(func() { f(t0, t1) })
	}
	wg.Wait()
}

func benchMatVec(b *testing.B, threads int) {
	for _, p := range SupportedPaths() {
		for _, s := range benchMatVecShapes {
			n, k := s[0], s[1]
			b.Run(fmt.Sprintf("%s/%dx%d", p, n, k), func(b *testing.B) {
				ws := benchWeights(n, k, true)
				x := randX(rand.New(rand.NewPCG(1, 1)), k)
				dst := make([]float32, n)
				b.SetBytes(int64(n) * int64(k) * 2)
				best := time.Duration(math.MaxInt64)
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					w := ws[i%len(ws)]
					start := time.Now()
					runSplit(threads, matTiles(n), func(t0, t1 int) {
						p.MatVecTiles(dst, w, x, n, k, t0, t1)
					})
					best = min(best, time.Since(start))
				}
				b.ReportMetric(float64(n)*float64(k)*2/best.Seconds()/1e9, "best-GB/s")
			})
		}
	}
}

// BenchmarkMatVec reports weight bytes per second (MB/s) of one thread.
func BenchmarkMatVec(b *testing.B) { benchMatVec(b, 1) }

// BenchmarkMatVec2Threads splits the tiles over two goroutines.
func BenchmarkMatVec2Threads(b *testing.B) { benchMatVec(b, 2) }

type gemmFunc func(dst []float32, ldy int, w []uint16, x []float32, ldx, m, n, k, t0, t1 int)

func benchGemmShape(b *testing.B, f gemmFunc, threads, m, n, k int) {
	w := benchWeights(n, k, false)[0]
	x := randX(rand.New(rand.NewPCG(1, 1)), m*k)
	dst := make([]float32, m*n)
	best := time.Duration(math.MaxInt64)
	for b.Loop() {
		start := time.Now()
		runSplit(threads, matTiles(n), func(t0, t1 int) {
			f(dst, n, w, x, k, m, n, k, t0, t1)
		})
		best = min(best, time.Since(start))
	}
	flop := 2 * float64(m) * float64(n) * float64(k)
	b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	// The best single op is less sensitive to other processes sharing
	// this small machine.
	b.ReportMetric(flop/best.Seconds()/1e9, "best-GFLOP/s")
}

func benchGemm(b *testing.B, threads int) {
	for _, p := range SupportedPaths() {
		for _, m := range []int{512, 64, 14} {
			for _, s := range benchGemmShapes {
				b.Run(fmt.Sprintf("%s/m=%d/%dx%d", p, m, s[0], s[1]), func(b *testing.B) {
					benchGemmShape(b, p.GemmTiles, threads, m, s[0], s[1])
				})
			}
		}
	}
}

// BenchmarkGemm reports GFLOP/s (2*m*n*k per op) of one thread.
func BenchmarkGemm(b *testing.B) { benchGemm(b, 1) }

// BenchmarkGemm2Threads splits the tiles over two goroutines.
func BenchmarkGemm2Threads(b *testing.B) { benchGemm(b, 2) }
