package main

import (
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/qwenc/qwenc/internal/reference"
	"github.com/qwenc/qwenc/internal/synth"
)

const (
	name = "tiny-moe-b"
	seed = 11 // the issue that brought Qwen3-MoE
	// kept is how many token ids have non-zero embedding rows: enough for
	// varied prompts, few enough that the weights gzip to under 1 MB.
	kept = 3000
	// firstSpecial is the first id of Qwen's added tokens; prompts are
	// drawn below it.
	firstSpecial = 151643
)

func shape() synth.Shape {
	return synth.Shape{ModelType: "qwen3_moe", Hidden: 48, Intermediate: 40, Layers: 4, Heads: 3, KVHeads: 1, HeadDim: 16,
		Vocab: 151936, MaxPositions: 4096, Tied: true, DType: "BF16", Seed: seed,
		Experts: 6, ExpertsPerToken: 3, MoEIntermediate: 64, NormTopKProb: false, DecoderSparseStep: 1, MLPOnlyLayers: []int{2}}
}

// hello is "Hello, world!" in the Qwen vocabulary, the first prompt of
// every bundled model's expected data.
var hello = []int32{9707, 11, 1879, 0}

func main() {
	out := flag.String("o", "", "output `DIR` (default testdata/"+name+" of the repository)")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintf(os.Stderr, "gentiny: %v\n", err)
		os.Exit(1)
	}
}

func run(out string) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if out == "" {
		out = filepath.Join(root, "testdata", name)
	}
	ids := tokenIDs()
	tmp, err := os.MkdirTemp("", "gentiny")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := writeModel(tmp, ids); err != nil {
		return err
	}
	m, err := reference.Load(tmp)
	if err != nil {
		return err
	}
	cases, err := makeCases(m, ids)
	if err != nil {
		return err
	}
	return install(tmp, out, root, cases)
}

// install puts the checkpoint in out in the repository's form: the weights
// gzip-compressed, Qwen3's tokenizer_config.json, no tokenizer.json (tests
// take the shared one), and a fresh expected/.
func install(tmp, out, root string, cases []reference.Case) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, f := range []struct{ from, to string }{
		{filepath.Join(tmp, "config.json"), "config.json"},
		{filepath.Join(tmp, "generation_config.json"), "generation_config.json"},
		{filepath.Join(root, "testdata", "tiny-a", "tokenizer_config.json"), "tokenizer_config.json"},
	} {
		if err := copyFile(f.from, filepath.Join(out, f.to)); err != nil {
			return err
		}
	}
	if err := gzipFile(filepath.Join(tmp, "model.safetensors"), filepath.Join(out, "model.safetensors.gz")); err != nil {
		return err
	}
	expected := filepath.Join(out, "expected")
	if err := os.RemoveAll(expected); err != nil { // no stale cases
		return err
	}
	return reference.WriteExpected(expected, name, cases)
}

// tokenIDs returns the sorted ids whose embedding rows are not zero: the
// hello prompt's and kept-len(hello) others below firstSpecial.
func tokenIDs() []int {
	rng := rand.New(rand.NewPCG(seed, 1<<32)) // synth's tensor streams are (seed, i) for small i
	ids := map[int]bool{}
	for _, id := range hello {
		ids[int(id)] = true
	}
	for len(ids) < kept {
		ids[rng.IntN(firstSpecial)] = true
	}
	out := make([]int, 0, len(ids))
	for id := range ids {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// tensors are synth's for shape(), with these changes. The embedding is
// zero outside ids and has std 0.5, as tiny-a's: with synth's std 1 and a
// tied head, logits reach 40 and the last token's own row dominates them.
// Layer 0's router is zero. The other routers have twice synth's std, as
// tiny-moe-a's, for a wider spread of router logits: the runtime's errors
// in them come mostly from the hidden state, not the router weights, so
// wider gaps between experts make its choices match more often.
func tensors(ids []int) []synth.Tensor {
	ts := shape().Tensors()
	for i := range ts {
		switch t := &ts[i]; {
		case t.Name == "model.embed_tokens.weight":
			t.Rows, t.Std = ids, 0.5
		case t.Name == "model.layers.0.mlp.gate.weight":
			t.Std = 0
		case strings.HasSuffix(t.Name, ".mlp.gate.weight"):
			t.Std *= 2
		}
	}
	return ts
}

func writeModel(dir string, ids []int) error {
	s := shape()
	if err := synth.WriteConfig(dir, s); err != nil {
		return err
	}
	return synth.WriteSafetensors(filepath.Join(dir, "model.safetensors"), tensors(ids), s.DType, s.Seed, 0)
}

// minMargin is the smallest lead of the best logit over the second that
// a greedy step may have. The shared reference data asks engines to follow
// greedy continuations only while the margin exceeds 0.05; prompts are
// drawn until the whole continuation does, so that all of it is a test.
const minMargin = 0.05

// makeCases computes the cases: short prompts, and long ones that cross the
// runtime's 256-position KV chunk and its 512-token prefill batch. Random
// prompts are drawn from ids until a case passes accept.
func makeCases(m *reference.Model, ids []int) ([]reference.Case, error) {
	rng := rand.New(rand.NewPCG(seed, 1<<32+1))
	var cases []reference.Case
	for _, s := range []struct {
		name      string
		n         int // the prompt's length; 0 for hello
		positions []int
		greedy    int
	}{
		{"hello", 0, []int{0, 1, 2, 3}, 32},
		{"single", 1, []int{0}, 32},
		{"rand40", 40, []int{0, 31, 32, 33, 39}, 32},
		{"long300", 300, []int{0, 1, 254, 255, 256, 257, 299}, 24},
		{"long600", 600, []int{255, 256, 511, 512, 513, 599}, 20},
	} {
		var err error
		for attempt := 0; attempt < 20; attempt++ {
			prompt := hello
			if s.n > 0 {
				prompt = make([]int32, s.n)
				for i := range prompt {
					prompt[i] = int32(ids[rng.IntN(len(ids))])
				}
			}
			var c reference.Case
			if c, err = m.Case(reference.Spec{Name: s.name, Prompt: prompt, Positions: s.positions, Greedy: s.greedy}); err != nil {
				return nil, err
			}
			if err = accept(c); err == nil {
				cases = append(cases, c)
				break
			}
			if s.n == 0 {
				break // a fixed prompt cannot be redrawn
			}
		}
		if err != nil {
			return nil, fmt.Errorf("case %s: %w (choose another seed)", s.name, err)
		}
	}
	return cases, nil
}

// accept makes sure a case tests what the model is for: a greedy
// continuation without near-ties, ties in layer 0 at every position, every
// expert of layer 3 in long prompts.
func accept(c reference.Case) error {
	if c.GreedyMinMargin < minMargin {
		return fmt.Errorf("a greedy step leads by %.3g only", c.GreedyMinMargin)
	}
	if len(c.Router) != 3 || c.Router[0].Layer != 0 || c.Router[2].Layer != 3 {
		return fmt.Errorf("router statistics %+v, want layers 0, 1 and 3", c.Router)
	}
	if r := c.Router[0]; !slices.Equal(r.ExpertsUsed, []int{0, 1, 2}) || r.Ties != len(c.PromptIDs) {
		return fmt.Errorf("layer 0 with a zero router: %+v, want experts [0 1 2] tied at every position", r)
	}
	if r := c.Router[2]; len(c.PromptIDs) >= 300 && len(r.ExpertsUsed) != 6 {
		return fmt.Errorf("layer 3 uses experts %v, want all 6", r.ExpertsUsed)
	}
	return nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory; run from the repository")
		}
		dir = parent
	}
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

func gzipFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := os.Create(to)
	if err != nil {
		return err
	}
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		f.Close()
		return err
	}
	if _, err := io.Copy(zw, in); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", to, err)
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", to, err)
	}
	return f.Close()
}
