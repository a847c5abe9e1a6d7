package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/qwenc/qwenc/qwen"
)

// EmbedConfig is what Embed measures: a batch of short inputs embedded
// together against one input of the prefill batch's length, in the same
// process, alternately.
type EmbedConfig struct {
	Model          string
	Inputs, Tokens int // the batch: Inputs inputs of Tokens tokens each (64 x 64)
	Long           int // the single input's tokens (512: pp512)
	Reps           int
	Options        []qwen.Option
}

// EmbedResult is the figures of an Embed run.
type EmbedResult struct {
	BatchTokS, LongTokS []float64 // tokens/s of each round
	Ratio               float64   // the median over rounds of batch/long within a round
}

// Embed times embedding cfg.Inputs inputs of cfg.Tokens random tokens in
// one request, and one input of cfg.Long, each round both, the first
// round a warm-up. The inputs end with the model's appended tokens, so
// their lengths are exact; the prefix cache is off, so nothing is reused.
func Embed(cfg EmbedConfig) (EmbedResult, error) {
	var res EmbedResult
	if cfg.Reps < 1 || cfg.Inputs < 1 || cfg.Tokens < 2 || cfg.Long < 2 {
		return res, fmt.Errorf("bench embed: reps %d, inputs %d, tokens %d, long %d: want 1, 1, 2 and 2 or more", cfg.Reps, cfg.Inputs, cfg.Tokens, cfg.Long)
	}
	m, err := qwen.Open(cfg.Model, append([]qwen.Option{qwen.WithStateCache(0)}, cfg.Options...)...)
	if err != nil {
		return res, err
	}
	defer m.Close()
	ids := m.Tokenize("<|endoftext|>")
	if len(ids) != 1 {
		return res, fmt.Errorf("%s: no <|endoftext|> token", cfg.Model)
	}
	eot := ids[0]
	rng := rand.New(rand.NewPCG(1, 2))
	input := func(n int) []int32 {
		ids := make([]int32, n)
		for i := range n - 1 {
			ids[i] = rng.Int32N(150000) // ordinary tokens
		}
		ids[n-1] = eot
		return ids
	}
	run := func(inputs [][]int32) (float64, error) {
		start := time.Now()
		e, err := m.Embed(context.Background(), qwen.EmbedRequest{Tokens: inputs})
		if err != nil {
			return 0, err
		}
		return float64(e.PromptTokens) / time.Since(start).Seconds(), nil
	}
	var ratios []float64
	for r := range cfg.Reps + 1 {
		batch := make([][]int32, cfg.Inputs)
		for i := range batch {
			batch[i] = input(cfg.Tokens)
		}
		b, err := run(batch)
		if err != nil {
			return res, err
		}
		l, err := run([][]int32{input(cfg.Long)})
		if err != nil {
			return res, err
		}
		if r == 0 {
			continue
		}
		res.BatchTokS, res.LongTokS = append(res.BatchTokS, b), append(res.LongTokS, l)
		ratios = append(ratios, b/l)
	}
	res.Ratio = median(ratios)
	return res, nil
}

// Write prints the result.
func (r EmbedResult) Write(w io.Writer, cfg EmbedConfig) {
	fmt.Fprintf(w, "embedding %d inputs of %d tokens together / one input of %d, same process, alternating rounds: %.2fx (median of %d rounds)\n",
		cfg.Inputs, cfg.Tokens, cfg.Long, r.Ratio, len(r.BatchTokS))
	for i := range r.BatchTokS {
		fmt.Fprintf(w, "  round %d: %d x %d: %.0f tok/s, 1 x %d: %.0f tok/s\n", i+1, cfg.Inputs, cfg.Tokens, r.BatchTokS[i], cfg.Long, r.LongTokS[i])
	}
}
