package kernels

import "sync"

// Tile-major int8 matrices: the 8-bit KV cache.
//
// The layout is that of the f16 weights (see matmul.go) with one byte per
// element: for tile t and column j the 32 values of rows 32t..32t+31 are 32
// contiguous bytes, which the kernels sign-extend and convert into two
// 16-lane (AVX-512) or four 8-lane (AVX2) f32 registers. There are no
// scales: the caller applies per-row or per-column scales itself.

// MatVecTilesI8 is MatVecTilesLd over a tile-major int8 matrix: element (r, j)
// is float32(w[((r/32)*ldw + j)*32 + r%32]); there are no scales (the caller
// applies per-row or per-column scales itself).
func (p Path) MatVecTilesI8(dst []float32, w []int8, ldw int, x []float32, n, k, t0, t1 int) {
	matVec(p, "MatVecTilesI8", matI8Table, dst, w, ldw, x, n, k, t0, t1)
}

// GemmTilesI8 is GemmTilesLd over the same int8 layout.
func (p Path) GemmTilesI8(dst []float32, ldy int, w []int8, ldw int, x []float32, ldx, m, n, k, t0, t1 int) {
	gemm(p, "GemmTilesI8", matI8Table, dst, ldy, w, ldw, x, ldx, m, n, k, t0, t1)
}

// matI8Table maps uint16(v) for every int8 v (sign-extended: 0..127 and
// 0xff80..0xffff) to float32(v), for the portable kernels, which index
// their tables by uint16 whatever the element type.
var matI8Table = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for v := -128; v < 128; v++ {
		t[uint16(int8(v))] = float32(v)
	}
	return &t
})
