package gguf_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qwenc/qwenc/format/ggml"
	"github.com/qwenc/qwenc/format/gguf"
	"github.com/qwenc/qwenc/internal/testmodel"
)

// zooExpected is testdata/gguf/zoo_expected.json: where each tensor's
// values, as ggml's own to_float decoded them, are in zoo_expected.f32.
type zooExpected struct {
	Tensors []struct {
		Name     string   `json:"name"`
		Type     string   `json:"type"`
		GGMLType uint32   `json:"ggml_type"`
		Ne       []uint64 `json:"ne"`
		NBytes   int64    `json:"nbytes"`
		Offset   int      `json:"offset"`
		Count    int      `json:"count"`
	} `json:"tensors"`
}

func readZoo(t *testing.T) (*gguf.File, zooExpected, []float32) {
	t.Helper()
	f, err := gguf.Open(testmodel.Testdata(t, "gguf", "zoo.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var exp zooExpected
	b, err := os.ReadFile(testmodel.Testdata(t, "gguf", "zoo_expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &exp); err != nil {
		t.Fatal(err)
	}
	gz, err := os.Open(testmodel.Testdata(t, "gguf", "zoo_expected.f32.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer gz.Close()
	zr, err := gzip.NewReader(gz)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]float32, len(raw)/4)
	for i := range vals {
		vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return f, exp, vals
}

// TestZooDecodesAsGGML decodes every tensor of zoo.gguf, one per ggml
// type and shape quantized by ggml itself, and compares each value, bit
// for bit, with what ggml's to_float gave for it.
func TestZooDecodesAsGGML(t *testing.T) {
	f, exp, vals := readZoo(t)
	if len(exp.Tensors) != len(f.Tensors) {
		t.Fatalf("%d tensors in the file, %d expected", len(f.Tensors), len(exp.Tensors))
	}
	types := map[ggml.Type]int{}
	for i, e := range exp.Tensors {
		tn := &f.Tensors[i]
		if tn.Name != e.Name || uint32(tn.Type) != e.GGMLType || tn.Type.String() != e.Type || !slices.Equal(tn.Dims, e.Ne) || tn.Size != e.NBytes {
			t.Fatalf("tensor %d: %s %s %v %d bytes, expected %s %s %v %d bytes", i, tn.Name, tn.Type, tn.Dims, tn.Size, e.Name, e.Type, e.Ne, e.NBytes)
		}
		got := make([]float32, tn.Elements())
		tn.Type.Decode(got, f.Data(tn))
		want := vals[e.Offset : e.Offset+e.Count]
		bad := 0
		for j := range want {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				if bad < 3 {
					t.Errorf("%s: value %d = %v (%08x), ggml gives %v (%08x)", e.Name, j, got[j], math.Float32bits(got[j]), want[j], math.Float32bits(want[j]))
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d values differ", e.Name, bad, len(want))
		}
		types[tn.Type]++
	}
	// Every type the issue names is in the file.
	for _, typ := range []ggml.Type{ggml.F32, ggml.F16, ggml.BF16, ggml.Q8_0, ggml.Q4_0, ggml.Q4_1, ggml.Q5_0, ggml.Q5_1,
		ggml.Q2_K, ggml.Q3_K, ggml.Q4_K, ggml.Q5_K, ggml.Q6_K, ggml.IQ2_S, ggml.IQ3_XXS, ggml.IQ3_S, ggml.IQ4_NL, ggml.IQ4_XS,
		ggml.TQ1_0, ggml.TQ2_0, ggml.MXFP4} {
		if types[typ] == 0 {
			t.Errorf("no %s tensor checked", typ)
		}
	}
}

// TestZooMetadata reads zoo.gguf's keys of every value type.
func TestZooMetadata(t *testing.T) {
	f, _, _ := readZoo(t)
	if f.Version != 3 || f.Alignment != gguf.DefaultAlignment {
		t.Errorf("version %d, alignment %d", f.Version, f.Alignment)
	}
	arch, err := f.Arch()
	if err != nil || arch != "zoo" {
		t.Errorf("architecture %q, %v", arch, err)
	}
	check := func(key string, want any) {
		t.Helper()
		kv, ok := f.Lookup(key)
		if !ok {
			t.Errorf("%s missing", key)
			return
		}
		if !equalValue(kv.Value, want) {
			t.Errorf("%s = %#v (%s), want %#v", key, kv.Value, kv.TypeName(), want)
		}
	}
	check("zoo.seed", uint64(1))
	check("zoo.pi", float32(math.Pi))
	check("zoo.flag", true)
	check("zoo.minus_one", int32(-1))
	if n, ok, err := f.Float("zoo.pi"); !ok || err != nil || n != float64(float32(math.Pi)) {
		t.Errorf("Float(zoo.pi) = %v, %v, %v", n, ok, err)
	}
	if _, _, err := f.Uint("zoo.minus_one"); err == nil {
		t.Error("Uint(zoo.minus_one) took a negative value")
	}
	if _, _, err := gguf.Get[string](f, "zoo.seed"); err == nil {
		t.Error("Get[string](zoo.seed) took a u64")
	}
	shapes, ok, err := f.Ints("zoo.shapes")
	if !ok || err != nil || len(shapes) == 0 {
		t.Errorf("zoo.shapes: %v, %v, %v", shapes, ok, err)
	}
	types, ok, err := gguf.Get[[]string](f, "zoo.types")
	if !ok || err != nil || !slices.Contains(types, "iq3_s") {
		t.Errorf("zoo.types: %v, %v, %v", types, ok, err)
	}
}

func equalValue(a, b any) bool {
	if fa, ok := a.(float32); ok {
		fb, ok := b.(float32)
		return ok && math.Float32bits(fa) == math.Float32bits(fb)
	}
	return a == b
}

// TestZooOneRow: a one-row matrix, which GGUF stores as a 1-D tensor, of
// every type is read and decoded as that row of the matrix was: each
// matrix's first row written alone, read back, decoded bit for bit as
// ggml decoded it.
func TestZooOneRow(t *testing.T) {
	f, exp, vals := readZoo(t)
	var ts []gguf.TensorData
	var want [][]float32
	for i, e := range exp.Tensors {
		tn := &f.Tensors[i]
		if !tn.Type.Decodable() || len(tn.Dims) != 2 {
			continue
		}
		row, ok := tn.Type.RowBytes(tn.Dims[0])
		if !ok {
			t.Fatalf("%s: rows of %d are not whole blocks", tn.Name, tn.Dims[0])
		}
		ts = append(ts, gguf.TensorData{Name: tn.Name + ".row0", Type: tn.Type, Dims: tn.Dims[:1], Data: f.Data(tn)[:row]})
		want = append(want, vals[e.Offset:e.Offset+int(tn.Dims[0])])
	}
	p := filepath.Join(t.TempDir(), "rows.gguf")
	var b bytes.Buffer
	if err := gguf.Write(&b, []gguf.KV{{Key: "general.architecture", Type: gguf.String, Value: "zoo"}}, ts); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for i := range ts {
		tn, ok := g.Tensor(ts[i].Name)
		if !ok || len(tn.Dims) != 1 || tn.Elements() != uint64(len(want[i])) {
			t.Fatalf("%s: %+v", ts[i].Name, tn)
		}
		got := make([]float32, tn.Elements())
		tn.Type.Decode(got, g.Data(tn))
		for j := range got {
			if math.Float32bits(got[j]) != math.Float32bits(want[i][j]) {
				t.Errorf("%s: value %d = %v, ggml gives %v", tn.Name, j, got[j], want[i][j])
				break
			}
		}
	}
	if len(ts) < 70 {
		t.Errorf("%d rows checked", len(ts))
	}
}
