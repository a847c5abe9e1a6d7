package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/tokenizer"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
	"github.com/qwenc/qwenc/runtime/infer"
)

var qwencBin string

const testVersion = "v0.0.0-test"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "qwenc-bin")
	if err != nil {
		panic(err)
	}
	qwencBin = filepath.Join(dir, "qwenc")
	// The version a release build would set; qwenrun's tests run a build without it.
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.version="+testVersion, "-o", qwencBin, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func run(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(qwencBin, args...)
	cmd.Dir = dir
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func model(t *testing.T, name string) string {
	dir := filepath.Join(t.TempDir(), name)
	s := synth.Shape{ModelType: "qwen3", Hidden: 40, Intermediate: 70, Layers: 2, Heads: 3, KVHeads: 1, HeadDim: 10,
		Vocab: 300, MaxPositions: 512, Tied: true, DType: "BF16", EOS: synth.MiniEOS}
	if err := synth.WriteMini(dir, s); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCompileInspectVerify(t *testing.T) {
	m := model(t, "small-model")
	work := t.TempDir()
	// Flags after the model path; default output named after the directory.
	_, stderr, code := run(t, work, "compile", m, "--max-prefill", "32")
	if code != 0 {
		t.Fatalf("compile exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "sections") {
		t.Errorf("no progress on stderr: %q", stderr)
	}
	out := filepath.Join(work, "small-model.qbin")
	if _, err := os.Stat(out); err != nil {
		t.Fatal(err)
	}
	if _, stderr, _ := run(t, work, "compile", "-q", m, "-o", "quiet.qbin"); stderr != "" {
		t.Errorf("--quiet printed %q", stderr)
	}

	stdout, stderr, code := run(t, work, "inspect", out)
	if code != 0 {
		t.Fatalf("inspect exit %d: %s", code, stderr)
	}
	for _, want := range []string{"model: qwen3, hidden 40", "layers.1.down_proj", "tile-major", "MiB", "decode (1 token)", "prefill (32 tokens)", "KV cache"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inspect output lacks %q", want)
		}
	}

	stdout, _, code = run(t, work, "inspect", "--json", "--seq", "5,300", out)
	if code != 0 {
		t.Fatal("inspect --json failed")
	}
	var j map[string]any
	if err := json.Unmarshal([]byte(stdout), &j); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"format_version", "config.hidden_size", "config.intermediate_size", "config.num_hidden_layers",
		"config.num_attention_heads", "config.num_key_value_heads", "config.head_dim", "config.vocab_size", "config.tie_word_embeddings",
		"config.model_type", "memory.weights_bytes", "memory.embeddings_row_major_bytes", "memory.embeddings_tile_major_bytes",
		"memory.layers_bytes", "memory.arena.decode_bytes", "memory.arena.decode_naive_bytes", "memory.arena.decode_peak_live_bytes",
		"memory.arena.prefill_bytes", "memory.arena.prefill_naive_bytes", "memory.arena.prefill_peak_live_bytes", "memory.arena.max_prefill",
		"memory.kv.chunk_tokens", "memory.kv.chunk_bytes_per_layer", "memory.kv.by_seq"} {
		var v any = j
		for _, k := range strings.Split(path, ".") {
			v = v.(map[string]any)[k]
		}
		if v == nil {
			t.Errorf("inspect --json lacks %s", path)
		}
	}
	secs := j["sections"].([]any)
	first := secs[0].(map[string]any)
	for _, k := range []string{"name", "dtype", "layout", "shape", "offset", "size"} {
		if first[k] == nil {
			t.Errorf("section lacks %q", k)
		}
	}
	if by := j["memory"].(map[string]any)["kv"].(map[string]any)["by_seq"].([]any); len(by) != 2 {
		t.Errorf("by_seq has %d rows, want 2", len(by))
	}
	// --kv-type q8 sizes the 8-bit cache, per chunk, layer and KV head: 256
	// f32 value scales, K as 8 q8 tiles of head_dim rounded up to blocks of
	// 32 (1088 bytes a block: 32 f16 scales, 32 x 32 values), V as
	// ceil(head_dim/32) q8 tiles of 256 columns.
	stdout, _, code = run(t, work, "inspect", "--json", "--seq", "300", "--kv-type", "q8", out)
	if code != 0 {
		t.Fatal("inspect --kv-type q8 failed")
	}
	var q8 struct {
		Config struct {
			KVHeads int `json:"num_key_value_heads"`
			HeadDim int `json:"head_dim"`
			Layers  int `json:"num_hidden_layers"`
		} `json:"config"`
		Memory struct {
			KV struct {
				Type  string `json:"type"`
				Chunk int64  `json:"chunk_bytes_per_layer"`
				BySeq []struct {
					Total int64 `json:"total_bytes"`
				} `json:"by_seq"`
			} `json:"kv"`
		} `json:"memory"`
	}
	if err := json.Unmarshal([]byte(stdout), &q8); err != nil {
		t.Fatal(err)
	}
	hd := q8.Config.HeadDim
	tiles := int64(hd+31) / 32
	want := int64(q8.Config.KVHeads) * (256*4 + 8*tiles*1088 + tiles*8*1088)
	if kv := q8.Memory.KV; kv.Type != "q8" || kv.Chunk != want || len(kv.BySeq) != 1 || kv.BySeq[0].Total != 2*want*int64(q8.Config.Layers) {
		t.Errorf("inspect --kv-type q8: %+v, want type q8 and %d bytes per chunk and layer", kv, want)
	}

	if stdout, _, code := run(t, work, "verify", out); code != 0 || !strings.Contains(stdout, "ok") {
		t.Fatalf("verify: exit %d, %q", code, stdout)
	}
	b, _ := os.ReadFile(out)
	b[len(b)/2] ^= 0xff
	os.WriteFile(out, b, 0o644)
	_, stderr, code = run(t, work, "verify", out)
	if code != 1 || !strings.Contains(stderr, "checksum mismatch") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("verify of a damaged file: exit %d, %q", code, stderr)
	}
}

func TestBadInputExitsOne(t *testing.T) {
	m := model(t, "broken")
	os.WriteFile(filepath.Join(m, "config.json"), []byte(`{"model_type": "llama"}`), 0o644)
	work := t.TempDir()
	_, stderr, code := run(t, work, "compile", m)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "config.json") || !strings.Contains(stderr, "model_type") {
		t.Fatalf("stderr %q is not one line naming the file and field", stderr)
	}
	if es, _ := os.ReadDir(work); len(es) != 0 {
		t.Fatalf("left %d files behind", len(es))
	}
	for _, args := range [][]string{{"inspect", filepath.Join(m, "config.json")}, {"verify", "/nonexistent.qbin"}} {
		if _, stderr, code := run(t, work, args...); code != 1 || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// A value-taking flag written last must not take the "--" that the flag
// reordering puts before the arguments (it once wrote a file named "--").
func TestFlagWithoutValue(t *testing.T) {
	m := model(t, "small-model")
	work := t.TempDir()
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"compile", m, "-o"}, "-o"},
		{[]string{"compile", m, "--quiet", "--output"}, "--output"},
		{[]string{"inspect", "small-model.qbin", "--seq"}, "--seq"},
	} {
		out, stderr, code := run(t, work, tc.args...)
		want := "qwenc: flag needs an argument: " + tc.flag + "\nRun 'qwenc " + tc.args[0] + " --help' for usage.\n"
		if code != 1 || stderr != want || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", tc.args, code, out, stderr, want)
		}
	}
	if es, _ := os.ReadDir(work); len(es) != 0 {
		t.Fatalf("wrote %v", es)
	}
}

// TestCompileTypes compiles q8 and q4 files through the command, checks
// inspect's dtypes and decode_weight_bytes, verify, and an unknown --type.
func TestCompileTypes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q-model")
	s := synth.Shape{ModelType: "qwen3", Hidden: 64, Intermediate: 100, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 300, MaxPositions: 512, Tied: true, DType: "BF16", EOS: synth.MiniEOS}
	if err := synth.WriteMini(dir, s); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	for _, typ := range []string{"q8", "q4"} {
		out := filepath.Join(work, typ+".qbin")
		if _, stderr, code := run(t, work, "compile", dir, "--type", typ, "-o", out, "-q"); code != 0 {
			t.Fatalf("compile --type %s: exit %d: %s", typ, code, stderr)
		}
		if _, stderr, code := run(t, work, "verify", out); code != 0 {
			t.Fatalf("verify %s: %s", typ, stderr)
		}
		stdout, _, code := run(t, work, "inspect", out, "--json")
		var r struct {
			Sections []struct{ Name, DType, Layout string } `json:"sections"`
			Memory   struct {
				Weights uint64            `json:"weights_bytes"`
				Decode  uint64            `json:"decode_weight_bytes"`
				ByDType map[string]uint64 `json:"matrix_bytes_by_dtype"`
				KeptF16 []string          `json:"kept_f16"`
			} `json:"memory"`
		}
		if err := json.Unmarshal([]byte(stdout), &r); err != nil || code != 0 {
			t.Fatalf("inspect --json %s: exit %d, %v", typ, code, err)
		}
		types := map[string]string{}
		for _, sec := range r.Sections {
			types[sec.Name] = sec.DType
		}
		// FFN 100 is not a multiple of 32: down_proj stays f16; the tied
		// embedding is the head, stored once.
		head := typ
		if typ == "q4" {
			head = "q6"
		}
		if types["layers.0.q_proj"] != typ || types["layers.1.down_proj"] != "f16" || types["lm_head"] != head ||
			types["embed_tokens"] != "" || types["norm"] != "f32" {
			t.Errorf("%s: dtypes %v", typ, types)
		}
		if len(r.Memory.KeptF16) != 2 || r.Memory.Decode != r.Memory.Weights || r.Memory.ByDType["f16"] == 0 || r.Memory.ByDType[head] == 0 {
			t.Errorf("%s: memory report %+v", typ, r.Memory)
		}
		text, _, _ := run(t, work, "inspect", out)
		for _, want := range []string{"matrices by type:", "kept at f16 (columns not a multiple of 32): layers.0.down_proj, layers.1.down_proj",
			"embedding: looked up in the tied LM head", "read by one decode step"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: inspect does not say %q", typ, want)
			}
		}
	}
	_, stderr, code := run(t, work, "compile", dir, "--type", "q3", "-o", filepath.Join(work, "x.qbin"))
	if code != 1 || strings.TrimSpace(stderr) != `qwenc: compile: unknown --type "q3" (want f16, q8 or q4)` {
		t.Errorf("--type q3: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(work, "x.qbin")); err == nil {
		t.Error("--type q3 wrote a file")
	}
}

// An -o that names the checkpoint's own files is refused, and they stay:
// the compiled file once replaced them, exit 0.
func TestOutputIsNotInput(t *testing.T) {
	m := model(t, "own-files")
	work := t.TempDir()
	for _, name := range []string{"model.safetensors", "config.json"} {
		path := filepath.Join(m, name)
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, stderr, code := run(t, work, "compile", "-q", m, "-o", path)
		if want := "qwenc: -o " + path + " is a file of the checkpoint MODEL: the compile would replace its own input\n"; code != 1 || stderr != want {
			t.Errorf("-o %s: exit %d, stderr %q; want exit 1 and %q", name, code, stderr, want)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
			t.Errorf("-o %s: the checkpoint's file changed", name)
		}
	}
	src := filepath.Join(m, "model.safetensors")
	if _, stderr, code := run(t, work, "compile", "-q", src, "-o", src); code != 1 || stderr != "qwenc: -o "+src+" is MODEL itself: the compile would replace its own input\n" {
		t.Errorf("-o MODEL: exit %d, stderr %q", code, stderr)
	}
	// A .qbin beside the checkpoint is an output like any other.
	if _, stderr, code := run(t, work, "compile", "-q", m, "-o", filepath.Join(m, "own-files.qbin")); code != 0 {
		t.Errorf("-o beside the checkpoint: exit %d, %s", code, stderr)
	}
}

// A listing or an "ok" that cannot be written (here to /dev/full, as to
// a full disk) is a failure: exit 1, not 0 with the output lost.
func TestStdoutWriteError(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full here: %v", err)
	}
	defer full.Close()
	work := t.TempDir()
	if _, stderr, code := run(t, work, "compile", "-q", model(t, "small-model"), "-o", "m.qbin"); code != 0 {
		t.Fatal(stderr)
	}
	for _, args := range [][]string{{"inspect", "m.qbin"}, {"inspect", "--json", "m.qbin"}, {"inspect", "m.qbin", "--tensor", "norm"}, {"verify", "m.qbin"}} {
		cmd := exec.Command(qwencBin, args...)
		cmd.Dir = work
		var e bytes.Buffer
		cmd.Stdout, cmd.Stderr = full, &e
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(e.String(), "no space left on device") {
			t.Errorf("%q: exit %v, stderr %q; want exit 1 and the write error", args, err, e.String())
		}
	}
}

// TestVerifyRefusesTokenizerBeyondVocab: a file whose tokenizer has more
// ids than config.vocab_size (rows of the head) is refused by verify, as
// qwenrun refuses to open it. A quantized tied file's only vocabulary
// section is lm_head, whose size is the same for any vocabulary of as
// many tiles of 32 rows, so only the header changes.
func TestVerifyRefusesTokenizerBeyondVocab(t *testing.T) {
	s := synth.Shape{ModelType: "qwen3", Hidden: 32, Intermediate: 64, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 16,
		Vocab: 288, MaxPositions: 64, Tied: true, DType: "BF16", EOS: synth.MiniEOS}
	path := synthtest.CompileAs(t, s, 4, format.Q8)
	f, err := format.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	h := f.Header
	tb, err := f.Bytes(format.SecTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(bytes.Clone(tb))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.VocabSize()
	if ids <= 257 || ids > s.Vocab {
		t.Fatalf("the mini tokenizer's %d ids leave no smaller vocabulary in lm_head's tiles", ids)
	}
	h.Config.Vocab = ids - 1
	head, _ := h.Section(format.SecLMHead)
	head.Shape[0] = uint64(ids - 1)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "short.qbin")
	if err := os.WriteFile(out, synthtest.WithHeader(t, b, h), 0o644); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`%s: section "tokenizer": %d token ids for a vocabulary of %d (config.vocab_size)`, out, ids, ids-1)
	if _, stderr, code := run(t, t.TempDir(), "verify", out); code != 1 || strings.TrimSpace(stderr) != "qwenc: "+want {
		t.Errorf("verify: exit %d, %q; want exit 1 and %q", code, stderr, want)
	}
	if m, err := infer.Open(out, infer.Options{Threads: 1}); err == nil || err.Error() != want {
		if m != nil {
			m.Close()
		}
		t.Errorf("qwenrun's open: %v; want %q", err, want)
	}
}
