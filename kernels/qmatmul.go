package kernels

import (
	"fmt"
	"math"

	"github.com/qwenc/qwenc/format/wtype"
)

// Quantized activations. A row of k values (k a multiple of 32) becomes
// k/32 blocks of qActBlockBytes: a 16-byte header, then the 32 values as
// int8 (two's complement), x ~ d * q with d = max|x| / 127:
//
//	bytes 0..3    f32  d
//	bytes 4..7    f32  d * sum(q)        (the q4 minimum's term)
//	bytes 8..11   i32  -128 * sum(q)     (the q8 offset's correction)
//	bytes 12..15  i32  sum(q)
//	bytes 16..47  i8   q[0..31]
//
// The header carries what each weight type's kernel needs per block
// ready-made, one broadcast load each.
const qActBlockBytes = 48

// qActMinAmax is the smallest block maximum quantized as non-zero (2^-100).
const qActMinAmax = 0x1p-100

// QActRowBytes is the size of one quantized activation row of k values.
func QActRowBytes(k int) int { return k / QBlock * qActBlockBytes }

// QuantizeActs quantizes m rows of x (k values each, k a multiple of 32,
// row stride ldx) into dst, row i at dst[i*QActRowBytes(k):]. Rounding is
// to nearest, ties to even, on every path.
func (p Path) QuantizeActs(dst []byte, x []float32, ldx, m, k int) {
	if k <= 0 || k%QBlock != 0 || m < 0 || ldx < k {
		panic(fmt.Sprintf("kernels: QuantizeActs: m = %d, k = %d, ldx = %d", m, k, ldx))
	}
	if m == 0 {
		return
	}
	rb := QActRowBytes(k)
	if len(dst) < m*rb || len(x) < (m-1)*ldx+k {
		panic(fmt.Sprintf("kernels: QuantizeActs: len(dst) = %d, len(x) = %d for %d rows of %d", len(dst), len(x), m, k))
	}
	for i := range m {
		row := x[i*ldx : i*ldx+k]
		out := dst[i*rb : (i+1)*rb]
		n := 0
		if p != Generic {
			n = quantizeActsArch(p, out, row)
		}
		quantizeActsGeneric(out[n/QBlock*qActBlockBytes:], row[n:])
	}
}

func quantizeActsGeneric(dst []byte, x []float32) {
	for b := 0; b < len(x)/QBlock; b++ {
		blk := dst[b*qActBlockBytes : (b+1)*qActBlockBytes]
		v := x[b*QBlock : (b+1)*QBlock]
		var amax float32
		for _, e := range v {
			amax = max(amax, float32(math.Abs(float64(e))))
		}
		// A block this small is zero: 127/amax would overflow.
		var d, inv float32
		if amax >= qActMinAmax {
			d, inv = amax/127, 127/amax
		}
		sum := int32(0)
		for c, e := range v {
			q := int32(math.RoundToEven(float64(e * inv)))
			q = min(max(q, -127), 127)
			blk[16+c] = byte(int8(q))
			sum += q
		}
		put32(blk[0:], math.Float32bits(d))
		put32(blk[4:], math.Float32bits(d*float32(sum)))
		put32(blk[8:], uint32(-128*sum))
		put32(blk[12:], uint32(sum))
	}
}

func put32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// GemmQ computes Y[i, r] = sum_j X[i, j]*W[r, j] for i in [0, m) and the
// rows r of tiles [t0, t1) of a quantized tile-major W [n, k] of type t.
// X is given quantized (QuantizeActs), row i at xq[i*QActRowBytes(k):];
// Y is row-major f32 [m, >= n] with row stride ldy >= n. As for GemmTiles,
// only the rows r < n of the tiles are written. m = 1 is the decode
// product. It panics if a slice is too short for the range.
func (p Path) GemmQ(t wtype.Type, dst []float32, ldy int, w []byte, xq []byte, m, n, k, t0, t1 int) {
	tt := Traits(t)
	if tt.dot == nil {
		panic(fmt.Sprintf("kernels: GemmQ: %s is not a quantized type", t))
	}
	gemmQ(tt, p, dst, ldy, w, nil, xq, m, n, k, t0, t1)
}

// gemmQ is GemmQ without the lookup: the quantized types' Mul.
func gemmQ(tt *TypeTraits, p Path, dst []float32, ldy int, w []byte, _ []float32, xq []byte, m, n, k, t0, t1 int) {
	checkTiles("GemmQ", n, k, t0, t1)
	if !tt.Fits(k) || m < 0 || ldy < n {
		panic(fmt.Sprintf("kernels: GemmQ: m = %d, k = %d, ldy = %d, n = %d", m, k, ldy, n))
	}
	if t0 == t1 || m == 0 {
		return
	}
	rEnd := min(matTileRows*t1, n)
	if need := (m-1)*ldy + rEnd; len(dst) < need {
		panic(fmt.Sprintf("kernels: GemmQ: len(dst) = %d < %d", len(dst), need))
	}
	tb := tt.TileBytes(k)
	if need := t1 * tb; len(w) < need {
		panic(fmt.Sprintf("kernels: GemmQ: len(w) = %d < %d (%d tiles of %s)", len(w), need, t1, tt.Type))
	}
	if need := m * QActRowBytes(k); len(xq) < need {
		panic(fmt.Sprintf("kernels: GemmQ: len(xq) = %d < %d", len(xq), need))
	}
	if p == Generic || !gemmQArch(p, tt, dst, ldy, w, xq, m, n, k, t0, t1) {
		gemmQGeneric(tt, dst, ldy, w, xq, m, n, k, t0, t1)
	}
}

// A qBlockDot adds, for each of the 32 rows of a tile, the product of its
// block b with activation block xb (qActBlockBytes) to acc: the int32 dot
// product, then the block's scales in float32. It is a type's portable
// dot product and the reference of its kernels. acc goes by value: a
// pointer to it, passed to a function value, would move it to the heap,
// and a decode step must not allocate.
type qBlockDot func(acc [matTileRows]float32, tile []byte, b int, xb []byte) [matTileRows]float32

// gemmQGeneric is the portable quantized product: per tile and token, the
// type's dot product of every block.
func gemmQGeneric(tt *TypeTraits, dst []float32, ldy int, w []byte, xq []byte, m, n, k, t0, t1 int) {
	tb, rb, nb := tt.TileBytes(k), QActRowBytes(k), k/QBlock
	var acc [matTileRows]float32
	for tile := t0; tile < t1; tile++ {
		wt := w[tile*tb : (tile+1)*tb]
		r0 := tile * matTileRows
		r1 := min(r0+matTileRows, n)
		for i := range m {
			x := xq[i*rb : (i+1)*rb]
			clear(acc[:])
			for b := range nb {
				acc = tt.dot(acc, wt, b, x[b*qActBlockBytes:(b+1)*qActBlockBytes])
			}
			copy(dst[i*ldy+r0:i*ldy+r1], acc[:])
		}
	}
}

func dotQ8(acc [matTileRows]float32, tile []byte, b int, xb []byte) [matTileRows]float32 {
	dx := math.Float32frombits(le32(xb[0:]))
	q := xb[16:48]
	blk := tile[b*q8BlockBytes:]
	for r := range matTileRows {
		var s int32
		for c := range QBlock {
			s += int32(int(blk[q8ValueAt(r, c)])-q8Offset) * int32(int8(q[c]))
		}
		acc[r] += float32(s) * (matF16ToF32(le16(blk[2*r:])) * dx)
	}
	return acc
}

func dotQ4(acc [matTileRows]float32, tile []byte, b int, xb []byte) [matTileRows]float32 {
	dx := math.Float32frombits(le32(xb[0:]))
	dxs := math.Float32frombits(le32(xb[4:]))
	q := xb[16:48]
	hdr, blk := q4Header(tile, b), q4Block(tile, b)
	var d, mn [matTileRows]float32
	for r := range matTileRows {
		d[r] = matF16ToF32(le16(hdr[2*r:])) * float32(blk[r])
		mn[r] = matF16ToF32(le16(hdr[64+2*r:])) * float32(blk[32+r])
	}
	for r := range matTileRows {
		var s int32
		for c := range QBlock {
			s += int32(q4Value(blk, r, c)) * int32(int8(q[c]))
		}
		acc[r] += float32(s)*(d[r]*dx) - mn[r]*dxs
	}
	return acc
}
