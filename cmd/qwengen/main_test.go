package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/compiler"
	"github.com/qwenc/qwenc/internal/reference"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/testmodel"
)

var required = []string{"-o", "out", "-tokenizer", "t.json", "-tokenizer-config", "tc.json"}

func TestPresetThenOverrides(t *testing.T) {
	// --layers before --preset still overrides the preset.
	o, err := parse(append([]string{"--layers", "4", "--preset", "qwen3-30b-a3b", "--mlp-only-layers", "1,3", "--norm-topk=false"}, required...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := synth.Qwen3_30BA3B()
	want.Layers, want.MLPOnlyLayers, want.NormTopKProb = 4, []int{1, 3}, false
	got := o.shape
	if got.Layers != 4 || !slices.Equal(got.MLPOnlyLayers, want.MLPOnlyLayers) || got.NormTopKProb ||
		got.Experts != 128 || got.ExpertsPerToken != 8 || got.MoEIntermediate != 768 || got.Tied || got.Hidden != 2048 {
		t.Errorf("shape %+v, want %+v", got, want)
	}
	o, err = parse(required, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.shape.ModelType != "qwen3" || o.shape.Hidden != synth.Qwen3_06B().Hidden {
		t.Errorf("default shape %+v, want Qwen3-0.6B's", o.shape)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, args := range [][]string{
		append([]string{"--preset", "qwen3-7b"}, required...),
		append([]string{"--mlp-only-layers", "1,x"}, required...),
		append([]string{"extra"}, required...),
		{"-o", "out"},
	} {
		if _, err := parse(args, io.Discard); err == nil || errors.Is(err, flag.ErrHelp) {
			t.Errorf("parse(%q) = %v, want an error", args, err)
		}
	}
	if _, err := parse([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
}

// miniTokenizer writes the small test tokenizer's files and returns their
// paths.
func miniTokenizer(t *testing.T) (tok, tokCfg string) {
	tmp := t.TempDir()
	tj, tc := synth.MiniTokenizer()
	tok, tokCfg = filepath.Join(tmp, "tokenizer.json"), filepath.Join(tmp, "tokenizer_config.json")
	if err := os.WriteFile(tok, tj, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokCfg, tc, 0o644); err != nil {
		t.Fatal(err)
	}
	return tok, tokCfg
}

// writeAndLoad runs qwengen with args and the small tokenizer, and loads
// what it wrote in the reference forward pass; it returns the model and
// its directory.
func writeAndLoad(t *testing.T, args string) (*reference.Model, string) {
	t.Helper()
	tok, tokCfg := miniTokenizer(t)
	out := filepath.Join(t.TempDir(), "model")
	o, err := parse(append(strings.Fields(args), "-o", out, "-tokenizer", tok, "-tokenizer-config", tokCfg), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	m, err := reference.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	return m, out
}

func TestWritesMoE(t *testing.T) {
	m, _ := writeAndLoad(t, "--preset qwen3-30b-a3b --layers 2 --hidden 16 --ffn 24 --heads 2 --kv-heads 1 --head-dim 8 "+
		"--vocab 300 --experts 5 --experts-per-token 2 --moe-ffn 12 --mlp-only-layers 0 --shards 2")
	if m.Config.ModelType != "qwen3_moe" || m.Config.Experts != 5 || m.Config.Sparse(0) || !m.Config.Sparse(1) {
		t.Errorf("config %+v", m.Config)
	}
}

func TestQwen35Presets(t *testing.T) {
	for name, preset := range presets {
		if !strings.HasPrefix(name, "qwen3.5-") {
			continue
		}
		o, err := parse(append([]string{"--preset", name, "--layers", "3"}, required...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		want := preset()
		want.Layers = 3
		if !reflect.DeepEqual(o.shape, want) {
			t.Errorf("--preset %s --layers 3: %+v, want %+v", name, o.shape, want)
		}
	}
}

// TestWritesQwen35 writes a slice of the Qwen3.5-35B-A3B preset, shrunk by
// flags, and loads it in the reference forward pass.
func TestWritesQwen35(t *testing.T) {
	m, out := writeAndLoad(t, "--preset qwen3.5-35b-a3b --layers 4 --hidden 24 --heads 2 --kv-heads 1 --head-dim 16 --vocab 300 "+
		"--experts 6 --experts-per-token 2 --moe-ffn 12 --shared-expert-ffn 20 --linear-key-heads 1 --linear-value-heads 3 "+
		"--linear-key-dim 8 --linear-value-dim 6 --conv-kernel 3 --partial-rotary 0.5 --expert-layout per-expert --zero-experts "+
		"--vision=false --shards 2 --qwen35-vocab=false")
	c := m.Config
	if c.ModelType != "qwen3_5_moe" || c.Experts != 6 || c.LinearValueHeads != 3 || c.RotaryDims() != 8 || c.Tied || !m.HasMTP() ||
		!slices.Equal(c.LayerTypes, []string{"linear_attention", "linear_attention", "linear_attention", "full_attention"}) {
		t.Errorf("config %+v", c)
	}
	if _, err := os.Stat(filepath.Join(out, "model.safetensors.index.json")); err != nil {
		t.Error(err)
	}
	// A Qwen3.5 field on a Qwen3 model type is refused, not ignored.
	tok, tokCfg := miniTokenizer(t)
	o, err := parse([]string{"--vision", "-o", filepath.Join(t.TempDir(), "x"), "-tokenizer", tok, "-tokenizer-config", tokCfg}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(o); err == nil || !strings.Contains(err.Error(), "Qwen3.5 fields given for model type qwen3") {
		t.Errorf("--vision on qwen3: %v", err)
	}
}

// TestWritesQwen35Vocabulary writes a small model of a Qwen3.5 preset
// with Qwen3.5's vocabulary, extended from the small test tokenizer as
// -qwen35-vocab does by default for those presets: the ids of the real
// one (the 248,320-row head, added tokens from 248044, eos 248046 and
// 248044), which the compiler takes.
func TestWritesQwen35Vocabulary(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a 248,320-row model")
	}
	_, out := writeAndLoad(t, "--preset qwen3.5-0.8b --layers 4 --hidden 16 --ffn 24 --heads 2 --kv-heads 1 --head-dim 16 "+
		"--linear-key-heads 1 --linear-value-heads 2 --linear-key-dim 8 --linear-value-dim 8 --vision=false")
	var tok struct {
		Model struct {
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
		PreTokenizer struct {
			Pretokenizers []struct {
				Pattern struct{ Regex string } `json:"pattern"`
			} `json:"pretokenizers"`
		} `json:"pre_tokenizer"`
	}
	testmodel.ReadJSON(t, filepath.Join(out, "tokenizer.json"), &tok)
	if len(tok.Model.Vocab) != synth.Qwen35BPETokens || tok.PreTokenizer.Pretokenizers[0].Pattern.Regex != synth.Qwen35Pattern {
		t.Errorf("tokenizer.json: %d BPE tokens, pattern %q", len(tok.Model.Vocab), tok.PreTokenizer.Pretokenizers[0].Pattern.Regex)
	}
	// The small tokenizer's five added tokens, then Qwen3.5's seven new ones.
	for _, a := range tok.AddedTokens {
		if want := map[string]int{"<|endoftext|>": 248044, "<|im_end|>": 248046, "<think>": 248047, "<|audio_pad|>": 248055}[a.Content]; want != 0 && a.ID != want {
			t.Errorf("added token %q has id %d, want %d", a.Content, a.ID, want)
		}
	}
	var gen struct {
		EOS []int `json:"eos_token_id"`
	}
	testmodel.ReadJSON(t, filepath.Join(out, "generation_config.json"), &gen)
	if !slices.Equal(gen.EOS, []int{248046, 248044}) {
		t.Errorf("generation_config.json eos_token_id %v, want [248046 248044]", gen.EOS)
	}
	res, err := compiler.Compile(context.Background(), out, compiler.Options{Output: filepath.Join(t.TempDir(), "m.qbin"), MaxPrefill: 16, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if h := res.Header; h.Config.Vocab != 248320 || !slices.Equal(h.Generation.EOS, []int32{248046, 248044}) {
		t.Errorf("compiled: vocab %d, eos %v", h.Config.Vocab, h.Generation.EOS)
	}
	// A tokenizer of Qwen3.5's already is not extended again.
	cfg, _ := os.ReadFile(filepath.Join(out, "tokenizer_config.json"))
	o, err := parse([]string{"--preset", "qwen3.5-0.8b", "-o", filepath.Join(t.TempDir(), "x"), "-tokenizer", filepath.Join(out, "tokenizer.json"),
		"-tokenizer-config", filepath.Join(out, "tokenizer_config.json")}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(o); err == nil || !strings.Contains(err.Error(), "Qwen3.5's already") || len(cfg) == 0 {
		t.Errorf("extending a Qwen3.5 tokenizer: %v", err)
	}
}
