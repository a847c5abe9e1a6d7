package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
	"github.com/qwenc/qwenc/runtime/perplexity"
)

// goText is Go source to score: this test file itself, a few thousand
// tokens of text the bundled model was not trained on.
func goText(t *testing.T, repeat int) string {
	b, err := os.ReadFile("perplexity_test.go")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "text.go")
	if err := os.WriteFile(path, []byte(strings.Repeat(string(b), repeat)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPerplexityCommand(t *testing.T) {
	model := tinyModel(t)
	text := goText(t, 2)
	out, errOut, code := qwenrun(t, "", "perplexity", model, "-f", text, "--ctx", "64", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r perplexity.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	if r.Ctx != 64 || r.Chunks < 2 || r.TokensScored != r.Chunks*31 || !(r.PPL > 1) || !(r.PPLStderr > 0) || r.KLMean != nil {
		t.Errorf("unexpected result %+v", r)
	}
	if !strings.Contains(errOut, "chunk ") {
		t.Errorf("no progress on stderr: %q", errOut)
	}
	// The model against itself: no divergence.
	out, errOut, code = qwenrun(t, "", "perplexity", model, "-f", text, "--ctx", "64", "--json", "--base", model)
	if code != 0 {
		t.Fatalf("--base: exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.KLMean == nil || *r.KLMean > 1e-6 || *r.Top1Agree != 1 {
		t.Errorf("--base itself: %v, %q", err, out)
	}
	// Plain output, flags after the model.
	out, _, code = qwenrun(t, "", "perplexity", model, "--ctx", "64", "-f", text)
	if code != 0 || !strings.Contains(out, "PPL = ") || !strings.Contains(out, " chunks of 64") {
		t.Errorf("plain output (exit %d): %q", code, out)
	}
}

func TestPerplexityRefuses(t *testing.T) {
	model := tinyModel(t)
	short := filepath.Join(t.TempDir(), "short.txt")
	os.WriteFile(short, []byte("package main\n\nfunc main() {}\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-f", short}, short + ": text too short: it has 7 tokens, and perplexity with --ctx 512 needs at least 1024 (two chunks)"},
		{[]string{"-f", goText(t, 1), "--ctx", "100000"}, "--ctx 100000: want 4 to 4096 tokens (the model's maximum context)"},
		{[]string{"-f", filepath.Join(t.TempDir(), "missing.txt")}, "no such file"},
		{[]string{"-f", short, "--base", short}, "shorter than the 64-byte preamble"},
		{[]string{"-f", goText(t, 1), "--ctx", "64", "--base", synthtest.Compile(t, synth.Shape{ModelType: "qwen3", Hidden: 32, Intermediate: 64,
			Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 16, Vocab: 300, MaxPositions: 128, Tied: true, DType: "BF16", Seed: 1, EOS: synth.MiniEOS}, 64)},
			"the base model has a vocabulary of 300, this model 151936"},
	} {
		_, errOut, code := qwenrun(t, "", append([]string{"perplexity", model}, c.args...)...)
		if code != 1 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 and one line with %q", c.args, code, errOut, c.want)
		}
	}
}
