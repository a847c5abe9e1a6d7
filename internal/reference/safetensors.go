package reference

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
)

// tensor is one checkpoint tensor, widened to float64 (exactly: every
// BF16, F16 and F32 value is a float64).
type tensor struct {
	shape []int
	data  []float64
}

// readTensors reads every tensor of the checkpoint in dir: model.safetensors,
// or the shards that model.safetensors.index.json names.
func readTensors(dir string) (map[string]tensor, error) {
	files := []string{"model.safetensors"}
	idx, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	switch {
	case err == nil:
		var index struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(idx, &index); err != nil {
			return nil, fmt.Errorf("reference: model.safetensors.index.json: %w", err)
		}
		files = files[:0]
		for _, f := range index.WeightMap {
			if !slices.Contains(files, f) {
				files = append(files, f)
			}
		}
		slices.Sort(files)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("reference: %w", err)
	}
	all := map[string]tensor{}
	for _, f := range files {
		if err := readSafetensors(filepath.Join(dir, f), all); err != nil {
			return nil, err
		}
	}
	return all, nil
}

// readSafetensors adds the tensors of one safetensors file to into.
func readSafetensors(path string, into map[string]tensor) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reference: %w", err)
	}
	if len(b) < 8 {
		return fmt.Errorf("reference: %s: %d bytes, too short for a safetensors header", path, len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > uint64(len(b)-8) {
		return fmt.Errorf("reference: %s: header of %d bytes in a file of %d", path, n, len(b))
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &header); err != nil {
		return fmt.Errorf("reference: %s: header: %w", path, err)
	}
	data := b[8+n:]
	for name, raw := range header {
		if name == "__metadata__" {
			continue
		}
		var h struct {
			DType   string   `json:"dtype"`
			Shape   []int    `json:"shape"`
			Offsets [2]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &h); err != nil {
			return fmt.Errorf("reference: %s: tensor %s: %w", path, name, err)
		}
		if _, dup := into[name]; dup {
			return fmt.Errorf("reference: %s: tensor %s is stored twice", path, name)
		}
		t, err := decode(h.DType, h.Shape, data, h.Offsets)
		if err != nil {
			return fmt.Errorf("reference: %s: tensor %s: %w", path, name, err)
		}
		into[name] = t
	}
	return nil
}

func decode(dtype string, shape []int, data []byte, off [2]int64) (tensor, error) {
	size := map[string]int64{"BF16": 2, "F16": 2, "F32": 4}[dtype]
	if size == 0 {
		return tensor{}, fmt.Errorf("dtype %s (want BF16, F16 or F32)", dtype)
	}
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return tensor{}, fmt.Errorf("shape %v", shape)
		}
		n *= int64(d)
	}
	if off[0] < 0 || off[1] > int64(len(data)) || off[1]-off[0] != n*size {
		return tensor{}, fmt.Errorf("data_offsets %v for %d %s values in a data area of %d bytes", off, n, dtype, len(data))
	}
	raw := data[off[0]:off[1]]
	t := tensor{shape: shape, data: make([]float64, n)}
	for i := range t.data {
		switch dtype {
		case "BF16":
			t.data[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16))
		case "F16":
			t.data[i] = halfToFloat(binary.LittleEndian.Uint16(raw[2*i:]))
		case "F32":
			t.data[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
		}
	}
	return t, nil
}

// halfToFloat decodes an IEEE 754 half, written out here rather than taken
// from the float16 package the compiler uses, to stay independent of it.
func halfToFloat(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, frac := int(h>>10)&0x1f, float64(h&0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24) // subnormal
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	}
	return sign * math.Ldexp(1024+frac, exp-25)
}
