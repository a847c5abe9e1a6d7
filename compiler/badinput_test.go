package compiler

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/synth"
)

// edit rewrites a file of the model directory.
func edit(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func replace(t *testing.T, old, new string) func([]byte) []byte {
	return func(b []byte) []byte {
		if !bytes.Contains(b, []byte(old)) {
			t.Fatalf("%q not found", old)
		}
		return bytes.Replace(b, []byte(old), []byte(new), 1)
	}
}

// safetensorsHeaderEdit rewrites the JSON header of model.safetensors,
// keeping its length field consistent.
func safetensorsHeaderEdit(t *testing.T, f func(string) string) func([]byte) []byte {
	return func(b []byte) []byte {
		n := binary.LittleEndian.Uint64(b)
		h := []byte(f(string(b[8 : 8+n])))
		out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
		return append(append(out, h...), b[8+n:]...)
	}
}

// TestBadInput checks that every kind of bad checkpoint gives an error
// naming the file and the tensor or field, and leaves no output and no
// temporary file behind.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		input  string // relative to the model dir; "" means the dir
		mutate func(t *testing.T, dir string)
		want   []string
	}{
		{"missing config", "", func(t *testing.T, d string) { os.Remove(filepath.Join(d, "config.json")) },
			[]string{"config.json", "no such file"}},
		{"config not JSON", "", func(t *testing.T, d string) { os.WriteFile(filepath.Join(d, "config.json"), []byte("{oops"), 0o644) },
			[]string{"/model/config.json: invalid character"}},
		{"no weights", "", func(t *testing.T, d string) { os.Remove(filepath.Join(d, "model.safetensors")) },
			[]string{"/model: no model.safetensors or model.safetensors.index.json"}},
		{"not a checkpoint", "config.json", func(t *testing.T, d string) {},
			[]string{"/model/config.json: not a model directory, .safetensors file or .safetensors.index.json"}},
		{"missing model", "absent", func(t *testing.T, d string) {}, []string{"/model/absent: no such file or directory"}},
		{"empty index", "model.safetensors.index.json", func(t *testing.T, d string) {
			os.WriteFile(filepath.Join(d, "model.safetensors.index.json"), []byte(`{"weight_map": {}}`), 0o644)
		}, []string{"/model/model.safetensors.index.json: weight_map is empty or missing"}},
		{"generation config not JSON", "", func(t *testing.T, d string) {
			os.WriteFile(filepath.Join(d, "generation_config.json"), []byte("[1"), 0o644)
		}, []string{"/model/generation_config.json: unexpected end of JSON input"}},
		{"generation default the sampler refuses", "", func(t *testing.T, d string) {
			os.WriteFile(filepath.Join(d, "generation_config.json"), []byte(`{"top_p": 1.5}`), 0o644)
		}, []string{"/model/generation_config.json", "top_p = 1.5, want in [0, 1]"}},
		{"pad id outside the vocabulary", "", func(t *testing.T, d string) {
			os.WriteFile(filepath.Join(d, "generation_config.json"), []byte(`{"pad_token_id": -5}`), 0o644)
		}, []string{"/model/generation_config.json", `field "pad_token_id": id -5 outside the vocabulary [0, 300)`}},
		{"bos id outside the vocabulary", "", func(t *testing.T, d string) {
			os.WriteFile(filepath.Join(d, "generation_config.json"), []byte(`{"bos_token_id": 300}`), 0o644)
		}, []string{`field "bos_token_id": id 300 outside the vocabulary [0, 300)`}},
		{"unreadable config", "", func(t *testing.T, d string) {
			p := filepath.Join(d, "config.json")
			os.Remove(p)
			os.Mkdir(p, 0o755) // a directory: reading it fails even as root
		}, []string{"config.json"}},
		{"unsupported model_type", "", func(t *testing.T, d string) {
			editConfig(t, d, func(c map[string]any) { c["model_type"] = "llama" })
		}, []string{"config.json", "model_type", "llama"}},
		{"missing field", "", func(t *testing.T, d string) {
			editConfig(t, d, func(c map[string]any) { delete(c, "hidden_size") })
		}, []string{"config.json", "hidden_size", "missing"}},
		{"unsupported dtype", "", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "model.safetensors"), safetensorsHeaderEdit(t, func(h string) string {
				// I16 has the size of BF16, so offsets stay valid.
				i := strings.Index(h, `"model.norm.weight"`)
				return h[:i] + strings.Replace(h[i:], `"dtype":"BF16"`, `"dtype":"I16"`, 1)
			}))
		}, []string{"model.norm.weight", "dtype I16"}},
		{"missing tensor", "", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "model.safetensors"), safetensorsHeaderEdit(t, func(h string) string {
				return strings.Replace(h, `"model.layers.1.mlp.up_proj.weight"`, `"model.layers.1.mlp.up_proj.weighX"`, 1)
			}))
		}, []string{`"model.layers.1.mlp.up_proj.weight"`, "missing"}},
		{"shape disagrees", "", func(t *testing.T, d string) {
			editConfig(t, d, func(c map[string]any) { c["intermediate_size"] = 35 })
		}, []string{"model.layers.0.mlp.gate_proj.weight", "shape [70 40]", "[35 40]"}},
		{"header not JSON", "", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "model.safetensors"), safetensorsHeaderEdit(t, func(h string) string { return "[" + h[1:] }))
		}, []string{"model.safetensors", "not a JSON object"}},
		{"offsets past end", "", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "model.safetensors"), safetensorsHeaderEdit(t, func(h string) string {
				i := strings.Index(h, `"model.norm.weight"`)
				j := strings.Index(h[i:], "]") + i
				k := strings.LastIndex(h[:j], ",")
				return h[:k+1] + "999999999" + h[j:]
			}))
		}, []string{"model.safetensors", "model.norm.weight", "outside"}},
		{"overlapping tensors", "", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "model.safetensors"), safetensorsHeaderEdit(t, func(h string) string {
				// Give the final norm (80 bytes) the range of the first 80 bytes of the embedding.
				i := strings.Index(h, `"model.norm.weight"`)
				j := strings.Index(h[i:], "[") + i
				k := strings.Index(h[j:], "]") + j
				return h[:j] + "[0,80" + h[k:]
			}))
		}, []string{"model.safetensors", "overlap"}},
		{"truncated safetensors", "", func(t *testing.T, d string) {
			p := filepath.Join(d, "model.safetensors")
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()-100)
		}, []string{"model.safetensors", "outside", "truncated"}},
		{"truncated inside the header", "", func(t *testing.T, d string) { os.Truncate(filepath.Join(d, "model.safetensors"), 50) },
			[]string{"model.safetensors", "header length"}},
		{"missing shard", "model.safetensors.index.json", func(t *testing.T, d string) {
			os.WriteFile(filepath.Join(d, "model.safetensors.index.json"),
				[]byte(`{"weight_map": {"model.norm.weight": "model-00002-of-00002.safetensors", "model.embed_tokens.weight": "model.safetensors"}}`), 0o644)
		}, []string{"model.safetensors.index.json", "model-00002-of-00002.safetensors", "no such file"}},
		{"index names a tensor no shard holds", "model.safetensors.index.json", func(t *testing.T, d string) {
			// A tensor the model does not read went unreported; one it
			// reads was said to be missing from the checkpoint.
			os.WriteFile(filepath.Join(d, "model.safetensors.index.json"),
				[]byte(`{"weight_map": {"model.embed_tokens.weight": "model.safetensors", "model.layers.0.extra.weight": "model.safetensors", "model.norm.weight": "model.safetensors"}}`), 0o644)
		}, []string{`/model/model.safetensors.index.json: tensor "model.layers.0.extra.weight": weight_map puts it in "model.safetensors", which does not hold it`}},
		{"tokenizer truncated", "", func(t *testing.T, d string) {
			// The error blamed post_processor, the first field read.
			os.Truncate(filepath.Join(d, "tokenizer.json"), 100)
		}, []string{"/model/tokenizer.json: unexpected end of JSON input"}},
		{"tokenizer not byte-level BPE", "", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "tokenizer.json"), replace(t, `"type":"BPE"`, `"type":"WordPiece"`))
		}, []string{"tokenizer.json", "byte-level BPE"}},
		{"tokenizer with an unknown split pattern", "", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "tokenizer.json"), replace(t, `]?\\p{L}+|`, `]?\\p{L}*|`))
		}, []string{"tokenizer.json", `pre_tokenizer.pretokenizers[0].pattern.Regex "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}*|`, "is not supported"}},
		{"named chat templates without a default", "", func(t *testing.T, d string) {
			// Read as no template, the file chatted as plain ChatML.
			os.WriteFile(filepath.Join(d, "tokenizer_config.json"),
				[]byte(`{"chat_template": [{"name": "tool_use", "template": "<|im_start|>{{ tools }}"}, {"name": "rag", "template": "<|im_start|>"}]}`), 0o644)
		}, []string{"/model/tokenizer_config.json", `field "chat_template": named templates "tool_use", "rag", none of them "default"`}},
		{"fewer layers in the config than the tensors", "", func(t *testing.T, d string) {
			// Layer 1 was left out without a word: another model.
			editConfig(t, d, func(c map[string]any) { c["num_hidden_layers"] = 1 })
		}, []string{"/model/model.safetensors", `tensor "model.layers.1.`, "more): part of no section of the qwen3 model config.json describes (num_hidden_layers 1)"}},
		{"a bias config.json has no place for", "", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "model.safetensors"), safetensorsHeaderEdit(t, func(h string) string {
				return `{"model.layers.0.self_attn.q_proj.bias":{"dtype":"BF16","shape":[0],"data_offsets":[0,0]},` + h[1:]
			}))
		}, []string{`tensor "model.layers.0.self_attn.q_proj.bias": part of no section`}},
		{"a head of its own beside tie_word_embeddings", "", func(t *testing.T, d string) {
			// Tied, the head is the embedding: this one, differing in a
			// weight, was dropped without a word.
			addTensorCopy(t, d, "lm_head.weight", "model.embed_tokens.weight", func(b []byte) { b[0] ^= 1 })
		}, []string{`/model/model.safetensors: tensor "lm_head.weight": config.json's tie_word_embeddings is true`, "not a copy"}},
		{"weight not finite in f16", "", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "model.safetensors"), func(b []byte) []byte {
				n := binary.LittleEndian.Uint64(b)
				b[8+n+1] = 0x7f // first embedding element's high byte: bf16 0x7fXX, NaN or huge
				b[8+n] = 0x80
				return b
			})
		}, []string{"model.embed_tokens.weight", "not representable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeModel(t, smallShape())
			tc.mutate(t, dir)
			outDir := t.TempDir()
			refused(t, dir, filepath.Join(dir, tc.input), outDir, tc.want)
		})
	}
}

// cancelOnWrite cancels a context on the n-th progress write, which lands
// in the middle of writing sections.
type cancelOnWrite struct {
	n      int
	cancel context.CancelFunc
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	if c.n--; c.n == 0 {
		c.cancel()
	}
	return len(p), nil
}

func TestCancelLeavesNothing(t *testing.T) {
	s := smallShape()
	s.Vocab = 20000 // a large enough embedding that writing takes several blocks
	model := writeModel(t, s)
	outDir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Compile(ctx, model, Options{Output: filepath.Join(outDir, "out.qbin"), MaxPrefill: 16, NoSync: true,
		Progress: &cancelOnWrite{n: 2, cancel: cancel}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if names := dirEntries(t, outDir); len(names) != 0 {
		t.Fatalf("output directory holds %v", names)
	}
}

func TestUnwritableOutput(t *testing.T) {
	model := writeModel(t, smallShape())
	_, err := Compile(context.Background(), model, Options{Output: filepath.Join(t.TempDir(), "no", "such", "dir", "x.qbin"), MaxPrefill: 16, Progress: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("err = %v", err)
	}
}

// Without an output, the file is named after the model's directory, in
// the current one (t.Chdir: not in parallel with other tests).
func TestDefaultOutput(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "Qwen3-0.6B")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "model.safetensors")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{dir, dir + "/", file} {
		if got := DefaultOutput(model); got != "Qwen3-0.6B.qbin" {
			t.Errorf("%s: %q, want Qwen3-0.6B.qbin", model, got)
		}
	}
	t.Chdir(dir)
	if got := DefaultOutput("."); got != "Qwen3-0.6B.qbin" {
		t.Errorf(".: %q, want the current directory's name", got)
	}
	model := writeModel(t, smallShape())
	work := t.TempDir()
	t.Chdir(work)
	res, err := Compile(context.Background(), model, Options{MaxPrefill: 16, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Base(model) + ".qbin"; res.Output != want || len(dirEntries(t, work)) != 1 {
		t.Errorf("wrote %q, and %v in the current directory; want %q", res.Output, dirEntries(t, work), want)
	}
}

// An output that is a directory is refused before anything is read or
// written: the final rename would fail only after all the work.
func TestOutputIsADirectory(t *testing.T) {
	model := writeModel(t, smallShape())
	out := t.TempDir()
	var progress strings.Builder
	_, err := Compile(context.Background(), model, Options{Output: out, MaxPrefill: 16, Progress: &progress})
	if want := "output " + out + ": is a directory; name the .qbin file to write"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if progress.Len() != 0 {
		t.Errorf("progress before the refusal: %q", progress.String())
	}
	if names := dirEntries(t, out); len(names) != 0 {
		t.Errorf("the directory holds %v", names)
	}
}

// smallQwen35 is a small hybrid checkpoint laid out as Qwen3.5 ships:
// the multimodal config with text_config inside, a vision stub, one MTP
// layer, three DeltaNet layers to one attention layer.
func smallQwen35() synth.Shape {
	return synth.Shape{ModelType: "qwen3_5", Hidden: 40, Intermediate: 56, Layers: 4, Heads: 3, KVHeads: 1, HeadDim: 20,
		Vocab: 300, MaxPositions: 128, Tied: true, DType: "BF16", Seed: 11, EOS: synth.MiniEOS,
		Qwen35: synth.Qwen35{FullAttentionInterval: 4, LinearKeyHeads: 2, LinearValueHeads: 6, LinearKeyHeadDim: 12, LinearValueHeadDim: 10,
			ConvKernel: 4, PartialRotaryFactor: 0.4, MTPLayers: 1, Vision: true}}
}

// editTextConfig edits the text model's fields of a Qwen3.5 config.json,
// which sit under text_config.
func editTextConfig(t *testing.T, dir string, f func(map[string]any)) {
	editConfig(t, dir, func(c map[string]any) {
		tc, ok := c["text_config"].(map[string]any)
		if !ok {
			t.Fatal("config.json has no text_config")
		}
		f(tc)
	})
}

// TestBadInputQwen35 checks the hybrid checkpoints' own ways to be wrong:
// each names the tensor or field at fault, the ones this build cannot run
// say they are not supported yet, and nothing is left in the output
// directory.
func TestBadInputQwen35(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T, dir string)
		want   []string
	}{
		{"missing DeltaNet tensor", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "model.safetensors"), safetensorsHeaderEdit(t, func(h string) string {
				return strings.Replace(h, `"model.language_model.layers.1.linear_attn.A_log"`, `"model.language_model.layers.1.linear_attn.A_loX"`, 1)
			}))
		}, []string{`model.language_model.layers.1.linear_attn.A_log`, "missing"}},
		{"missing MTP tensor", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "model.safetensors"), safetensorsHeaderEdit(t, func(h string) string {
				return strings.Replace(h, `"mtp.fc.weight"`, `"mtp.fc.weighX"`, 1)
			}))
		}, []string{`mtp.fc.weight`, "missing"}},
		{"conv kernel disagrees", func(t *testing.T, d string) {
			editTextConfig(t, d, func(c map[string]any) { c["linear_conv_kernel_dim"] = 3 })
		}, []string{"linear_attn.conv1d.weight", "shape"}},
		{"value heads disagree", func(t *testing.T, d string) {
			editTextConfig(t, d, func(c map[string]any) { c["linear_num_value_heads"] = 4 })
		}, []string{"model.language_model.layers.0.linear_attn", "shape"}},
		{"unknown layer type", func(t *testing.T, d string) {
			editTextConfig(t, d, func(c map[string]any) {
				c["layer_types"] = []any{"linear_attention", "sliding_attention", "linear_attention", "full_attention"}
			})
		}, []string{"config.json", "layer_types", `layer 1 is "sliding_attention"`, "does not support yet"}},
		{"layer types of another depth", func(t *testing.T, d string) {
			editTextConfig(t, d, func(c map[string]any) { c["layer_types"] = []any{"linear_attention", "full_attention"} })
		}, []string{"config.json", "layer_types", "2 entries for 4 layers"}},
		{"Qwen3.8-Flash-Next", func(t *testing.T, d string) {
			editConfig(t, d, func(c map[string]any) {
				c["model_type"] = "qwen4_exp"
				c["text_config"].(map[string]any)["model_type"] = "qwen4_exp_text"
			})
		}, []string{"config.json", `"qwen4_exp"`, "Qwen3.8-Flash-Next", "not supported yet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeModel(t, smallQwen35())
			tc.mutate(t, dir)
			outDir := t.TempDir()
			refused(t, dir, dir, outDir, tc.want)
		})
	}
}

// refused compiles input from the model directory dir into outDir and
// checks the error: one line, naming each of want, the model directory
// once (the file at fault under it, no path twice), and nothing written.
func refused(t *testing.T, dir, input, outDir string, want []string) {
	t.Helper()
	_, err := Compile(context.Background(), input, Options{Output: filepath.Join(outDir, "out.qbin"), MaxPrefill: 16, NoSync: true})
	if err == nil {
		t.Fatal("compile succeeded")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("error is not one line: %q", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not mention %q", msg, w)
		}
	}
	if n := strings.Count(msg, dir); n != 1 {
		t.Errorf("error %q names the model directory %d times, want once", msg, n)
	}
	if names := dirEntries(t, outDir); len(names) != 0 {
		t.Errorf("output directory holds %v", names)
	}
}

// TestNamedPipesRefused: a named pipe where a checkpoint's file should be
// is refused by name. Opening or reading one blocks until a writer comes,
// where no signal would end the wait: the compile hung.
func TestNamedPipesRefused(t *testing.T) {
	model := writeModel(t, smallShape())
	pipe := func(path string) {
		t.Helper()
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(path, 0o644); err != nil {
			t.Skip(err)
		}
	}
	weights := filepath.Join(model, "model.safetensors")
	pipe(weights)
	for _, c := range []struct{ what, model, path string }{
		{"a directory's weights", model, weights},
		{"the weights given by name", weights, weights},
		{"a directory's config", model, filepath.Join(model, "config.json")},
	} {
		if c.path != weights {
			pipe(c.path)
		}
		done := make(chan error, 1)
		go func() {
			_, err := Compile(context.Background(), c.model, Options{Output: filepath.Join(t.TempDir(), "out.qbin"), MaxPrefill: 16, NoSync: true})
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.path+": not a regular file (a named pipe)") {
				t.Errorf("%s a named pipe: %v", c.what, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s a named pipe: the compile still waits after a minute", c.what)
		}
	}
}

// TestOutputNotARegularFile: an output that is a device or a pipe is
// refused before any work and left as it is. The finished file is
// renamed over the output, which replaced the node: a CI job's
// -o /dev/null, run as root, turned /dev/null into a regular file.
func TestOutputNotARegularFile(t *testing.T) {
	model := writeModel(t, smallShape())
	dir := t.TempDir()
	out := filepath.Join(dir, "out.qbin")
	if err := syscall.Mkfifo(out, 0o644); err != nil {
		t.Skip(err)
	}
	_, err := Compile(context.Background(), model, Options{Output: out, MaxPrefill: 16, NoSync: true})
	if want := "output " + out + ": not a regular file (a named pipe)"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err = %v, want it to begin %q", err, want)
	}
	if st, err := os.Lstat(out); err != nil || st.Mode().Type() != fs.ModeNamedPipe {
		t.Errorf("the pipe is now %v (%v)", st.Mode(), err)
	}
	if names := dirEntries(t, dir); len(names) != 1 {
		t.Errorf("the directory holds %v", names)
	}
}

// TestNamedChatTemplates: of a list of named templates, "default" is the
// one compiled; an empty list is no template.
func TestNamedChatTemplates(t *testing.T) {
	for cfg, want := range map[string]string{
		`{"chat_template": [{"name": "tool_use", "template": "x"}, {"name": "default", "template": "<|im_start|>"}]}`: "<|im_start|>",
		`{"chat_template": []}`: "",
	} {
		if got, _, err := chatTemplate([]byte(cfg)); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", cfg, got, err, want)
		}
	}
}

// addTensorCopy appends to model.safetensors a tensor name holding the
// bytes of tensor from, changed by change.
func addTensorCopy(t *testing.T, dir, name, from string, change func([]byte)) {
	t.Helper()
	edit(t, filepath.Join(dir, "model.safetensors"), func(b []byte) []byte {
		n := binary.LittleEndian.Uint64(b)
		var h map[string]json.RawMessage
		if err := json.Unmarshal(b[8:8+n], &h); err != nil {
			t.Fatal(err)
		}
		var e struct {
			DType       string  `json:"dtype"`
			Shape       []int64 `json:"shape"`
			DataOffsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(h[from], &e); err != nil {
			t.Fatal(err)
		}
		data := b[8+n:]
		copied := slices.Clone(data[e.DataOffsets[0]:e.DataOffsets[1]])
		change(copied)
		e.DataOffsets = []int64{int64(len(data)), int64(len(data) + len(copied))}
		h[name], _ = json.Marshal(e)
		hb, _ := json.Marshal(h)
		out := binary.LittleEndian.AppendUint64(nil, uint64(len(hb)))
		return append(append(append(out, hb...), data...), copied...)
	})
}

// TestTiedHeadCopyAccepted: a head saved beside a tied embedding as its
// copy (as some fine-tuning tools save it) is what tying makes it, and
// compiles as if absent. A config without MTP layers beside the MTP
// block's tensors leaves them out with a note: they change no output.
func TestTiedHeadCopyAccepted(t *testing.T) {
	dir := writeModel(t, smallShape())
	plain := compileTo(t, dir)
	addTensorCopy(t, dir, "lm_head.weight", "model.embed_tokens.weight", func([]byte) {})
	if a, b := readAll(t, plain), readAll(t, compileTo(t, dir)); !bytes.Equal(a, b) {
		t.Error("the head's copy changed the compiled file")
	}
	// Absent, or 0 (transformers' config takes it).
	for _, edit := range []func(map[string]any){
		func(c map[string]any) { delete(c, "mtp_num_hidden_layers") },
		func(c map[string]any) { c["mtp_num_hidden_layers"] = 0 },
	} {
		q35 := writeModel(t, smallQwen35())
		editTextConfig(t, q35, edit)
		res, err := Compile(context.Background(), q35, Options{Output: filepath.Join(t.TempDir(), "out.qbin"), MaxPrefill: 16, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.HasPrefix(n, "the MTP block (") }) {
			t.Errorf("notes %q do not say the MTP block is left out", res.Notes)
		}
	}
}

func readAll(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestQwen35WithoutMTPBlock: a Qwen3.5 checkpoint saved by transformers
// (a fine-tune, a quantization) keeps mtp_num_hidden_layers and has none
// of the MTP block's tensors, which transformers drops on load: it
// compiles without the block, saying so, where it was refused for the
// first tensor missing. Part of the block missing is still refused
// (TestBadInputQwen35).
func TestQwen35WithoutMTPBlock(t *testing.T) {
	dir := writeModel(t, smallQwen35())
	edit(t, filepath.Join(dir, "model.safetensors"), safetensorsHeaderEdit(t, func(h string) string {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(h), &m); err != nil {
			t.Fatal(err)
		}
		n := 0
		for name := range m {
			if strings.HasPrefix(name, "mtp.") {
				delete(m, name)
				n++
			}
		}
		if n == 0 {
			t.Fatal("the model has no MTP tensors to drop")
		}
		b, _ := json.Marshal(m)
		return string(b)
	}))
	out := filepath.Join(t.TempDir(), "out.qbin")
	res, err := Compile(context.Background(), dir, Options{Output: out, MaxPrefill: 16, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	checkNoMTP(t, res, out, "the checkpoint has no MTP block")
}

// checkNoMTP checks that a compile to out without an MTP block said so
// in a note beginning with note, and that the file has no MTP layers.
func checkNoMTP(t *testing.T, res *Result, out, note string) {
	t.Helper()
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.HasPrefix(n, note) }) {
		t.Errorf("notes %q do not say the MTP block is absent", res.Notes)
	}
	f, err := format.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := f.Header.Config.MTPLayers; n != 0 {
		t.Errorf("the file says %d MTP layers", n)
	}
}
