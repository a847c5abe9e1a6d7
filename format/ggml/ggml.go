package ggml

import (
	"fmt"
	"strings"
)

// Type is a ggml tensor type, by its number in a GGUF file (ggml.h's enum
// ggml_type).
type Type uint32

// The types of upstream ggml (numbers 4, 5 and 31 to 33 were removed from
// it; 36 to 38 were never released there).
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
)

// traits is one row of the table: a tensor row of the type is a whole
// number of blocks of blockSize elements stored in blockBytes bytes.
type traits struct {
	name                  string
	blockSize, blockBytes int
	// decode writes the values of len(dst)/blockSize consecutive blocks
	// of src; nil for the integer types, which hold no weights.
	decode func(dst []float32, src []byte)
}

// qkK is the elements of a super-block (ggml's QK_K).
const qkK = 256

var table = [...]traits{
	F32:     {"f32", 1, 4, decodeF32},
	F16:     {"f16", 1, 2, decodeF16},
	Q4_0:    {"q4_0", 32, 18, decodeQ4_0},
	Q4_1:    {"q4_1", 32, 20, decodeQ4_1},
	Q5_0:    {"q5_0", 32, 22, decodeQ5_0},
	Q5_1:    {"q5_1", 32, 24, decodeQ5_1},
	Q8_0:    {"q8_0", 32, 34, q8Decoder(34, 2)},
	Q8_1:    {"q8_1", 32, 36, q8Decoder(36, 4)},
	Q2_K:    {"q2_K", qkK, 84, decodeQ2_K},
	Q3_K:    {"q3_K", qkK, 110, decodeQ3_K},
	Q4_K:    {"q4_K", qkK, 144, decodeQ4_K},
	Q5_K:    {"q5_K", qkK, 176, decodeQ5_K},
	Q6_K:    {"q6_K", qkK, 210, decodeQ6_K},
	Q8_K:    {"q8_K", qkK, 292, decodeQ8_K},
	IQ2_XXS: {"iq2_xxs", qkK, 66, decodeIQ2_XXS},
	IQ2_XS:  {"iq2_xs", qkK, 74, decodeIQ2_XS},
	IQ3_XXS: {"iq3_xxs", qkK, 98, decodeIQ3_XXS},
	IQ1_S:   {"iq1_s", qkK, 50, decodeIQ1_S},
	IQ4_NL:  {"iq4_nl", 32, 18, decodeIQ4_NL},
	IQ3_S:   {"iq3_s", qkK, 110, decodeIQ3_S},
	IQ2_S:   {"iq2_s", qkK, 82, decodeIQ2_S},
	IQ4_XS:  {"iq4_xs", qkK, 136, decodeIQ4_XS},
	I8:      {"i8", 1, 1, nil},
	I16:     {"i16", 1, 2, nil},
	I32:     {"i32", 1, 4, nil},
	I64:     {"i64", 1, 8, nil},
	F64:     {"f64", 1, 8, nil},
	IQ1_M:   {"iq1_m", qkK, 56, decodeIQ1_M},
	BF16:    {"bf16", 1, 2, decodeBF16},
	TQ1_0:   {"tq1_0", qkK, 54, decodeTQ1_0},
	TQ2_0:   {"tq2_0", qkK, 66, decodeTQ2_0},
	MXFP4:   {"mxfp4", 32, 17, decodeMXFP4},
}

// Known reports whether t is a row of the table.
func (t Type) Known() bool { return int64(t) < int64(len(table)) && table[t].name != "" }

// String is ggml's name of the type ("q4_K"), or "type N" for a number
// the table does not hold.
func (t Type) String() string {
	if !t.Known() {
		return fmt.Sprintf("type %d", uint32(t))
	}
	return table[t].name
}

// Decodable reports whether t holds values Decode turns into floats.
func (t Type) Decodable() bool { return t.Known() && table[t].decode != nil }

// BlockSize is the elements of one block (1 for the plain types).
func (t Type) BlockSize() int { return table[t].blockSize }

// BlockBytes is the bytes of one block.
func (t Type) BlockBytes() int { return table[t].blockBytes }

// RowBytes is the bytes of n consecutive elements (a tensor row, or a
// run of them); ok is false when n is not a whole number of blocks.
func (t Type) RowBytes(n uint64) (size uint64, ok bool) {
	r := &table[t]
	if n%uint64(r.blockSize) != 0 {
		return 0, false
	}
	return n / uint64(r.blockSize) * uint64(r.blockBytes), true
}

// Decode writes the values of src, whole blocks of type t, into dst: as
// many values as the blocks hold, computed as ggml's to_float computes
// them. It panics when t has no decoder or the lengths disagree: callers
// check the sizes of the tensors they read before reading them.
func (t Type) Decode(dst []float32, src []byte) {
	if !t.Decodable() {
		panic(fmt.Sprintf("ggml: Decode(%s): no decoder", t))
	}
	r := &table[t]
	if len(dst)%r.blockSize != 0 || len(src) != len(dst)/r.blockSize*r.blockBytes {
		panic(fmt.Sprintf("ggml: Decode(%s): %d values from %d bytes", t, len(dst), len(src)))
	}
	r.decode(dst, src)
}

// Parse finds a type by its name, in any case ("Q4_K", "q4_k").
func Parse(name string) (Type, bool) {
	for t := range table {
		if table[t].name != "" && strings.EqualFold(table[t].name, name) {
			return Type(t), true
		}
	}
	return 0, false
}

// ScaledInt8 reports whether every block of type t is 32 values that are
// one f16 scale times integers in [-128, 127]: Q8_0, and Q4_0, Q5_0 and
// IQ4_NL, whose 4- and 5-bit codes stand for such integers. For those,
// ScaledInt8Blocks gives the scales and the integers as they are.
func (t Type) ScaledInt8() bool {
	switch t {
	case Q8_0, Q4_0, Q5_0, IQ4_NL:
		return true
	}
	return false
}

// ScaledInt8Blocks writes the blocks of src (of a ScaledInt8 type) as
// the bits of each block's f16 scale into scales and its 32 integers
// into q: value j of block b is scale[b] * q[32b + j], exactly what
// Decode computes.
func (t Type) ScaledInt8Blocks(src []byte, scales []uint16, q []int8) {
	r := &table[t]
	for b := range len(src) / r.blockBytes {
		x := src[b*r.blockBytes : (b+1)*r.blockBytes]
		scales[b] = le16(x)
		y := q[32*b : 32*b+32]
		switch t {
		case Q8_0:
			for j, v := range x[2:34] {
				y[j] = int8(v)
			}
		case Q4_0:
			for j, v := range x[2:18] {
				y[j], y[j+16] = int8(v&15)-8, int8(v>>4)-8
			}
		case Q5_0:
			qh := le32(x[2:])
			for j, v := range x[6:22] {
				y[j] = int8(v&15|byte(qh>>j<<4)&0x10) - 16
				y[j+16] = int8(v>>4|byte(qh>>(j+12))&0x10) - 16
			}
		case IQ4_NL:
			for j, v := range x[2:18] {
				y[j], y[j+16] = kvaluesIQ4NL[v&15], kvaluesIQ4NL[v>>4]
			}
		default:
			panic(fmt.Sprintf("ggml: ScaledInt8Blocks(%s)", t))
		}
	}
}

// Q4KBlocks writes the super-blocks of src, Q4_K data, as their parts:
// for super-block s the bits of its f16 scale and minimum scale, d[s]
// and dmin[s]; for block b of 32 values its 6-bit scale and minimum,
// sc[b] and m[b]; for value i its 4 bits, u[i]. Value 32b + j is
// d*sc[b] * u[32b + j] - dmin*m[b], computed as Decode computes it: the
// layout of q4, whose scales are 8-bit, so a Q4_K row is a q4 row as
// it is.
func Q4KBlocks(src []byte, d, dmin []uint16, sc, m, u []uint8) {
	for s := range len(src) / 144 {
		x := src[s*144 : (s+1)*144]
		d[s], dmin[s] = le16(x), le16(x[2:])
		q := x[16:144]
		for j := range 8 {
			sc[8*s+j], m[8*s+j] = scaleMinK4(j, x[4:16])
		}
		y := u[s*qkK : (s+1)*qkK]
		for c := range 4 {
			for l := range 32 {
				y[64*c+l], y[64*c+32+l] = q[32*c+l]&15, q[32*c+l]>>4
			}
		}
	}
}
