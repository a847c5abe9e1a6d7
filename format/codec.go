package format

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// encoder appends little-endian fields; every field but str has a fixed
// width, which is what lets the writer rewrite the header in place.
type encoder struct{ b []byte }

func (e *encoder) u8(v uint8)    { e.b = append(e.b, v) }
func (e *encoder) u32(v uint32)  { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64)  { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) i32(v int32)   { e.u32(uint32(v)) }
func (e *encoder) f32(v float32) { e.u32(math.Float32bits(v)) }
func (e *encoder) f64(v float64) { e.u64(math.Float64bits(v)) }
func (e *encoder) bool(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}
func (e *encoder) str(s string) {
	e.u32(uint32(len(s)))
	e.b = append(e.b, s...)
}

// decoder reads fields with bounds checks; the first error sticks and
// later reads return zero, so parsing code can check once per block.
type decoder struct {
	b   []byte
	off int
	err error
}

var errShort = errors.New("unexpected end of header")

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b)-d.off {
		d.err = fmt.Errorf("%w at byte %d (need %d more)", errShort, d.off, n)
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}

func (d *decoder) u8() uint8 {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}
func (d *decoder) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}
func (d *decoder) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}
func (d *decoder) i32() int32   { return int32(d.u32()) }
func (d *decoder) f32() float32 { return math.Float32frombits(d.u32()) }
func (d *decoder) f64() float64 { return math.Float64frombits(d.u64()) }
func (d *decoder) bool(field string) bool {
	switch v := d.u8(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("%s: boolean byte is %d", field, v)
		return false
	}
}

func (d *decoder) str(field string) string {
	n := d.u32()
	if d.err == nil && n > maxString {
		d.fail("%s: string length %d over the limit %d", field, n, maxString)
	}
	return string(d.take(int(n)))
}

// count reads an element count and rejects one that the remaining bytes
// cannot hold (each element is at least minSize bytes), so no allocation is
// ever sized by an unchecked field.
func (d *decoder) count(field string, minSize int) int {
	n := d.u32()
	if d.err == nil && uint64(n)*uint64(minSize) > uint64(len(d.b)-d.off) {
		d.fail("%s: count %d does not fit in the %d bytes left", field, n, len(d.b)-d.off)
		return 0
	}
	return int(n)
}

func (d *decoder) zero(field string, n int) {
	for _, c := range d.take(n) {
		if c != 0 {
			d.fail("%s: reserved bytes are not zero", field)
			return
		}
	}
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}
