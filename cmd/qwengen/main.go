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
	"qwen3-0.6b":        synth.Qwen3_06B,
	"qwen3-30b-a3b":     synth.Qwen3_30BA3B,
	"qwen3.5-0.8b":      synth.Qwen35_08B,
	"qwen3.5-2b":        synth.Qwen35_2B,
	"qwen3.5-4b":        synth.Qwen35_4B,
	"qwen3.5-9b":        synth.Qwen35_9B,
	"qwen3.5-27b":       synth.Qwen35_27B,
	"qwen3.5-35b-a3b":   synth.Qwen35_35BA3B,
	"qwen3.5-122b-a10b": synth.Qwen35_122BA10B,
}

type options struct {
	out, tokenizer, tokenizerConfig, preset string
	qwen35Vocab                             bool
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
	fs.BoolVar(&o.qwen35Vocab, "qwen35-vocab", base.Hybrid(), "extend the Qwen2/3 -tokenizer and -tokenizer-config to Qwen3.5's vocabulary: 248,044 BPE tokens, added tokens from 248044, Qwen3.5's split pattern, eos ids 248046 and 248044 (random new tokens: the shape and ids are real, the text is not)")
	fs.StringVar(&o.preset, "preset", "qwen3-0.6b", "the shape the other flags modify: "+strings.Join(slices.Sorted(maps.Keys(presets)), ", "))
	fs.StringVar(&s.ModelType, "model-type", s.ModelType, "qwen3, qwen2, qwen3_moe, qwen3_5 or qwen3_5_moe")
	fs.IntVar(&s.Hidden, "hidden", s.Hidden, "hidden size")
	fs.IntVar(&s.Intermediate, "ffn", s.Intermediate, "intermediate (FFN) size of the dense layers (none in qwen3_5_moe)")
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
	fs.IntVar(&s.Experts, "experts", s.Experts, "qwen3_moe, qwen3_5_moe: experts per sparse layer (num_experts)")
	fs.IntVar(&s.ExpertsPerToken, "experts-per-token", s.ExpertsPerToken, "qwen3_moe, qwen3_5_moe: experts each token is routed to (num_experts_per_tok)")
	fs.IntVar(&s.MoEIntermediate, "moe-ffn", s.MoEIntermediate, "qwen3_moe, qwen3_5_moe: an expert's FFN size (moe_intermediate_size)")
	fs.BoolVar(&s.NormTopKProb, "norm-topk", s.NormTopKProb, "qwen3_moe: renormalise the kept experts' weights to sum to 1 (norm_topk_prob)")
	fs.IntVar(&s.DecoderSparseStep, "sparse-step", s.DecoderSparseStep, "qwen3_moe: layer l is sparse when (l+1) is a multiple of this (decoder_sparse_step)")
	fs.BoolVar(&s.ZeroExperts, "zero-experts", s.ZeroExperts, "qwen3_moe, qwen3_5_moe: zero routed expert weights, written as holes of sparse files (the full 30B-A3B in 3 GB of disk)")
	fs.Var((*intList)(&s.MLPOnlyLayers), "mlp-only-layers", "qwen3_moe: comma-separated `LAYERS` that stay dense, e.g. 1,3 (mlp_only_layers)")
	q := &s.Qwen35
	fs.Var((*stringList)(&q.LayerTypes), "layer-types", "qwen3_5*: comma-separated `TYPES`, linear_attention or full_attention, one per layer (default: every --full-attention-interval-th layer full)")
	fs.IntVar(&q.FullAttentionInterval, "full-attention-interval", q.FullAttentionInterval, "qwen3_5*: every N-th layer is full attention when --layer-types is not given")
	fs.IntVar(&q.LinearKeyHeads, "linear-key-heads", q.LinearKeyHeads, "qwen3_5*: Gated DeltaNet key heads (linear_num_key_heads)")
	fs.IntVar(&q.LinearValueHeads, "linear-value-heads", q.LinearValueHeads, "qwen3_5*: Gated DeltaNet value heads, a multiple of the key heads (linear_num_value_heads)")
	fs.IntVar(&q.LinearKeyHeadDim, "linear-key-dim", q.LinearKeyHeadDim, "qwen3_5*: Gated DeltaNet key head dimension (linear_key_head_dim)")
	fs.IntVar(&q.LinearValueHeadDim, "linear-value-dim", q.LinearValueHeadDim, "qwen3_5*: Gated DeltaNet value head dimension (linear_value_head_dim)")
	fs.IntVar(&q.ConvKernel, "conv-kernel", q.ConvKernel, "qwen3_5*: the causal conv's kernel (linear_conv_kernel_dim)")
	fs.Float64Var(&q.PartialRotaryFactor, "partial-rotary", q.PartialRotaryFactor, "qwen3_5*: share of each attention head RoPE rotates (partial_rotary_factor)")
	fs.Float64Var(&q.RopeTheta, "rope-theta", q.RopeTheta, "qwen3_5*: RoPE base (rope_parameters.rope_theta; 0: 1e7)")
	fs.IntVar(&q.SharedExpertIntermediate, "shared-expert-ffn", q.SharedExpertIntermediate, "qwen3_5_moe: the shared expert's FFN size (shared_expert_intermediate_size)")
	fs.IntVar(&q.MTPLayers, "mtp-layers", q.MTPLayers, "qwen3_5*: layers of the MTP block (mtp_num_hidden_layers; 0: no mtp.* tensors)")
	fs.BoolVar(&q.Vision, "vision", q.Vision, "qwen3_5*: add a small vision tower (model.visual.*) and vision_config, as shipped checkpoints carry one")
	fs.BoolVar(&q.TextOnly, "text-only", q.TextOnly, "qwen3_5*: the Qwen3_5ForCausalLM layout: no text_config nesting, the text model under model.")
	fs.StringVar((*string)(&q.ExpertLayout), "expert-layout", string(q.ExpertLayout), "qwen3_5_moe: fused (3-D gate_up_proj/down_proj), per-expert, or empty: fused in the main layers and per expert in the MTP layer, as shipped")
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

// stringList is a flag.Value of comma-separated strings.
type stringList []string

func (l *stringList) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, ",")
}

func (l *stringList) Set(v string) error {
	*l = []string{}
	for f := range strings.SplitSeq(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			*l = append(*l, f)
		}
	}
	return nil
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
	if o.qwen35Vocab {
		if o.shape.Vocab < synth.Qwen35AddedStart+33 {
			return fmt.Errorf("-qwen35-vocab: -vocab %d is smaller than Qwen3.5's 248,077 token ids", o.shape.Vocab)
		}
		if tj, tc, err = synth.Qwen35Tokenizer(tj, tc); err != nil {
			return fmt.Errorf("-qwen35-vocab: %w", err)
		}
		if o.shape.EOS == nil {
			o.shape.EOS = synth.Qwen35EOS
		}
	}
	return synth.Write(o.out, o.shape, tj, tc)
}
