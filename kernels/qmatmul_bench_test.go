package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/qwenc/qwenc/format/wtype"
)

// benchQWeights returns random quantized copies of an [n, k] matrix of
// type t, as many as stream 256 MiB when stream is set (see benchWeights).
func benchQWeights(t wtype.Type, n, k int, stream bool) [][]byte {
	rng := rand.New(rand.NewPCG(7, 8))
	tb := t.TileBytes(k)
	rows := randRows(rng, matTileRows, k)
	tile := make([]byte, tb)
	if err := Traits(t).QuantizeTile(tile, rows, matTileRows, k); err != nil {
		panic(err)
	}
	size := matTiles(n) * tb
	copies := 1
	if stream {
		copies = max(1, (256<<20)/size)
	}
	ws := make([][]byte, copies)
	for c := range ws {
		w := make([]byte, size)
		for o := 0; o < size; o += tb {
			copy(w[o:], tile) // the values do not change the speed
		}
		ws[c] = w
	}
	return ws
}

func benchQActs(m, k int) []byte {
	x := randX(rand.New(rand.NewPCG(1, 1)), m*k)
	xq := make([]byte, m*QActRowBytes(k))
	Generic.QuantizeActs(xq, x, k, m, k)
	return xq
}

// BenchmarkMatVecQ reports the weight bytes per second of the one-token
// product of quantized weights, one thread (best-GB/s: the best op).
func BenchmarkMatVecQ(b *testing.B) {
	for _, t := range qTypes {
		for _, p := range SupportedPaths() {
			for _, s := range benchMatVecShapes {
				n, k := s[0], s[1]
				b.Run(fmt.Sprintf("%s/%s/%dx%d", t, p, n, k), func(b *testing.B) {
					ws := benchQWeights(t, n, k, true)
					xq := benchQActs(1, k)
					dst := make([]float32, n)
					bytes := float64(len(ws[0]))
					b.SetBytes(int64(bytes))
					best := time.Duration(math.MaxInt64)
					for i := 0; b.Loop(); i++ {
						start := time.Now()
						p.GemmQ(t, dst, n, ws[i%len(ws)], xq, 1, n, k, 0, matTiles(n))
						best = min(best, time.Since(start))
					}
					b.ReportMetric(bytes/best.Seconds()/1e9, "best-GB/s")
				})
			}
		}
	}
}

// BenchmarkGemmQ reports the multiply-adds per second (as GOP/s, 2 per
// multiply-add, to compare with BenchmarkGemm's GFLOP/s) of batched
// products of quantized weights, one thread.
func BenchmarkGemmQ(b *testing.B) {
	for _, t := range qTypes {
		for _, p := range SupportedPaths() {
			if p == Generic {
				continue
			}
			for _, m := range []int{512, 64, 16, 8, 4, 1} {
				for _, s := range benchGemmShapes {
					n, k := s[0], s[1]
					b.Run(fmt.Sprintf("%s/%s/m=%d/%dx%d", t, p, m, n, k), func(b *testing.B) {
						w := benchQWeights(t, n, k, false)[0]
						xq := benchQActs(m, k)
						dst := make([]float32, m*n)
						best := time.Duration(math.MaxInt64)
						for b.Loop() {
							start := time.Now()
							p.GemmQ(t, dst, n, w, xq, m, n, k, 0, matTiles(n))
							best = min(best, time.Since(start))
						}
						ops := 2 * float64(m) * float64(n) * float64(k)
						b.ReportMetric(ops/best.Seconds()/1e9, "best-GOP/s")
					})
				}
			}
		}
	}
}

// BenchmarkQuantizeActs reports activation values quantized per second.
func BenchmarkQuantizeActs(b *testing.B) {
	const m, k = 64, 3072
	x := randX(rand.New(rand.NewPCG(1, 1)), m*k)
	xq := make([]byte, m*QActRowBytes(k))
	for _, p := range SupportedPaths() {
		b.Run(p.String(), func(b *testing.B) {
			b.SetBytes(4 * m * k)
			for b.Loop() {
				p.QuantizeActs(xq, x, k, m, k)
			}
		})
	}
}

// BenchmarkQuantizeTile reports the weights per second the compiler's
// encoder quantizes, one thread.
func BenchmarkQuantizeTile(b *testing.B) {
	const k = 1024
	rows := randRows(rand.New(rand.NewPCG(1, 1)), matTileRows, k)
	for _, t := range qTypes {
		b.Run(t.String(), func(b *testing.B) {
			tile := make([]byte, t.TileBytes(k))
			b.SetBytes(matTileRows * k * 2) // bf16 input bytes
			for b.Loop() {
				if err := Traits(t).QuantizeTile(tile, rows, matTileRows, k); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMatVecQ2Threads splits the tiles over two goroutines, for one
// token and for the few rows of a server's batched decode step (m=...),
// the weights streamed from memory as in a step: the rows' products
// should hide under the reading of the weights.
func BenchmarkMatVecQ2Threads(b *testing.B) {
	for _, t := range qTypes {
		for _, p := range SupportedPaths() {
			for _, m := range []int{1, 8, 16} {
				if m > 1 && p == Generic {
					continue
				}
				for _, s := range benchMatVecShapes {
					n, k := s[0], s[1]
					name := fmt.Sprintf("%s/%s/%dx%d", t, p, n, k)
					if m > 1 {
						name = fmt.Sprintf("%s/%s/m=%d/%dx%d", t, p, m, n, k)
					}
					b.Run(name, func(b *testing.B) {
						ws := benchQWeights(t, n, k, true)
						xq := benchQActs(m, k)
						dst := make([]float32, m*n)
						bytes := float64(len(ws[0]))
						b.SetBytes(int64(bytes))
						best := time.Duration(math.MaxInt64)
						for i := 0; b.Loop(); i++ {
							start := time.Now()
							runSplit(2, matTiles(n), func(t0, t1 int) {
								p.GemmQ(t, dst, n, ws[i%len(ws)], xq, m, n, k, t0, t1)
							})
							best = min(best, time.Since(start))
						}
						b.ReportMetric(bytes/best.Seconds()/1e9, "best-GB/s")
						if m > 1 {
							b.ReportMetric(2*float64(m*n*k)/best.Seconds()/1e9, "best-GOP/s")
						}
					})
				}
			}
		}
	}
}
