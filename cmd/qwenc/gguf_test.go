package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format/ggml"
	"github.com/qwenc/qwenc/format/gguf"
	"github.com/qwenc/qwenc/internal/testmodel"
)

// TestCompileGGUF compiles a Q8_0 GGUF with the types it has (its
// blocks kept exactly, no KL to measure) and as q4, which says what the
// new rounding changed: the largest change of a weight and the KL
// divergence over a short text, measured against an f16 reference that
// is gone afterwards.
func TestCompileGGUF(t *testing.T) {
	src := testmodel.GGUF(t, "tiny-a-Q8_0")
	work := t.TempDir()
	_, stderr, code := run(t, work, "compile", src, "--no-sync")
	if code != 0 || !strings.Contains(stderr, "GGUF weights kept exactly: 15 q8_0 to q8\n") || strings.Contains(stderr, "KL") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(work, "tiny-a-Q8_0.qbin")); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = run(t, work, "compile", src, "--type", "q4", "-o", "q4.qbin", "--no-sync")
	// q4's rules give the head and the use_more_bits layers' v and down
	// projections (one layer of tiny-a's two) q6: none stays q8_0.
	for _, want := range []string{"GGUF weights converted: 12 q8_0 to q4, 3 q8_0 to q6; largest change of a weight 0.0",
		"KL divergence from the GGUF's own weights: 0."} {
		if code != 0 || !strings.Contains(stderr, want) {
			t.Errorf("exit %d: stderr does not say %q:\n%s", code, want, stderr)
		}
	}
	es, _ := os.ReadDir(work)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"q4.qbin", "tiny-a-Q8_0.qbin"}) {
		t.Errorf("the directory holds %v", names)
	}
	_, stderr, code = run(t, work, "compile", src, "--type", "q4", "-o", "q4b.qbin", "--no-sync", "--no-kl")
	if code != 0 || strings.Contains(stderr, "KL") || strings.Count(stderr, "q8_0 is kept exactly by --type q8") != 1 {
		t.Errorf("--no-kl: exit %d: %s", code, stderr)
	}
}

// TestInspectGGUF: --json lists a GGUF's tensors with their names, ggml
// types and dimensions, and its metadata.
func TestInspectGGUF(t *testing.T) {
	zoo := testmodel.Testdata(t, "gguf", "zoo.gguf")
	out, stderr, code := run(t, t.TempDir(), "inspect", "--json", zoo)
	var r struct {
		Format   string `json:"format"`
		Version  int    `json:"version"`
		Metadata []struct {
			Key, Type string
			Value     any
		} `json:"metadata"`
		Tensors []struct {
			Name, Type string
			Shape      []uint64
		} `json:"tensors"`
		ConfigError string `json:"config_error"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 {
		t.Fatalf("exit %d, %v: %s", code, err, stderr)
	}
	var exp struct {
		Tensors []struct {
			Name, Type string
			Ne         []uint64
		}
	}
	b, _ := os.ReadFile(testmodel.Testdata(t, "gguf", "zoo_expected.json"))
	json.Unmarshal(b, &exp)
	if r.Format != "gguf" || r.Version != 3 || len(r.Tensors) != len(exp.Tensors) || !strings.Contains(r.ConfigError, `"zoo" is not supported`) {
		t.Fatalf("%s version %d, %d tensors, config error %q", r.Format, r.Version, len(r.Tensors), r.ConfigError)
	}
	for i, e := range exp.Tensors {
		if g := r.Tensors[i]; g.Name != e.Name || g.Type != e.Type || !slices.Equal(g.Shape, e.Ne) {
			t.Errorf("tensor %d: %+v, want %+v", i, g, e)
		}
	}
	found := false
	for _, m := range r.Metadata {
		found = found || m.Key == "zoo.minus_one" && m.Type == "i32" && m.Value == float64(-1)
	}
	if !found {
		t.Errorf("zoo.minus_one not listed as i32 -1: %+v", r.Metadata)
	}
	text, _, code := run(t, t.TempDir(), "inspect", zoo)
	if code != 0 || !strings.Contains(text, "iq3_s.m256x4") || !strings.Contains(text, "compiles: no: general.architecture \"zoo\"") {
		t.Errorf("exit %d:\n%s", code, text)
	}
}

// TestInspectGGUFValues: --json gives every metadata value as JSON
// holds it: an array of u8 as numbers (not base64), a float that is not
// finite as its text, at any depth.
func TestInspectGGUFValues(t *testing.T) {
	kv := []gguf.KV{
		{Key: "general.architecture", Type: gguf.String, Value: "test"},
		{Key: "test.bytes", Type: gguf.Array, Elem: gguf.Uint8, Value: []uint8{1, 2, 255}},
		{Key: "test.nan", Type: gguf.Float64, Value: math.NaN()},
		{Key: "test.floats", Type: gguf.Array, Elem: gguf.Float32, Value: []float32{1.5, float32(math.Inf(-1))}},
		{Key: "test.nested", Type: gguf.Array, Elem: gguf.Array, Value: []any{[]uint8{7}, []float64{math.Inf(1)}}},
	}
	var b bytes.Buffer
	if err := gguf.Write(&b, kv, []gguf.TensorData{{Name: "v", Type: ggml.F32, Dims: []uint64{2}, Data: make([]byte, 8)}}); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	p := filepath.Join(work, "v.gguf")
	os.WriteFile(p, b.Bytes(), 0o644)
	out, stderr, code := run(t, work, "inspect", "--json", p)
	var r struct {
		Metadata []struct {
			Key   string
			Value any
		}
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 {
		t.Fatalf("exit %d, %v: %s", code, err, stderr)
	}
	want := map[string]string{"test.bytes": "[1 2 255]", "test.nan": "NaN", "test.floats": "[1.5 -Inf]", "test.nested": "[[7] [+Inf]]"}
	for _, m := range r.Metadata {
		if w, ok := want[m.Key]; ok && fmt.Sprint(m.Value) != w {
			t.Errorf("%s: %v, want %s", m.Key, m.Value, w)
		}
	}
}

// TestInspectNotGGUF: a .gguf file that does not start as one is
// refused as not a GGUF file, whatever inspect is asked.
func TestInspectNotGGUF(t *testing.T) {
	work := t.TempDir()
	p := filepath.Join(work, "m.gguf")
	os.WriteFile(p, append([]byte("GGUX"), make([]byte, 4096)...), 0o644)
	for _, args := range [][]string{{"inspect", p}, {"inspect", "--json", p}, {"inspect", p, "--tensor", "x"}} {
		_, stderr, code := run(t, work, args...)
		if code == 0 || !strings.Contains(stderr, p+`: not a GGUF file: it starts with "GGUX"`) {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
	}
}

// TestInspectDequant writes a tensor's values: a GGUF's as ggml decodes
// them, a .qbin section's as the runtime reads them; a Q8_0 tensor
// compiled to q8 reads back the same.
func TestInspectDequant(t *testing.T) {
	work := t.TempDir()
	zoo := testmodel.Testdata(t, "gguf", "zoo.gguf")
	var exp struct {
		Tensors []struct {
			Name          string
			Offset, Count int
		}
	}
	b, _ := os.ReadFile(testmodel.Testdata(t, "gguf", "zoo_expected.json"))
	json.Unmarshal(b, &exp)
	gz, _ := os.Open(testmodel.Testdata(t, "gguf", "zoo_expected.f32.gz"))
	zr, _ := gzip.NewReader(gz)
	vals, _ := io.ReadAll(zr)
	gz.Close()
	for _, e := range exp.Tensors {
		if !strings.HasSuffix(e.Name, "m512x3") {
			continue
		}
		out := filepath.Join(work, e.Name+".f32")
		if _, stderr, code := run(t, work, "inspect", zoo, "--tensor", e.Name, "--dequant", out); code != 0 {
			t.Fatalf("%s: exit %d: %s", e.Name, code, stderr)
		}
		got, _ := os.ReadFile(out)
		if !bytes.Equal(got, vals[4*e.Offset:4*(e.Offset+e.Count)]) {
			t.Errorf("%s: the values written are not ggml's", e.Name)
		}
	}
	src := testmodel.GGUF(t, "tiny-a-Q8_0")
	qbin := filepath.Join(work, "m.qbin")
	if _, stderr, code := run(t, work, "compile", "-q", src, "-o", qbin); code != 0 {
		t.Fatal(stderr)
	}
	for _, c := range [][3]string{{src, "blk.1.ffn_down.weight", "g.f32"}, {qbin, "layers.1.down_proj", "q.f32"}} {
		stdout, stderr, code := run(t, work, "inspect", c[0], "--tensor", c[1], "--dequant", c[2])
		if code != 0 || !strings.Contains(stdout, "values: 12288,") {
			t.Fatalf("%s: exit %d: %s%s", c[1], code, stdout, stderr)
		}
	}
	g, _ := os.ReadFile(filepath.Join(work, "g.f32"))
	q, _ := os.ReadFile(filepath.Join(work, "q.f32"))
	if len(g) != 4*12288 || !bytes.Equal(g, q) {
		t.Error("the q8 section does not read back as the Q8_0 tensor it was copied from")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", zoo, "--dequant", "x.f32"}, "--dequant needs --tensor"},
		{[]string{"inspect", zoo, "--tensor", "nope", "--dequant", "x.f32"}, `no tensor "nope"`},
		{[]string{"inspect", qbin, "--tensor", "tokenizer"}, "holds no values"},
		// Flags that what is printed would ignore, and a file that could
		// not be written, refused up front.
		{[]string{"inspect", qbin, "--tensor", "norm", "--dequant", filepath.Join("no", "x.f32")}, "qwenc: --dequant no/x.f32: its directory does not exist\n"},
		{[]string{"inspect", zoo, "--seq", "5"}, "qwenc: inspect: --seq sizes a .qbin file's KV cache table, which --tensor and a GGUF file's listing do not print\n"},
		{[]string{"inspect", qbin, "--tensor", "norm", "--kv-type", "q8"}, "qwenc: inspect: --kv-type sizes a .qbin file's KV cache table"},
		{[]string{"inspect", qbin, "--tensor", "norm", "--json"}, "qwenc: inspect: --json prints the whole file's listing; --tensor prints text\n"},
	} {
		_, stderr, code := run(t, work, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q", c.args, code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(work, "x.f32")); err == nil {
		t.Error("a failed --dequant left its file")
	}
}

// TestCompileOllama: ollama:NAME finds the model in $OLLAMA_MODELS, or
// without it in ~/.ollama/models, as Ollama does.
func TestCompileOllama(t *testing.T) {
	home := t.TempDir()
	store := filepath.Join(home, ".ollama", "models")
	model, err := os.ReadFile(testmodel.GGUF(t, "tiny-moe-a-f16"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(model)
	blob := filepath.Join(store, "blobs", "sha256-"+hex.EncodeToString(sum[:]))
	os.MkdirAll(filepath.Dir(blob), 0o755)
	os.WriteFile(blob, model, 0o644)
	manifest := filepath.Join(store, "manifests", "registry.ollama.ai", "library", "tiny", "latest")
	os.MkdirAll(filepath.Dir(manifest), 0o755)
	os.WriteFile(manifest, fmt.Appendf(nil, `{"layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:%x", "size": %d}]}`, sum, len(model)), 0o644)
	work := t.TempDir()
	env := append(os.Environ(), "OLLAMA_MODELS="+store)
	runEnv := func(args ...string) (string, int) {
		cmd := exec.Command(qwencBin, args...)
		cmd.Dir, cmd.Env = work, env
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		return string(out), 0
	}
	if out, code := runEnv("compile", "-q", "--no-sync", "ollama:tiny"); code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(work, "tiny.qbin")); err != nil {
		t.Error(err)
	}
	if out, code := runEnv("compile", "-q", "ollama:qwen3:8b"); code != 1 || !strings.Contains(out, "not in Ollama's store "+store) {
		t.Errorf("a name the store lacks: exit %d: %s", code, out)
	}
	env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	if out, code := runEnv("compile", "-q", "--no-sync", "-o", "home.qbin", "ollama:tiny"); code != 0 {
		t.Fatalf("from ~/.ollama/models: exit %d: %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(work, "home.qbin")); err != nil {
		t.Error(err)
	}
}
