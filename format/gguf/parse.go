package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/qwenc/qwenc/format/ggml"
)

// Magic opens every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the alignment of tensor data when the file has no
// general.alignment key.
const DefaultAlignment = 32

// maxDims is ggml's GGML_MAX_DIMS.
const maxDims = 4

// ValueType is the type of a metadata value.
type ValueType uint32

// The metadata value types, by their numbers in the file.
const (
	Uint8 ValueType = iota
	Int8
	Uint16
	Int16
	Uint32
	Int32
	Float32
	Bool
	String
	Array
	Uint64
	Int64
	Float64
)

var valueTypeNames = [...]string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"}

func (t ValueType) String() string {
	if int64(t) < int64(len(valueTypeNames)) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("value type %d", uint32(t))
}

// size is the bytes of a value of a fixed-size type, 0 for strings and
// arrays.
func (t ValueType) size() int {
	switch t {
	case Uint8, Int8, Bool:
		return 1
	case Uint16, Int16:
		return 2
	case Uint32, Int32, Float32:
		return 4
	case Uint64, Int64, Float64:
		return 8
	}
	return 0
}

// KV is one metadata key and its value: a Go value of its type (uint8,
// int8, uint16, int16, uint32, int32, float32, bool, string, uint64,
// int64 or float64), or for an array a slice of its elements' type
// ([]string, []int32, ...; []any for an array of arrays).
type KV struct {
	Key   string
	Type  ValueType
	Elem  ValueType // an array's elements' type
	Value any
}

// TypeName is the value's type as a reader would write it: "u32",
// "array of string".
func (kv *KV) TypeName() string {
	if kv.Type == Array {
		return "array of " + kv.Elem.String()
	}
	return kv.Type.String()
}

// Tensor is one entry of a file's directory.
type Tensor struct {
	Name string
	Type ggml.Type
	// Dims are the dimensions in ggml's order: Dims[0] is the length of a
	// row, the elements that are consecutive in the file.
	Dims []uint64
	// Offset is where the data starts in its part (the file of a split
	// model that holds it), Size its bytes.
	Offset, Size int64
	Part         int
}

// Elements is the number of values the tensor holds.
func (t *Tensor) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Shape is the dimensions in row-major order, outermost first, as
// safetensors and numpy give them: Dims reversed.
func (t *Tensor) Shape() []uint64 {
	s := slices.Clone(t.Dims)
	slices.Reverse(s)
	return s
}

// header is what one file's bytes say before any tensor is read.
type header struct {
	version   uint32
	alignment uint64
	kv        []KV
	tensors   []Tensor // offsets relative to dataStart
	dataStart int64
}

// maxHeader bounds a file's header, its metadata and tensor directory:
// the largest GGUF's (a vocabulary of a few hundred thousand tokens, a
// directory of a few thousand tensors) are tens of MB. Counts and lengths
// are checked against the bytes left of it, so that a hostile count in a
// file of many GB (a model's) cannot make the parser allocate more than a
// few times this.
const maxHeader = 128 << 20

// reader reads little-endian values from a file's bytes, keeping the
// first error (a read past the end) so a parser checks once per entry.
type reader struct {
	b   []byte
	off int
	err error
	// capped: b is the first maxHeader bytes of a longer file.
	capped bool
}

var errTruncated = errors.New("truncated")

// beyond is the error of a read of n bytes past the end of r.b.
func (r *reader) beyond(n uint64) error {
	if r.capped {
		return fmt.Errorf("%d bytes wanted at byte %d: more than a GGUF header holds (%d MiB)", n, r.off, maxHeader>>20)
	}
	return fmt.Errorf("%w: %d bytes wanted at byte %d of %d", errTruncated, n, r.off, len(r.b))
}

func (r *reader) take(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.off) {
		r.err = r.beyond(n)
		return nil
	}
	p := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return p
}

func (r *reader) u8() uint8 {
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if p := r.take(2); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if p := r.take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if p := r.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (r *reader) str() string { return string(r.take(r.u64())) }

// count reads an element count and checks that at least min bytes per
// element remain, so that a hostile count cannot make the parser
// allocate more than the file's size.
func (r *reader) count(minBytes int) uint64 {
	n := r.u64()
	if r.err == nil && minBytes > 0 && n > uint64(len(r.b)-r.off)/uint64(minBytes) {
		if r.capped {
			r.err = fmt.Errorf("%d entries of at least %d bytes each: more than a GGUF header holds (%d MiB)", n, minBytes, maxHeader>>20)
		} else {
			r.err = fmt.Errorf("%w: %d entries of at least %d bytes each do not fit in the %d bytes left", errTruncated, n, minBytes, len(r.b)-r.off)
		}
	}
	return n
}

// maxArrayDepth bounds arrays of arrays.
const maxArrayDepth = 4

// value reads one value of type t.
func (r *reader) value(t ValueType, depth int) (v any, elem ValueType, err error) {
	switch t {
	case Uint8:
		return r.u8(), 0, nil
	case Int8:
		return int8(r.u8()), 0, nil
	case Uint16:
		return r.u16(), 0, nil
	case Int16:
		return int16(r.u16()), 0, nil
	case Uint32:
		return r.u32(), 0, nil
	case Int32:
		return int32(r.u32()), 0, nil
	case Float32:
		return math.Float32frombits(r.u32()), 0, nil
	case Uint64:
		return r.u64(), 0, nil
	case Int64:
		return int64(r.u64()), 0, nil
	case Float64:
		return math.Float64frombits(r.u64()), 0, nil
	case Bool:
		b := r.u8()
		if r.err == nil && b > 1 {
			return nil, 0, fmt.Errorf("bool value %d is neither 0 nor 1", b)
		}
		return b == 1, 0, nil
	case String:
		return r.str(), 0, nil
	case Array:
		if depth >= maxArrayDepth {
			return nil, 0, fmt.Errorf("arrays nested more than %d deep", maxArrayDepth)
		}
		elem = ValueType(r.u32())
		v, err := r.array(elem, depth)
		return v, elem, err
	}
	return nil, 0, fmt.Errorf("unknown value type %d", uint32(t))
}

// array reads an array's count and elements of type t.
func (r *reader) array(t ValueType, depth int) (any, error) {
	minBytes := t.size()
	switch t {
	case String, Array:
		minBytes = 8 // a length or an element type and a count
	case Uint8, Int8, Uint16, Int16, Uint32, Int32, Float32, Bool, Uint64, Int64, Float64:
	default:
		return nil, fmt.Errorf("array of unknown value type %d", uint32(t))
	}
	n := r.count(minBytes)
	if r.err != nil {
		return nil, nil
	}
	switch t {
	case Uint8:
		return slices.Clone(r.take(n)), nil
	case Int8:
		return fixed(r, n, 1, func(p []byte) int8 { return int8(p[0]) }), nil
	case Uint16:
		return fixed(r, n, 2, binary.LittleEndian.Uint16), nil
	case Int16:
		return fixed(r, n, 2, func(p []byte) int16 { return int16(binary.LittleEndian.Uint16(p)) }), nil
	case Uint32:
		return fixed(r, n, 4, binary.LittleEndian.Uint32), nil
	case Int32:
		return fixed(r, n, 4, func(p []byte) int32 { return int32(binary.LittleEndian.Uint32(p)) }), nil
	case Float32:
		return fixed(r, n, 4, func(p []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(p)) }), nil
	case Uint64:
		return fixed(r, n, 8, binary.LittleEndian.Uint64), nil
	case Int64:
		return fixed(r, n, 8, func(p []byte) int64 { return int64(binary.LittleEndian.Uint64(p)) }), nil
	case Float64:
		return fixed(r, n, 8, func(p []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(p)) }), nil
	case Bool:
		p := r.take(n)
		out := make([]bool, len(p))
		for i, b := range p {
			if b > 1 {
				return nil, fmt.Errorf("element %d: bool value %d is neither 0 nor 1", i, b)
			}
			out[i] = b == 1
		}
		return out, nil
	case String:
		out := make([]string, n)
		for i := range out {
			out[i] = r.str()
		}
		return out, nil
	}
	out := make([]any, n) // arrays of arrays
	for i := range out {
		v, _, err := r.value(Array, depth+1)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}

func fixed[T any](r *reader, n uint64, size int, get func([]byte) T) []T {
	p := r.take(n * uint64(size))
	if p == nil {
		return nil
	}
	out := make([]T, n)
	for i := range out {
		out[i] = get(p[i*size:])
	}
	return out
}

// parseHeader reads a file's header, metadata and tensor directory from
// its bytes and checks every tensor's type, dimensions and data against
// them.
func parseHeader(b []byte) (*header, error) {
	r := &reader{b: b}
	if len(b) > maxHeader {
		r.b, r.capped = b[:maxHeader], true
	}
	magic := r.take(4)
	if r.err != nil {
		return nil, fmt.Errorf("%d bytes: too short for a GGUF header (truncated, or not a GGUF file)", len(b))
	}
	if string(magic) != Magic {
		return nil, fmt.Errorf("not a GGUF file: it starts with %q, not %q", magic, Magic)
	}
	h := &header{version: r.u32(), alignment: DefaultAlignment}
	switch {
	case r.err != nil:
		return nil, fmt.Errorf("%d bytes: too short for a GGUF header (truncated)", len(b))
	case h.version == 1:
		return nil, errors.New("GGUF version 1 is not supported (versions 2 and 3 are): convert the model again with a current llama.cpp")
	case h.version&0xffff == 0 && h.version>>16 != 0:
		return nil, fmt.Errorf("GGUF version %#08x: a big-endian file, which this reader does not read", h.version)
	case h.version != 2 && h.version != 3:
		return nil, fmt.Errorf("GGUF version %d is not supported (versions 2 and 3 are)", h.version)
	}
	// A tensor's directory entry takes at least 32 bytes (a name length,
	// one dimension, a type and an offset), a key 13.
	nTensors := r.count(32)
	nKV := r.count(13)
	if r.err != nil {
		return nil, fmt.Errorf("header: %w", r.err)
	}
	keys := map[string]bool{}
	for i := range nKV {
		key := r.str()
		t := ValueType(r.u32())
		if r.err != nil {
			return nil, fmt.Errorf("metadata entry %d of %d: %w", i, nKV, r.err)
		}
		v, elem, err := r.value(t, 0)
		if err == nil {
			err = r.err
		}
		if err != nil {
			return nil, fmt.Errorf("metadata key %q: %w", key, err)
		}
		if keys[key] {
			return nil, fmt.Errorf("metadata key %q appears twice", key)
		}
		keys[key] = true
		h.kv = append(h.kv, KV{Key: key, Type: t, Elem: elem, Value: v})
	}
	for _, kv := range h.kv {
		if kv.Key != "general.alignment" {
			continue
		}
		a, ok := kv.Value.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("metadata key \"general.alignment\" = %v (%s): want a power of two, as a u32", kv.Value, kv.TypeName())
		}
		h.alignment = uint64(a)
	}
	names := map[string]bool{}
	for i := range nTensors {
		var t Tensor
		t.Name = r.str()
		nDims := r.u32()
		if r.err == nil && (nDims < 1 || nDims > maxDims) {
			return nil, fmt.Errorf("tensor %q: %d dimensions (1 to %d)", t.Name, nDims, maxDims)
		}
		for range nDims {
			t.Dims = append(t.Dims, r.u64())
		}
		t.Type = ggml.Type(r.u32())
		off := r.u64()
		if r.err != nil {
			return nil, fmt.Errorf("tensor directory entry %d of %d: %w", i, nTensors, r.err)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("tensor %q appears twice", t.Name)
		}
		names[t.Name] = true
		size, err := tensorSize(&t)
		if err != nil {
			return nil, err
		}
		if off%h.alignment != 0 {
			return nil, fmt.Errorf("tensor %q: data offset %d is not a multiple of the alignment %d", t.Name, off, h.alignment)
		}
		if off > math.MaxInt64/2 {
			return nil, fmt.Errorf("tensor %q: data offset %d out of range", t.Name, off)
		}
		t.Offset, t.Size = int64(off), int64(size)
		h.tensors = append(h.tensors, t)
	}
	h.dataStart = int64(alignUp(uint64(r.off), h.alignment))
	dataSize := int64(len(b)) - h.dataStart
	for _, t := range h.tensors {
		if t.Offset > dataSize || t.Size > dataSize-t.Offset {
			return nil, fmt.Errorf("tensor %q: data [%d, %d) runs past the end of the file's %d bytes of tensor data (truncated file?)", t.Name, t.Offset, t.Offset+t.Size, max(dataSize, 0))
		}
	}
	if err := checkOverlaps(h.tensors); err != nil {
		return nil, err
	}
	if err := checkLayout(h.tensors, int64(h.alignment)); err != nil {
		return nil, err
	}
	for i := range h.tensors {
		h.tensors[i].Offset += h.dataStart
	}
	return h, nil
}

// checkLayout checks that the tensors' data follow one another in the
// directory's order, each padded to the alignment, as ggml writes them
// and requires (gguf_init_from_file refuses any other offset): a type or
// dimensions that give a tensor fewer bytes than its data, which no other
// check sees, leave a gap before the next tensor.
func checkLayout(ts []Tensor, align int64) error {
	end := int64(0)
	for i, t := range ts {
		if t.Offset != end {
			if i == 0 {
				return fmt.Errorf("tensor %q: data at offset %d, but the first tensor's data starts at 0", t.Name, t.Offset)
			}
			return fmt.Errorf("tensor %q: data at offset %d, but the tensors before it end at %d: the type or dimensions of tensor %q disagree with the size of its data", t.Name, t.Offset, end, ts[i-1].Name)
		}
		end = int64(alignUp(uint64(t.Offset+t.Size), uint64(align)))
	}
	return nil
}

// tensorSize checks a tensor's type and dimensions and returns its
// bytes.
func tensorSize(t *Tensor) (uint64, error) {
	if !t.Type.Known() {
		return 0, fmt.Errorf("tensor %q: unknown ggml type %d (this build reads %s)", t.Name, uint32(t.Type), knownTypes())
	}
	elems := uint64(1)
	for _, d := range t.Dims {
		if d > 1<<40 || (d > 0 && elems > (1<<50)/d) {
			return 0, fmt.Errorf("tensor %q: dimensions %v out of range", t.Name, t.Dims)
		}
		elems *= d
	}
	row, ok := t.Type.RowBytes(t.Dims[0])
	if !ok {
		return 0, fmt.Errorf("tensor %q: type %s stores rows in blocks of %d values, but a row (dimension 0) has %d", t.Name, t.Type, t.Type.BlockSize(), t.Dims[0])
	}
	if t.Dims[0] == 0 {
		return 0, nil
	}
	return row * (elems / t.Dims[0]), nil
}

// knownTypes lists the ggml types the table holds, for an error.
func knownTypes() string {
	var names []string
	for t := range ggml.Type(64) {
		if t.Known() {
			names = append(names, t.String())
		}
	}
	return strings.Join(names, ", ")
}

// checkOverlaps refuses tensors whose data share bytes.
func checkOverlaps(ts []Tensor) error {
	sorted := make([]*Tensor, 0, len(ts))
	for i := range ts {
		if ts[i].Size > 0 {
			sorted = append(sorted, &ts[i])
		}
	}
	slices.SortFunc(sorted, func(a, b *Tensor) int {
		if a.Offset != b.Offset {
			return int(a.Offset - b.Offset)
		}
		return strings.Compare(a.Name, b.Name)
	})
	for i := 1; i < len(sorted); i++ {
		if p, t := sorted[i-1], sorted[i]; p.Offset+p.Size > t.Offset {
			return fmt.Errorf("tensors %q and %q overlap", p.Name, t.Name)
		}
	}
	return nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }
