package compiler

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/ggml"
	"github.com/qwenc/qwenc/format/gguf"
	"github.com/qwenc/qwenc/format/wtype"
	"github.com/qwenc/qwenc/internal/testmodel"
	"github.com/qwenc/qwenc/kernels"
)

func compileGGUF(t *testing.T, model string, typ format.DType) *Result {
	t.Helper()
	res, err := Compile(context.Background(), model, Options{Output: filepath.Join(t.TempDir(), "out.qbin"), MaxPrefill: 64, NoSync: true, Type: typ})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestGGUFAsCheckpoint: the f16 GGUFs of a Qwen2, a Qwen3-MoE, a
// Qwen3.5 and a Qwen3.5-MoE model compile into the same weights, to the
// byte, as the checkpoints they were converted from: the experts
// unstacked (and for Qwen3.5-MoE, whose checkpoint fuses gate and up,
// read from a tensor of each), and for Qwen3.5 the norms' 1 + w and
// ssm_a's -exp(A_log) kept, the convolution's [channels, kernel] read as
// it is, the value heads put back in the checkpoint's order, attn_q
// split into the query and the gate. Same weights, same logits. The
// configs are the same, and so is the tokenizer where the GGUF's eos
// and pad ids are the checkpoint's (the Qwen3.5 converter writes eos
// <|endoftext|> and no pad).
func TestGGUFAsCheckpoint(t *testing.T) {
	for _, c := range []struct{ gguf, model string }{{"tiny-q2b-f16", "tiny-q2b"}, {"tiny-moe-a-f16", "tiny-moe-a"},
		{"tiny-q35-f16", "tiny-q35"}, {"tiny-q35-moe-f16", "tiny-q35-moe"}} {
		g := compileGGUF(t, testmodel.GGUF(t, c.gguf), 0)
		h := compileGGUF(t, testmodel.Dir(t, c.model), format.F16)
		if g.Header.Config.ModelType != h.Header.Config.ModelType || fmt.Sprint(g.Header.Config) != fmt.Sprint(h.Header.Config) {
			t.Errorf("%s: config %+v, the checkpoint's %+v", c.gguf, g.Header.Config, h.Header.Config)
		}
		want := map[string]format.Section{}
		for _, s := range h.Header.Sections {
			want[s.Name] = s
		}
		for _, s := range g.Header.Sections {
			w, ok := want[s.Name]
			if s.Name == format.SecTokenizer && strings.HasPrefix(c.model, "tiny-q35") {
				delete(want, s.Name)
				continue
			}
			if !ok || s.DType != w.DType || s.CRC != w.CRC || !slices.Equal(s.Shape, w.Shape) {
				t.Errorf("%s: section %s: %s %v crc %08x; the checkpoint's %s %v crc %08x", c.gguf, s.Name, s.DType, s.Shape, s.CRC, w.DType, w.Shape, w.CRC)
			}
			delete(want, s.Name)
		}
		delete(want, format.SecChatTemplate) // tiny-q35's converter wrote none
		if len(want) > 0 {
			t.Errorf("%s: sections missing: %v", c.gguf, want)
		}
		for _, cv := range g.Converted {
			if !cv.Exact || cv.MaxAbsErr != 0 {
				t.Errorf("%s: %s (%s, %s to %s) not exact", c.gguf, cv.Section, cv.Tensor, cv.From, cv.To)
			}
		}
		// Generation: the eos ids of the checkpoint's generation config
		// (<|im_end|> and <|endoftext|>), in any order.
		ge, he := slices.Sorted(slices.Values(g.Header.Generation.EOS)), slices.Sorted(slices.Values(h.Header.Generation.EOS))
		if !slices.Equal(ge, he) || g.Header.Generation.BOS != h.Header.Generation.BOS {
			t.Errorf("%s: eos %v bos %d, the checkpoint's eos %v bos %d", c.gguf, ge, g.Header.Generation.BOS, he, h.Header.Generation.BOS)
		}
	}
}

// compileOpen compiles a GGUF with the types it has and opens both files.
func compileOpen(t *testing.T, path string) (*Result, *gguf.File, *format.File) {
	t.Helper()
	res := compileGGUF(t, path, 0)
	g, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	f, err := format.Open(res.Output)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return res, g, f
}

// readsAsGGUF checks that a converted section's weights, read back
// through the kernels' decoder, are its GGUF tensor's values as ggml
// decodes them, bit for bit.
func readsAsGGUF(t *testing.T, g *gguf.File, f *format.File, cv Conversion) {
	t.Helper()
	s, _ := f.Header.Section(cv.Section)
	tn, _ := g.Tensor(cv.Tensor)
	want := make([]float32, tn.Elements())
	tn.Type.Decode(want, g.Data(tn))
	data, _ := f.Bytes(cv.Section)
	wt, _ := s.DType.Weight()
	tt := kernels.Traits(wt)
	experts, n, k := s.MatrixDims()
	tb := tt.TileBytes(k)
	got := make([]float32, k)
	for r := range experts * n {
		tt.DequantizeRow(got, data[(r/n*format.Tiles(n)+r%n/32)*tb:], r%n%32, k)
		for c := range got {
			if math.Float32bits(got[c]) != math.Float32bits(want[r*k+c]) {
				t.Fatalf("%s: row %d, column %d: %v, ggml's %v", cv.Section, r, c, got[c], want[r*k+c])
			}
		}
	}
}

// TestGGUFQ8Exact: a Q8_0 GGUF compiles to q8 with every weight, read
// back through the kernels' decoder, ggml's own value.
func TestGGUFQ8Exact(t *testing.T) {
	res, g, f := compileOpen(t, testmodel.GGUF(t, "tiny-a-Q8_0"))
	checked := 0
	for _, cv := range res.Converted {
		if cv.From != "q8_0" || cv.To != format.Q8 || !cv.Exact {
			t.Errorf("%s: %s %s to %s, exact %v", cv.Section, cv.Tensor, cv.From, cv.To, cv.Exact)
			continue
		}
		readsAsGGUF(t, g, f, cv)
		checked++
	}
	if checked != 15 {
		t.Errorf("%d q8 sections checked, want 15", checked)
	}
}

// TestGGUFScaledInt8: tensors whose blocks are an f16 scale and 32
// integers (Q8_0, Q4_0, Q5_0, IQ4_NL) become q8 exactly, but for a Q8_0
// row holding -128, which is quantized again.
func TestGGUFScaledInt8(t *testing.T) {
	src := testmodel.GGUF(t, "tiny-moe-a-f16")
	kv, ts := readGGUF(t, src)
	rng := rand.New(rand.NewPCG(1, 2))
	types := map[string]ggml.Type{"blk.0.attn_q.weight": ggml.Q8_0, "blk.0.attn_k.weight": ggml.Q4_0,
		"blk.0.attn_v.weight": ggml.Q5_0, "blk.0.attn_output.weight": ggml.IQ4_NL, "blk.2.attn_q.weight": ggml.Q8_0}
	for i := range ts {
		typ, ok := types[ts[i].Name]
		if !ok {
			continue
		}
		n := ts[i].Dims[0] * ts[i].Dims[1] / 32
		data := make([]byte, int(n)*typ.BlockBytes())
		for b := range n {
			blk := data[int(b)*typ.BlockBytes() : int(b+1)*typ.BlockBytes()]
			for j := range blk {
				blk[j] = byte(rng.Uint32())
				if typ == ggml.Q8_0 && blk[j] == 0x80 {
					blk[j] = 0x81
				}
			}
			binary.LittleEndian.PutUint16(blk, uint16(0x1c00+rng.IntN(0x800))) // 2^-8 to 2^-6
		}
		if ts[i].Name == "blk.2.attn_q.weight" {
			data[2+5] = 0x80 // -128 in the first row
		}
		ts[i].Type, ts[i].Data = typ, data
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	writeGGUF(t, path, kv, ts)
	res := compileGGUF(t, path, format.Q8)
	g, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	f, err := format.Open(res.Output)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, cv := range res.Converted {
		typ, ok := types[cv.Tensor]
		if !ok {
			continue
		}
		if exact := cv.Tensor != "blk.2.attn_q.weight"; cv.Exact != exact || cv.From != typ.String() {
			t.Errorf("%s: %s to %s, exact %v", cv.Section, cv.From, cv.To, cv.Exact)
			continue
		}
		s, _ := f.Header.Section(cv.Section)
		tn, _ := g.Tensor(cv.Tensor)
		_, n, k := s.MatrixDims()
		want := make([]float32, n*k)
		tn.Type.Decode(want, g.Data(tn))
		data, _ := f.Bytes(cv.Section)
		tt := kernels.Traits(wtype.Q8)
		got := make([]float32, k)
		for r := range n {
			tt.DequantizeRow(got, data[r/32*tt.TileBytes(k):], r%32, k)
			if same := slices.Equal(got, want[r*k:(r+1)*k]); same != (cv.Exact || r > 0) {
				t.Errorf("%s: row %d is ggml's: %v", cv.Section, r, same)
			}
		}
	}
}

// TestGGUFRequantized: a type asked for that is not the GGUF's own
// quantizes the decoded weights again, and says by how much each moved.
func TestGGUFRequantized(t *testing.T) {
	res := compileGGUF(t, testmodel.GGUF(t, "tiny-a-Q8_0"), format.Q4)
	for _, cv := range res.Converted {
		// A q4 file keeps some value and down projections at q8, which
		// the Q8_0 blocks are copied into. A q4 block's 16 levels span
		// its 32 weights, which are within 0.2 of 0 in tiny-a: no weight
		// moves by more than a level, 0.03. The head is q6, whose 64
		// levels span twice a block's largest magnitude, under 3 in
		// tiny-a's embedding: at most a level, 0.097.
		if cv.To == format.Q8 {
			if !cv.Exact {
				t.Errorf("%s: q8_0 to q8 not exact", cv.Section)
			}
			continue
		}
		bound := 0.03
		if cv.To == format.Q6 {
			bound = 3.0 / 31
		}
		if cv.Exact || cv.MaxAbsErr <= 0 || cv.MaxAbsErr > bound {
			t.Errorf("%s: %s to %s, exact %v, max error %g", cv.Section, cv.From, cv.To, cv.Exact, cv.MaxAbsErr)
		}
	}
	if len(res.Converted) != 15 {
		t.Errorf("%d conversions", len(res.Converted))
	}
}

// readGGUF reads a GGUF's keys and tensors, for a test to change them
// and write the file again.
func readGGUF(t *testing.T, path string) ([]gguf.KV, []gguf.TensorData) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []gguf.TensorData
	for i := range f.Tensors {
		tn := &f.Tensors[i]
		ts = append(ts, gguf.TensorData{Name: tn.Name, Type: tn.Type, Dims: tn.Dims, Data: bytes.Clone(f.Data(tn))})
	}
	return slices.Clone(f.KV), ts
}

func writeGGUF(t *testing.T, path string, kv []gguf.KV, ts []gguf.TensorData) {
	t.Helper()
	var b bytes.Buffer
	if err := gguf.Write(&b, kv, ts); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// setKey replaces a key's value.
func setKey(kv []gguf.KV, key string, typ gguf.ValueType, v any) []gguf.KV {
	for i := range kv {
		if kv[i].Key == key {
			kv[i].Type, kv[i].Value = typ, v
		}
	}
	return kv
}

// patchTensorType rewrites a tensor's ggml type in a file's directory.
func patchTensorType(t *testing.T, path, name string, typ uint32) {
	t.Helper()
	edit(t, path, func(b []byte) []byte {
		entry := bytes.Index(b, append(binary.LittleEndian.AppendUint64(nil, uint64(len(name))), name...))
		if entry < 0 {
			t.Fatalf("no entry %q", name)
		}
		at := entry + 8 + len(name)
		nd := int(binary.LittleEndian.Uint32(b[at:]))
		binary.LittleEndian.PutUint32(b[at+4+8*nd:], typ)
		return b
	})
}

// TestGGUFBadInput: a damaged or unsupported GGUF is refused with one
// line naming the file and what is wrong in it, and leaves no output and
// no temporary file.
func TestGGUFBadInput(t *testing.T) {
	src := testmodel.GGUF(t, "tiny-moe-a-f16")
	for _, c := range []struct {
		name  string
		make  func(t *testing.T, path string)
		wants []string
	}{
		{"truncated", func(t *testing.T, p string) {
			b, _ := os.ReadFile(src)
			os.WriteFile(p, b[:len(b)/2], 0o644)
		}, []string{`tensor "`, "runs past the end", "truncated"}},
		{"truncated in the metadata", func(t *testing.T, p string) {
			b, _ := os.ReadFile(src)
			os.WriteFile(p, b[:100000], 0o644)
		}, []string{"metadata key", "truncated"}},
		{"wrong magic", func(t *testing.T, p string) {
			b, _ := os.ReadFile(src)
			os.WriteFile(p, append([]byte("GGUX"), b[4:]...), 0o644)
		}, []string{`not a GGUF file: it starts with "GGUX"`}},
		{"unknown architecture", func(t *testing.T, p string) {
			kv, ts := readGGUF(t, src)
			writeGGUF(t, p, setKey(kv, "general.architecture", gguf.String, "llama"), ts)
		}, []string{`general.architecture "llama" is not supported (qwen2, qwen3, qwen3moe, qwen35, qwen35moe)`}},
		{"unknown tensor type", func(t *testing.T, p string) {
			b, _ := os.ReadFile(src)
			os.WriteFile(p, b, 0o644)
			patchTensorType(t, p, "blk.1.ffn_up.weight", 77)
		}, []string{`tensor "blk.1.ffn_up.weight": unknown ggml type 77`}},
		{"a type of no weights", func(t *testing.T, p string) {
			kv, ts := readGGUF(t, src)
			for i := range ts {
				if ts[i].Name == "blk.0.attn_q.weight" {
					ts[i].Type = ggml.I16 // the size of f16
				}
			}
			writeGGUF(t, p, kv, ts)
		}, []string{`tensor "blk.0.attn_q.weight": ggml type i16 holds no weights`}},
		{"size disagrees with shape", func(t *testing.T, p string) {
			b, _ := os.ReadFile(src)
			os.WriteFile(p, b, 0o644)
			patchTensorType(t, p, "output_norm.weight", uint32(ggml.F64))
		}, []string{`"output_norm.weight"`, "overlap"}},
		{"shape disagrees with the metadata", func(t *testing.T, p string) {
			kv, ts := readGGUF(t, src)
			writeGGUF(t, p, setKey(kv, "qwen3moe.expert_feed_forward_length", gguf.Uint32, uint32(40)), ts)
		}, []string{`tensor "blk.0.ffn_gate_exps.weight": shape [8 48 32]`, "[8 40 32]"}},
		{"missing tensor", func(t *testing.T, p string) {
			kv, ts := readGGUF(t, src)
			ts = slices.DeleteFunc(ts, func(d gguf.TensorData) bool { return d.Name == "blk.2.attn_k_norm.weight" })
			writeGGUF(t, p, kv, ts)
		}, []string{`tensor "blk.2.attn_k_norm.weight" (section "layers.2.k_norm"): missing`}},
		{"missing key", func(t *testing.T, p string) {
			kv, ts := readGGUF(t, src)
			kv = slices.DeleteFunc(kv, func(e gguf.KV) bool { return e.Key == "qwen3moe.block_count" })
			writeGGUF(t, p, kv, ts)
		}, []string{`"qwen3moe.block_count" missing`}},
		{"no expert_used_count", func(t *testing.T, p string) {
			// llama.cpp refuses a MoE model without it; transformers'
			// default (8) is not the file's.
			kv, ts := readGGUF(t, src)
			kv = slices.DeleteFunc(kv, func(e gguf.KV) bool { return e.Key == "qwen3moe.expert_used_count" })
			writeGGUF(t, p, kv, ts)
		}, []string{`"qwen3moe.expert_used_count" missing`}},
		{"no layer_norm_rms_epsilon", func(t *testing.T, p string) {
			kv, ts := readGGUF(t, src)
			kv = slices.DeleteFunc(kv, func(e gguf.KV) bool { return e.Key == "qwen3moe.attention.layer_norm_rms_epsilon" })
			writeGGUF(t, p, kv, ts)
		}, []string{`"qwen3moe.attention.layer_norm_rms_epsilon" missing`}},
		{"key of the wrong type", func(t *testing.T, p string) {
			kv, ts := readGGUF(t, src)
			writeGGUF(t, p, setKey(kv, "qwen3moe.embedding_length", gguf.String, "32"), ts)
		}, []string{`"qwen3moe.embedding_length"`}},
		{"no tokens", func(t *testing.T, p string) {
			kv, ts := readGGUF(t, src)
			kv = slices.DeleteFunc(kv, func(e gguf.KV) bool { return e.Key == "tokenizer.ggml.tokens" })
			writeGGUF(t, p, kv, ts)
		}, []string{`tokenizer.ggml.tokens: missing`}},
		{"no merges", func(t *testing.T, p string) {
			// llama.cpp refuses a BPE vocabulary without its merges: with
			// none, every text would split into single bytes.
			kv, ts := readGGUF(t, src)
			kv = slices.DeleteFunc(kv, func(e gguf.KV) bool { return e.Key == "tokenizer.ggml.merges" })
			writeGGUF(t, p, kv, ts)
		}, []string{`tokenizer.ggml.merges: missing`}},
		{"pooling type of the wrong type", func(t *testing.T, p string) {
			kv, ts := readGGUF(t, src)
			writeGGUF(t, p, append(kv, gguf.KV{Key: "qwen3moe.pooling_type", Type: gguf.String, Value: "mean"}), ts)
		}, []string{`metadata key "qwen3moe.pooling_type" = mean (string)`}},
		{"tokenizer of another kind", func(t *testing.T, p string) {
			kv, ts := readGGUF(t, src)
			writeGGUF(t, p, setKey(kv, "tokenizer.ggml.model", gguf.String, "llama"), ts)
		}, []string{`tokenizer.ggml.model "llama"`}},
		{"a vector in a block type", func(t *testing.T, p string) {
			kv, ts := readGGUF(t, src)
			for i := range ts {
				if ts[i].Name == "output_norm.weight" {
					// One Q8_0 block (scale 1, values 1) per 32 values: a
					// valid tensor, whose rows of one value no block holds.
					q := make([]byte, int(ts[i].Dims[0])/32*34)
					for b := 0; b < len(q); b += 34 {
						binary.LittleEndian.PutUint16(q[b:], 0x3c00)
						for j := range 32 {
							q[b+2+j] = 1
						}
					}
					ts[i].Type, ts[i].Data = ggml.Q8_0, q
				}
			}
			writeGGUF(t, p, kv, ts)
		}, []string{`tensor "output_norm.weight": ggml type q8_0 stores blocks of values, and section "norm" reads rows of 1`}},
		{"fewer layers in the metadata than the tensors", func(t *testing.T, p string) {
			// The last layer's tensors were read by no section: the file
			// compiled as a shallower model.
			kv, ts := readGGUF(t, src)
			writeGGUF(t, p, setKey(kv, "qwen3moe.block_count", gguf.Uint32, uint32(2)), ts)
		}, []string{`tensor "blk.2.`, "more): part of no section of the qwen3_moe model the metadata describes (2 layers)"}},
		{"weight not finite", func(t *testing.T, p string) {
			kv, ts := readGGUF(t, src)
			for i := range ts {
				if ts[i].Name == "blk.0.attn_v.weight" {
					binary.LittleEndian.PutUint16(ts[i].Data[2*100:], 0x7c00) // +Inf
				}
			}
			writeGGUF(t, p, kv, ts)
		}, []string{`tensor "blk.0.attn_v.weight"`, "rows 0..", "element 100 is +Inf"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "model.gguf")
			c.make(t, in)
			outDir := t.TempDir()
			_, err := Compile(context.Background(), in, Options{Output: filepath.Join(outDir, "out.qbin"), MaxPrefill: 16, NoSync: true})
			if err == nil {
				t.Fatal("compile succeeded")
			}
			msg := err.Error()
			if strings.Contains(msg, "%!") {
				t.Errorf("error %q: a formatting mistake", msg)
			}
			if strings.Contains(msg, "\n") || strings.Count(msg, in) != 1 {
				t.Errorf("error %q: want one line naming %s once", msg, in)
			}
			for _, w := range c.wants {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
			if names := dirEntries(t, outDir); len(names) != 0 {
				t.Errorf("output directory holds %v", names)
			}
		})
	}
}

// TestGGUFSplit: a model split in two files compiles from either, into
// the file the whole one gives.
func TestGGUFSplit(t *testing.T) {
	src := testmodel.GGUF(t, "tiny-moe-a-f16")
	whole := compileGGUF(t, src, 0)
	kv, ts := readGGUF(t, src)
	dir := t.TempDir()
	half := len(ts) / 2
	split := func(no int, kv []gguf.KV, ts []gguf.TensorData) {
		kv = append(slices.Clone(kv), gguf.KV{Key: "split.no", Type: gguf.Uint16, Value: uint16(no)},
			gguf.KV{Key: "split.count", Type: gguf.Uint16, Value: uint16(2)})
		writeGGUF(t, filepath.Join(dir, fmt.Sprintf("m-%05d-of-00002.gguf", no+1)), kv, ts)
	}
	split(0, append(kv, gguf.KV{Key: "split.tensors.count", Type: gguf.Int32, Value: int32(len(ts))}), ts[:half])
	split(1, nil, ts[half:])
	for _, part := range []string{"m-00001-of-00002.gguf", "m-00002-of-00002.gguf"} {
		res := compileGGUF(t, filepath.Join(dir, part), 0)
		if fmt.Sprint(res.Header.Sections) != fmt.Sprint(whole.Header.Sections) {
			t.Errorf("from %s: sections differ from the whole file's", part)
		}
	}
	if got := DefaultOutput(filepath.Join(dir, "m-00002-of-00002.gguf")); got != "m.qbin" {
		t.Errorf("DefaultOutput of a part: %q, want m.qbin", got)
	}
}

// ollamaStore makes an Ollama store holding the tiny Qwen3-MoE GGUF as
// NAME:TAG, with a params and a template layer.
func ollamaStore(t *testing.T, name, tag, params string) string {
	t.Helper()
	store := t.TempDir()
	var layers []string
	blob := func(media string, b []byte) {
		sum := sha256.Sum256(b)
		digest := "sha256:" + hex.EncodeToString(sum[:])
		p := filepath.Join(store, "blobs", "sha256-"+hex.EncodeToString(sum[:]))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		layers = append(layers, fmt.Sprintf(`{"mediaType": %q, "digest": %q, "size": %d}`, media, digest, len(b)))
	}
	model, err := os.ReadFile(testmodel.GGUF(t, "tiny-moe-a-f16"))
	if err != nil {
		t.Fatal(err)
	}
	blob(ollamaModelLayer, model)
	blob(ollamaTemplateLayer, []byte("{{ .Prompt }}"))
	blob(ollamaParamsLayer, []byte(params))
	m := filepath.Join(store, "manifests", "registry.ollama.ai", "library", name, tag)
	os.MkdirAll(filepath.Dir(m), 0o755)
	man := `{"schemaVersion": 2, "layers": [` + strings.Join(layers, ", ") + `]}`
	if err := os.WriteFile(m, []byte(man), 0o644); err != nil {
		t.Fatal(err)
	}
	return store
}

// TestOllama compiles a model of Ollama's store by its name, with the
// sampling defaults of its params layer, and refuses a name the store
// does not hold with the manifest it looked for.
func TestOllama(t *testing.T) {
	store := ollamaStore(t, "tiny", "0.1", `{"temperature": 0.6, "top_k": 20, "top_p": 0.95, "stop": ["<|im_end|>", "\n\nUser:"], "num_ctx": 4096}`)
	bad := ollamaStore(t, "tiny", "latest", `{"temperature": "hot"}`)
	wide := ollamaStore(t, "tiny", "latest", `{"top_p": 2}`)
	work := t.TempDir()
	t.Chdir(work)
	res, err := Compile(context.Background(), "ollama:tiny:0.1", Options{MaxPrefill: 16, NoSync: true, OllamaModels: store})
	if err != nil {
		t.Fatal(err)
	}
	g := res.Header.Generation
	if res.Output != "tiny-0.1.qbin" || !g.DoSample || g.Temperature != 0.6 || g.TopK != 20 || g.TopP != 0.95 || !slices.Contains(g.EOS, 151645) {
		t.Errorf("wrote %s with generation %+v", res.Output, g)
	}
	notes := strings.Join(res.Notes, "\n")
	for _, want := range []string{`stop sequence "\n\nUser:" is not one token`, "num_ctx", "template layer"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q do not say %q", notes, want)
		}
	}
	for _, c := range []struct{ model, want string }{
		{"ollama:tiny", "manifests/registry.ollama.ai/library/tiny/latest"},
		{"ollama:other:0.1", "not in Ollama's store"},
		{"ollama:../x", `".." is not a valid part`},
		{"ollama:a/b/c/d", "not a model name"},
	} {
		_, err := Compile(context.Background(), c.model, Options{MaxPrefill: 16, NoSync: true, OllamaModels: store})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.model) {
			t.Errorf("%s: %v, want an error naming it with %q", c.model, err, c.want)
		}
	}
	if _, err := Compile(context.Background(), "ollama:tiny", Options{MaxPrefill: 16, NoSync: true, OllamaModels: bad}); err == nil || !strings.Contains(err.Error(), `"temperature" = "hot"`) {
		t.Errorf("a bad params layer: %v", err)
	}
	// A value the sampler would refuse, refused here rather than in a
	// file that could not be opened.
	if _, err := Compile(context.Background(), "ollama:tiny", Options{MaxPrefill: 16, NoSync: true, OllamaModels: wide}); err == nil || !strings.Contains(err.Error(), "params layer") || !strings.Contains(err.Error(), "top_p = 2, want in [0, 1]") {
		t.Errorf("top_p 2 in the params layer: %v", err)
	}
	if names := dirEntries(t, work); len(names) != 1 {
		t.Errorf("the working directory holds %v", names)
	}
}

// TestGGUFFloatMatrices: a GGUF's f32 and bf16 matrices become f16, each
// value measured as it is rounded: exact when every value is an f16
// (llama.cpp keeps routers f32), otherwise with the largest change.
func TestGGUFFloatMatrices(t *testing.T) {
	src := testmodel.GGUF(t, "tiny-moe-a-f16")
	kv, ts := readGGUF(t, src)
	widen := func(d *gguf.TensorData, typ ggml.Type, nudge bool) {
		vals := make([]float32, len(d.Data)/2)
		ggml.F16.Decode(vals, d.Data)
		d.Type, d.Data = typ, nil
		for i, v := range vals {
			if nudge && i%7 == 3 {
				v *= 1 + 1.0/4096 // between two f16s: rounds by up to half an f16 step
			}
			bits := math.Float32bits(v)
			if typ == ggml.BF16 {
				d.Data = binary.LittleEndian.AppendUint16(d.Data, uint16(bits>>16)) // a truncation: still an f16
			} else {
				d.Data = binary.LittleEndian.AppendUint32(d.Data, bits)
			}
		}
	}
	for i := range ts {
		switch ts[i].Name {
		case "blk.0.attn_q.weight":
			widen(&ts[i], ggml.F32, true)
		case "blk.0.attn_k.weight":
			widen(&ts[i], ggml.BF16, false)
		case "blk.0.ffn_gate_inp.weight", "blk.0.attn_v.weight":
			widen(&ts[i], ggml.F32, false)
		}
	}
	p := filepath.Join(t.TempDir(), "m.gguf")
	writeGGUF(t, p, kv, ts)
	res := compileGGUF(t, p, 0)
	want := map[string]string{"layers.0.q_proj": "f32 inexact", "layers.0.k_proj": "bf16 exact", "layers.0.router": "f32 exact", "layers.0.v_proj": "f32 exact"}
	for _, cv := range res.Converted {
		w, ok := want[cv.Section]
		if !ok {
			continue
		}
		delete(want, cv.Section)
		got := cv.From + " exact"
		if !cv.Exact {
			got = cv.From + " inexact"
		}
		if got != w || cv.To != format.F16 || cv.Exact != (cv.MaxAbsErr == 0) || cv.MaxAbsErr > 1e-3 {
			t.Errorf("%s: %s to %s, exact %v, max error %g; want %s", cv.Section, cv.From, cv.To, cv.Exact, cv.MaxAbsErr, w)
		}
	}
	if len(want) > 0 {
		t.Errorf("no conversion of %v", want)
	}
}

// TestGGUFQuantizedLayouts: Qwen3.5's layout, undone on a GGUF's
// quantized tensors (the value heads put back by rows of attn_qkv, the
// convolution and the gates, by columns of ssm_out; attn_q split), gives
// what it gives on the same values as f32: each matrix of the f16 file
// is replaced by random blocks of a ggml type of 32-value blocks, and a
// second file holds the values ggml decodes from them as f32; both
// compile to f16 with the same bytes in every section.
func TestGGUFQuantizedLayouts(t *testing.T) {
	kv, ts := readGGUF(t, testmodel.GGUF(t, "tiny-q35-f16"))
	types := []ggml.Type{ggml.Q4_0, ggml.Q4_1, ggml.Q5_0, ggml.Q5_1, ggml.Q8_0, ggml.IQ4_NL, ggml.MXFP4}
	rng := rand.New(rand.NewPCG(3, 5))
	decoded := slices.Clone(ts)
	used := map[ggml.Type]bool{}
	n := 0
	for i := range ts {
		d := &ts[i]
		if d.Type != ggml.F16 || len(d.Dims) < 2 || d.Dims[0]%32 != 0 || d.Name == "token_embd.weight" {
			continue
		}
		typ := types[n%len(types)]
		n++
		used[typ] = true
		elems := uint64(1)
		for _, x := range d.Dims {
			elems *= x
		}
		blocks := make([]byte, int(elems)/32*typ.BlockBytes())
		for j := range blocks {
			blocks[j] = byte(rng.Uint32())
		}
		// Scales (and Q4_1's and Q5_1's minimums) of about 1/128, so
		// that every value is a finite f16.
		for b := 0; b < len(blocks); b += typ.BlockBytes() {
			switch typ {
			case ggml.MXFP4:
				blocks[b] = 120 + byte(rng.IntN(4))
			case ggml.Q4_1, ggml.Q5_1:
				binary.LittleEndian.PutUint16(blocks[b+2:], 0x2000|uint16(rng.IntN(1024))|uint16(rng.IntN(2))<<15)
				fallthrough
			default:
				binary.LittleEndian.PutUint16(blocks[b:], 0x2000|uint16(rng.IntN(1024))|uint16(rng.IntN(2))<<15)
			}
		}
		vals := make([]float32, elems)
		typ.Decode(vals, blocks)
		f32 := make([]byte, 0, 4*len(vals))
		for _, v := range vals {
			f32 = binary.LittleEndian.AppendUint32(f32, math.Float32bits(v))
		}
		d.Type, d.Data = typ, blocks
		decoded[i] = gguf.TensorData{Name: d.Name, Type: ggml.F32, Dims: d.Dims, Data: f32}
	}
	if len(used) != len(types) {
		t.Fatalf("%d matrices, types %v", n, used)
	}
	dir := t.TempDir()
	writeGGUF(t, filepath.Join(dir, "q.gguf"), kv, ts)
	writeGGUF(t, filepath.Join(dir, "f.gguf"), kv, decoded)
	q := compileGGUF(t, filepath.Join(dir, "q.gguf"), format.F16)
	f := compileGGUF(t, filepath.Join(dir, "f.gguf"), format.F16)
	if len(q.Header.Sections) != len(f.Header.Sections) {
		t.Fatalf("%d and %d sections", len(q.Header.Sections), len(f.Header.Sections))
	}
	for i, s := range q.Header.Sections {
		if w := f.Header.Sections[i]; s.Name != w.Name || s.CRC != w.CRC {
			t.Errorf("section %s: crc %08x; from the decoded values %s %08x", s.Name, s.CRC, w.Name, w.CRC)
		}
	}
}

// TestGGUFQ4KExact: Q4_K matrices become q4 with every weight ggml's
// own, their scales, minimums and values copied (q4's block scales have
// 8 bits where Q4_K's have 6), stacked experts too; a row whose scale is
// negative, which ggml never writes, has its tile quantized again. The
// tiny Qwen3-MoE is widened to MLPs of 256, so that its down projections
// hold whole Q4_K super-blocks.
func TestGGUFQ4KExact(t *testing.T) {
	kv, ts := readGGUF(t, testmodel.GGUF(t, "tiny-moe-a-f16"))
	const inter = 256
	kv = setKey(kv, "qwen3moe.feed_forward_length", gguf.Uint32, uint32(inter))
	kv = setKey(kv, "qwen3moe.expert_feed_forward_length", gguf.Uint32, uint32(inter))
	rng := rand.New(rand.NewPCG(13, 14))
	f16s := func(n int) []byte {
		b := make([]byte, 2*n)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(0x2000+rng.IntN(0x800))|uint16(rng.IntN(2))<<15)
		}
		return b
	}
	q4k := func(rows int) []byte {
		b := make([]byte, rows*144)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		for s := 0; s < rows; s++ {
			binary.LittleEndian.PutUint16(b[144*s:], uint16(0x2000+rng.IntN(0x400))) // d
			binary.LittleEndian.PutUint16(b[144*s+2:], uint16(0x1c00+rng.IntN(0x400)))
		}
		return b
	}
	hidden := ts[0].Dims[0]
	for i := range ts {
		d := &ts[i]
		experts := uint64(1)
		if len(d.Dims) == 3 {
			experts = d.Dims[2]
		}
		switch {
		case strings.HasSuffix(d.Name, "ffn_gate.weight"), strings.HasSuffix(d.Name, "ffn_up.weight"),
			strings.HasSuffix(d.Name, "ffn_gate_exps.weight"), strings.HasSuffix(d.Name, "ffn_up_exps.weight"):
			d.Dims[1] = inter
			d.Data = f16s(int(hidden * inter * experts))
		case strings.HasSuffix(d.Name, "ffn_down.weight"), strings.HasSuffix(d.Name, "ffn_down_exps.weight"):
			d.Dims[0] = inter
			d.Type, d.Data = ggml.Q4_K, q4k(int(hidden*experts))
		}
	}
	for i := range ts {
		if ts[i].Name == "blk.1.ffn_down.weight" {
			binary.LittleEndian.PutUint16(ts[i].Data[144*5:], 0xa000) // row 5's d: negative
		}
	}
	p := filepath.Join(t.TempDir(), "q4k.gguf")
	writeGGUF(t, p, kv, ts)
	res, g, f := compileOpen(t, p)
	checked := 0
	for _, cv := range res.Converted {
		if cv.From != "q4_K" {
			continue
		}
		checked++
		if cv.To != format.Q4 {
			t.Errorf("%s: %s to %s", cv.Section, cv.From, cv.To)
			continue
		}
		if cv.Section == "layers.1.down_proj" {
			if cv.Exact || cv.MaxAbsErr <= 0 {
				t.Errorf("%s: a row with a negative scale, yet exact %v, max error %g", cv.Section, cv.Exact, cv.MaxAbsErr)
			}
			continue
		}
		if !cv.Exact {
			t.Errorf("%s: %s to q4 not exact (max error %g)", cv.Section, cv.Tensor, cv.MaxAbsErr)
			continue
		}
		readsAsGGUF(t, g, f, cv)
	}
	if checked != 3 {
		t.Errorf("%d Q4_K sections, want 3", checked)
	}
}

// TestGGUFWithoutMTPBlock: a qwen35 GGUF whose nextn_predict_layers
// counts an MTP layer none of whose tensors it holds (the conversion of a
// checkpoint transformers saved, which drops the block) compiles without
// it, saying so.
func TestGGUFWithoutMTPBlock(t *testing.T) {
	kv, ts := readGGUF(t, testmodel.GGUF(t, "tiny-q35-f16"))
	mtp := "" // the MTP layer's block, "blk.N."
	for _, td := range ts {
		if b, _, ok := strings.Cut(td.Name, "nextn."); ok {
			mtp = b
		}
	}
	var kept []gguf.TensorData
	for _, td := range ts {
		if mtp == "" || !strings.HasPrefix(td.Name, mtp) {
			kept = append(kept, td)
		}
	}
	if len(kept) == len(ts) {
		t.Fatal("the file has no MTP tensors to drop")
	}
	path := filepath.Join(t.TempDir(), "no-mtp.gguf")
	writeGGUF(t, path, kv, kept)
	out := filepath.Join(t.TempDir(), "out.qbin")
	res, err := Compile(context.Background(), path, Options{Output: out, MaxPrefill: 16, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	checkNoMTP(t, res, out, "the file has no MTP block")
}
