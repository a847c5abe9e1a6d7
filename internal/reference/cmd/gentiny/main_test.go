package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/testmodel"
)

// TestWeightsReproduce checks that the committed tiny-moe-b is what this
// generator writes: the weights byte for byte and config.json. (The
// expected/ data follows from them; internal/reference's tests check it.)
func TestWeightsReproduce(t *testing.T) {
	var want bytes.Buffer
	if err := synth.EncodeSafetensors(&want, tensors(tokenIDs()), shape().DType, shape().Seed, 0); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(testmodel.Testdata(t, name, "model.safetensors.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("testdata/%s/model.safetensors.gz differs from what the generator writes: run go run ./internal/reference/cmd/gentiny", name)
	}
	dir := t.TempDir()
	if err := synth.WriteConfig(dir, shape()); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "generation_config.json"} {
		a, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(testmodel.Testdata(t, name, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("testdata/%s/%s differs from what the generator writes", name, f)
		}
	}
}
