package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/qwenc/qwenc/format/ggml"
)

// TensorData is a tensor to write: its directory entry and its bytes.
type TensorData struct {
	Name string
	Type ggml.Type
	Dims []uint64 // ggml's order: Dims[0] is a row
	Data []byte
}

// Write writes a GGUF file of version 3 with the default alignment (or
// general.alignment's, when kv sets it) to w: kv's keys in order, then
// the tensors' directory and data, each tensor's data aligned. A value's
// Go type must be the one its KV.Type reads as (KV), and a tensor's data
// the size its type and dimensions give.
func Write(w io.Writer, kv []KV, tensors []TensorData) error {
	bw := bufio.NewWriter(w)
	le := binary.LittleEndian
	var buf []byte
	put := func(b ...byte) { buf = append(buf, b...) }
	u32 := func(v uint32) { buf = le.AppendUint32(buf, v) }
	u64 := func(v uint64) { buf = le.AppendUint64(buf, v) }
	str := func(s string) { u64(uint64(len(s))); buf = append(buf, s...) }
	buf = append(buf, Magic...)
	u32(3)
	u64(uint64(len(tensors)))
	u64(uint64(len(kv)))
	align := uint64(DefaultAlignment)
	for _, e := range kv {
		if e.Key == "general.alignment" {
			a, ok := e.Value.(uint32)
			if !ok || a == 0 || a&(a-1) != 0 {
				return fmt.Errorf("general.alignment %v: want a power of two, as a u32", e.Value)
			}
			align = uint64(a)
		}
		str(e.Key)
		u32(uint32(e.Type))
		if e.Type == Array {
			u32(uint32(e.Elem))
		}
		var err error
		if buf, err = appendValue(buf, e.Type, e.Elem, e.Value); err != nil {
			return fmt.Errorf("key %q: %w", e.Key, err)
		}
	}
	off := uint64(0)
	offsets := make([]uint64, len(tensors))
	for i, t := range tensors {
		tt := Tensor{Name: t.Name, Type: t.Type, Dims: t.Dims}
		size, err := tensorSize(&tt)
		if err != nil {
			return err
		}
		if uint64(len(t.Data)) != size {
			return fmt.Errorf("tensor %q: %d bytes of data, its type and dimensions need %d", t.Name, len(t.Data), size)
		}
		str(t.Name)
		u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			u64(d)
		}
		u32(uint32(t.Type))
		u64(off)
		offsets[i] = off
		off = alignUp(off+size, align)
	}
	for uint64(len(buf))%align != 0 {
		put(0)
	}
	if _, err := bw.Write(buf); err != nil {
		return err
	}
	pos := uint64(0)
	for i, t := range tensors {
		for ; pos < offsets[i]; pos++ {
			bw.WriteByte(0)
		}
		if _, err := bw.Write(t.Data); err != nil {
			return err
		}
		pos += uint64(len(t.Data))
	}
	return bw.Flush()
}

// appendValue appends a value of type t (an array's elements of elem).
func appendValue(buf []byte, t, elem ValueType, v any) ([]byte, error) {
	le := binary.LittleEndian
	bad := fmt.Errorf("a %T value for type %s", v, t)
	switch t {
	case Uint8:
		x, ok := v.(uint8)
		if !ok {
			return nil, bad
		}
		return append(buf, x), nil
	case Int8:
		x, ok := v.(int8)
		if !ok {
			return nil, bad
		}
		return append(buf, byte(x)), nil
	case Uint16:
		x, ok := v.(uint16)
		if !ok {
			return nil, bad
		}
		return le.AppendUint16(buf, x), nil
	case Int16:
		x, ok := v.(int16)
		if !ok {
			return nil, bad
		}
		return le.AppendUint16(buf, uint16(x)), nil
	case Uint32:
		x, ok := v.(uint32)
		if !ok {
			return nil, bad
		}
		return le.AppendUint32(buf, x), nil
	case Int32:
		x, ok := v.(int32)
		if !ok {
			return nil, bad
		}
		return le.AppendUint32(buf, uint32(x)), nil
	case Float32:
		x, ok := v.(float32)
		if !ok {
			return nil, bad
		}
		return le.AppendUint32(buf, math.Float32bits(x)), nil
	case Uint64:
		x, ok := v.(uint64)
		if !ok {
			return nil, bad
		}
		return le.AppendUint64(buf, x), nil
	case Int64:
		x, ok := v.(int64)
		if !ok {
			return nil, bad
		}
		return le.AppendUint64(buf, uint64(x)), nil
	case Float64:
		x, ok := v.(float64)
		if !ok {
			return nil, bad
		}
		return le.AppendUint64(buf, math.Float64bits(x)), nil
	case Bool:
		x, ok := v.(bool)
		if !ok {
			return nil, bad
		}
		if x {
			return append(buf, 1), nil
		}
		return append(buf, 0), nil
	case String:
		x, ok := v.(string)
		if !ok {
			return nil, bad
		}
		buf = le.AppendUint64(buf, uint64(len(x)))
		return append(buf, x...), nil
	case Array:
		return appendArray(buf, elem, v)
	}
	return nil, fmt.Errorf("unknown value type %d", uint32(t))
}

func appendArray(buf []byte, elem ValueType, v any) ([]byte, error) {
	var items []any
	switch v := v.(type) {
	case []uint8:
		items = anys(v)
	case []int8:
		items = anys(v)
	case []uint16:
		items = anys(v)
	case []int16:
		items = anys(v)
	case []uint32:
		items = anys(v)
	case []int32:
		items = anys(v)
	case []float32:
		items = anys(v)
	case []uint64:
		items = anys(v)
	case []int64:
		items = anys(v)
	case []float64:
		items = anys(v)
	case []bool:
		items = anys(v)
	case []string:
		items = anys(v)
	case []any:
		items = v
	default:
		return nil, fmt.Errorf("a %T value for an array", v)
	}
	buf = binary.LittleEndian.AppendUint64(buf, uint64(len(items)))
	for i, x := range items {
		var err error
		sub := ValueType(0)
		if elem == Array {
			// An element array's own elements are typed by its Go type.
			sub = elemOf(x)
			buf = binary.LittleEndian.AppendUint32(buf, uint32(sub))
		}
		if buf, err = appendValue(buf, elem, sub, x); err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
	}
	return buf, nil
}

func anys[T any](v []T) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = x
	}
	return out
}

// elemOf is the element type of a Go slice an array value holds.
func elemOf(v any) ValueType {
	switch v.(type) {
	case []uint8:
		return Uint8
	case []int8:
		return Int8
	case []uint16:
		return Uint16
	case []int16:
		return Int16
	case []uint32:
		return Uint32
	case []int32:
		return Int32
	case []float32:
		return Float32
	case []uint64:
		return Uint64
	case []int64:
		return Int64
	case []float64:
		return Float64
	case []bool:
		return Bool
	case []string:
		return String
	}
	return Array
}
