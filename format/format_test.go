package format_test

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
)

// smallFile compiles a small synthetic model and returns the file's bytes.
func smallFile(t *testing.T) (string, []byte) {
	t.Helper()
	s := synth.Shape{ModelType: "qwen2", Hidden: 24, Intermediate: 40, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 12,
		Vocab: 280, MaxPositions: 64, DType: "BF16", EOS: synth.MiniEOS}
	out := synthtest.Compile(t, s, 8)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return out, b
}

func TestHeaderRoundTrip(t *testing.T) {
	path, _ := smallFile(t)
	f, err := format.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h2, err := format.UnmarshalHeader(format.MarshalHeader(f.Header))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Header, h2) {
		t.Fatal("header changed through a marshal round trip")
	}
	// The model kind block (version 4).
	f.Header.Config.Embedding, f.Header.Config.Append = true, []int32{151643, 7}
	h3, err := format.UnmarshalHeader(format.MarshalHeader(f.Header))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Header, h3) {
		t.Fatal("an embedding model's header changed through a marshal round trip")
	}
}

// Every truncation of the file, and a flip of every byte of the preamble
// and header, must give an error from ReadHeader, never a panic.
func TestDamagedHeadersAreRefused(t *testing.T) {
	_, b := smallFile(t)
	hdrEnd := int(format.DataStart(0)) // at least the preamble and the header's first page
	for n := 0; n < len(b); n += max(1, n/7) {
		if _, err := format.ReadHeader(bytes.NewReader(b[:n]), int64(n)); err == nil {
			t.Fatalf("file truncated to %d of %d bytes accepted", n, len(b))
		}
	}
	for i := 0; i < hdrEnd && i < len(b); i++ {
		c := bytes.Clone(b)
		c[i] ^= 0x20
		_, err := format.ReadHeader(bytes.NewReader(c), int64(len(c)))
		if err == nil && i < 48 {
			t.Fatalf("flipped preamble byte %d accepted", i)
		}
		if err == nil && i >= format.PreambleSize && isHeaderByte(b, i) {
			t.Fatalf("flipped header byte %d accepted", i)
		}
	}
}

func isHeaderByte(b []byte, i int) bool {
	p, err := format.ParsePreamble(b)
	return err == nil && i < format.PreambleSize+int(p.HeaderSize)
}

func TestVerifyCatchesFlippedWeight(t *testing.T) {
	path, b := smallFile(t)
	f, err := format.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := f.Header.Section("layers.0.down_proj")
	off := s.Offset + s.Size/2
	f.Close()
	b[off] ^= 1
	os.WriteFile(path, b, 0o644)
	f, err = format.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Verify(); err == nil || !bytes.Contains([]byte(err.Error()), []byte("layers.0.down_proj")) {
		t.Fatalf("Verify = %v, want a checksum error naming layers.0.down_proj", err)
	}
}

// TestDTypeCodes pins the dtype codes and names of SPEC.md's directory
// table; the weight types' come from package wtype.
func TestDTypeCodes(t *testing.T) {
	for code, name := range []string{"dtype(0)", "f16", "f32", "u8", "q8", "q4", "q6", "dtype(7)"} {
		d := format.DType(code)
		if d.String() != name || d.Known() != (code >= 1 && code <= 6) || d.Quantized() != (code >= 4 && code <= 6) {
			t.Errorf("dtype %d: %q known %v quantized %v, want %q", code, d, d.Known(), d.Quantized(), name)
		}
	}
	if format.F16 != 1 || format.F32 != 2 || format.Bytes != 3 || format.Q8 != 4 || format.Q4 != 5 || format.Q6 != 6 {
		t.Error("a dtype constant moved from its code")
	}
}

// TestKindCodes pins the kind codes and names of SPEC.md's kind table and
// what each admits.
func TestKindCodes(t *testing.T) {
	names := []string{"kind(0)", "embedding", "projection", "norm", "bias", "router", "experts", "lm_head", "bytes", "conv", "param", "kind(11)"}
	for code, name := range names {
		k := format.Kind(code)
		if k.String() != name || k.Known() != (code >= 1 && code <= 10) {
			t.Errorf("kind %d: %q known %v, want %q", code, k, k.Known(), name)
		}
		if p, ok := format.ParseKind(name); ok != k.Known() || (ok && p != k) {
			t.Errorf("ParseKind(%q) = %v, %v", name, p, ok)
		}
	}
	for _, c := range []struct {
		kind   format.Kind
		dtype  format.DType
		layout format.Layout
		rank   int
		ok     bool
	}{
		{format.KindEmbedding, format.F16, format.RowMajor, 2, true},
		{format.KindEmbedding, format.Q8, format.TileMajor, 2, true},
		{format.KindEmbedding, format.F16, format.TileMajor, 2, false},
		{format.KindEmbedding, format.Q4, format.RowMajor, 2, false},
		{format.KindProjection, format.Q4, format.TileMajor, 2, true},
		{format.KindProjection, format.F16, format.RowMajor, 2, false},
		{format.KindProjection, format.F32, format.TileMajor, 2, false},
		{format.KindProjection, format.F16, format.TileMajor, 3, false},
		{format.KindExperts, format.Q8, format.TileMajor, 3, true},
		{format.KindExperts, format.Q8, format.TileMajor, 2, false},
		{format.KindRouter, format.F16, format.TileMajor, 2, true},
		{format.KindLMHead, format.Q8, format.TileMajor, 2, true},
		{format.KindNorm, format.F32, format.RowMajor, 1, true},
		{format.KindNorm, format.F16, format.RowMajor, 1, false},
		{format.KindNorm, format.F32, format.RowMajor, 2, false},
		{format.KindBias, format.F32, format.RowMajor, 1, true},
		{format.KindParam, format.F32, format.RowMajor, 1, true},
		{format.KindConv, format.F32, format.RowMajor, 2, true},
		{format.KindConv, format.F32, format.RowMajor, 1, false},
		{format.KindBytes, format.Bytes, format.Raw, 1, true},
		{format.KindBytes, format.F32, format.RowMajor, 1, false},
		{format.KindNone, format.F32, format.RowMajor, 1, false},
		{format.Kind(11), format.F32, format.RowMajor, 1, false},
	} {
		if got := c.kind.Admits(c.dtype, c.layout, c.rank); got != c.ok {
			t.Errorf("%s admits %s %s rank %d: %v, want %v", c.kind, c.dtype, c.layout, c.rank, got, c.ok)
		}
	}
	for k := format.Kind(0); k < 12; k++ {
		if want := k == format.KindEmbedding || k == format.KindProjection || k == format.KindRouter || k == format.KindExperts || k == format.KindLMHead; k.Matrix() != want {
			t.Errorf("%s: Matrix() = %v", k, k.Matrix())
		}
	}
}

// TestVerifyCatchesPaddingAfterHeader: the zeros between the end of the
// header and the first 4096-byte boundary are padding like the rest, and
// Verify checks them.
func TestVerifyCatchesPaddingAfterHeader(t *testing.T) {
	path, b := smallFile(t)
	p, err := format.ParsePreamble(b)
	if err != nil {
		t.Fatal(err)
	}
	end, start := format.PreambleSize+int(p.HeaderSize), int(format.DataStart(int(p.HeaderSize)))
	if end == start {
		t.Fatalf("the header ends on the boundary at %d: no padding to damage", end)
	}
	for _, off := range []int{end, start - 1} {
		d := bytes.Clone(b)
		d[off] = 1
		if err := os.WriteFile(path, d, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := format.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		err = f.Verify()
		f.Close()
		if err == nil || !strings.Contains(err.Error(), "after the header") {
			t.Errorf("byte %d (header ends at %d, first section at %d) set: Verify = %v, want an error about the padding after the header", off, end, start, err)
		}
	}
}

// TestVerifyWithoutSections: a file the format accepts with no sections
// at all, ending with its header, is verified without reading past its
// end (which architecture a file needs sections for is package arch's
// to say).
func TestVerifyWithoutSections(t *testing.T) {
	path, _ := smallFile(t)
	f, err := format.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	h := *f.Header
	f.Close()
	h.Sections = nil
	hb := format.MarshalHeader(&h)
	b := append(format.MarshalPreamble(hb, uint64(format.PreambleSize+len(hb))), hb...)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err = format.Open(path); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Verify(); err != nil {
		t.Errorf("Verify of a file of no sections: %v", err)
	}
}
