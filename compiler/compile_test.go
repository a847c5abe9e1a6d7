package compiler

import (
	"bytes"
	"context"
	"encoding/binary"
	"github.com/qwenc/qwenc/format/arch"
	"github.com/qwenc/qwenc/format/graph"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/testmodel"
	"github.com/x448/float16"
)

func TestTileMajorRoundTrip(t *testing.T) {
	cv := newConverter()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sh := range [][2]int{{1, 1}, {31, 7}, {32, 5}, {33, 64}, {100, 3}, {64, 64}, {95, 33}} {
		n, k := sh[0], sh[1]
		src := make([]byte, n*k*2) // bf16, row-major
		for i := 0; i < n*k; i++ {
			v := float32(rng.NormFloat64()) * float32(math.Pow(2, float64(rng.IntN(30)-20)))
			binary.LittleEndian.PutUint16(src[2*i:], uint16(math.Float32bits(v)>>16))
		}
		for _, fused := range []bool{true, false} {
			tiles := make([]byte, format.TileMajorElems(n, k)*2)
			for i := range tiles {
				tiles[i] = 0xAA // padding must be overwritten with zeros
			}
			for t0 := 0; t0 < n; t0 += 32 {
				r := min(32, n-t0)
				dst := tiles[t0*k*2:]
				rows := src[t0*k*2 : (t0+r)*k*2]
				if fused {
					if cv.tileMajorBF16(dst, rows, r, k) {
						t.Fatal("finite values reported as not finite")
					}
				} else {
					conv := make([]byte, len(rows))
					if err := cv.f16(conv, rows, "BF16"); err != nil {
						t.Fatal(err)
					}
					tileMajor(dst, conv, r, k)
				}
			}
			for row := 0; row < format.Tiles(n)*32; row++ {
				for col := 0; col < k; col++ {
					got := binary.LittleEndian.Uint16(tiles[2*format.TileMajorIndex(row, col, k):])
					var want uint16
					if row < n {
						bf := binary.LittleEndian.Uint16(src[2*(row*k+col):])
						want = float16.Fromfloat32(math.Float32frombits(uint32(bf) << 16)).Bits()
					}
					if got != want {
						t.Fatalf("n=%d k=%d fused=%v: W[%d,%d] = %04x, want %04x", n, k, fused, row, col, got, want)
					}
				}
			}
		}
	}
}

func TestConverterRefusesNonFinite(t *testing.T) {
	cv := newConverter()
	for _, bits := range []uint16{0x7f80 /* inf */, 0x7fc0 /* NaN */, 0x7f7f /* 3.4e38 */, 0x4780 /* 65536 */} {
		src := []byte{0, 0, byte(bits), byte(bits >> 8)}
		if err := cv.f16(make([]byte, 4), src, "BF16"); err == nil {
			t.Errorf("bf16 %04x converted without error", bits)
		}
		if !cv.tileMajorBF16(make([]byte, 2*64), src, 1, 2) {
			t.Errorf("bf16 %04x not flagged by the fused path", bits)
		}
	}
}

// readTensor returns a checkpoint tensor as float32 values.
func readTensor(t *testing.T, ck *Checkpoint, name string) []float32 {
	ti := ck.Tensors[name]
	if ti == nil {
		t.Fatalf("no tensor %q", name)
	}
	b := make([]byte, ti.Size)
	if err := ck.ReadAt(ti, b, 0); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, ti.Size/int64(ElemSize(ti.DType)))
	for i := range out {
		out[i] = elemValue(b, ti.DType, i)
	}
	return out
}

// TestCompiledWeightsMatchCheckpoint reads every section of compiled
// models back through the format package and compares each element with
// the checkpoint, for odd dimensions, both families, tied and untied heads
// and every input dtype.
func TestCompiledWeightsMatchCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		family, dtype string
		tied          bool
	}{{"qwen3", "BF16", true}, {"qwen2", "F16", false}, {"qwen3", "F32", false}} {
		s := smallShape()
		s.ModelType, s.DType, s.Tied = tc.family, tc.dtype, tc.tied
		model := writeModel(t, s)
		f, err := format.Open(compileTo(t, model))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ck, err := OpenCheckpoint(model)
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		checked := 0
		names := hfNames(t, f.Header)
		for _, sec := range f.Header.Sections {
			hf := names[sec.Name]
			if hf == "" {
				continue
			}
			want := readTensor(t, ck, hf)
			var got []float32
			if sec.DType == format.F32 {
				got, _ = f.F32(sec.Name)
			} else {
				raw, _ := f.F16(sec.Name)
				got = make([]float32, len(want))
				k := int(sec.Shape[1])
				for i := range want {
					idx := i
					if sec.Layout == format.TileMajor {
						idx = format.TileMajorIndex(i/k, i%k, k)
					}
					got[i] = float16.Frombits(raw[idx]).Float32()
				}
			}
			for i := range want {
				w := want[i]
				if sec.DType == format.F16 {
					w = float16.Fromfloat32(w).Float32()
				}
				if got[i] != w {
					t.Fatalf("%s %s: section %s element %d = %v, want %v", tc.family, tc.dtype, sec.Name, i, got[i], w)
				}
			}
			checked++
		}
		if want := len(f.Header.Sections) - 2; checked != want {
			t.Fatalf("%s: checked %d sections, want %d", tc.family, checked, want)
		}
	}
}

func fmtSscanLayer(name string, l *int, what *string) (int, error) {
	var rest string
	n, err := sscanf(name, l, &rest)
	*what = rest
	return n, err
}

func TestDeterministicAndAligned(t *testing.T) {
	model := writeModel(t, smallShape())
	prev := runtime.GOMAXPROCS(1)
	a := compileTo(t, model)
	runtime.GOMAXPROCS(4)
	b := compileTo(t, model)
	runtime.GOMAXPROCS(prev)
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Fatal("two compiles of the same checkpoint differ")
	}
	if len(ab)%format.Alignment != 0 {
		t.Fatalf("file size %d is not a multiple of %d", len(ab), format.Alignment)
	}
	f, err := format.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hdrEnd := uint64(format.PreambleSize) + uint64(len(format.MarshalHeader(f.Header)))
	prevEnd := hdrEnd
	for _, s := range f.Header.Sections {
		if s.Offset%format.Alignment != 0 {
			t.Errorf("section %s at %d is not 4096-aligned", s.Name, s.Offset)
		}
		for _, c := range ab[prevEnd:s.Offset] {
			if c != 0 {
				t.Fatalf("non-zero padding before section %s", s.Name)
			}
		}
		prevEnd = s.Offset + s.Size
	}
	if err := f.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestShardedEqualsSingle(t *testing.T) {
	s := smallShape()
	single := compileTo(t, writeModel(t, s))
	s.Shards = 3
	model := writeModel(t, s)
	for _, in := range []string{model, filepath.Join(model, "model.safetensors.index.json")} {
		sharded := compileTo(t, in)
		a, _ := os.ReadFile(single)
		b, _ := os.ReadFile(sharded)
		if !bytes.Equal(a, b) {
			t.Fatalf("compiling %s differs from the single-file checkpoint", in)
		}
	}
}

func TestTinyACompiles(t *testing.T) {
	model := testmodel.Dir(t, "tiny-a")
	out := filepath.Join(t.TempDir(), "tiny-a.qbin")
	if _, err := Compile(context.Background(), filepath.Join(model, "model.safetensors"), Options{Output: out, MaxPrefill: 512, NoSync: true}); err != nil {
		t.Fatal(err)
	}
	f, err := format.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Verify(); err != nil {
		t.Fatal(err)
	}
	c, g := f.Header.Config, f.Header.Generation
	if c.Hidden != 64 || c.Intermediate != 192 || c.Layers != 2 || c.Heads != 4 || c.KVHeads != 2 || c.HeadDim != 32 ||
		c.Vocab != 151936 || !c.TieEmbeddings || !c.QKNorm || c.QKVBias || c.RopeTheta != 1e6 || c.RMSNormEps != 1e-6 || c.MaxPositions != 4096 {
		t.Fatalf("config %+v", c)
	}
	if len(g.EOS) != 2 || g.EOS[0] != 151645 || g.EOS[1] != 151643 || g.Temperature != 0.6 || g.TopK != 20 || g.TopP != 0.95 {
		t.Fatalf("generation %+v", g)
	}
	if f.Header.ChatFamily != "qwen3" {
		t.Fatalf("chat family %q", f.Header.ChatFamily)
	}
	// The tied LM head is the embedding, re-tiled: spot-check a few rows.
	emb, _ := f.F16(format.SecEmbed)
	head, _ := f.F16(format.SecLMHead)
	for _, row := range []int{0, 1, 31, 32, 151935} {
		for col := 0; col < 64; col++ {
			if emb[row*64+col] != head[format.TileMajorIndex(row, col, 64)] {
				t.Fatalf("lm_head[%d,%d] differs from the embedding", row, col)
			}
		}
	}
}

// TestArticleFigures plans a checkpoint of the design article's shape and
// checks its memory report byte for byte. The safetensors data area is a
// sparse hole: planning reads headers only, so the test stays fast.
func TestArticleFigures(t *testing.T) {
	s := synth.Shape{ModelType: "qwen3", Hidden: 1024, Intermediate: 3072, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 64,
		Vocab: 151936, MaxPositions: 40960, Tied: true, DType: "BF16"}
	dir := filepath.Join(t.TempDir(), "article")
	tj, tc := synth.MiniTokenizer()
	if err := synth.Write(dir, synth.Shape{ModelType: "qwen3", Hidden: 8, Intermediate: 8, Layers: 1, Heads: 1, KVHeads: 1, HeadDim: 8, Vocab: 300, MaxPositions: 64, DType: "BF16", EOS: synth.MiniEOS}, tj, tc); err != nil {
		t.Fatal(err)
	}
	editConfig(t, dir, func(c map[string]any) {
		c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"] = s.Hidden, s.Intermediate, s.Layers
		c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"] = s.Heads, s.KVHeads, s.HeadDim
		c["vocab_size"], c["tie_word_embeddings"] = s.Vocab, s.Tied
	})
	hb, data, err := synth.SafetensorsHeader(s.Tensors(), "BF16")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Create(filepath.Join(dir, "model.safetensors"))
	f.Write(hb)
	f.Truncate(int64(len(hb)) + data)
	f.Close()

	ck, err := OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	hdr, _, err := plan(ck, Options{MaxPrefill: 512, Type: format.F16})
	if err != nil {
		t.Fatal(err)
	}
	r := format.Report(hdr)
	a, err := arch.Builtin().For(hdr.Config.ModelType)
	if err != nil {
		t.Fatal(err)
	}
	r.KV = graph.ReportStates(arch.States(a, &hdr.Config), []int{5, 8, 300, 1024, 32768}, format.KVF16)
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"embeddings row-major", r.EmbeddingsRowMajorBytes, 311_164_928},
		{"embeddings tile-major", r.EmbeddingsTileMajorBytes, 311_164_928},
		{"matrices per layer", r.LayerMatricesBytes, 25_165_824},
		{"KV chunk per layer", r.KV.ChunkBytesPerLayer, 524_288},
		{"KV at 5 tokens", r.KV.BySeq[0].TotalBytes, 14_680_064},
		{"KV at 8 tokens", r.KV.BySeq[1].TotalBytes, 14_680_064},
		{"KV per layer at 300", r.KV.BySeq[2].PerLayerBytes, 1 << 20},
		{"KV at 1024 tokens", r.KV.BySeq[3].TotalBytes, 28 * 2 << 20},
		{"KV at 32768 tokens", r.KV.BySeq[4].TotalBytes, 1_879_048_192},
		{"final norm (f32)", r.FinalNormBytes, 4096},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d bytes, the article gives %d", c.name, c.got, c.want)
		}
	}
}

// TestFusedConversionMatchesTable runs every bf16 value through the fused
// tile path, which must agree with the rounding table.
func TestFusedConversionMatchesTable(t *testing.T) {
	cv := newConverter()
	src := make([]byte, 2)
	tile := make([]byte, 64)
	for b := 0; b < 1<<16; b++ {
		src[0], src[1] = byte(b), byte(b>>8)
		cv.tileMajorBF16(tile, src, 1, 1)
		if got := binary.LittleEndian.Uint16(tile); got != cv.bf16ToF16[b] {
			t.Fatalf("bf16 %04x: %04x, table %04x", b, got, cv.bf16ToF16[b])
		}
	}
}

// hfNames maps each section of a compiled file to the Hugging Face tensor
// it comes from, as the architecture lists them.
func hfNames(t *testing.T, h *format.Header) map[string]string {
	a, err := arch.Builtin().For(h.Config.ModelType)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for ts := range arch.Tensors(a, &h.Config) {
		if len(ts.HF) == 1 {
			m[ts.Section] = ts.HF[0]
		}
	}
	return m
}
