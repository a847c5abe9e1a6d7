package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// KV cache shapes of the int8 kernels (n, k, ldw): the scores of a 256
// position chunk against 128-dim keys, and the transposed values of a chunk
// (128 dims, up to 256 filled positions).
var benchI8Shapes = [][3]int{{256, 128, 128}, {128, 256, 256}}

// benchI8Chunks is how many chunks one op of BenchmarkMatVecI8 sweeps (a
// head's attention over 16K positions).
const benchI8Chunks = 64

// benchTileChunks returns enough random int8 and f16 copies of a tile-major
// matrix (n, ldw) that cycling through them streams 256 MiB of each, from
// memory rather than the L3.
func benchTileChunks(n, ldw int) ([][]int8, [][]uint16) {
	r := rand.New(rand.NewPCG(7, 8))
	size := matTiles(n) * ldw * 32
	i8s := make([][]int8, max(benchI8Chunks, (256<<20)/size))
	for c := range i8s {
		i8s[c] = make([]int8, size)
		for i := range i8s[c] {
			i8s[c][i] = int8(r.Uint32())
		}
	}
	f16s := make([][]uint16, max(benchI8Chunks, (256<<20)/(2*size)))
	for c := range f16s {
		f16s[c] = make([]uint16, size)
		for i := range f16s[c] {
			f16s[c][i] = randF16(r)
		}
	}
	return i8s, f16s
}

// BenchmarkMatVecI8 compares MatVecTilesI8 with MatVecTilesLd (f16) on the
// KV cache shapes: one op sweeps 64 chunks streamed from memory; MB/s and
// best-GB/s count the weight bytes read (k columns of every tile).
func BenchmarkMatVecI8(b *testing.B) {
	for _, s := range benchI8Shapes {
		n, k, ldw := s[0], s[1], s[2]
		i8s, f16s := benchTileChunks(n, ldw)
		x := randX(rand.New(rand.NewPCG(1, 1)), k)
		dst := make([]float32, n)
		nt := matTiles(n)
		for _, p := range SupportedPaths() {
			for _, typ := range []string{"i8", "f16"} {
				b.Run(fmt.Sprintf("%s/%s/%dx%d", p, typ, n, k), func(b *testing.B) {
					size, chunks := 1, len(i8s)
					op := func(c int) { p.MatVecTilesI8(dst, i8s[c], ldw, x, n, k, 0, nt) }
					if typ == "f16" {
						size, chunks = 2, len(f16s)
						op = func(c int) { p.MatVecTilesLd(dst, f16s[c], ldw, x, n, k, 0, nt) }
					}
					bytes := float64(benchI8Chunks * n * k * size)
					benchSweeps(b, bytes, "GB/s", 1e-9*bytes, func(i int) {
						for c := range benchI8Chunks {
							op((i*benchI8Chunks + c) % chunks)
						}
					})
				})
			}
		}
	}
}

// BenchmarkGemmI8 compares GemmTilesI8 with GemmTilesLd (f16) on one
// chunk in cache for the token counts of a decode step's query heads
// sharing a KV head; GFLOP/s counts 2*m*n*k.
func BenchmarkGemmI8(b *testing.B) {
	for _, s := range benchI8Shapes {
		n, k, ldw := s[0], s[1], s[2]
		i8s, f16s := benchTileChunks(n, ldw)
		wi, wf := i8s[0], f16s[0]
		nt := matTiles(n)
		for _, p := range SupportedPaths() {
			for _, m := range []int{1, 2, 4, 8, 16, 32} {
				x := randX(rand.New(rand.NewPCG(1, 1)), m*k)
				dst := make([]float32, m*n)
				flop := 2 * float64(m*n*k)
				b.Run(fmt.Sprintf("%s/i8/%dx%d/m=%d", p, n, k, m), func(b *testing.B) {
					benchSweeps(b, 0, "GFLOP/s", 1e-9*flop, func(int) {
						p.GemmTilesI8(dst, n, wi, ldw, x, k, m, n, k, 0, nt)
					})
				})
				b.Run(fmt.Sprintf("%s/f16/%dx%d/m=%d", p, n, k, m), func(b *testing.B) {
					benchSweeps(b, 0, "GFLOP/s", 1e-9*flop, func(int) {
						p.GemmTilesLd(dst, n, wf, ldw, x, k, m, n, k, 0, nt)
					})
				})
			}
		}
	}
}

// benchSweeps runs op(i) for i = 0, 1, ... and reports the rate of work
// (units of it per op) over the whole run and for the fastest op, as
// unit and best-unit; bytes per op, if not 0, also give MB/s.
func benchSweeps(b *testing.B, bytes float64, unit string, work float64, op func(i int)) {
	if bytes > 0 {
		b.SetBytes(int64(bytes))
	}
	best := time.Duration(math.MaxInt64)
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		op(i)
		best = min(best, time.Since(start))
	}
	b.ReportMetric(work*float64(b.N)/b.Elapsed().Seconds(), unit)
	b.ReportMetric(work/best.Seconds(), "best-"+unit)
}
