package qwen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/qwenc/qwenc/compiler"
	"github.com/qwenc/qwenc/internal/testmodel"
)

// The tests and examples run in a temporary directory holding the models
// they open, compiled once: qwen3-go-demo.qbin (the bundled trained
// model), tiny-a.qbin (random weights, Qwen's tokenizer and Qwen3's
// chat template) and tiny-q35.qbin (Qwen3.5's, random too), so that the
// examples read as a program would: qwen.Open("qwen3-go-demo.qbin").
func TestMain(m *testing.M) {
	code, err := runIn(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

// testRoot is the repository's root.
var testRoot string

func runIn(m *testing.M) (int, error) {
	root, err := filepath.Abs("..") // go test runs in the package's directory
	if err != nil {
		return 0, err
	}
	testRoot = root
	dir, err := os.MkdirTemp("", "qwen-test")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	tok := filepath.Join(root, "testdata", "tokenizer", "tokenizer.json.gz")
	models := []string{"qwen3-go-demo", "tiny-a", "tiny-emb", "tiny-rerank", "tiny-q35", "qwen35-go-demo"}
	if raceEnabled {
		models = models[:2]
	}
	for _, name := range models {
		src := filepath.Join(dir, "src", name)
		if err := testmodel.Materialise(filepath.Join(root, "testdata", name), tok, src); err != nil {
			return 0, err
		}
		out := filepath.Join(dir, name+".qbin")
		if _, err := compiler.Compile(context.Background(), src, compiler.Options{Output: out, MaxPrefill: 64, NoSync: true}); err != nil {
			return 0, err
		}
	}
	if err := os.Chdir(dir); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// tiny is tiny-a opened once for the tests that only read from it.
var tiny struct {
	once sync.Once
	m    *Model
	err  error
}

func tinyModel(t *testing.T) *Model {
	t.Helper()
	tiny.once.Do(func() { tiny.m, tiny.err = Open("tiny-a.qbin", WithThreads(2)) })
	if tiny.err != nil {
		t.Fatal(tiny.err)
	}
	return tiny.m
}
