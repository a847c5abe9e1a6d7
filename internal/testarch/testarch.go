package testarch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/qwenc/qwenc/compiler"
	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/arch"
	"github.com/qwenc/qwenc/format/graph"
	"github.com/qwenc/qwenc/internal/synth"
)

// ModelType is config.json's model_type of the architecture.
const ModelType = "qwen3_conv_test"

// Width is the convolution's number of taps.
const Width = 4

// Arch is Qwen3 with a recurrent mixer before each layer's attention.
type Arch struct{ base arch.Arch }

// Registry is the built-in architectures and this one.
func Registry() arch.Registry {
	base, err := arch.Builtin().For("qwen3")
	if err != nil {
		panic(err) // qwen3 is built in
	}
	return arch.Builtin().With(Arch{base})
}

func (Arch) ModelType() string { return ModelType }

func (a Arch) Configure(c *format.Config, hf *arch.HFConfig) error { return a.base.Configure(c, hf) }

func (a Arch) Layer(c *format.Config, l int) []arch.Tensor {
	return append(mixerTensors(c, l), a.base.Layer(c, l)...)
}

// Transform: the checkpoint's values are the file's.
func (Arch) Transform(*format.Config, *arch.Tensor) arch.Transform { return arch.Transform{} }

func mixerTensors(c *format.Config, l int) []arch.Tensor {
	t := func(kind format.Kind, what, hf string, shape ...uint64) arch.Tensor {
		return arch.Tensor{Section: format.LayerSection(l, what), HF: []string{fmt.Sprintf("model.layers.%d.%s", l, hf)},
			Kind: kind, Shape: shape, Role: what, Layer: l}
	}
	return []arch.Tensor{t(format.KindNorm, "mixer_norm", "mixer.norm.weight", uint64(c.Hidden)),
		t(format.KindConv, "mixer_conv", "mixer.conv.weight", uint64(c.Hidden), Width)}
}

// Features: its base's; the mixer is in every layer, whatever the keys.
func (a Arch) Features() []string { return a.base.Features() }

func (a Arch) BuildLayer(b *arch.Builder, l int) {
	g, c := b.G, b.C
	xn := g.NewTensor(fmt.Sprintf("layers.%d.mixer_norm", l), b.T, c.Hidden)
	g.AddOp(graph.Op{Kind: graph.RMSNorm, Layer: l, Weight: format.LayerSection(l, "mixer_norm"), In: []int{b.X}, Out: xn})
	st := g.AddState(graph.State{Kind: graph.Recurrent, Layer: l, Floats: (Width - 1) * c.Hidden})
	out := g.NewTensor(fmt.Sprintf("layers.%d.mixer", l), b.T, c.Hidden)
	g.AddOp(graph.Op{Kind: graph.CausalConv, Layer: l, State: st, Weight: format.LayerSection(l, "mixer_conv"), In: []int{xn}, Out: out})
	g.AddOp(graph.Op{Kind: graph.AddInPlace, Layer: l, In: []int{out}, InOut: []int{b.X}, Out: graph.NoTensor})
	a.base.BuildLayer(b, l)
}

// Write writes a random checkpoint of shape s (a qwen3 shape; its
// ModelType is ignored) in this architecture into dir, with the small
// test tokenizer.
func Write(dir string, s synth.Shape) error {
	s.ModelType = "qwen3"
	if err := synth.WriteMini(dir, s); err != nil {
		return err
	}
	ts := s.Tensors()
	for l := range s.Layers {
		p := fmt.Sprintf("model.layers.%d.mixer.", l)
		// Taps of about a third each, so that the mixer's output is of the
		// hidden state's size and the text depends on it.
		ts = append(ts, synth.Tensor{Name: p + "norm.weight", Shape: []int{s.Hidden}, Std: 0.1, Mean: 1},
			synth.Tensor{Name: p + "conv.weight", Shape: []int{s.Hidden, Width}, Std: 0.3})
	}
	if err := synth.WriteSafetensors(filepath.Join(dir, "model.safetensors"), ts, s.DType, s.Seed, 0); err != nil {
		return err
	}
	path := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		return err
	}
	cfg["model_type"] = ModelType
	if b, err = json.MarshalIndent(cfg, "", "  "); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Compile writes a checkpoint of shape s in this architecture and
// compiles it to weight type typ; it returns the .qbin path.
func Compile(tb testing.TB, s synth.Shape, maxPrefill int, typ format.DType) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "model")
	if err := Write(dir, s); err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(tb.TempDir(), "model.qbin")
	opts := compiler.Options{Output: out, MaxPrefill: maxPrefill, NoSync: true, Type: typ, Archs: Registry()}
	if _, err := compiler.Compile(context.Background(), dir, opts); err != nil {
		tb.Fatal(err)
	}
	return out
}
