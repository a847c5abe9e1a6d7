package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/qwenc/qwenc/internal/synth"
)

var presets = map[string]func() synth.Shape{
	"qwen3-0.6b":    synth.Qwen3_06B,
	"qwen3-30b-a3b": synth.Qwen3_30BA3B,
}

type options struct {
	out, tokenizer, tokenizerConfig, preset string
	shape                                   synth.Shape
}

func main() {
	o, err := parse(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "qwengen: %v\nRun 'qwengen -h' for the flags.\n", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "qwengen: %v\n", err)
		os.Exit(1)
	}
}

// parse reads the command line twice: the first pass only finds --preset,
// the second lays every flag given over the preset's shape, so a flag
// overrides the preset wherever it stands.
func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	_ = flags(&o, synth.Qwen3_06B(), io.Discard).Parse(args) // the second pass reports errors
	preset, ok := presets[o.preset]
	if !ok {
		return o, fmt.Errorf("--preset %q: want one of %s", o.preset, strings.Join(slices.Sorted(maps.Keys(presets)), ", "))
	}
	fs := flags(&o, preset(), stderr)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.out == "" || o.tokenizer == "" || o.tokenizerConfig == "" {
		return o, errors.New("-o, -tokenizer and -tokenizer-config are required")
	}
	return o, nil
}

// flags defines the command's flags over o, with the shape flags'
// defaults taken from base.
func flags(o *options, base synth.Shape, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("qwengen", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: qwengen [flags] -o DIR -tokenizer FILE -tokenizer-config FILE\n"+
			"The defaults shown are the preset's: qwengen --preset P -h shows P's.\n")
		fs.PrintDefaults()
	}
	o.shape = base
	s := &o.shape
	fs.StringVar(&o.out, "o", "", "output `DIR` (required)")
	fs.StringVar(&o.tokenizer, "tokenizer", "", "tokenizer.json to copy in (required)")
	fs.StringVar(&o.tokenizerConfig, "tokenizer-config", "", "tokenizer_config.json to copy in (required)")
	fs.StringVar(&o.preset, "preset", "qwen3-0.6b", "the shape the other flags modify: qwen3-0.6b or qwen3-30b-a3b")
	fs.StringVar(&s.ModelType, "model-type", s.ModelType, "qwen3, qwen2 or qwen3_moe")
	fs.IntVar(&s.Hidden, "hidden", s.Hidden, "hidden size")
	fs.IntVar(&s.Intermediate, "ffn", s.Intermediate, "intermediate (FFN) size of the dense layers")
	fs.IntVar(&s.Layers, "layers", s.Layers, "layers")
	fs.IntVar(&s.Heads, "heads", s.Heads, "attention heads")
	fs.IntVar(&s.KVHeads, "kv-heads", s.KVHeads, "key/value heads")
	fs.IntVar(&s.HeadDim, "head-dim", s.HeadDim, "head dimension")
	fs.IntVar(&s.Vocab, "vocab", s.Vocab, "vocabulary size")
	fs.IntVar(&s.MaxPositions, "max-positions", s.MaxPositions, "max_position_embeddings")
	fs.BoolVar(&s.Tied, "tied", s.Tied, "tie the LM head to the embedding")
	fs.BoolVar(&s.Embedding, "embedding", s.Embedding, "lay the checkpoint out as Qwen3-Embedding ships: no \"model.\" prefix, no LM head, <|endoftext|> appended by the tokenizer")
	fs.StringVar(&s.DType, "dtype", s.DType, "BF16, F16 or F32")
	fs.IntVar(&s.Shards, "shards", s.Shards, "number of safetensors shards (>1 writes an index)")
	fs.Uint64Var(&s.Seed, "seed", s.Seed, "random seed")
	fs.IntVar(&s.Experts, "experts", s.Experts, "qwen3_moe: experts per sparse layer (num_experts)")
	fs.IntVar(&s.ExpertsPerToken, "experts-per-token", s.ExpertsPerToken, "qwen3_moe: experts each token is routed to (num_experts_per_tok)")
	fs.IntVar(&s.MoEIntermediate, "moe-ffn", s.MoEIntermediate, "qwen3_moe: an expert's FFN size (moe_intermediate_size)")
	fs.BoolVar(&s.NormTopKProb, "norm-topk", s.NormTopKProb, "qwen3_moe: renormalise the kept experts' weights to sum to 1 (norm_topk_prob)")
	fs.IntVar(&s.DecoderSparseStep, "sparse-step", s.DecoderSparseStep, "qwen3_moe: layer l is sparse when (l+1) is a multiple of this (decoder_sparse_step)")
	fs.BoolVar(&s.ZeroExperts, "zero-experts", s.ZeroExperts, "qwen3_moe: zero expert weights, written as holes of sparse files (the full 30B-A3B in 3 GB of disk)")
	fs.Var((*intList)(&s.MLPOnlyLayers), "mlp-only-layers", "qwen3_moe: comma-separated `LAYERS` that stay dense, e.g. 1,3 (mlp_only_layers)")
	return fs
}

// intList is a flag.Value of comma-separated integers.
type intList []int

func (l *intList) String() string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	*l = []int{}
	for f := range strings.SplitSeq(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("%q is not a layer number", f)
		}
		*l = append(*l, n)
	}
	return nil
}

func run(o options) error {
	tj, err := os.ReadFile(o.tokenizer)
	if err != nil {
		return err
	}
	tc, err := os.ReadFile(o.tokenizerConfig)
	if err != nil {
		return err
	}
	return synth.Write(o.out, o.shape, tj, tc)
}
