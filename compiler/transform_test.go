package compiler

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/arch"
	"github.com/qwenc/qwenc/format/wtype"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/kernels"
	"github.com/x448/float16"
)

// runWriteTensor converts one section as a compile does and returns its
// bytes.
func runWriteTensor(t *testing.T, ck *Checkpoint, s *section) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	w := &sectionWriter{w: bufio.NewWriter(&buf)}
	slots := make([]*blockSlot, 2*runtime.GOMAXPROCS(0))
	for i := range slots {
		slots[i] = &blockSlot{}
	}
	err := writeTensor(context.Background(), ck, newConverter(), w, s, slots)
	if err == nil {
		err = w.w.Flush()
	}
	return buf.Bytes(), err
}

// checkpointF32 reads a whole checkpoint tensor as f32, row-major.
func checkpointF32(t *testing.T, ck *Checkpoint, ti *TensorInfo) []float32 {
	t.Helper()
	b := make([]byte, ti.Size)
	if err := ck.ReadAt(ti, b, 0); err != nil {
		t.Fatal(err)
	}
	v := make([]float32, int(ti.Size)/ElemSize(ti.DType))
	if err := toF32(v, b, ti.DType); err != nil {
		t.Fatal(err)
	}
	return v
}

// transformed applies tr to one source matrix as its definition says:
// out[r][c] = Values(src[Row(r)][Col(c)]).
func transformed(src []float32, tr *arch.Transform, rows, k int) []float32 {
	out := make([]float32, rows*k)
	for r := range rows {
		sr := r
		if tr.Row != nil {
			sr = tr.Row(r)
		}
		for c := range k {
			sc := c
			if tr.Col != nil {
				sc = tr.Col(c)
			}
			out[r*k+c] = src[sr*k+sc]
		}
	}
	if tr.Values != nil {
		for i := range out {
			tr.Values(out[i : i+1])
		}
	}
	return out
}

// encode is a transformed matrix [rows, k] in a section's dtype and
// layout, element by element: f16 through x448/float16 (round to nearest
// even, as every f16 of a file), quantized types through the kernels'
// encoder tile by tile, f32 as it is.
func encode(t *testing.T, m []float32, dt format.DType, layout format.Layout, rows, k int) []byte {
	t.Helper()
	if layout != format.TileMajor {
		out := make([]byte, 0, len(m)*dt.Size())
		for _, v := range m {
			if dt == format.F16 {
				out = binary.LittleEndian.AppendUint16(out, float16.Fromfloat32(v).Bits())
			} else {
				out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
			}
		}
		return out
	}
	wt, _ := dt.Weight()
	if wt == wtype.F16 {
		out := make([]byte, 2*format.TileMajorElems(rows, k))
		for r := range rows {
			for c := range k {
				binary.LittleEndian.PutUint16(out[2*format.TileMajorIndex(r, c, k):], float16.Fromfloat32(m[r*k+c]).Bits())
			}
		}
		return out
	}
	tb := wt.TileBytes(k)
	out := make([]byte, format.Tiles(rows)*tb)
	for t0 := 0; t0 < rows; t0 += format.TileRows {
		r := min(format.TileRows, rows-t0)
		if err := kernels.Traits(wt).QuantizeTile(out[t0/format.TileRows*tb:][:tb], m[t0*k:(t0+r)*k], r, k); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestTransformsWhileStreaming: a section whose architecture transforms
// its values (rows read from elsewhere, columns permuted, values changed)
// gets exactly what the transform's definition gives, in every dtype and
// layout and for stacked experts, though the compiler reads it in blocks
// of rows; a checkpoint shape the transform names is found; and a value
// the transform makes non-finite fails the compile, naming the tensor.
func TestTransformsWhileStreaming(t *testing.T) {
	s := synth.Shape{ModelType: "qwen3_moe", Hidden: 64, Intermediate: 96, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 32,
		Vocab: 300, MaxPositions: 64, DType: "BF16", Seed: 9, EOS: synth.MiniEOS,
		Experts: 3, ExpertsPerToken: 1, MoEIntermediate: 64}
	ck, err := OpenCheckpoint(writeModel(t, s))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	reverse := func(n int) func(int) int { return func(i int) int { return n - 1 - i } }
	// An expert's [64, 64] matrices are read as 8 heads of two
	// interleaved blocks of 4 rows, as Qwen3.5's q_proj is.
	const hd = 4
	cases := []struct {
		name   string
		hf     []string
		shape  []uint64
		kind   format.Kind
		dtypes []format.DType
		tr     arch.Transform
	}{
		{"query half, columns reversed, 1 + w", []string{"model.layers.0.mlp.experts.0.gate_proj.weight"}, []uint64{32, 64}, format.KindProjection,
			[]format.DType{format.F16, format.Q8, format.Q4},
			arch.Transform{SrcShape: []uint64{64, 64}, Row: arch.HeadPart(hd, 2, 0), Col: reverse(64), Values: arch.OnePlus}},
		{"gate half of every expert", []string{"model.layers.0.mlp.experts.0.up_proj.weight", "model.layers.0.mlp.experts.1.up_proj.weight",
			"model.layers.0.mlp.experts.2.up_proj.weight"}, []uint64{3, 32, 64}, format.KindExperts,
			[]format.DType{format.F16, format.Q8},
			arch.Transform{SrcShape: []uint64{64, 64}, Row: arch.HeadPart(hd, 2, 1)}},
		{"heads reordered, -exp", []string{"model.layers.0.input_layernorm.weight"}, []uint64{64}, format.KindParam,
			[]format.DType{format.F32},
			arch.Transform{Row: arch.HeadRows(8, 16, 2, arch.GroupedToTiled(4, 16)), Values: arch.NegExp}},
		{"conv rows reversed", []string{"model.layers.0.self_attn.k_proj.weight"}, []uint64{32, 64}, format.KindConv,
			[]format.DType{format.F32},
			arch.Transform{Row: reverse(32)}},
	}
	for _, c := range cases {
		tensor := arch.Tensor{Section: "x", HF: c.hf, Kind: c.kind, Shape: c.shape}
		if err := c.tr.Check(&tensor); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		srcs, err := checkpointTensors(ck, &tensor, &c.tr)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		rows, k := int(c.shape[0]), 1
		if len(c.shape) >= 2 {
			rows, k = int(c.shape[len(c.shape)-2]), int(c.shape[len(c.shape)-1])
		}
		for _, dt := range c.dtypes {
			layout := format.TileMajor
			if dt == format.F32 {
				layout = format.RowMajor
			}
			sec := section{Section: format.Section{Name: "x", Kind: c.kind, DType: dt, Layout: layout, Shape: c.shape}, tr: c.tr, srcs: srcs}
			sec.Size, _ = format.ExpectedSize(dt, layout, c.shape)
			got, err := runWriteTensor(t, ck, &sec)
			if err != nil {
				t.Fatalf("%s %s: %v", c.name, dt, err)
			}
			var want []byte
			for _, src := range srcs {
				want = append(want, encode(t, transformed(checkpointF32(t, ck, src), &c.tr, rows, k), dt, layout, rows, k)...)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s %s: %d bytes differ from the transform's definition (%d)", c.name, dt, len(got), len(want))
			}
		}
	}

	// A conv1d weight is [C, 1, K] in the checkpoint: a transform naming
	// that shape finds a [C, K] one only if it is that shape.
	conv := arch.Tensor{Section: "x", HF: []string{"model.layers.0.self_attn.k_proj.weight"}, Kind: format.KindConv, Shape: []uint64{32, 64}}
	_, err = checkpointTensors(ck, &conv, &arch.Transform{SrcShape: []uint64{32, 1, 64}})
	if err == nil || !strings.Contains(err.Error(), "shape [32 64], config.json implies [32 1 64]") {
		t.Errorf("a checkpoint shape other than the transform's: %v", err)
	}

	huge := arch.Transform{Values: func(v []float32) {
		for i := range v {
			v[i] *= 1e38 // beyond f16, and for all but the smallest beyond f32
			v[i] *= 1e38
		}
	}}
	for _, dt := range []format.DType{format.F16, format.F32} {
		layout, shape, hf := format.TileMajor, []uint64{32, 64}, "model.layers.0.self_attn.k_proj.weight"
		if dt == format.F32 {
			layout, shape, hf = format.RowMajor, []uint64{64}, "model.layers.0.input_layernorm.weight"
		}
		tensor := arch.Tensor{Section: "x", HF: []string{hf}, Kind: format.KindProjection, Shape: shape}
		srcs, err := checkpointTensors(ck, &tensor, &huge)
		if err != nil {
			t.Fatal(err)
		}
		sec := section{Section: format.Section{Name: "x", DType: dt, Layout: layout, Shape: shape}, tr: huge, srcs: srcs}
		sec.Size, _ = format.ExpectedSize(dt, layout, shape)
		if _, err := runWriteTensor(t, ck, &sec); err == nil || !strings.Contains(err.Error(), `tensor "`+hf+`": rows 0..`) {
			t.Errorf("%s: values the transform made too large: %v", dt, err)
		}
	}
}
