package synth_test

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/internal/synth"
)

// TestDenseOutputUnchanged pins the bytes of small dense checkpoints (all
// files but the tokenizer's): tests and benchmarks elsewhere depend on
// what a Shape and seed produce, so adding model types must not move them.
func TestDenseOutputUnchanged(t *testing.T) {
	for _, tc := range []struct {
		s    synth.Shape
		want string
	}{
		{synth.Shape{ModelType: "qwen3", Hidden: 16, Intermediate: 24, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 8, Vocab: 300,
			MaxPositions: 64, Tied: true, DType: "BF16", Seed: 7, EOS: synth.MiniEOS},
			"6db4eacbb62cc39f46288b9a66aad6da6d9dde3eed798f2add2ce643c01d8008"},
		{synth.Shape{ModelType: "qwen2", Hidden: 16, Intermediate: 24, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 8, Vocab: 300,
			MaxPositions: 64, DType: "F16", Shards: 3, Seed: 8, EOS: synth.MiniEOS},
			"0e1049ce3fc7575f6802d4fcd64640404730a229530849a9937fe6f2b8f762fb"},
	} {
		dir := t.TempDir()
		if err := synth.WriteMini(dir, tc.s); err != nil {
			t.Fatal(err)
		}
		if got := hashDir(t, dir); got != tc.want {
			t.Errorf("%s: files hash to %s, want %s", tc.s.ModelType, got, tc.want)
		}
	}
}

// hashDir hashes the names, sizes and contents of the files in dir, but
// the tokenizer's.
func hashDir(t *testing.T, dir string) string {
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for _, e := range es { // ReadDir sorts by name
		if strings.HasPrefix(e.Name(), "tokenizer") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", e.Name(), len(b))
		h.Write(b)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestRowsZeroTheOthers(t *testing.T) {
	ts := []synth.Tensor{{Name: "e", Shape: []int{4, 2}, Std: 1, Rows: []int{1, 3}}, {Name: "z", Shape: []int{3}, Std: 0}}
	var all, kept strings.Builder
	if err := synth.EncodeSafetensors(&kept, ts, "F32", 1, 0); err != nil {
		t.Fatal(err)
	}
	ts[0].Rows = nil
	if err := synth.EncodeSafetensors(&all, ts, "F32", 1, 0); err != nil {
		t.Fatal(err)
	}
	a, k := all.String(), kept.String()
	data := len(a) - (4*2+3)*4 // where the data area starts
	for i := data; i < len(a); i++ {
		row, inZ := (i-data)/8, i-data >= 32
		want := a[i]
		if inZ || row == 0 || row == 2 {
			want = 0
		}
		if k[i] != want {
			t.Fatalf("byte %d (row %d) is %d, want %d", i-data, row, k[i], want)
		}
	}
	ts[0].Rows = []int{4}
	if err := synth.EncodeSafetensors(&kept, ts, "F32", 1, 0); err == nil || !strings.Contains(err.Error(), "tensor e") {
		t.Errorf("a row outside the tensor: %v, want an error naming it", err)
	}
}

func TestQwen3_30BA3B(t *testing.T) {
	s := synth.Qwen3_30BA3B()
	var total, active int64
	for _, ts := range s.Tensors() {
		n := int64(1)
		for _, d := range ts.Shape {
			n *= int64(d)
		}
		total += n
		if !strings.Contains(ts.Name, ".mlp.experts.") {
			active += n
		}
	}
	active += int64(s.Layers) * int64(s.ExpertsPerToken) * 3 * int64(s.Hidden*s.MoEIntermediate)
	// Qwen's model card: 30.5B parameters in all, 3.3B activated.
	if total < 30.4e9 || total > 30.6e9 || active < 3.2e9 || active > 3.4e9 {
		t.Errorf("%d parameters, %d active; want about 30.5e9 and 3.3e9", total, active)
	}
	if !slices.Equal(s.Tensors()[len(s.Tensors())-1].Shape, []int{151936, 2048}) {
		t.Errorf("the last tensor should be the untied lm_head [151936, 2048]")
	}
}
