package kernels

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/qwenc/qwenc/format/wtype"
)

// TypeTraits is what package kernels knows of one weight type, beside its
// row in package wtype (name and tile size, embedded here): how a tile is
// encoded and decoded, and its matrix product with the portable dot
// product and the kernels of each CPU path. typeTraits holds one per type,
// as ggml-cpu's type_traits_cpu; Traits hands out a row once, so that the
// callers of its products look nothing up per call.
type TypeTraits struct {
	wtype.Type
	// quantize encodes the first r rows of rows (row-major, k columns,
	// finite) into a cleared tile; dequantize decodes row r of a tile.
	quantize   func(dst []byte, rows []float32, r, k int) error
	dequantize func(dst []float32, tile []byte, r, k int)
	// mul is the product: f16's takes f32 activations, the quantized
	// types' take them quantized and run dot, or arch's kernel set of the
	// path when it has one.
	mul  func(tt *TypeTraits, p Path, dst []float32, ldy int, w []byte, x []float32, xq []byte, m, n, k, t0, t1 int)
	dot  qBlockDot
	arch *qArch
}

var typeTraits = [...]TypeTraits{
	wtype.F16: {Type: wtype.F16, quantize: quantizeTileF16, dequantize: dequantizeRowF16, mul: mulF16},
	wtype.Q8:  {Type: wtype.Q8, quantize: quantizeTileQ8, dequantize: dequantizeRowQ8, mul: gemmQ, dot: dotQ8, arch: &q8Kernels},
	wtype.Q4:  {Type: wtype.Q4, quantize: quantizeTileQ4, dequantize: dequantizeRowQ4, mul: gemmQ, dot: dotQ4, arch: &q4Kernels},
	wtype.Q6:  {Type: wtype.Q6, quantize: quantizeTileQ6, dequantize: dequantizeRowQ6, mul: gemmQ, dot: dotQ6, arch: &q6Kernels},
}

// Traits returns the kernels of weight type t; every type of package wtype
// has them.
func Traits(t wtype.Type) *TypeTraits {
	if int(t) >= len(typeTraits) || typeTraits[t].mul == nil {
		panic(fmt.Sprintf("kernels: no kernels for weight type %s", t))
	}
	return &typeTraits[t]
}

// QuantizeTile encodes the first r (<= 32) rows of rows (row-major, k
// columns each, t.Fits(k)) as one tile into dst (TileBytes(k) bytes); the
// tile's other rows are zero. It is the compiler's encoder and is
// deterministic. It returns an error for a value that is not finite or
// beyond what the type can hold (f16's range, or a scale beyond it).
func (tt *TypeTraits) QuantizeTile(dst []byte, rows []float32, r, k int) error {
	if !tt.Fits(k) || r < 0 || r > matTileRows || len(rows) < r*k || len(dst) != tt.TileBytes(k) {
		panic(fmt.Sprintf("kernels: QuantizeTile(%s): r = %d, k = %d, len(rows) = %d, len(dst) = %d", tt.Type, r, k, len(rows), len(dst)))
	}
	if i := firstNonFinite(rows[:r*k]); i >= 0 {
		return fmt.Errorf("row %d, column %d: %v is not finite", i/k, i%k, rows[i])
	}
	clear(dst)
	return tt.quantize(dst, rows, r, k)
}

// DequantizeRow decodes row r (0..31) of a tile of a k-column matrix into
// dst (k values): the embedding lookup of a quantized file.
func (tt *TypeTraits) DequantizeRow(dst []float32, tile []byte, r, k int) {
	if !tt.Fits(k) || r < 0 || r >= matTileRows || len(dst) < k || len(tile) < tt.TileBytes(k) {
		panic(fmt.Sprintf("kernels: DequantizeRow(%s): r = %d, k = %d, len(dst) = %d, len(tile) = %d", tt.Type, r, k, len(dst), len(tile)))
	}
	tt.dequantize(dst, tile, r, k)
}

// Mul computes Y[i, r] = sum_j X[i, j]*W[r, j] for i in [0, m) and the rows
// r of tiles [t0, t1) of a tile-major W [n, k] of the type, on path p: as
// GemmTiles (f16) or GemmQ (the quantized types) do, whose rules it
// follows. X is what the type's products take: f32 x (row stride k) for
// f16, quantized xq (QuantizeActs) when the type is Quantized; the other
// is not read.
func (tt *TypeTraits) Mul(p Path, dst []float32, ldy int, w []byte, x []float32, xq []byte, m, n, k, t0, t1 int) {
	tt.mul(tt, p, dst, ldy, w, x, xq, m, n, k, t0, t1)
}

func mulF16(_ *TypeTraits, p Path, dst []float32, ldy int, w []byte, x []float32, _ []byte, m, n, k, t0, t1 int) {
	// Sections are page-aligned and every matrix in one is a whole number
	// of tiles, so the f16 view is aligned.
	w16 := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(w))), len(w)/2)
	if m == 1 {
		// GemmTiles would run the same kernel, after checks of its own.
		p.MatVecTiles(dst, w16, x, n, k, t0, t1)
		return
	}
	p.GemmTiles(dst, ldy, w16, x, k, m, n, k, t0, t1)
}

// quantizeTileF16 rounds to the nearest f16, refusing a value beyond its
// range as the compiler does (whose conversion reads bf16 checkpoints
// straight into f16, without this detour through f32).
func quantizeTileF16(dst []byte, rows []float32, r, k int) error {
	for i, v := range rows[:r*k] {
		h := F32ToF16(v)
		if h&0x7c00 == 0x7c00 {
			return fmt.Errorf("row %d, column %d: %v is beyond f16's range", i/k, i%k, v)
		}
		put16(dst[2*((i%k)*matTileRows+i/k):], h)
	}
	return nil
}

func dequantizeRowF16(dst []float32, tile []byte, r, k int) {
	for c := range k {
		dst[c] = matF16ToF32(le16(tile[2*(c*matTileRows+r):]))
	}
}

// firstNonFinite is the index of the first NaN or infinity in x, or -1.
func firstNonFinite(x []float32) int {
	for i, v := range x {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return i
		}
	}
	return -1
}
