// Command qwengen writes a random-weight Qwen checkpoint in Hugging Face
// layout, for benchmarks and tests: by default the real Qwen3-0.6B shape.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/qwenc/qwenc/internal/synth"
)

func main() {
	s := synth.Qwen3_06B()
	out := flag.String("o", "", "output `DIR` (required)")
	tok := flag.String("tokenizer", "", "tokenizer.json to copy in (required)")
	tokCfg := flag.String("tokenizer-config", "", "tokenizer_config.json to copy in (required)")
	flag.StringVar(&s.ModelType, "model-type", s.ModelType, "qwen3 or qwen2")
	flag.IntVar(&s.Hidden, "hidden", s.Hidden, "hidden size")
	flag.IntVar(&s.Intermediate, "ffn", s.Intermediate, "intermediate (FFN) size")
	flag.IntVar(&s.Layers, "layers", s.Layers, "layers")
	flag.IntVar(&s.Heads, "heads", s.Heads, "attention heads")
	flag.IntVar(&s.KVHeads, "kv-heads", s.KVHeads, "key/value heads")
	flag.IntVar(&s.HeadDim, "head-dim", s.HeadDim, "head dimension")
	flag.IntVar(&s.Vocab, "vocab", s.Vocab, "vocabulary size")
	flag.BoolVar(&s.Tied, "tied", s.Tied, "tie the LM head to the embedding")
	flag.StringVar(&s.DType, "dtype", s.DType, "BF16, F16 or F32")
	flag.IntVar(&s.Shards, "shards", s.Shards, "number of safetensors shards (>1 writes an index)")
	flag.Uint64Var(&s.Seed, "seed", s.Seed, "random seed")
	flag.Parse()
	if *out == "" || *tok == "" || *tokCfg == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*out, s, *tok, *tokCfg); err != nil {
		fmt.Fprintf(os.Stderr, "qwengen: %v\n", err)
		os.Exit(1)
	}
}

func run(dir string, s synth.Shape, tok, tokCfg string) error {
	tj, err := os.ReadFile(tok)
	if err != nil {
		return err
	}
	tc, err := os.ReadFile(tokCfg)
	if err != nil {
		return err
	}
	return synth.Write(dir, s, tj, tc)
}
