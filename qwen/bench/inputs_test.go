package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
	"github.com/qwenc/qwenc/kernels"
	"github.com/qwenc/qwenc/qwen"
)

// ParseKernels: what a user gets by default (this CPU's path), every
// path with "all", or a list.
func TestParseKernels(t *testing.T) {
	for _, c := range []struct {
		spec string
		want []kernels.Path
		err  string
	}{
		{"", []kernels.Path{kernels.Detect()}, ""},
		{"generic", []kernels.Path{kernels.Generic}, ""},
		{"all", kernels.SupportedPaths(), ""},
		{"generic, auto", []kernels.Path{kernels.Generic, kernels.Detect()}, ""},
		{"generic,sse9", nil, `"sse9"`},
	} {
		got, err := ParseKernels(c.spec)
		if c.err == "" && (err != nil || !slices.Equal(got, c.want)) || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%q: %v, %v; want %v, error %q", c.spec, got, err, c.want, c.err)
		}
	}
}

// ReadPrompts: a file, or the files of a directory in name order, named
// without their extension; an empty directory is refused.
func TestReadPrompts(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("second"), 0o644)
	os.WriteFile(filepath.Join(dir, "a.go"), []byte("first"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	got, err := ReadPrompts(dir)
	if want := []SpecPrompt{{"a", "first"}, {"b", "second"}}; err != nil || !slices.Equal(got, want) {
		t.Errorf("directory: %v, %v; want %v", got, err, want)
	}
	if got, err := ReadPrompts(filepath.Join(dir, "b.txt")); err != nil || !slices.Equal(got, []SpecPrompt{{"b", "second"}}) {
		t.Errorf("file: %v, %v", got, err)
	}
	if _, err := ReadPrompts(filepath.Join(dir, "sub")); err == nil || !strings.Contains(err.Error(), "no prompt files") {
		t.Errorf("empty directory: %v", err)
	}
	if _, err := ReadPrompts(filepath.Join(dir, "missing")); err == nil {
		t.Errorf("missing directory: no error")
	}
}

// ProcessFirstToken times whole processes, and says when one fails.
func TestProcessFirstToken(t *testing.T) {
	ok, err := exec.LookPath("true")
	if err != nil {
		t.Skip(err)
	}
	if d, err := ProcessFirstToken(ok)("model.qbin", 2); err != nil || d <= 0 || d >= time.Hour {
		t.Errorf("true: %v, %v", d, err)
	}
	bad, _ := exec.LookPath("false")
	if _, err := ProcessFirstToken(bad)("model.qbin", 2); err == nil || !strings.Contains(err.Error(), "time to first token") {
		t.Errorf("false: %v", err)
	}
	// What the failed process said is the error's, not only its status.
	script := filepath.Join(t.TempDir(), "qwenrun")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'load 1 ms' >&2\necho 'qwenrun: this is an embedding model' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ProcessFirstToken(script)("model.qbin", 2); err == nil || err.Error() != "time to first token: exit status 1 (qwenrun: this is an embedding model)" {
		t.Errorf("a process that says why it failed: %v", err)
	}
}

// WriteHeader says what Serve measures, the kernels, threads and KV cache
// type the model opens with among it.
func TestServeHeader(t *testing.T) {
	s := synth.Shape{ModelType: "qwen3", Hidden: 32, Intermediate: 64, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 16,
		Vocab: 300, MaxPositions: 128, Tied: true, DType: "BF16", Seed: 1, EOS: synth.MiniEOS}
	model := synthtest.Compile(t, s, 8)
	cfg := ServeConfig{Model: model, PP: 4, TG: 8, Options: []qwen.Option{qwen.WithThreads(1), qwen.WithKernels("generic"), qwen.WithKVType("q8")}}
	var b strings.Builder
	if err := cfg.WriteHeader(&b); err != nil {
		t.Fatal(err)
	}
	if want := "model " + model + "; 4 prompt tokens and 8 generated per request; kernels generic, 1 threads, q8 KV cache\n"; b.String() != want {
		t.Errorf("%q, want %q", b.String(), want)
	}
	cfg.Model = filepath.Join(t.TempDir(), "missing.qbin")
	if err := cfg.WriteHeader(&b); err == nil {
		t.Errorf("a missing model: no error")
	}
}
