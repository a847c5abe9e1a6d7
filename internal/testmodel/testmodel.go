package testmodel

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// Root returns the repository root (the directory holding go.mod), found by
// walking up from the working directory, which `go test` sets to the package.
func Root(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("testmodel: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Testdata returns the path of a file or directory under testdata/.
func Testdata(tb testing.TB, elem ...string) string {
	return filepath.Join(append([]string{Root(tb), "testdata"}, elem...)...)
}

// TokenizerJSON returns the path of a decompressed copy of the Qwen
// tokenizer.json (shared by every bundled model) in a per-test directory.
func TokenizerJSON(tb testing.TB) string {
	tb.Helper()
	dst := filepath.Join(tb.TempDir(), "tokenizer.json")
	if err := gunzip(Testdata(tb, "tokenizer", "tokenizer.json.gz"), dst); err != nil {
		tb.Fatal(err)
	}
	return dst
}

// Dir builds a Hugging Face model directory for a bundled model ("tiny-a"
// or "qwen3-go-demo") in a temporary directory and returns its path. The
// directory is named after the model so default output names match.
func Dir(tb testing.TB, name string) string {
	tb.Helper()
	src := Testdata(tb, name)
	dir := filepath.Join(tb.TempDir(), name)
	if err := Materialise(src, Testdata(tb, "tokenizer", "tokenizer.json.gz"), dir); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// Materialise writes a usable model directory at dst from a bundled model
// directory src: JSON files are linked, *.gz files decompressed, and the
// shared tokenizer.json.gz decompressed when src has no tokenizer.json.
func Materialise(src, sharedTokenizerGz, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	haveTok := false
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		name := e.Name()
		from, err := filepath.Abs(filepath.Join(src, name))
		if err != nil {
			return err
		}
		if filepath.Ext(name) == ".gz" {
			name = name[:len(name)-3]
			if err := gunzip(from, filepath.Join(dst, name)); err != nil {
				return err
			}
		} else if err := os.Symlink(from, filepath.Join(dst, name)); err != nil {
			return err
		}
		if name == "tokenizer.json" {
			haveTok = true
		}
	}
	if !haveTok {
		return gunzip(sharedTokenizerGz, filepath.Join(dst, "tokenizer.json"))
	}
	return nil
}

func gunzip(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		return fmt.Errorf("gunzip %s: %w", src, err)
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, zr); err != nil {
		out.Close()
		return fmt.Errorf("gunzip %s: %w", src, err)
	}
	return out.Close()
}
