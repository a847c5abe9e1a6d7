package kernels

import (
	"fmt"
	"math"
)

// q6 (format/SPEC.md): per row and block of 32 columns an f16 scale d and
// 32 values q in [-32, 31], stored as u = q + 32 in [0, 63]: the low 4
// bits as q4 stores its nibbles, the high 2 bits in a plane after them.
// The weight is d*q. This is llama.cpp's Q6_K without its 16-value
// sub-blocks: a q4 file's LM head, which Q4_K_M keeps at Q6_K.
const (
	// q6BlockBytes: 32 f16 scales, 32 x 32 low nibbles, 32 x 32 pairs of
	// high bits.
	q6BlockBytes = 64 + 512 + 256
	q6HighBits   = 64 + 512 // the offset of the high bits in a block
	q6Offset     = 32       // u = q + q6Offset
)

// q6HighAt is the byte of a q6 block holding the high 2 bits of row r,
// column c, and their shift: a byte holds those of rows r and 16+r of two
// neighbouring groups of 4 columns (g even, then odd), so one 64-byte line
// completes the nibbles of two groups.
func q6HighAt(r, c int) (int, uint) {
	g := c / 4
	return q6HighBits + 64*(g/2) + 4*(r%16) + c%4, uint(2 * (2*(g%2) + r/16))
}

func q6Value(blk []byte, r, c int) uint8 {
	o, s := q6HighAt(r, c)
	return q4Value(blk, r, c) | (blk[o]>>s&3)<<4
}

// dequantizeRowQ6 decodes row r of a q6 tile.
func dequantizeRowQ6(dst []float32, tile []byte, r, k int) {
	for b := range k / QBlock {
		blk := tile[b*q6BlockBytes:]
		d := matF16ToF32(le16(blk[2*r:]))
		for c := range QBlock {
			dst[b*QBlock+c] = d * float32(int(q6Value(blk, r, c))-q6Offset)
		}
	}
}

func quantizeTileQ6(dst []byte, rows []float32, r, k int) error {
	for i := range r {
		for b := range k / QBlock {
			blk := dst[b*q6BlockBytes : (b+1)*q6BlockBytes]
			x := (*[QBlock]float32)(rows[i*k+b*QBlock:])
			d := q6BlockFit(x)
			h := F32ToF16(d)
			if h&0x7c00 == 0x7c00 {
				return fmt.Errorf("row %d, columns %d..%d: a block scale of %g does not fit in f16", i, b*QBlock, (b+1)*QBlock-1, d)
			}
			put16(blk[2*i:], h)
			d = matF16ToF32(h)
			var inv float32
			if d != 0 {
				inv = 1 / d
			}
			for c, v := range x {
				u := uint8(min(max(roundHalfAway(v*inv), -q6Offset), q6Offset-1) + q6Offset)
				if o := q4ValueAt(i, c); i >= 16 {
					blk[o] |= (u & 15) << 4
				} else {
					blk[o] |= u & 15
				}
				o, s := q6HighAt(i, c)
				blk[o] |= u >> 4 << s
			}
		}
	}
	return nil
}

// q6BlockFit chooses the scale d of 32 weights, x ~ d*q with q in [-32,
// 31], as llama.cpp's make_qx_quants does for Q6_K: the value of largest
// magnitude goes to -32 (the grid's extra step), d signed accordingly;
// for 9 grids around that one, the least-squares d of the rounded values,
// keeping the one of least squared error (that of the least-squares d is
// sum(x^2) - sum(x*q)^2/sum(q^2): the grid of largest sum(x*q)^2/sum(q^2)).
//
// llama.cpp tries 19 grids; on normal weights with outliers the other 10
// lower the RMS error by 1.6%, at twice the time of the head of a q4
// compile (a third of a Qwen3.5-0.8B's).
func q6BlockFit(x *[QBlock]float32) float32 {
	var amax, big float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, big = a, v
		}
	}
	if amax < qActMinAmax {
		return 0
	}
	var best, bestLX, bestL2 float32 = 0, 0, 1
	for step := -4; step <= 4; step++ {
		iscale := -(q6Offset + float32(0.1*float32(step))) / big
		var sumlx, suml2 float32
		for _, v := range x {
			q := float32(min(max(roundHalfAway(iscale*v), -q6Offset), q6Offset-1))
			// float32(): no fused multiply-add (arm64), so files are the same everywhere.
			sumlx += float32(v * q)
			suml2 += float32(q * q)
		}
		if suml2 > 0 && sumlx*sumlx*bestL2 > bestLX*bestLX*suml2 {
			best, bestLX, bestL2 = sumlx/suml2, sumlx, suml2
		}
	}
	return best
}

func dotQ6(acc [matTileRows]float32, tile []byte, b int, xb []byte) [matTileRows]float32 {
	dx := math.Float32frombits(le32(xb[0:]))
	q := xb[16:48]
	blk := tile[b*q6BlockBytes:]
	for r := range matTileRows {
		var s int32
		for c := range QBlock {
			s += (int32(q6Value(blk, r, c)) - q6Offset) * int32(int8(q[c]))
		}
		acc[r] += float32(s) * (matF16ToF32(le16(blk[2*r:])) * dx)
	}
	return acc
}
