package compiler

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/qwenc/qwenc/format"
)

// maxSafetensorsHeader is the header limit the safetensors format itself
// sets (100 MB); a larger length field means a damaged or hostile file.
const maxSafetensorsHeader = 100 << 20

// TensorInfo is one tensor of a safetensors file.
type TensorInfo struct {
	Name   string
	DType  string // "BF16", "F16", "F32", ...
	Shape  []int
	Offset int64 // absolute offset of the data in the file
	Size   int64
	File   string
	part   int // a GGUF's: which file of a split model holds it
}

// ElemSize returns the byte size of the dtype, or 0 for one this compiler
// does not read.
func ElemSize(dtype string) int {
	switch dtype {
	case "BF16", "F16":
		return 2
	case "F32":
		return 4
	}
	return 0
}

// dtypeSizes covers every safetensors dtype so sizes can be checked even for
// tensors the compiler never reads.
var dtypeSizes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}

// ParseSafetensorsHeader reads and checks the header of a safetensors file
// of the given size: a JSON object of tensors whose byte ranges lie inside
// the data area, match dtype and shape, and do not overlap.
func ParseSafetensorsHeader(r io.ReaderAt, fileSize int64, name string) (map[string]*TensorInfo, error) {
	var lenBuf [8]byte
	if fileSize < 8 {
		return nil, fmt.Errorf("%s: %d bytes, too short for a safetensors header", name, fileSize)
	}
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > maxSafetensorsHeader || n > uint64(fileSize-8) {
		return nil, fmt.Errorf("%s: header length %d exceeds the file (%d bytes) or the 100 MB limit: truncated or not safetensors", name, n, fileSize)
	}
	hdr := make([]byte, n)
	if _, err := r.ReadAt(hdr, 8); err != nil {
		return nil, fmt.Errorf("%s: read header: %w", name, err)
	}
	return parseSafetensorsJSON(hdr, fileSize-8-int64(n), 8+int64(n), name)
}

func parseSafetensorsJSON(hdr []byte, dataSize, dataStart int64, name string) (map[string]*TensorInfo, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(hdr))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s: header is not a JSON object: %w", name, err)
	}
	tensors := make(map[string]*TensorInfo, len(raw))
	for tname, msg := range raw {
		if tname == "__metadata__" {
			continue
		}
		var e struct {
			DType       string  `json:"dtype"`
			Shape       []int64 `json:"shape"`
			DataOffsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, fmt.Errorf("%s: tensor %q: %w", name, tname, err)
		}
		es, ok := dtypeSizes[e.DType]
		if !ok {
			return nil, fmt.Errorf("%s: tensor %q: unknown dtype %q", name, tname, e.DType)
		}
		if len(e.DataOffsets) != 2 {
			return nil, fmt.Errorf("%s: tensor %q: data_offsets has %d values, want 2", name, tname, len(e.DataOffsets))
		}
		b, end := e.DataOffsets[0], e.DataOffsets[1]
		if b < 0 || end < b || end > dataSize {
			return nil, fmt.Errorf("%s: tensor %q: data_offsets [%d, %d) outside the %d-byte data area (truncated file?)", name, tname, b, end, dataSize)
		}
		elems := int64(1)
		shape := make([]int, len(e.Shape))
		for i, d := range e.Shape {
			if d < 0 || d > 1<<40 || (d > 0 && elems > (1<<50)/d) {
				return nil, fmt.Errorf("%s: tensor %q: shape %v out of range", name, tname, e.Shape)
			}
			elems *= d
			shape[i] = int(d)
		}
		if elems*int64(es) != end-b {
			return nil, fmt.Errorf("%s: tensor %q: %s %v needs %d bytes, data_offsets give %d", name, tname, e.DType, e.Shape, elems*int64(es), end-b)
		}
		tensors[tname] = &TensorInfo{Name: tname, DType: e.DType, Shape: shape, Offset: dataStart + b, Size: end - b, File: name}
	}
	// Empty tensors occupy no bytes and are left out: between two others
	// they would hide an overlap from the neighbour-only check below.
	sorted := make([]*TensorInfo, 0, len(tensors))
	for _, t := range tensors {
		if t.Size > 0 {
			sorted = append(sorted, t)
		}
	}
	slices.SortFunc(sorted, func(a, b *TensorInfo) int {
		if a.Offset != b.Offset {
			return int(a.Offset - b.Offset)
		}
		return strings.Compare(a.Name, b.Name) // same error for the same file
	})
	for i := 1; i < len(sorted); i++ {
		if p, t := sorted[i-1], sorted[i]; p.Offset+p.Size > t.Offset {
			return nil, fmt.Errorf("%s: tensors %q and %q overlap", name, p.Name, t.Name)
		}
	}
	return tensors, nil
}

// openSafetensors opens one file and parses its header.
func openSafetensors(path string) (*os.File, map[string]*TensorInfo, error) {
	f, err := format.OpenRegular(path)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	ts, err := ParseSafetensorsHeader(f, st.Size(), path)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, ts, nil
}
