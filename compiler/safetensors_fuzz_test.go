package compiler

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/qwenc/qwenc/internal/synth"
)

// stFile builds a whole small safetensors file (zero data) with the
// synthetic header writer the test checkpoints use.
func stFile(tb testing.TB, ts []synth.Tensor, dtype string) []byte {
	tb.Helper()
	hdr, data, err := synth.SafetensorsHeader(ts, dtype)
	if err != nil {
		tb.Fatal(err)
	}
	return append(hdr, make([]byte, data)...)
}

// stWithJSON is a safetensors file whose header is the given JSON text and
// whose data area is dataSize zero bytes.
func stWithJSON(js string, dataSize int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	return append(append(b, js...), make([]byte, dataSize)...)
}

// FuzzSafetensorsHeader: any bytes, read as a whole safetensors file, give
// an error or tensors that each lie inside the data area, match their
// dtype and shape, and overlap no other tensor.
func FuzzSafetensorsHeader(f *testing.F) {
	small := []synth.Tensor{{Name: "a", Shape: []int{2, 3}}, {Name: "b", Shape: []int{4}}, {Name: "c", Shape: []int{1, 1, 2}}}
	f.Add(stFile(f, small, "BF16"))
	f.Add(stFile(f, small, "F32"))
	f.Add(stFile(f, []synth.Tensor{{Name: "model.norm.weight", Shape: []int{8}}}, "F16"))
	// The real header of the test checkpoint with only part of its data.
	hdr, _, err := synth.SafetensorsHeader(smallShape().Tensors(), "BF16")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(append(bytes.Clone(hdr), make([]byte, 256)...))
	f.Add(hdr[:len(hdr)/2])
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, '{'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add(stWithJSON(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"z":{"dtype":"U8","shape":[0],"data_offsets":[2,2]},"b":{"dtype":"U8","shape":[4],"data_offsets":[3,7]}}`, 8))
	f.Add(stWithJSON(`{"a":{"dtype":"I64","shape":[1099511627776,1099511627776],"data_offsets":[0,8]}}`, 8))
	f.Add(stWithJSON(`{"__metadata__":{"format":"pt"},"x":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}`, 8))
	f.Add(stWithJSON(`{"x":null,"y":[],"z":{"dtype":"BF16","shape":[-1],"data_offsets":[0,-2]}}`, 8))
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, err := ParseSafetensorsHeader(bytes.NewReader(b), int64(len(b)), "fuzz")
		if err != nil {
			return
		}
		n := int64(binary.LittleEndian.Uint64(b))
		dataStart, fileSize := 8+n, int64(len(b))
		var nonEmpty []*TensorInfo
		for name, ti := range ts {
			es := int64(dtypeSizes[ti.DType])
			elems := int64(1)
			for _, d := range ti.Shape {
				elems *= int64(d)
			}
			switch {
			case ti.Name != name || ti.File != "fuzz":
				t.Fatalf("tensor %q: name %q, file %q", name, ti.Name, ti.File)
			case es == 0:
				t.Fatalf("tensor %q: dtype %q accepted", name, ti.DType)
			case ti.Offset < dataStart || ti.Size < 0 || ti.Offset+ti.Size > fileSize:
				t.Fatalf("tensor %q: [%d, +%d) outside the data area [%d, %d)", name, ti.Offset, ti.Size, dataStart, fileSize)
			case elems*es != ti.Size:
				t.Fatalf("tensor %q: %s %v is %d bytes, size %d", name, ti.DType, ti.Shape, elems*es, ti.Size)
			}
			if ti.Size > 0 {
				nonEmpty = append(nonEmpty, ti)
			}
		}
		slices.SortFunc(nonEmpty, func(a, b *TensorInfo) int { return int(a.Offset - b.Offset) })
		for i := 1; i < len(nonEmpty); i++ {
			if p, q := nonEmpty[i-1], nonEmpty[i]; p.Offset+p.Size > q.Offset {
				t.Fatalf("tensors %q [%d, +%d) and %q [%d, +%d) overlap", p.Name, p.Offset, p.Size, q.Name, q.Offset, q.Size)
			}
		}
	})
}
