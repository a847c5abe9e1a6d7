package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/format/tokenizer"
	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/runtime/grammar"
	"github.com/qwenc/qwenc/runtime/sampling"
)

// SchemaConfig is what Schema measures: decoding held to a JSON Schema
// against decoding free, in the same process, alternately.
type SchemaConfig struct {
	Model   string
	Schema  json.RawMessage
	TG      int // tokens to generate, at most (a schema may end the answer before)
	Reps    int
	Options []qwen.Option
}

// DefaultSchema keeps a random-weight model generating structure, which
// is where masks cost: objects of a bounded string, an integer range and
// an enum, at least 50 of them, so that 128 tokens never end it.
var DefaultSchema = json.RawMessage(`{"type": "array", "minItems": 50, "items": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "qty": {"type": "integer", "minimum": 0, "maximum": 1000}, "unit": {"enum": ["kg", "g", "l", "pcs"]}}, "required": ["name", "qty", "unit"], "additionalProperties": false}}`)

// SchemaResult is the figures of a Schema run.
type SchemaResult struct {
	FreeTokS, HeldTokS []float64 // decode tokens/s of each round
	Ratio              float64   // the median over rounds of held/free within a round
	Compile            time.Duration
	Masks              []time.Duration // each step's mask, replayed on the held rounds' tokens
	Tokens             int
}

// Schema measures decode with and without a schema, and replays the
// held generations' tokens through the grammar to time each mask.
func Schema(cfg SchemaConfig) (SchemaResult, error) {
	var res SchemaResult
	if cfg.Reps < 1 {
		return res, fmt.Errorf("--reps %d: want 1 or more", cfg.Reps)
	}
	m, err := qwen.Open(cfg.Model, append([]qwen.Option{qwen.WithParallel(1), qwen.WithStateCache(0)}, cfg.Options...)...)
	if err != nil {
		return res, err
	}
	defer m.Close()
	msgs := []qwen.Message{{Role: "user", Content: "List what to buy, as JSON."}}
	run := func(req qwen.Request) (float64, []int32, error) {
		var ids []int32
		var u qwen.Usage
		for d, err := range m.Generate(context.Background(), req) {
			if err != nil {
				return 0, nil, err
			}
			ids = append(ids, d.IDs...)
			u = d.Usage
		}
		decode := u.Total - u.TimeToFirstToken
		if len(ids) < 2 || decode <= 0 {
			return 0, ids, fmt.Errorf("the generation made %d tokens: too few to time", len(ids))
		}
		return float64(len(ids)-1) / decode.Seconds(), ids, nil
	}
	var held [][]int32
	var ratios []float64
	for r := range cfg.Reps + 1 { // the first round warms up
		p := sampling.Params{Temperature: 1, Seed: uint64(r)}
		free, _, err := run(qwen.Request{Messages: msgs, NoThinking: true, MaxTokens: cfg.TG, Sampling: &p, IgnoreEOS: true})
		if err != nil {
			return res, err
		}
		h, ids, err := run(qwen.Request{Messages: msgs, NoThinking: true, MaxTokens: cfg.TG, Sampling: &p, JSONSchema: cfg.Schema})
		if err != nil {
			return res, err
		}
		if r == 0 {
			continue
		}
		res.FreeTokS, res.HeldTokS = append(res.FreeTokS, free), append(res.HeldTokS, h)
		ratios = append(ratios, h/free)
		held = append(held, ids)
	}
	res.Ratio = median(ratios)
	return res, replay(cfg, held, &res)
}

// replay compiles the schema's grammar afresh, as a request does, and
// times each step's mask over the tokens the held rounds generated.
func replay(cfg SchemaConfig, held [][]int32, res *SchemaResult) error {
	f, err := format.Open(cfg.Model)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := f.Bytes(format.SecTokenizer)
	if err != nil {
		return err
	}
	h := f.Header
	tok, err := tokenizer.LoadFor(bytes.Clone(b), h.Config.Vocab)
	if err != nil {
		return fmt.Errorf("%s: section %q: %w", cfg.Model, format.SecTokenizer, err)
	}
	cf, err := chat.Lookup(h.ChatFamily)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.Model, err)
	}
	v := grammar.VocabOf(tok, h.Config.Vocab, chat.StopTokens(tok, h.Generation.EOS, cf))
	start := time.Now()
	g, err := grammar.Compile(v, grammar.Answer{Schema: cfg.Schema})
	if err != nil {
		return err
	}
	// Every table, which a Matcher would otherwise build as it meets
	// them: the compile time is the whole grammar's, the masks' are the
	// steps'.
	g.BuildTables()
	res.Compile = time.Since(start)
	mask := v.NewMask()
	for _, ids := range held {
		mt := g.NewMatcher()
		for _, id := range ids {
			t0 := time.Now()
			mt.Fill(mask)
			res.Masks = append(res.Masks, time.Since(t0))
			if err := mt.Accept(id); err != nil {
				return fmt.Errorf("replay: %w", err)
			}
			res.Tokens++
		}
	}
	return nil
}

// Write prints the figures.
func (res SchemaResult) Write(w io.Writer) {
	pct := func(p float64) time.Duration { return percentile(res.Masks, p) }
	fmt.Fprintf(w, "decode held to a JSON Schema / free, same process, alternating rounds: %.2fx (median of %d rounds)\n", res.Ratio, len(res.FreeTokS))
	for i := range res.FreeTokS {
		fmt.Fprintf(w, "  round %d: free %.1f tok/s, held %.1f tok/s\n", i+1, res.FreeTokS[i], res.HeldTokS[i])
	}
	fmt.Fprintf(w, "grammar compile %.1f ms; mask per token over %d tokens: p50 %.1f us, p99 %.1f us, max %.1f us\n",
		ms(res.Compile), res.Tokens, us(pct(0.5)), us(pct(0.99)), us(pct(1)))
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
