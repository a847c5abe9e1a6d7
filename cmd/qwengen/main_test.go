package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/internal/reference"
	"github.com/qwenc/qwenc/internal/synth"
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

func TestWritesMoE(t *testing.T) {
	tmp := t.TempDir()
	tj, tc := synth.MiniTokenizer()
	tok, tokCfg := filepath.Join(tmp, "tokenizer.json"), filepath.Join(tmp, "tokenizer_config.json")
	if err := os.WriteFile(tok, tj, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokCfg, tc, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "moe")
	o, err := parse(strings.Fields("--preset qwen3-30b-a3b --layers 2 --hidden 16 --ffn 24 --heads 2 --kv-heads 1 --head-dim 8 "+
		"--vocab 300 --experts 5 --experts-per-token 2 --moe-ffn 12 --mlp-only-layers 0 --shards 2 -o "+out+
		" -tokenizer "+tok+" -tokenizer-config "+tokCfg), io.Discard)
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
	if m.Config.ModelType != "qwen3_moe" || m.Config.Experts != 5 || m.Config.Sparse(0) || !m.Config.Sparse(1) {
		t.Errorf("config %+v", m.Config)
	}
}
