package compiler

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/kernels"
)

func compileAs(t *testing.T, model string, typ format.DType) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.qbin")
	if _, err := Compile(context.Background(), model, Options{Output: out, MaxPrefill: 64, NoSync: true, Type: typ}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestQuantizedTypes checks which dtype every matrix gets: the file's type
// where k is a multiple of 32, f16 elsewhere; in q4 files the head at q6,
// with the v and down projections of use_more_bits layers, an untied
// embedding at q8; a tied embedding
// stored once (in the head), an untied one tile-major. Every quantized
// section decodes to the checkpoint within the scheme's error.
func TestQuantizedTypes(t *testing.T) {
	s := synth.Shape{ModelType: "qwen3", Hidden: 64, Intermediate: 100, Layers: 9, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 300, MaxPositions: 512, Tied: true, DType: "BF16", Seed: 7, EOS: synth.MiniEOS}
	for _, tied := range []bool{true, false} {
		s.Tied = tied
		model := writeModel(t, s)
		ck, err := OpenCheckpoint(model)
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		for _, typ := range []format.DType{format.Q8, format.Q4} {
			f, err := format.Open(compileAs(t, model, typ))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			_, hasEmbed := f.Header.Section(format.SecEmbed)
			if hasEmbed == tied {
				t.Errorf("%s tied=%v: embed_tokens present = %v", typ, tied, hasEmbed)
			}
			for _, sec := range f.Header.Sections {
				if sec.Layout != format.TileMajor {
					continue
				}
				var l int
				var what string
				hf := hfNames(t, f.Header)[sec.Name]
				if n, _ := fmtSscanLayer(sec.Name, &l, &what); n != 2 {
					what = sec.Name
				}
				want := typ
				moreBits := l < 1 || l >= 7 || (l-1)%3 == 2 // llama.cpp's use_more_bits for 9 layers
				switch {
				case sec.Shape[1]%32 != 0: // down_proj: k = 100
					want = format.F16
				case typ == format.Q4 && what == format.SecLMHead:
					want = format.Q6
				case typ == format.Q4 && what == format.SecEmbed:
					want = format.Q8
				case typ == format.Q4 && (what == "v_proj" || what == "down_proj") && moreBits:
					want = format.Q6
				}
				if sec.DType != want {
					t.Errorf("%s tied=%v: section %s is %s, want %s", typ, tied, sec.Name, sec.DType, want)
				}
				if !sec.DType.Quantized() {
					continue
				}
				checkDequantized(t, f, &sec, readTensor(t, ck, hf))
			}
		}
	}
}

// checkDequantized compares a quantized section with the checkpoint: the
// relative RMS error of q8 is about 0.5%, of q4 about 8%.
func checkDequantized(t *testing.T, f *format.File, sec *format.Section, want []float32) {
	t.Helper()
	qt, _ := sec.DType.Weight()
	b, _ := f.Bytes(sec.Name)
	n, k := int(sec.Shape[0]), int(sec.Shape[1])
	tb := qt.TileBytes(k)
	row := make([]float32, k)
	var e2, w2 float64
	for r := range n {
		kernels.Traits(qt).DequantizeRow(row, b[r/32*tb:(r/32+1)*tb], r%32, k)
		for c, v := range row {
			d := float64(v - want[r*k+c])
			e2 += d * d
			w2 += float64(want[r*k+c]) * float64(want[r*k+c])
		}
	}
	rel := math.Sqrt(e2 / w2)
	if lim := map[format.DType]float64{format.Q8: 0.01, format.Q4: 0.12, format.Q6: 0.04}[sec.DType]; rel > lim {
		t.Errorf("section %s (%s): relative RMS error %.4f > %.2f", sec.Name, sec.DType, rel, lim)
	}
}

func TestQuantizedDeterministic(t *testing.T) {
	s := smallShape()
	s.Hidden, s.Intermediate, s.HeadDim = 64, 96, 16
	model := writeModel(t, s)
	for _, typ := range []format.DType{format.Q8, format.Q4} {
		prev := runtime.GOMAXPROCS(1)
		a := compileAs(t, model, typ)
		runtime.GOMAXPROCS(4)
		b := compileAs(t, model, typ)
		runtime.GOMAXPROCS(prev)
		ab, _ := os.ReadFile(a)
		bb, _ := os.ReadFile(b)
		if !bytes.Equal(ab, bb) {
			t.Fatalf("%s: two compiles of the same checkpoint differ", typ)
		}
		f, err := format.Open(a)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Verify(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

func TestQuantizedRefusesUnknownType(t *testing.T) {
	model := writeModel(t, smallShape())
	_, err := Compile(context.Background(), model, Options{Output: filepath.Join(t.TempDir(), "x.qbin"), MaxPrefill: 8, Type: format.Bytes})
	if err == nil {
		t.Fatal("a u8 weight type was accepted")
	}
}
