package kernels

import (
	"fmt"
	"math"
	"sync"

	"github.com/qwenc/qwenc/format/wtype"
)

// Tile-major f16 weights.
//
// An [N, K] weight matrix (N output rows, K inputs) is stored as
// [ceil(N/32), K, 32] IEEE binary16 values: element (n, k) is at index
// ((n/32)*K + k)*32 + n%32, and the rows past N in the last tile are zero.
// For tile t and input column k the 32 weights of rows 32t..32t+31 are 64
// contiguous bytes, one cache line, which the kernels convert into two
// 16-lane (AVX-512) or four 8-lane (AVX2) f32 registers.

// matTileRows is the number of output rows in one weight tile.
const matTileRows = wtype.TileRows

// matTiles returns the number of tiles of an n-row matrix, ceil(n/32).
func matTiles(n int) int { return (n + matTileRows - 1) / matTileRows }

// MatVecTiles computes dst[r] = sum_j W[r, j]*x[j] for the rows r of tiles
// [t0, t1) (rows 32*t0 .. min(32*t1, n)-1); W is tile-major
// [ceil(n/32), k, 32] f16. Rows outside the tile range, positions >= n and
// the last tile's padding rows are not written. Splitting tiles across
// threads is the caller's job. It panics if a slice is too short for the
// range (dst needs min(32*t1, n) elements, w t1*k*32, x k).
func (p Path) MatVecTiles(dst []float32, w []uint16, x []float32, n, k, t0, t1 int) {
	p.matVec("MatVecTiles", dst, w, k, x, n, k, t0, t1)
}

func (p Path) matVec(fn string, dst []float32, w []uint16, ldw int, x []float32, n, k, t0, t1 int) {
	checkTiles(fn, n, k, t0, t1)
	if ldw < k {
		panic(fmt.Sprintf("kernels: %s: ldw = %d < k = %d", fn, ldw, k))
	}
	if t0 == t1 {
		return
	}
	rEnd := min(matTileRows*t1, n)
	if len(dst) < rEnd {
		panic(fmt.Sprintf("kernels: %s: len(dst) = %d < %d (rows up to tile %d of n = %d)", fn, len(dst), rEnd, t1, n))
	}
	if need := ((t1-1)*ldw + k) * matTileRows; len(w) < need {
		panic(fmt.Sprintf("kernels: %s: len(w) = %d < %d (tiles %d of ldw %d, k %d, x 32)", fn, len(w), need, t1, ldw, k))
	}
	if len(x) < k {
		panic(fmt.Sprintf("kernels: %s: len(x) = %d < k = %d", fn, len(x), k))
	}
	if k == 0 {
		clear(dst[matTileRows*t0 : rEnd])
		return
	}
	switch p {
	case Generic:
		matVecGeneric(dst, w, ldw, x, n, k, t0, t1)
	default:
		matVecArch(p, dst, w, ldw, x, n, k, t0, t1)
	}
}

// GemmTiles computes Y[i, r] = sum_j X[i, j]*W[r, j] for i in [0, m) and
// the rows r of tiles [t0, t1). X is row-major f32 [m, k] with row stride
// ldx >= k; Y is row-major f32 [m, >= n] with row stride ldy >= n. W is
// tile-major as for MatVecTiles, and the same writing rules apply (per
// token row of Y, only rows 32*t0 .. min(32*t1, n)-1 are written). The
// weights of a tile are read once per register block of tokens. dst must
// not overlap x or w. It panics if a slice is too short for the range.
func (p Path) GemmTiles(dst []float32, ldy int, w []uint16, x []float32, ldx, m, n, k, t0, t1 int) {
	p.gemm("GemmTiles", dst, ldy, w, k, x, ldx, m, n, k, t0, t1)
}

// GemmTilesLd is GemmTiles over the first k columns of a tile-major
// matrix whose tiles have ldw >= k columns: element (r, j) is at
// ((r/32)*ldw + j)*32 + r%32, and columns k..ldw-1 are never read (a KV
// cache chunk's transposed V, of which only the first positions are
// filled). w needs (t1-1)*ldw*32 + k*32 elements; m = 1 runs the
// matrix-vector kernel.
func (p Path) GemmTilesLd(dst []float32, ldy int, w []uint16, ldw int, x []float32, ldx, m, n, k, t0, t1 int) {
	p.gemm("GemmTilesLd", dst, ldy, w, ldw, x, ldx, m, n, k, t0, t1)
}

func (p Path) gemm(fn string, dst []float32, ldy int, w []uint16, ldw int, x []float32, ldx, m, n, k, t0, t1 int) {
	checkTiles(fn, n, k, t0, t1)
	if m < 0 {
		panic(fmt.Sprintf("kernels: %s: m = %d < 0", fn, m))
	}
	if ldx < k {
		panic(fmt.Sprintf("kernels: %s: ldx = %d < k = %d", fn, ldx, k))
	}
	if ldy < n {
		panic(fmt.Sprintf("kernels: %s: ldy = %d < n = %d", fn, ldy, n))
	}
	if ldw < k {
		panic(fmt.Sprintf("kernels: %s: ldw = %d < k = %d", fn, ldw, k))
	}
	if t0 == t1 || m == 0 {
		return
	}
	rEnd := min(matTileRows*t1, n)
	if need := (m-1)*ldy + rEnd; len(dst) < need {
		panic(fmt.Sprintf("kernels: %s: len(dst) = %d < %d ((m-1)*ldy + rows, m = %d, ldy = %d)", fn, len(dst), need, m, ldy))
	}
	if need := ((t1-1)*ldw + k) * matTileRows; len(w) < need {
		panic(fmt.Sprintf("kernels: %s: len(w) = %d < %d (tiles %d of ldw %d, k %d, x 32)", fn, len(w), need, t1, ldw, k))
	}
	if need := (m-1)*ldx + k; len(x) < need {
		panic(fmt.Sprintf("kernels: %s: len(x) = %d < %d ((m-1)*ldx + k, m = %d, ldx = %d)", fn, len(x), need, m, ldx))
	}
	if k == 0 {
		for i := range m {
			clear(dst[i*ldy+matTileRows*t0 : i*ldy+rEnd])
		}
		return
	}
	if m == 1 {
		// One token: the memory-bound matrix-vector kernel is the right one.
		p.matVec(fn, dst[:rEnd], w, ldw, x[:k], n, k, t0, t1)
		return
	}
	switch p {
	case Generic:
		gemmGeneric(dst, ldy, w, ldw, x, ldx, m, n, k, t0, t1)
	default:
		gemmArch(p, dst, ldy, w, ldw, x, ldx, m, n, k, t0, t1)
	}
}

func checkTiles(fn string, n, k, t0, t1 int) {
	if n < 0 || k < 0 {
		panic(fmt.Sprintf("kernels: %s: negative shape n = %d, k = %d", fn, n, k))
	}
	if t0 < 0 || t1 < t0 || t1 > matTiles(n) {
		panic(fmt.Sprintf("kernels: %s: bad tile range [%d, %d) for n = %d (%d tiles)", fn, t0, t1, n, matTiles(n)))
	}
}

func unsupported(p Path) {
	panic(fmt.Sprintf("kernels: path %s is not supported on this CPU or build", p))
}

// matF16ToF32 converts IEEE binary16 bits to float32 exactly (subnormals,
// infinities and NaNs included).
func matF16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0: // zero or subnormal: mant * 2^-24
		return math.Float32frombits(math.Float32bits(float32(mant)*(1.0/(1<<24))) | sign)
	case 0x1f: // infinity or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// matF16Table maps every binary16 value to float32 (256 KiB, built on
// first use by the portable kernels).
var matF16Table = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for h := range t {
		t[h] = matF16ToF32(uint16(h))
	}
	return &t
})

// matVecGeneric is the portable matrix-vector kernel.
func matVecGeneric(dst []float32, w []uint16, ldw int, x []float32, n, k, t0, t1 int) {
	x = x[:k]
	tab := matF16Table()
	for t := t0; t < t1; t++ {
		var acc [matTileRows]float32
		wt := w[t*ldw*matTileRows : (t*ldw+k)*matTileRows]
		for j, xv := range x {
			col := (*[matTileRows]uint16)(wt[j*matTileRows:])
			for r := range acc {
				acc[r] += tab[col[r]] * xv
			}
		}
		r0 := t * matTileRows
		copy(dst[r0:min(r0+matTileRows, n)], acc[:])
	}
}

// gemmGenericBlock is the number of tokens the portable GEMM handles per
// pass over a tile's weights.
const gemmGenericBlock = 4

// gemmGeneric is the portable GEMM: per tile and block of tokens, each
// column of weights is converted once and used for every token of the block.
func gemmGeneric(dst []float32, ldy int, w []uint16, ldw int, x []float32, ldx, m, n, k, t0, t1 int) {
	var wf [matTileRows]float32
	tab := matF16Table()
	for t := t0; t < t1; t++ {
		wt := w[t*ldw*matTileRows : (t*ldw+k)*matTileRows]
		r0 := t * matTileRows
		r1 := min(r0+matTileRows, n)
		for i0 := 0; i0 < m; i0 += gemmGenericBlock {
			mb := min(gemmGenericBlock, m-i0)
			var acc [gemmGenericBlock][matTileRows]float32
			for j := range k {
				col := (*[matTileRows]uint16)(wt[j*matTileRows:])
				for r := range wf {
					wf[r] = tab[col[r]]
				}
				for i := range mb {
					xv := x[(i0+i)*ldx+j]
					a := &acc[i]
					for r := range a {
						a[r] += wf[r] * xv
					}
				}
			}
			for i := range mb {
				copy(dst[(i0+i)*ldy+r0:(i0+i)*ldy+r1], acc[i][:])
			}
		}
	}
}
