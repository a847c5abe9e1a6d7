package kernels

import (
	"fmt"
	"math"

	"github.com/qwenc/qwenc/format/wtype"
)

// Quantized tile-major weights (format/SPEC.md, "Quantized tile-major
// layouts"). A matrix [N, K] with K a multiple of 32 is stored as tiles of
// 32 rows; each tile is a run of blocks of 32 columns, and every row of a
// block has its own scale. Inside a block the values go in 8 groups of 4
// columns, 32 rows x 4 bytes per group: one 32-bit lane of a vector
// register holds one row's 4 values, the order VPDPBUSD and VPMADDUBSW
// consume.
//
// The activations a quantized product multiplies are quantized too, per
// row and block of 32, to int8 with a float scale (QuantizeActs): the
// products are int8 dot products accumulated in int32, scaled once per
// block.

const (
	// QBlock is the number of columns of one block.
	QBlock = 32
	// q8BlockBytes: 32 f16 scales and 32 x 32 values.
	q8BlockBytes = 64 + 1024
	// q4BlockBytes: 32 u8 scales, 32 u8 minimums and 32 x 32 nibbles.
	q4BlockBytes = 64 + 512
	// q4SuperBlocks is the number of blocks under one q4 super-block
	// header (32 f16 scales and 32 f16 minimum scales).
	q4SuperBlocks = 8
	q4HeaderBytes = 128
	// q8Offset is added to a q8 value to store it as an unsigned byte,
	// the operand VPDPBUSD multiplies as unsigned.
	q8Offset = 128
)

// dequantizeRowQ8 decodes row r of a q8 tile.
func dequantizeRowQ8(dst []float32, tile []byte, r, k int) {
	for b := range k / QBlock {
		blk := tile[b*q8BlockBytes:]
		d := matF16ToF32(le16(blk[2*r:]))
		for c := range QBlock {
			dst[b*QBlock+c] = d * float32(int(blk[q8ValueAt(r, c)])-q8Offset)
		}
	}
}

// dequantizeRowQ4 decodes row r of a q4 tile.
func dequantizeRowQ4(dst []float32, tile []byte, r, k int) {
	for b := range k / QBlock {
		hdr, blk := q4Header(tile, b), q4Block(tile, b)
		d := matF16ToF32(le16(hdr[2*r:])) * float32(blk[r])
		m := matF16ToF32(le16(hdr[64+2*r:])) * float32(blk[32+r])
		for c := range QBlock {
			dst[b*QBlock+c] = d*float32(q4Value(blk, r, c)) - m
		}
	}
}

func le16(b []byte) uint16 { return uint16(b[0]) | uint16(b[1])<<8 }

func put16(b []byte, v uint16) { b[0], b[1] = byte(v), byte(v>>8) }

// q8ValueAt is the offset in a q8 block of row r, column c.
func q8ValueAt(r, c int) int { return 64 + 128*(c/4) + 4*r + c%4 }

// q4Header returns the super-block header over block b of a q4 tile.
func q4Header(tile []byte, b int) []byte {
	s := b / q4SuperBlocks
	return tile[s*q4HeaderBytes+s*q4SuperBlocks*q4BlockBytes:]
}

// q4Block returns block b of a q4 tile.
func q4Block(tile []byte, b int) []byte {
	s := b / q4SuperBlocks
	return tile[(s+1)*q4HeaderBytes+b*q4BlockBytes:]
}

// q4ValueAt is the byte of a q4 block holding row r, column c; the low
// nibble for rows 0..15, the high one for rows 16..31.
func q4ValueAt(r, c int) int { return 64 + 64*(c/4) + 4*(r%16) + c%4 }

func q4Value(blk []byte, r, c int) uint8 {
	v := blk[q4ValueAt(r, c)]
	if r >= 16 {
		return v >> 4
	}
	return v & 15
}

// f16Scale rounds a non-negative scale up to the next f16, so values
// quantized against it never need clamping (which matters for subnormal
// f16 scales, whose rounding error is large), refusing one beyond f16's
// range (weights whose blocks span more than about 65504 x 127).
func f16Scale(s float32) (uint16, float32, error) {
	h := F32ToF16(s)
	if matF16ToF32(h) < s {
		h++ // the next f16 up: bits of positive f16 values are monotone
	}
	if h&0x7c00 == 0x7c00 {
		return 0, 0, fmt.Errorf("a block scale of %g does not fit in f16", s)
	}
	return h, matF16ToF32(h), nil
}

func quantizeTileQ8(dst []byte, rows []float32, r, k int) error {
	for b := range k / QBlock {
		blk := dst[b*q8BlockBytes : (b+1)*q8BlockBytes]
		for i := r; i < matTileRows; i++ {
			for c := range QBlock {
				blk[q8ValueAt(i, c)] = q8Offset
			}
		}
	}
	for i := range r {
		if err := quantizeRowQ8(dst, rows[i*k:(i+1)*k], i, k); err != nil {
			return fmt.Errorf("row %d, %w", i, err)
		}
	}
	return nil
}

// QuantizeQ8Row encodes row r (0..31) of a q8 tile of a k-column matrix
// (k a multiple of 32) from row (k values), leaving the tile's other rows
// as they are: how a q8 KV cache stores one position's key. A value that
// is not finite, or a scale beyond f16's range, is an error and leaves the
// row's scales zero, so it reads as zeros. Q4, whose scales are shared by
// 8 blocks of all rows, has no such encoder.
func QuantizeQ8Row(dst []byte, row []float32, r, k int) error {
	if !wtype.Q8.Fits(k) || r < 0 || r >= matTileRows || len(row) < k || len(dst) < wtype.Q8.TileBytes(k) {
		panic(fmt.Sprintf("kernels: QuantizeQ8Row: r = %d, k = %d, len(row) = %d, len(dst) = %d", r, k, len(row), len(dst)))
	}
	var err error
	if c := firstNonFinite(row[:k]); c >= 0 {
		err = fmt.Errorf("column %d: %v is not finite", c, row[c])
	} else {
		err = quantizeRowQ8(dst, row[:k], r, k)
	}
	if err != nil {
		for b := range k / QBlock {
			put16(dst[b*q8BlockBytes+2*r:], 0)
		}
	}
	return err
}

// quantizeRowQ8 writes row i of a q8 tile from finite values: per block
// of 32 columns, the f16 scale (the block's absolute maximum / 127,
// rounded up) and the values.
func quantizeRowQ8(dst []byte, row []float32, i, k int) error {
	for b := range k / QBlock {
		blk := dst[b*q8BlockBytes : (b+1)*q8BlockBytes]
		x := (*[QBlock]float32)(row[b*QBlock:])
		h, d, err := f16Scale(absMax(x) / 127)
		if err != nil {
			return fmt.Errorf("columns %d..%d: %w", b*QBlock, (b+1)*QBlock-1, err)
		}
		put16(blk[2*i:], h)
		var inv float32
		if d > 0 {
			inv = 1 / d
		}
		for g := range QBlock / 4 {
			out := blk[64+128*g+4*i : 64+128*g+4*i+4]
			for j := range 4 {
				// |x/d| <= 127 (d is rounded up), so the clamp only
				// guards the last bit of the multiplication.
				q := min(max(roundHalfAway(x[4*g+j]*inv), -127), 127)
				out[j] = byte(q + q8Offset)
			}
		}
	}
	return nil
}

// absMax is the largest magnitude of finite values: the bits of
// non-negative floats order as the floats do, and an integer max is far
// cheaper than a float one.
func absMax(x *[QBlock]float32) float32 {
	var m uint32
	for _, v := range x {
		m = max(m, math.Float32bits(v)&^(1<<31))
	}
	return math.Float32frombits(m)
}

// roundHalfAway rounds to the nearest integer, halves away from zero, for
// |v| < 2^23.
func roundHalfAway(v float32) int32 {
	if v < 0 {
		return -int32(-v + 0.5)
	}
	return int32(v + 0.5)
}

func quantizeTileQ4(dst []byte, rows []float32, r, k int) error {
	nb := k / QBlock
	var scale, mins [q4SuperBlocks]float32
	for s0 := 0; s0 < nb; s0 += q4SuperBlocks {
		s1 := min(s0+q4SuperBlocks, nb)
		hdr := q4Header(dst, s0)
		for i := range r {
			// Each block's best scale and minimum, then both quantized
			// to 8 bits against the largest of the super-block.
			var maxS, maxM float32
			for b := s0; b < s1; b++ {
				scale[b-s0], mins[b-s0] = q4BlockFit(rows[i*k+b*QBlock : i*k+(b+1)*QBlock])
				maxS, maxM = max(maxS, scale[b-s0]), max(maxM, mins[b-s0])
			}
			hd, D, err := f16Scale(maxS / 255)
			if err == nil {
				var hm uint16
				hm, _, err = f16Scale(maxM / 255)
				put16(hdr[2*i:], hd)
				put16(hdr[64+2*i:], hm)
			}
			if err != nil {
				return fmt.Errorf("row %d, columns %d..%d: %w", i, s0*QBlock, s1*QBlock-1, err)
			}
			M := matF16ToF32(le16(hdr[64+2*i:]))
			for b := s0; b < s1; b++ {
				blk := q4Block(dst, b)
				var sc, mn float32
				if D > 0 {
					sc = float32(min(math.Round(float64(scale[b-s0]/D)), 255))
				}
				if M > 0 {
					mn = float32(min(math.Round(float64(mins[b-s0]/M)), 255))
				}
				blk[i], blk[32+i] = uint8(sc), uint8(mn)
				// The values again, for the scale and minimum as stored.
				d, m := D*sc, M*mn
				x := rows[i*k+b*QBlock : i*k+(b+1)*QBlock]
				var inv float32
				if d > 0 {
					inv = 1 / d
				}
				for c, v := range x {
					q := uint8(min(max(roundHalfAway((v+m)*inv), 0), 15))
					o := q4ValueAt(i, c)
					if i >= 16 {
						blk[o] |= q << 4
					} else {
						blk[o] |= q
					}
				}
			}
		}
	}
	return nil
}

// q4BlockFit chooses a scale >= 0 and a minimum m >= 0 for 32 weights x,
// so that x ~ scale*u - m with u in [0, 15]: the weighted least-squares
// search of llama.cpp's make_qkx2_quants (weights |x| + rms(x), candidate
// grids of 14 to 16 steps over the block's range, the minimum clamped so
// the grid covers 0), with 11 candidates where llama.cpp tries 21: on
// normal weights that costs 0.2% of the RMS error and halves a q4 compile.
// Each candidate's error comes from the sums the fit needs, so one pass
// over the block per candidate suffices.
func q4BlockFit(x []float32) (scale, m float32) {
	const nmax = 15
	var w [QBlock]float32
	// Products are converted explicitly wherever a sum follows: Go may
	// fuse x*y + z into one instruction on some CPUs (arm64), and a
	// compiled file must not depend on the machine that compiled it.
	var sumx2 float32
	for _, v := range x {
		sumx2 += float32(v * v)
	}
	av := float32(math.Sqrt(float64(sumx2 / QBlock)))
	lo, hi := x[0], x[0]
	var sumw, sumx, sumwx2 float64
	for i, v := range x {
		w[i] = av + float32(math.Abs(float64(v)))
		lo, hi = min(lo, v), max(hi, v)
		sumw += float64(w[i])
		sumx += float64(w[i] * v)
		sumwx2 += float64(w[i] * v * v)
	}
	lo = min(lo, 0)
	if hi == lo {
		return 0, -lo
	}
	xa := (*[QBlock]float32)(x)
	var d [QBlock]float32 // the values above the minimum
	for i, v := range xa {
		d[i] = v - lo
	}
	// errFor is sum w*(s*u + mn - x)^2 expanded over the sums.
	errFor := func(s, mn, suml, suml2, sumxl float64) float64 {
		return float64(s*s*suml2) + float64(2*s*mn*suml) - float64(2*s*sumxl) + float64(mn*mn*sumw) - float64(2*mn*sumx) + sumwx2
	}
	// grid rounds the block onto the grid of iscale and returns the sums
	// of the weighted values, squares and products with x (two partial
	// sums each, which halves the additions' latency chain).
	grid := func(iscale float32) (suml, suml2, sumxl float64) {
		var a0, a1, b0, b1, c0, c1 float32
		for i := 0; i < QBlock; i += 2 {
			// d >= 0, so the conversion rounds half up; an integer min is
			// far cheaper than a float one.
			l0, l1 := min(int32(float32(iscale*d[i])+0.5), nmax), min(int32(float32(iscale*d[i+1])+0.5), nmax)
			wl0, wl1 := w[i]*float32(l0), w[i+1]*float32(l1)
			a0 += wl0
			a1 += wl1
			b0 += float32(wl0 * float32(l0))
			b1 += float32(wl1 * float32(l1))
			c0 += float32(wl0 * xa[i])
			c1 += float32(wl1 * xa[i+1])
		}
		return float64(a0 + a1), float64(b0 + b1), float64(c0 + c1)
	}
	iscale := nmax / (hi - lo)
	bestS, bestMin := float64(1/iscale), float64(lo)
	suml, suml2, sumxl := grid(iscale)
	best := errFor(bestS, bestMin, suml, suml2, sumxl)
	for step := range 11 {
		suml, suml2, sumxl = grid((-1 + float32(0.2*float32(step)) + nmax) / (hi - lo))
		det := float64(sumw*suml2) - float64(suml*suml)
		if det <= 0 {
			continue
		}
		s := (float64(sumw*sumxl) - float64(sumx*suml)) / det
		mn := (float64(suml2*sumx) - float64(suml*sumxl)) / det
		if mn > 0 {
			mn, s = 0, sumxl/suml2
		}
		if e := errFor(s, mn, suml, suml2, sumxl); e < best {
			best, bestS, bestMin = e, s, mn
		}
	}
	return max(float32(bestS), 0), -float32(bestMin)
}

// SetQ8UnitScales sets every scale of a q8 tile of a k-column matrix to
// 1, for a tile that holds plain int8 values (SetQ8Value): a q8 KV cache
// keeps its transposed values so, with a scale per position applied to
// the probabilities instead, because a block's 32 positions arrive one at
// a time.
func SetQ8UnitScales(tile []byte, k int) {
	const one = 0x3c00 // 1.0 in f16
	for b := range k / QBlock {
		for r := range matTileRows {
			put16(tile[b*q8BlockBytes+2*r:], one)
		}
	}
}

// SetQ8Value stores v as row r, column c of a q8 tile.
func SetQ8Value(tile []byte, r, c int, v int8) {
	tile[(c/QBlock)*q8BlockBytes+q8ValueAt(r, c%QBlock)] = byte(int(v) + q8Offset)
}

// SetQ4Row stores row r (0..31) of a q4 tile of a k-column matrix from
// values already quantized as q4 stores them: per super-block of 256
// columns the bits of the f16 scales of its block scales and minimums,
// d and dmin; per block of 32 columns a scale and a minimum, sc and m;
// per column a value in [0, 15], u. Nothing is rounded: a GGUF's Q4_K
// blocks, whose 6-bit scales and minimums are these, become q4 exactly.
// A scale that is negative or not finite, which q4's quantizer never
// writes, is an error and leaves the tile as it was.
func SetQ4Row(dst []byte, r, k int, d, dmin []uint16, sc, m, u []uint8) error {
	nb := k / QBlock
	ns := (nb + q4SuperBlocks - 1) / q4SuperBlocks
	if !wtype.Q4.Fits(k) || r < 0 || r >= matTileRows || len(d) < ns || len(dmin) < ns || len(sc) < nb || len(m) < nb || len(u) < k || len(dst) < wtype.Q4.TileBytes(k) {
		panic(fmt.Sprintf("kernels: SetQ4Row: r = %d, k = %d, len(d) = %d, len(sc) = %d, len(u) = %d, len(dst) = %d", r, k, len(d), len(sc), len(u), len(dst)))
	}
	for s := range ns {
		for _, h := range []uint16{d[s], dmin[s]} {
			if h&0x8000 != 0 || h&0x7c00 == 0x7c00 {
				return fmt.Errorf("columns %d..%d: scale %v is negative or not finite", s*q4SuperBlocks*QBlock, min((s+1)*q4SuperBlocks*QBlock, k)-1, matF16ToF32(h))
			}
		}
	}
	for c, v := range u[:k] {
		if v > 15 {
			return fmt.Errorf("column %d: value %d is outside q4's [0, 15]", c, v)
		}
	}
	for b := range nb {
		if b%q4SuperBlocks == 0 {
			hdr := q4Header(dst, b)
			put16(hdr[2*r:], d[b/q4SuperBlocks])
			put16(hdr[64+2*r:], dmin[b/q4SuperBlocks])
		}
		blk := q4Block(dst, b)
		blk[r], blk[32+r] = sc[b], m[b]
		for c, v := range u[b*QBlock : (b+1)*QBlock] {
			o := q4ValueAt(r, c)
			if r >= 16 {
				blk[o] = blk[o]&0x0f | v<<4
			} else {
				blk[o] = blk[o]&0xf0 | v
			}
		}
	}
	return nil
}

// SetQ8Row stores row r (0..31) of a q8 tile of a k-column matrix from
// values already quantized as q8 stores them: per block of 32 columns
// the bits of an f16 scale, and 32 values in [-127, 127] (block b's at
// q[32b:32b+32]). Nothing is rounded: a GGUF's Q8_0 blocks, which are
// these, become q8 exactly. A value of -128, which q8's kernels cannot
// take (they negate values), or a scale that is not finite, is an error
// and leaves the tile as it was.
func SetQ8Row(dst []byte, r, k int, scales []uint16, q []int8) error {
	if !wtype.Q8.Fits(k) || r < 0 || r >= matTileRows || len(scales) < k/QBlock || len(q) < k || len(dst) < wtype.Q8.TileBytes(k) {
		panic(fmt.Sprintf("kernels: SetQ8Row: r = %d, k = %d, len(scales) = %d, len(q) = %d, len(dst) = %d", r, k, len(scales), len(q), len(dst)))
	}
	for b, h := range scales[:k/QBlock] {
		if h&0x7c00 == 0x7c00 {
			return fmt.Errorf("columns %d..%d: scale %v is not finite", b*QBlock, (b+1)*QBlock-1, matF16ToF32(h))
		}
	}
	for c, v := range q[:k] {
		if v == -128 {
			return fmt.Errorf("column %d: value -128 is outside q8's [-127, 127]", c)
		}
	}
	for b, h := range scales[:k/QBlock] {
		put16(dst[b*q8BlockBytes+2*r:], h)
	}
	for c, v := range q[:k] {
		SetQ8Value(dst, r, c, v)
	}
	return nil
}
