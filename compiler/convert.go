package compiler

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/qwenc/qwenc/format/ggml"
	"github.com/x448/float16"
)

// littleEndian is checked before compiling: the converters reinterpret
// checkpoint bytes (little-endian, like the .qbin file) as native words.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// converter turns checkpoint elements into the file's f16 and f32. bf16 has
// only 65536 values, so its conversion to f16 is one table lookup; the
// table is built once per compile with x448/float16's round-to-nearest-even.
type converter struct {
	bf16ToF16 []uint16
}

func newConverter() *converter {
	t := make([]uint16, 1<<16)
	for i := range t {
		t[i] = float16.Fromfloat32(math.Float32frombits(uint32(i) << 16)).Bits()
	}
	return &converter{bf16ToF16: t}
}

func u16s(b []byte) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2)
}
func i8s(b []byte) []int8 {
	return unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(b))), len(b))
}
func f32Bytes(f []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*len(f))
}
func u32s(b []byte) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

// f16 converts src (elements of dtype) to f16 in dst (2 bytes each). A value
// that is not finite in f16 (NaN, infinity, or a finite value beyond f16's
// range) is an error: such a weight would poison every activation it
// touches, so it is refused at compile time.
func (cv *converter) f16(dst, src []byte, dtype string) error {
	out := u16s(dst)
	switch dtype {
	case "F16":
		copy(out, u16s(src))
	case "BF16":
		tab := cv.bf16ToF16[:1<<16]
		for i, b := range u16s(src) {
			out[i] = tab[b]
		}
	case "F32":
		for i, b := range u32s(src) {
			out[i] = float16.Fromfloat32(math.Float32frombits(b)).Bits()
		}
	default:
		return fmt.Errorf("dtype %s not supported (BF16, F16, F32)", dtype)
	}
	// A separate pass over the cache-resident block keeps the conversion
	// loops branch-free.
	for j, h := range out {
		if h&0x7c00 == 0x7c00 {
			return fmt.Errorf("element %d is %v in f16 (source %s value %v): not representable", j,
				float16.Frombits(h).Float32(), dtype, elemValue(src, dtype, j))
		}
	}
	return nil
}

// f32 converts src to f32 in dst (4 bytes each), refusing non-finite values.
func (cv *converter) f32(dst, src []byte, dtype string) error {
	es := ElemSize(dtype)
	if es == 0 {
		return fmt.Errorf("dtype %s not supported (BF16, F16, F32)", dtype)
	}
	out := u32s(dst)
	for i := range len(src) / es {
		v := elemValue(src, dtype, i)
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("element %d is %v: not finite", i, v)
		}
		out[i] = math.Float32bits(v)
	}
	return nil
}

func elemValue(src []byte, dtype string, i int) float32 {
	switch dtype {
	case "F16":
		return float16.Frombits(binary.LittleEndian.Uint16(src[2*i:])).Float32()
	case "BF16":
		return math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
	case "F32":
		return math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
	return float32(math.NaN())
}

// tileMajor reorders r row-major f16 rows of k columns (r <= 32) into one
// tile-major tile (format/SPEC.md): tile[col*32+row] = rows[row*k+col]; rows
// r..31 of the tile are zero.
func tileMajor(tile, rows []byte, r, k int) {
	dst, src := u16s(tile)[:k*32], u16s(rows)[:r*k]
	if r < 32 {
		clear(dst)
	}
	for row := 0; row < r; row++ {
		for col, v := range src[row*k : (row+1)*k] {
			dst[col*32+row] = v
		}
	}
}

// tileMajorBF16 is tileMajor fused with the bf16 to f16 conversion, the
// common case, saving a pass over every weight. It reports whether any
// converted value is not finite; the caller then takes the checked path
// for the error message.
//
// Columns go in blocks of 64, so the 4 KiB of the tile they fill stay in
// L1 while all rows are written into them (a whole tile, 64 KiB and more,
// does not fit).
func (cv *converter) tileMajorBF16(tile, rows []byte, r, k int) (bad bool) {
	tab := cv.bf16ToF16[:1<<16]
	dst, src := u16s(tile)[:k*32], u16s(rows)[:r*k]
	if r < 32 {
		clear(dst)
	}
	var flag uint16
	const block = 64
	for c0 := 0; c0 < k; c0 += block {
		c1 := min(c0+block, k)
		for row := 0; row < r; row++ {
			d := dst[c0*32+row:]
			for j, b := range src[row*k+c0 : row*k+c1] {
				h := tab[b]
				// (h&0x7c00)+0x0400 reaches 0x8000 only for an all-ones exponent.
				flag |= (h&0x7c00 + 0x0400) & 0x8000
				d[j*32] = h
			}
		}
	}
	return flag != 0
}

// elemType is a tensor dtype as a ggml type: safetensors' BF16, F16 and
// F32 are ggml's, and a GGUF tensor's dtype is its ggml type's name in
// capitals ("Q4_K"). ok is false for a dtype this compiler cannot decode.
func elemType(dtype string) (t ggml.Type, ok bool) {
	switch dtype {
	case "BF16":
		return ggml.BF16, true
	case "F16":
		return ggml.F16, true
	case "F32":
		return ggml.F32, true
	}
	t, ok = ggml.Parse(dtype)
	return t, ok && t.Decodable()
}

// rowBytes is the bytes of a row of k elements of dtype (a decodable
// one, whose blocks k is a whole number of: checked with the tensor's
// shape).
func rowBytes(dtype string, k int) int {
	t, _ := elemType(dtype)
	n, _ := t.RowBytes(uint64(k))
	return int(n)
}

// toF32 widens src (elements of dtype) to float32 for quantizing, or
// decodes it as ggml does (a GGUF's block types); the quantizer refuses
// values that are not finite.
func toF32(dst []float32, src []byte, dtype string) error {
	switch dtype {
	case "BF16":
		for i, b := range u16s(src) {
			dst[i] = math.Float32frombits(uint32(b) << 16)
		}
	case "F16":
		for i, b := range u16s(src) {
			dst[i] = float16.Frombits(b).Float32()
		}
	case "F32":
		for i, b := range u32s(src) {
			dst[i] = math.Float32frombits(b)
		}
	default:
		t, ok := elemType(dtype)
		if !ok {
			return fmt.Errorf("dtype %s not supported (BF16, F16, F32, or a GGUF's ggml types)", dtype)
		}
		t.Decode(dst, src)
	}
	return nil
}
