package gguf

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format/ggml"
)

// small is a file of two tensors: a 2x64 f16 matrix and a one-row q8_0
// matrix that GGUF stores as a 1-D tensor.
func small(t *testing.T) ([]KV, []TensorData) {
	t.Helper()
	kv := []KV{
		{Key: "general.architecture", Type: String, Value: "test"},
		{Key: "test.count", Type: Uint32, Value: uint32(7)},
		{Key: "test.list", Type: Array, Elem: Int32, Value: []int32{1, -2, 3}},
		{Key: "test.nested", Type: Array, Elem: Array, Value: []any{[]string{"a"}, []uint8{1, 2}}},
	}
	q8 := make([]byte, 34*2)
	for i := range q8 {
		q8[i] = byte(i)
	}
	q8[0], q8[1], q8[34], q8[35] = 0, 0x3c, 0, 0x38 // d = 1 and 0.5
	return kv, []TensorData{
		{Name: "m", Type: ggml.F16, Dims: []uint64{64, 2}, Data: make([]byte, 2*64*2)},
		{Name: "row", Type: ggml.Q8_0, Dims: []uint64{64}, Data: q8},
	}
}

func writeFile(t *testing.T, kv []KV, ts []TensorData) string {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, kv, ts); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWriteRead(t *testing.T) {
	kv, ts := small(t)
	f, err := Open(writeFile(t, kv, ts))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version != 3 || len(f.KV) != len(kv) || len(f.Tensors) != 2 {
		t.Fatalf("version %d, %d keys, %d tensors", f.Version, len(f.KV), len(f.Tensors))
	}
	if n, ok, err := f.Uint("test.count"); n != 7 || !ok || err != nil {
		t.Errorf("test.count = %d, %v, %v", n, ok, err)
	}
	if l, ok, err := f.Ints("test.list"); !slices.Equal(l, []int64{1, -2, 3}) || !ok || err != nil {
		t.Errorf("test.list = %v, %v, %v", l, ok, err)
	}
	if kv, _ := f.Lookup("test.nested"); kv.TypeName() != "array of array" || len(kv.Value.([]any)) != 2 {
		t.Errorf("test.nested = %#v", kv)
	}
	row, ok := f.Tensor("row")
	if !ok || !slices.Equal(row.Dims, []uint64{64}) || row.Elements() != 64 || row.Offset%DefaultAlignment != 0 {
		t.Fatalf("row: %+v", row)
	}
	if !bytes.Equal(f.Data(row), ts[1].Data) {
		t.Error("row's data differs from what was written")
	}
	got := make([]byte, 10)
	if err := f.ReadAt(row, got, 34); err != nil || !bytes.Equal(got, ts[1].Data[34:44]) {
		t.Errorf("ReadAt: %v", err)
	}
	if err := f.ReadAt(row, got, 60); err == nil {
		t.Error("ReadAt past the tensor's end succeeded")
	}
	vals := make([]float32, 64)
	row.Type.Decode(vals, f.Data(row))
	if vals[0] != 2 || vals[32] != 0.5*36 {
		t.Errorf("decoded %v, %v", vals[0], vals[32])
	}
}

// TestBadFiles: every way a file can disagree with itself is an error
// naming what is wrong.
func TestBadFiles(t *testing.T) {
	kv, ts := small(t)
	var good bytes.Buffer
	if err := Write(&good, kv, ts); err != nil {
		t.Fatal(err)
	}
	g := good.Bytes()
	// row's directory entry: its name's length and bytes, one dimension
	// count, one dimension, then its type.
	entry := bytes.Index(g, append(binary.LittleEndian.AppendUint64(nil, 3), "row"...))
	typeOf := entry + 8 + 3 + 4 + 8
	// m's: its name, two dimensions, then its type.
	mEntry := bytes.Index(g, append(binary.LittleEndian.AppendUint64(nil, 1), "m"...))
	mDims := mEntry + 8 + 1 + 4
	patch := func(off int, v uint32) []byte {
		b := slices.Clone(g)
		binary.LittleEndian.PutUint32(b[off:], v)
		return b
	}
	for _, c := range []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "too short for a GGUF header"},
		{"truncated header", g[:40], "truncated"},
		{"truncated data", g[:len(g)-10], `tensor "row": data [`},
		{"magic", append([]byte("GGML"), g[4:]...), `not a GGUF file: it starts with "GGML"`},
		{"version 1", patch(4, 1), "GGUF version 1 is not supported"},
		{"big-endian", patch(4, 3<<24), "big-endian"},
		{"version 9", patch(4, 9), "GGUF version 9 is not supported"},
		{"unknown type", patch(typeOf, 99), `tensor "row": unknown ggml type 99`},
		{"row not whole blocks", patch(typeOf, uint32(ggml.Q4_K)), `tensor "row": type q4_K stores rows in blocks of 256 values, but a row (dimension 0) has 64`},
		{"size disagrees", patch(typeOf, uint32(ggml.F32)), `tensor "row": data [256, 512) runs past the end`},
		{"overlap", patch(typeOf+4, 0), `tensors "m" and "row" overlap`},
		{"unaligned", patch(typeOf+4, 250), `tensor "row": data offset 250 is not a multiple of the alignment 32`},
		{"huge count", patch(8, 0xffffff), "do not fit"},
		// ggml lays the tensors out one after the other, each padded to
		// the alignment, and refuses a file where they are not: a type or
		// dimensions that give a tensor fewer bytes than it has leave a
		// gap before the next one.
		{"type smaller than its data", patch(mDims+16, uint32(ggml.Q8_0)), `tensor "row": data at offset 256, but the tensors before it end at 160`},
		{"fewer rows than its data", patch(mDims+8, 1), `tensor "row": data at offset 256, but the tensors before it end at 128`},
	} {
		p := filepath.Join(t.TempDir(), "bad.gguf")
		if err := os.WriteFile(p, c.file, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(p)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want an error naming %s with %q", c.name, err, p, c.want)
		}
	}
	for _, c := range []struct {
		name string
		kv   []KV
		want string
	}{
		{"duplicate key", append(slices.Clone(kv), kv[1]), `metadata key "test.count" appears twice`},
		{"bad alignment", append(slices.Clone(kv), KV{Key: "general.alignment", Type: Uint32, Value: uint32(24)}), "general.alignment"},
	} {
		var b bytes.Buffer
		err := Write(&b, c.kv, ts)
		if err == nil {
			p := filepath.Join(t.TempDir(), "bad.gguf")
			os.WriteFile(p, b.Bytes(), 0o644)
			_, err = Open(p)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if err := Write(&bytes.Buffer{}, kv, []TensorData{{Name: "x", Type: ggml.F32, Dims: []uint64{4}, Data: make([]byte, 12)}}); err == nil {
		t.Error("Write took 12 bytes for 4 f32 values")
	}
}

// TestHugeCount: a count that the bytes of a big file (a model's
// weights) could hold, but no GGUF header holds, is refused before
// anything is allocated for it.
func TestHugeCount(t *testing.T) {
	kv, ts := small(t)
	kv = append(kv, KV{Key: "test.many", Type: Array, Elem: String, Value: []string{}})
	var b bytes.Buffer
	if err := Write(&b, kv, ts); err != nil {
		t.Fatal(err)
	}
	g := b.Bytes()
	at := bytes.Index(g, []byte("test.many")) + len("test.many") + 4 + 4
	const size = 300 << 20
	binary.LittleEndian.PutUint64(g[at:], size/8-1024)
	p := filepath.Join(t.TempDir(), "big.gguf")
	if err := os.WriteFile(p, g, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil { // zeros, sparse on disk
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Open(p)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), `metadata key "test.many"`) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "more than a GGUF header") {
		t.Errorf("%v, want an error naming the key and the file", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("%d MB allocated", n>>20)
	}
}

// TestSplit reads a model split in two files from either part, and
// refuses one whose other part is missing.
func TestSplit(t *testing.T) {
	kv, ts := small(t)
	dir := t.TempDir()
	split := func(no int, ts []TensorData, extra ...KV) {
		keys := []KV{{Key: "split.no", Type: Uint16, Value: uint16(no)}, {Key: "split.count", Type: Uint16, Value: uint16(2)}}
		if no == 0 {
			keys = append(append(slices.Clone(kv), keys...), KV{Key: "split.tensors.count", Type: Int32, Value: int32(2)})
		}
		var b bytes.Buffer
		if err := Write(&b, append(keys, extra...), ts); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "m-0000"+string(rune('1'+no))+"-of-00002.gguf"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	split(0, ts[:1])
	split(1, ts[1:])
	for _, p := range []string{"m-00001-of-00002.gguf", "m-00002-of-00002.gguf"} {
		f, err := Open(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		row, ok := f.Tensor("row")
		if len(f.Parts) != 2 || f.Path != filepath.Join(dir, "m-00001-of-00002.gguf") || !ok || row.Part != 1 || !bytes.Equal(f.Data(row), ts[1].Data) {
			t.Errorf("opened from %s: parts %v, row %+v", p, f.Parts, row)
		}
		if n, _, _ := f.Uint("test.count"); n != 7 {
			t.Errorf("opened from %s: the first part's metadata is not read", p)
		}
		f.Close()
	}
	// Parts of two models: the second's keys disagree with the first's.
	for _, c := range []struct {
		extra KV
		want  string
	}{
		{KV{Key: "split.tensors.count", Type: Int32, Value: int32(3)}, `metadata key "split.tensors.count" = 3, but 2 in`},
		{KV{Key: "general.architecture", Type: String, Value: "other"}, `metadata key "general.architecture" = other, but test in`},
	} {
		split(1, ts[1:], c.extra)
		_, err := Open(filepath.Join(dir, "m-00001-of-00002.gguf"))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "m-00002-of-00002.gguf") {
			t.Errorf("a second part with %s: %v, want %q", c.extra.Key, err, c.want)
		}
	}
	// A second part that is no part of a split model.
	var whole bytes.Buffer
	if err := Write(&whole, kv, ts[1:]); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "m-00002-of-00002.gguf"), whole.Bytes(), 0o644)
	if _, err := Open(filepath.Join(dir, "m-00001-of-00002.gguf")); err == nil || !strings.Contains(err.Error(), "m-00002-of-00002.gguf: no split.no key: not a part of a split model") {
		t.Errorf("a second part without split keys: %v", err)
	}
	os.Remove(filepath.Join(dir, "m-00002-of-00002.gguf"))
	if _, err := Open(filepath.Join(dir, "m-00001-of-00002.gguf")); err == nil || !strings.Contains(err.Error(), "m-00002-of-00002.gguf") {
		t.Errorf("a missing part: %v", err)
	}
}

// TestVersion2: a version 2 file, laid out as version 3 is for a
// little-endian machine (version 3 only added big-endian files), reads
// the same.
func TestVersion2(t *testing.T) {
	kv, ts := small(t)
	p := writeFile(t, kv, ts)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(b[4:], 2)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row, ok := f.Tensor("row")
	if f.Version != 2 || len(f.KV) != len(kv) || !ok || !bytes.Equal(f.Data(row), ts[1].Data) {
		t.Errorf("version %d, %d keys, tensor row %v", f.Version, len(f.KV), ok)
	}
}
