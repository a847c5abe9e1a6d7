package format

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
)

// ValueType is the type of a value in the header's key/value block
// (SPEC.md, "Values"): a scalar type, or Array with a scalar type.
type ValueType uint8

const (
	TypeU8     ValueType = 1
	TypeU32    ValueType = 2
	TypeI32    ValueType = 3
	TypeU64    ValueType = 4
	TypeF32    ValueType = 5
	TypeF64    ValueType = 6
	TypeBool   ValueType = 7
	TypeString ValueType = 8
	// Array marks an array of the scalar type in the low bits.
	Array ValueType = 0x80
)

// Bounds of the key/value block, checked before anything is allocated.
const (
	// MaxEntries bounds the number of keys (a header has about 40).
	MaxEntries = 1 << 16
	// maxKey bounds a key's length.
	maxKey = 128
)

var typeNames = [...]string{TypeU8: "u8", TypeU32: "u32", TypeI32: "i32", TypeU64: "u64", TypeF32: "f32", TypeF64: "f64", TypeBool: "bool", TypeString: "string"}

func (t ValueType) scalar() ValueType { return t &^ Array }

// known reports whether t is a scalar type or an array of one.
func (t ValueType) known() bool {
	s := t.scalar()
	return t&^Array == s && s >= TypeU8 && s <= TypeString
}

func (t ValueType) String() string {
	if !t.known() {
		return fmt.Sprintf("type(%d)", uint8(t))
	}
	if t&Array != 0 {
		return typeNames[t.scalar()] + "[]"
	}
	return typeNames[t]
}

// Entry is one key and its value. Value holds one of uint8, uint32,
// int32, uint64, float32, float64, bool or string, or a slice of one of
// them (an array), its Go type giving its ValueType; or, for a value
// type this build does not know, a RawValue.
type Entry struct {
	Key   string
	Value any
}

// RawValue is a value of a type this build does not know (a newer writer's),
// kept as its bytes.
type RawValue struct {
	Type  ValueType
	Bytes []byte
}

func (r RawValue) String() string { return fmt.Sprintf("(%s, %d bytes)", r.Type, len(r.Bytes)) }

// TypeOf is the ValueType of a value of one of Entry's Go types.
func TypeOf(v any) (ValueType, bool) {
	switch v := v.(type) {
	case RawValue:
		return v.Type, true
	case uint8:
		return TypeU8, true
	case uint32:
		return TypeU32, true
	case int32:
		return TypeI32, true
	case uint64:
		return TypeU64, true
	case float32:
		return TypeF32, true
	case float64:
		return TypeF64, true
	case bool:
		return TypeBool, true
	case string:
		return TypeString, true
	case []uint8:
		return Array | TypeU8, true
	case []uint32:
		return Array | TypeU32, true
	case []int32:
		return Array | TypeI32, true
	case []uint64:
		return Array | TypeU64, true
	case []float32:
		return Array | TypeF32, true
	case []float64:
		return Array | TypeF64, true
	case []bool:
		return Array | TypeBool, true
	case []string:
		return Array | TypeString, true
	}
	return 0, false
}

// validKey reports whether k is a key as SPEC.md defines them: dotted
// segments of lowercase letters, digits and underscores, the first
// starting with a letter, at most 128 bytes.
func validKey(k string) bool {
	if len(k) == 0 || len(k) > maxKey || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for i, seg := range strings.Split(k, ".") {
		if seg == "" && i > 0 {
			return false
		}
		for _, c := range []byte(seg) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
				return false
			}
		}
	}
	return true
}

// entries encodes a key/value block (entries in increasing key order):
// the count, then each entry: its key, its value type, the size of its
// value and the value (SPEC.md, "Key/value block").
func (e *encoder) entries(es []Entry) {
	e.u32(uint32(len(es)))
	for _, x := range es {
		t, _ := TypeOf(x.Value)
		e.str(x.Key)
		e.u8(uint8(t))
		at := len(e.b)
		e.u32(0)
		e.value(x.Value)
		binary.LittleEndian.PutUint32(e.b[at:], uint32(len(e.b)-at-4))
	}
}

// value encodes a value of one of Entry's Go types; an array is its
// element count and its elements.
func (e *encoder) value(v any) {
	switch v := v.(type) {
	case RawValue:
		e.b = append(e.b, v.Bytes...)
	case uint8:
		e.u8(v)
	case uint32:
		e.u32(v)
	case int32:
		e.i32(v)
	case uint64:
		e.u64(v)
	case float32:
		e.f32(v)
	case float64:
		e.f64(v)
	case bool:
		e.bool(v)
	case string:
		e.str(v)
	case []uint8:
		elems(e, v)
	case []uint32:
		elems(e, v)
	case []int32:
		elems(e, v)
	case []uint64:
		elems(e, v)
	case []float32:
		elems(e, v)
	case []float64:
		elems(e, v)
	case []bool:
		elems(e, v)
	case []string:
		elems(e, v)
	}
}

func elems[T any](e *encoder, v []T) {
	e.u32(uint32(len(v)))
	for _, x := range v {
		e.value(x)
	}
}

// entries decodes a key/value block: every count and length is bounded
// by the bytes left before anything is allocated, keys must be valid and
// strictly increasing (so none is listed twice), and a value of a known
// type must fill its size exactly. A value of an unknown type is kept as
// a RawValue: its size lets the reader step over it.
func (d *decoder) entries() []Entry {
	n := d.count("keys", 10) // the smallest entry: a 1-byte key, a type, a size, a u8
	if d.err == nil && n > MaxEntries {
		d.fail("keys: %d entries, at most %d", n, MaxEntries)
	}
	if d.err != nil {
		return nil
	}
	es := make([]Entry, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		k := d.str("key")
		if d.err != nil {
			break
		}
		switch {
		case !validKey(k):
			d.fail("key %q: not a valid key", k)
		case i > 0 && k <= es[i-1].Key:
			d.fail("key %q: after %q, out of order or listed twice", k, es[i-1].Key)
		}
		t := ValueType(d.u8())
		size := d.u32()
		if d.err == nil && uint64(size) > uint64(len(d.b)-d.off) {
			d.fail("key %q: a value of %d bytes, past the end of the header", k, size)
		}
		b := d.take(int(size))
		if d.err != nil {
			break
		}
		if !t.known() {
			es = append(es, Entry{k, RawValue{t, b}})
			continue
		}
		vd := &decoder{b: b}
		v := vd.value(t)
		switch {
		case errors.Is(vd.err, errShort):
			d.fail("key %q: a %s does not fit in its %d bytes", k, t, len(b))
		case vd.err != nil:
			d.fail("key %q: %w", k, vd.err)
		case vd.off != len(b):
			d.fail("key %q: a %s takes %d of its %d bytes", k, t, vd.off, len(b))
		}
		es = append(es, Entry{k, v})
	}
	return es
}

// scalarSize is the smallest encoding of a scalar type.
var scalarSize = [...]int{TypeU8: 1, TypeU32: 4, TypeI32: 4, TypeU64: 8, TypeF32: 4, TypeF64: 8, TypeBool: 1, TypeString: 4}

// value decodes a value of a known type t.
func (d *decoder) value(t ValueType) any {
	if d.err != nil {
		return nil
	}
	if t&Array != 0 {
		s := t.scalar()
		n := d.count("array", scalarSize[s])
		switch s {
		case TypeU8:
			return array(d, n, d.u8)
		case TypeU32:
			return array(d, n, d.u32)
		case TypeI32:
			return array(d, n, d.i32)
		case TypeU64:
			return array(d, n, d.u64)
		case TypeF32:
			return array(d, n, d.f32)
		case TypeF64:
			return array(d, n, d.f64)
		case TypeBool:
			return array(d, n, func() bool { return d.bool("value") })
		case TypeString:
			return array(d, n, func() string { return d.str("value") })
		}
	}
	switch t {
	case TypeU8:
		return d.u8()
	case TypeU32:
		return d.u32()
	case TypeI32:
		return d.i32()
	case TypeU64:
		return d.u64()
	case TypeF32:
		return d.f32()
	case TypeF64:
		return d.f64()
	case TypeBool:
		return d.bool("value")
	case TypeString:
		return d.str("value")
	}
	return nil
}

func array[T any](d *decoder, n int, elem func() T) []T {
	if d.err != nil {
		return nil
	}
	a := make([]T, n)
	for i := range a {
		a[i] = elem()
	}
	return a
}

// FormatValue prints a value for a person: strings quoted, arrays in
// brackets.
func FormatValue(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case []string:
		q := make([]string, len(v))
		for i, s := range v {
			q[i] = fmt.Sprintf("%q", s)
		}
		return "[" + strings.Join(q, " ") + "]"
	}
	return fmt.Sprintf("%v", v)
}

// JSONValue is a value as encoding/json can write it: non-finite floats,
// which JSON has no numbers for, as the strings "NaN", "+Inf" and "-Inf";
// a value of a type this build does not know as its bytes in hex.
func JSONValue(v any) any {
	num := func(f float64) any {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Sprint(f)
		}
		return f
	}
	switch v := v.(type) {
	case RawValue:
		return hex.EncodeToString(v.Bytes)
	case float32:
		return num(float64(v))
	case float64:
		return num(v)
	case []float32:
		a := make([]any, len(v))
		for i, f := range v {
			a[i] = num(float64(f))
		}
		return a
	case []float64:
		a := make([]any, len(v))
		for i, f := range v {
			a[i] = num(f)
		}
		return a
	case []uint8:
		// not base64, as encoding/json writes a []byte
		a := make([]int, len(v))
		for i, b := range v {
			a[i] = int(b)
		}
		return a
	}
	return v
}
