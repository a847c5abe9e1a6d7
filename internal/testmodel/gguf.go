package testmodel

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/x448/float16"
)

// The GGUF conversions of the bundled models (testdata/gguf: the shared
// ones from /work/shared/reference/gguf, and others made by the shared
// peers' converters) are 16 to 27 MB, most of it the token embedding and
// the LM head, which are the bundled model's own: testdata keeps each
// file without them (NAME.rest.gz, the bytes around them) and a note of
// where they go and how they were made (NAME.json), and GGUF rebuilds
// the file, checking it is byte for byte the converted one by its
// SHA-256.

// ggufNote is testdata/gguf/NAME.json.
type ggufNote struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Pieces are the tensors taken out, by increasing offset.
	Pieces []struct {
		Offset int64  `json:"offset"`
		Bytes  int64  `json:"bytes"`
		Type   string `json:"type"`   // "f16", "bf16", or "q8_0": ggml's Q8_0 of the f16 values
		Model  string `json:"model"`  // the bundled model they are the tensor of
		Tensor string `json:"tensor"` // its checkpoint name, by suffix: "embed_tokens.weight", "lm_head.weight"
	} `json:"pieces"`
}

// GGUF returns the path of a rebuilt GGUF file of testdata/gguf
// ("tiny-a-Q8_0") in a directory of the test's.
func GGUF(tb testing.TB, name string) string {
	tb.Helper()
	p, err := rebuildGGUF(tb, name, tb.TempDir())
	if err != nil {
		tb.Fatalf("testdata/gguf/%s: %v", name, err)
	}
	return p
}

func rebuildGGUF(tb testing.TB, name, dir string) (string, error) {
	var note ggufNote
	b, err := os.ReadFile(Testdata(tb, "gguf", name+".json"))
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(b, &note); err != nil {
		return "", err
	}
	rest, err := readGz(Testdata(tb, "gguf", name+".rest.gz"))
	if err != nil {
		return "", err
	}
	file := make([]byte, 0, note.Size)
	var at int64 // bytes of rest used
	for _, e := range note.Pieces {
		vals, err := bf16Tensor(tb, e.Model, e.Tensor)
		if err != nil {
			return "", err
		}
		var data []byte
		switch e.Type {
		case "f16":
			data = make([]byte, 2*len(vals))
			for i, v := range vals {
				binary.LittleEndian.PutUint16(data[2*i:], float16.Fromfloat32(v).Bits())
			}
		case "bf16":
			// The bundled model's bf16 values, as they are.
			data = make([]byte, 2*len(vals))
			for i, v := range vals {
				binary.LittleEndian.PutUint16(data[2*i:], uint16(math.Float32bits(v)>>16))
			}
		case "q8_0":
			// llama-quantize made it from the f16 file: the f16 values.
			for i, v := range vals {
				vals[i] = float16.Fromfloat32(v).Float32()
			}
			data = quantizeQ8_0(vals)
		default:
			return "", fmt.Errorf("%s: type %q", e.Tensor, e.Type)
		}
		gap := e.Offset - int64(len(file))
		if int64(len(data)) != e.Bytes || gap < 0 || at+gap > int64(len(rest)) {
			return "", fmt.Errorf("%s is %d bytes at %d; the note says %d, and the rest is %d bytes", e.Tensor, len(data), e.Offset, e.Bytes, len(rest))
		}
		file = append(append(file, rest[at:at+gap]...), data...)
		at += gap
	}
	file = append(file, rest[at:]...)
	if int64(len(file)) != note.Size {
		return "", fmt.Errorf("rebuilt %d bytes, the note says %d", len(file), note.Size)
	}
	if sum := sha256.Sum256(file); hex.EncodeToString(sum[:]) != note.SHA256 {
		return "", fmt.Errorf("rebuilt with SHA-256 %x, the converted file's is %s", sum, note.SHA256)
	}
	p := filepath.Join(dir, name+".gguf")
	return p, os.WriteFile(p, file, 0o644)
}

// quantizeQ8_0 is ggml's quantize_row_q8_0_ref: per 32 values the f16 of
// max|x| / 127 and the values times its inverse, rounded half away from
// zero.
func quantizeQ8_0(x []float32) []byte {
	out := make([]byte, 0, len(x)/32*34)
	for b := 0; b < len(x); b += 32 {
		var amax float32
		for _, v := range x[b : b+32] {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		out = binary.LittleEndian.AppendUint16(out, float16.Fromfloat32(d).Bits())
		for _, v := range x[b : b+32] {
			out = append(out, byte(int8(math.Round(float64(v*id)))))
		}
	}
	return out
}

// bf16Tensor reads a bundled model's bf16 tensor whose name ends in
// suffix as float32.
func bf16Tensor(tb testing.TB, model, suffix string) ([]float32, error) {
	path := Testdata(tb, model, "model.safetensors")
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		b, err = readGz(path + ".gz")
	}
	if err != nil {
		return nil, err
	}
	if len(b) < 8 {
		return nil, fmt.Errorf("%s: too short", path)
	}
	n := binary.LittleEndian.Uint64(b)
	var hdr map[string]json.RawMessage
	if n > uint64(len(b)-8) || json.Unmarshal(b[8:8+n], &hdr) != nil {
		return nil, fmt.Errorf("%s: not safetensors", path)
	}
	for name, raw := range hdr {
		if !strings.HasSuffix(name, suffix) {
			continue
		}
		var t struct {
			DType   string  `json:"dtype"`
			Offsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &t); err != nil || t.DType != "BF16" || len(t.Offsets) != 2 {
			return nil, fmt.Errorf("%s: %s is not a bf16 tensor", path, name)
		}
		data := b[8+int64(n)+t.Offsets[0] : 8+int64(n)+t.Offsets[1]]
		out := make([]float32, len(data)/2)
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(data[2*i:])) << 16)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: no tensor *%s", path, suffix)
}

func readGz(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return io.ReadAll(zr)
}
