package compiler

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/qwenc/qwenc/internal/synth"
)

// smallShape has dimensions that are not multiples of 32 anywhere.
func smallShape() synth.Shape {
	return synth.Shape{ModelType: "qwen3", Hidden: 40, Intermediate: 70, Layers: 2, Heads: 3, KVHeads: 1, HeadDim: 10,
		Vocab: 300, MaxPositions: 512, Tied: true, DType: "BF16", Seed: 7, EOS: synth.MiniEOS}
}

// writeModel writes a synthetic checkpoint with the small test tokenizer
// into a directory named "model" under a fresh temporary directory.
func writeModel(t testing.TB, s synth.Shape) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	tj, tc := synth.MiniTokenizer()
	if err := synth.Write(dir, s, tj, tc); err != nil {
		t.Fatal(err)
	}
	return dir
}

func compileTo(t testing.TB, model string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.qbin")
	if _, err := Compile(context.Background(), model, Options{Output: out, MaxPrefill: 64, NoSync: true}); err != nil {
		t.Fatal(err)
	}
	return out
}

// dirEntries lists a directory's file names.
func dirEntries(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// editConfig rewrites a model directory's config.json: f edits its decoded
// fields, numbers kept as written (json.Number). Editing the text instead
// would depend on how synth formats it.
func editConfig(t testing.TB, dir string, f func(cfg map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var cfg map[string]any
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	f(cfg)
	if b, err = json.MarshalIndent(cfg, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
