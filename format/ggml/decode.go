package ggml

import (
	"encoding/binary"
	"math"
	"sync"

	"github.com/x448/float16"
)

// The decoders, one per type, each the arithmetic of ggml's
// dequantize_row_<type> (ggml-quants.c) in the same order, so that every
// value is the same float32. Go may fuse x*y + z into one rounding on
// some CPUs; ggml, built as C11, does not, so every product that feeds a
// sum is rounded on its own by an explicit float32 conversion.
//
// Each decoder writes len(dst)/blockSize blocks; Type.Decode has checked
// that src holds exactly those.

// f16Table maps every f16 to its float32, exactly (subnormals included).
var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = float16.Frombits(uint16(i)).Float32()
	}
	return &t
})

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

func decodeF32(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(le32(src[4*i:]))
	}
}

func decodeF16(dst []float32, src []byte) {
	t := f16Table()
	for i := range dst {
		dst[i] = t[le16(src[2*i:])]
	}
}

func decodeBF16(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(le16(src[2*i:])) << 16)
	}
}

// blocks calls f for each block of dst and src.
func blocks(dst []float32, src []byte, size, bytes int, f func(y []float32, x []byte)) {
	for i := range len(dst) / size {
		f(dst[i*size:(i+1)*size], src[i*bytes:(i+1)*bytes])
	}
}

// Q4_0: d (f16), 16 bytes of nibbles; value (q - 8) * d, the low nibbles
// first.
func decodeQ4_0(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, 32, 18, func(y []float32, x []byte) {
		d := h[le16(x)]
		for j, q := range x[2:18] {
			y[j] = float32(int(q&15)-8) * d
			y[j+16] = float32(int(q>>4)-8) * d
		}
	})
}

// Q4_1: d, m (f16), 16 bytes of nibbles; value q * d + m.
func decodeQ4_1(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, 32, 20, func(y []float32, x []byte) {
		d, m := h[le16(x)], h[le16(x[2:])]
		for j, q := range x[4:20] {
			y[j] = float32(float32(q&15)*d) + m
			y[j+16] = float32(float32(q>>4)*d) + m
		}
	})
}

// Q5_0: d, 32 high bits, 16 bytes of nibbles; value (q - 16) * d.
func decodeQ5_0(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, 32, 22, func(y []float32, x []byte) {
		d, qh := h[le16(x)], le32(x[2:])
		for j, q := range x[6:22] {
			h0 := byte(qh>>j<<4) & 0x10
			h1 := byte(qh>>(j+12)) & 0x10
			y[j] = float32(int(q&15|h0)-16) * d
			y[j+16] = float32(int(q>>4|h1)-16) * d
		}
	})
}

// Q5_1: d, m, 32 high bits, 16 bytes of nibbles; value q * d + m.
func decodeQ5_1(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, 32, 24, func(y []float32, x []byte) {
		d, m, qh := h[le16(x)], h[le16(x[2:])], le32(x[4:])
		for j, q := range x[8:24] {
			h0 := byte(qh>>j<<4) & 0x10
			h1 := byte(qh>>(j+12)) & 0x10
			y[j] = float32(float32(q&15|h0)*d) + m
			y[j+16] = float32(float32(q>>4|h1)*d) + m
		}
	})
}

// q8Decoder decodes blocks of size bytes holding d (f16) and 32 signed
// values from byte off: Q8_0 (34, 2), and Q8_1 (36, 4), whose second f16
// is d times the values' sum, unused here. A value is q * d.
func q8Decoder(size, off int) func(dst []float32, src []byte) {
	return func(dst []float32, src []byte) {
		h := f16Table()
		blocks(dst, src, 32, size, func(y []float32, x []byte) {
			d := h[le16(x)]
			for j, q := range x[off : off+32] {
				y[j] = float32(int8(q)) * d
			}
		})
	}
}

// Q2_K: 16 bytes of 4-bit scale and minimum per 16 values, 64 bytes of
// 2-bit values, d and dmin (f16); value d*scale * q - dmin*min.
func decodeQ2_K(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, qkK, 84, func(y []float32, x []byte) {
		scales, qs := x[0:16], x[16:80]
		d, dmin := h[le16(x[80:])], h[le16(x[82:])]
		is := 0
		for n := 0; n < qkK; n += 128 {
			q := qs[n/4:]
			for shift := 0; shift < 8; shift += 2 {
				for half := range 2 {
					sc := scales[is]
					is++
					dl, ml := d*float32(sc&15), dmin*float32(sc>>4)
					for l := range 16 {
						y[l] = float32(dl*float32(q[l+16*half]>>shift&3)) - ml
					}
					y = y[16:]
				}
			}
		}
	})
}

// q3KScales unpacks Q3_K's twelve bytes into its sixteen 6-bit scales.
func q3KScales(b []byte) [16]int8 {
	const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
	a0, a1, tmp := le32(b), le32(b[4:]), le32(b[8:])
	aux := [4]uint32{
		a0&kmask2 | (tmp>>0&kmask1)<<4,
		a1&kmask2 | (tmp>>2&kmask1)<<4,
		a0>>4&kmask2 | (tmp>>4&kmask1)<<4,
		a1>>4&kmask2 | (tmp>>6&kmask1)<<4,
	}
	var s [16]int8
	for i, v := range aux {
		for j := range 4 {
			s[4*i+j] = int8(v >> (8 * j))
		}
	}
	return s
}

// Q3_K: 32 bytes of high bits (inverted: a clear bit subtracts 4), 64
// bytes of 2-bit values, 12 bytes of 6-bit scales, d; value
// d*(scale - 32) * q.
func decodeQ3_K(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, qkK, 110, func(y []float32, x []byte) {
		hm, qs := x[0:32], x[32:96]
		scales := q3KScales(x[96:108])
		d := h[le16(x[108:])]
		is, m := 0, byte(1)
		for n := 0; n < qkK; n += 128 {
			q := qs[n/4:]
			for shift := 0; shift < 8; shift += 2 {
				for half := range 2 {
					dl := d * float32(int(scales[is])-32)
					is++
					for l := range 16 {
						v := int(q[l+16*half] >> shift & 3)
						if hm[l+16*half]&m == 0 {
							v -= 4
						}
						y[l] = dl * float32(v)
					}
					y = y[16:]
				}
				m <<= 1
			}
		}
	})
}

// scaleMinK4 is ggml's get_scale_min_k4: the 6-bit scale and minimum of
// sub-block j from Q4_K's and Q5_K's twelve bytes.
func scaleMinK4(j int, q []byte) (sc, m byte) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&15 | q[j-4]>>6<<4, q[j+4]>>4 | q[j]>>6<<4
}

// Q4_K: d, dmin, 12 bytes of 6-bit scales and minimums per 32 values,
// 128 bytes of nibbles (a run of 32 bytes holds two sub-blocks: low
// nibbles, then high); value d*scale * q - dmin*min.
func decodeQ4_K(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, qkK, 144, func(y []float32, x []byte) {
		d, dmin, scales, q := h[le16(x)], h[le16(x[2:])], x[4:16], x[16:144]
		for is := 0; is < 8; is += 2 {
			sc, m := scaleMinK4(is, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			for l := range 32 {
				y[l] = float32(d1*float32(q[l]&15)) - m1
				y[l+32] = float32(d2*float32(q[l]>>4)) - m2
			}
			y, q = y[64:], q[32:]
		}
	})
}

// Q5_K: Q4_K with a fifth bit per value from 32 bytes of high bits.
func decodeQ5_K(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, qkK, 176, func(y []float32, x []byte) {
		d, dmin, scales, qh, q := h[le16(x)], h[le16(x[2:])], x[4:16], x[16:48], x[48:176]
		u1, u2 := byte(1), byte(2)
		for is := 0; is < 8; is += 2 {
			sc, m := scaleMinK4(is, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			for l := range 32 {
				lo, hi := q[l]&15, q[l]>>4
				if qh[l]&u1 != 0 {
					lo += 16
				}
				if qh[l]&u2 != 0 {
					hi += 16
				}
				y[l] = float32(d1*float32(lo)) - m1
				y[l+32] = float32(d2*float32(hi)) - m2
			}
			y, q = y[64:], q[32:]
			u1, u2 = u1<<2, u2<<2
		}
	})
}

// Q6_K: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 signed
// 8-bit scales per 16 values, d; value d*scale * (q - 32).
func decodeQ6_K(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, qkK, 210, func(y []float32, x []byte) {
		ql, qh, sc := x[0:128], x[128:192], x[192:208]
		d := h[le16(x[208:])]
		for n := 0; n < qkK; n += 128 {
			for l := range 32 {
				is := l / 16
				q1 := int(ql[l]&15|(qh[l]>>0&3)<<4) - 32
				q2 := int(ql[l+32]&15|(qh[l]>>2&3)<<4) - 32
				q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				y[l] = float32(d*float32(int8(sc[is]))) * float32(q1)
				y[l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
				y[l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
				y[l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
			}
			y, ql, qh, sc = y[128:], ql[64:], qh[32:], sc[8:]
		}
	})
}

// Q8_K: d (f32), 256 signed bytes, 16 sums (unused here).
func decodeQ8_K(dst []float32, src []byte) {
	blocks(dst, src, qkK, 292, func(y []float32, x []byte) {
		d := math.Float32frombits(le32(x))
		for j, q := range x[4:260] {
			y[j] = d * float32(int8(q))
		}
	})
}

// ternary is a base-3 digit of TQ1_0: a byte holds five digits as a
// fixed-point fraction, and multiplying by 3^n brings digit n to the top.
func ternary(q, pow3 byte) float32 {
	q *= pow3 // modulo 256, as ggml's uint8_t
	return float32(int(uint16(q)*3>>8) - 1)
}

// TQ1_0: 48 bytes of five ternary digits, 4 bytes of four, d; value
// (digit - 1) * d, in the order ggml packs them.
func decodeTQ1_0(dst []float32, src []byte) {
	h := f16Table()
	pow3 := [5]byte{1, 3, 9, 27, 81}
	blocks(dst, src, qkK, 54, func(y []float32, x []byte) {
		qs, qh, d := x[0:48], x[48:52], h[le16(x[52:])]
		for _, run := range [][]byte{qs[0:32], qs[32:48]} {
			for n := range 5 {
				for m, q := range run {
					y[m] = ternary(q, pow3[n]) * d
				}
				y = y[len(run):]
			}
		}
		for n := range 4 {
			for j, q := range qh {
				y[j] = ternary(q, pow3[n]) * d
			}
			y = y[4:]
		}
	})
}

// TQ2_0: 64 bytes of 2-bit values, d; value (q - 1) * d.
func decodeTQ2_0(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, qkK, 66, func(y []float32, x []byte) {
		d := h[le16(x[64:])]
		for j := 0; j < 64; j += 32 {
			for l := range 4 {
				for m := range 32 {
					y[m] = float32(int(x[j+m]>>(2*l)&3)-1) * d
				}
				y = y[32:]
			}
		}
	})
}

// gridValue is byte j of a grid point.
func gridValue[T uint32 | uint64](p T, j int) float32 { return float32(byte(p >> (8 * j))) }

// signed returns v, negated when bit j of signs is set.
func signed(v float32, signs byte, j int) float32 {
	if signs>>j&1 != 0 {
		return -v
	}
	return v
}

// IQ2_XXS: d, then per 32 values 8 bytes: four grid indices, and a word
// of four 7-bit sign sets and a 4-bit scale.
func decodeIQ2_XXS(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, qkK, 66, func(y []float32, x []byte) {
		d := h[le16(x)]
		for ib := range 8 {
			idx, aux := x[2+8*ib:2+8*ib+4], le32(x[2+8*ib+4:])
			db := float32(d*(0.5+float32(aux>>28))) * 0.25
			for l := range 4 {
				p, signs := iq2xxsGrid[idx[l]], ksignsIQ2XS[aux>>(7*l)&127]
				for j := range 8 {
					y[j] = signed(db*gridValue(p, j), signs, j)
				}
				y = y[8:]
			}
		}
	})
}

// iq2Scales is IQ2_XS's and IQ2_S's pair of sub-block scales from a
// byte of two 4-bit ones.
func iq2Scales(d float32, s byte) [2]float32 {
	return [2]float32{float32(d*(0.5+float32(s&15))) * 0.25, float32(d*(0.5+float32(s>>4))) * 0.25}
}

// IQ2_XS: d, 32 words of a 9-bit grid index and a 7-bit sign set, eight
// bytes of two 4-bit scales.
func decodeIQ2_XS(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, qkK, 74, func(y []float32, x []byte) {
		d, scales := h[le16(x)], x[66:74]
		for ib := range 8 {
			db := iq2Scales(d, scales[ib])
			for l := range 4 {
				q := le16(x[2+2*(4*ib+l):])
				p, signs := iq2xsGrid[q&511], ksignsIQ2XS[q>>9]
				for j := range 8 {
					y[j] = signed(db[l/2]*gridValue(p, j), signs, j)
				}
				y = y[8:]
			}
		}
	})
}

// IQ2_S: d, 32 bytes of grid indices' low bits, 32 bytes of signs, 8
// bytes of their high bits, 8 bytes of two 4-bit scales.
func decodeIQ2_S(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, qkK, 82, func(y []float32, x []byte) {
		d, qs, signs, qh, scales := h[le16(x)], x[2:34], x[34:66], x[66:74], x[74:82]
		for ib := range 8 {
			db := iq2Scales(d, scales[ib])
			for l := range 4 {
				p := iq2sGrid[int(qs[4*ib+l])|int(qh[ib])<<(8-2*l)&0x300]
				for j := range 8 {
					y[j] = signed(db[l/2]*gridValue(p, j), signs[4*ib+l], j)
				}
				y = y[8:]
			}
		}
	})
}

// IQ3_XXS: d, 64 bytes of grid indices (4 values each), then per 32
// values a word of four 7-bit sign sets and a 4-bit scale.
func decodeIQ3_XXS(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, qkK, 98, func(y []float32, x []byte) {
		d, qs := h[le16(x)], x[2:66]
		for ib := range 8 {
			aux := le32(x[66+4*ib:])
			db := float32(d*(0.5+float32(aux>>28))) * 0.5
			for l := range 4 {
				signs := ksignsIQ2XS[aux>>(7*l)&127]
				p1, p2 := iq3xxsGrid[qs[8*ib+2*l]], iq3xxsGrid[qs[8*ib+2*l+1]]
				for j := range 4 {
					y[j] = signed(db*gridValue(p1, j), signs, j)
					y[j+4] = signed(db*gridValue(p2, j), signs, j+4)
				}
				y = y[8:]
			}
		}
	})
}

// IQ3_S: d, 64 bytes of grid indices' low bits, 8 bytes of their ninth
// bits, 32 bytes of signs, 4 bytes of two 4-bit scales (odd: 1 + 2s).
func decodeIQ3_S(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, qkK, 110, func(y []float32, x []byte) {
		d, qs, qh, signs, scales := h[le16(x)], x[2:66], x[66:74], x[74:106], x[106:110]
		for ib := 0; ib < 8; ib += 2 {
			for half := range 2 {
				s := scales[ib/2] & 15
				if half == 1 {
					s = scales[ib/2] >> 4
				}
				db := d * float32(1+2*int(s))
				q, hi, sg := qs[8*(ib+half):], int(qh[ib+half]), signs[4*(ib+half):]
				for l := range 4 {
					p1 := iq3sGrid[int(q[2*l])|hi<<(8-2*l)&256]
					p2 := iq3sGrid[int(q[2*l+1])|hi<<(7-2*l)&256]
					for j := range 4 {
						y[j] = signed(db*gridValue(p1, j), sg[l], j)
						y[j+4] = signed(db*gridValue(p2, j), sg[l], j+4)
					}
					y = y[8:]
				}
			}
		}
	})
}

// iq1Delta is ggml's IQ1S_DELTA (and IQ1M_DELTA): the shift of a ternary
// grid point.
const iq1Delta = 0.125

// iq1Point is value j of IQ1's grid point p plus delta.
func iq1Point(p uint64, j int, delta float32) float32 { return float32(int8(p>>(8*j))) + delta }

// IQ1_S: d, 32 bytes of grid indices' low bits, then per 32 values a
// word of four 3-bit index highs, a 3-bit scale and the delta's sign.
func decodeIQ1_S(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, qkK, 50, func(y []float32, x []byte) {
		d, qs := h[le16(x)], x[2:34]
		for ib := range 8 {
			qh := le16(x[34+2*ib:])
			dl := d * float32(2*int(qh>>12&7)+1)
			delta := float32(iq1Delta)
			if qh&0x8000 != 0 {
				delta = -iq1Delta
			}
			for l := range 4 {
				p := iq1sGrid[int(qs[4*ib+l])|int(qh>>(3*l)&7)<<8]
				for j := range 8 {
					y[j] = dl * iq1Point(p, j, delta)
				}
				y = y[8:]
			}
		}
	})
}

// IQ1_M: 32 bytes of grid indices' low bits, 16 bytes of their highs and
// the deltas' signs, 8 bytes of 3-bit scales whose top nibbles hold the
// f16 super-block scale.
func decodeIQ1_M(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, qkK, 56, func(y []float32, x []byte) {
		qs, qh := x[0:32], x[32:48]
		var sc [4]uint16
		for i := range sc {
			sc[i] = le16(x[48+2*i:])
		}
		d := h[sc[0]>>12|sc[1]>>8&0x00f0|sc[2]>>4&0x0f00|sc[3]&0xf000]
		for ib := range 8 {
			s := sc[ib/2] >> (6 * (ib % 2))
			dl := [2]float32{d * float32(2*int(s&7)+1), d * float32(2*int(s>>3&7)+1)}
			h0, h1 := int(qh[2*ib]), int(qh[2*ib+1])
			q := qs[4*ib:]
			idx := [4]int{int(q[0]) | h0<<8&0x700, int(q[1]) | h0<<4&0x700, int(q[2]) | h1<<8&0x700, int(q[3]) | h1<<4&0x700}
			for l, bit := range [4]int{h0 & 0x08, h0 & 0x80, h1 & 0x08, h1 & 0x80} {
				delta := float32(iq1Delta)
				if bit != 0 {
					delta = -iq1Delta
				}
				p := iq1sGrid[idx[l]]
				for j := range 8 {
					y[j] = dl[l/2] * iq1Point(p, j, delta)
				}
				y = y[8:]
			}
		}
	})
}

// IQ4_NL: d, 16 bytes of nibbles indexing the non-linear levels.
func decodeIQ4_NL(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, 32, 18, func(y []float32, x []byte) {
		d := h[le16(x)]
		for j, q := range x[2:18] {
			y[j] = d * float32(kvaluesIQ4NL[q&15])
			y[j+16] = d * float32(kvaluesIQ4NL[q>>4])
		}
	})
}

// IQ4_XS: d, the 6-bit scales of 32 values (high bits in a word, low
// nibbles in 4 bytes), 128 bytes of nibbles indexing the levels.
func decodeIQ4_XS(dst []float32, src []byte) {
	h := f16Table()
	blocks(dst, src, qkK, 136, func(y []float32, x []byte) {
		d, sh, sl, qs := h[le16(x)], le16(x[2:]), x[4:8], x[8:136]
		for ib := range 8 {
			ls := int(sl[ib/2]>>(4*(ib%2))&15) | int(sh>>(2*ib)&3)<<4
			dl := d * float32(ls-32)
			for j, q := range qs[16*ib : 16*ib+16] {
				y[j] = dl * float32(kvaluesIQ4NL[q&15])
				y[j+16] = dl * float32(kvaluesIQ4NL[q>>4])
			}
			y = y[32:]
		}
	})
}

// e8m0Half is half of the E8M0 scale e (2^(e-127) / 2), as ggml computes
// it: subnormal for e < 2.
func e8m0Half(e byte) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// MXFP4: an E8M0 scale, 16 bytes of nibbles indexing the E2M1 levels.
func decodeMXFP4(dst []float32, src []byte) {
	blocks(dst, src, 32, 17, func(y []float32, x []byte) {
		d := e8m0Half(x[0])
		for j, q := range x[1:17] {
			y[j] = float32(kvaluesMXFP4[q&15]) * d
			y[j+16] = float32(kvaluesMXFP4[q>>4]) * d
		}
	})
}
