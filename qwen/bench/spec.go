package bench

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/runtime/sampling"
)

// SpecConfig is what Spec measures: greedy decoding with drafts against
// the same requests without, alternately in one process.
type SpecConfig struct {
	Model   string
	Prompts []SpecPrompt
	Tokens  int // generated per request (past the end of the answer)
	Rounds  int
	Options []qwen.Option // WithDraftModel for a draft model's guesses
	// Draft, DraftModel and DraftPMin are the drafted requests'
	// (qwen.Request's).
	Draft, DraftModel int
	DraftPMin         float64
	// Prediction predicts each answer as the first round without drafts
	// gave it (OpenAI's Predicted Outputs of an unchanged file).
	Prediction bool
}

// SpecPrompt is a raw prompt, named.
type SpecPrompt struct{ Name, Text string }

// SpecRow is one prompt's figures.
type SpecRow struct {
	Name              string
	Drafted, Accepted int     // over the drafted rounds
	Plain, Drafting   float64 // median decode tokens/s
	Speedup           float64 // the median over rounds of drafting/plain within a round
	Same              bool    // every drafted round gave the tokens of the plain ones
}

// Spec measures each prompt: in each round, the request without drafts
// then with, so that the two share the machine's state of the moment.
func Spec(cfg SpecConfig) ([]SpecRow, error) {
	if cfg.Rounds < 1 || cfg.Tokens < 2 {
		return nil, fmt.Errorf("bench spec: rounds %d, tokens %d: want 1 and 2 or more", cfg.Rounds, cfg.Tokens)
	}
	m, err := qwen.Open(cfg.Model, append([]qwen.Option{qwen.WithParallel(1)}, cfg.Options...)...)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	run := func(req qwen.Request) (float64, []int32, qwen.Usage, error) {
		var ids []int32
		var u qwen.Usage
		for d, err := range m.Generate(context.Background(), req) {
			if err != nil {
				return 0, nil, u, err
			}
			ids = append(ids, d.IDs...)
			u = d.Usage
		}
		decode := u.Total - u.TimeToFirstToken
		return float64(u.CompletionTokens-1) / decode.Seconds(), ids, u, nil
	}
	var rows []SpecRow
	for _, p := range cfg.Prompts {
		plain := qwen.Request{Prompt: p.Text, MaxTokens: cfg.Tokens, IgnoreEOS: true, Sampling: &sampling.Params{}}
		drafting := plain
		drafting.Draft, drafting.DraftModel, drafting.DraftPMin = cfg.Draft, cfg.DraftModel, cfg.DraftPMin
		row := SpecRow{Name: p.Name, Same: true}
		var plainTS, draftTS, ratios []float64
		var want []int32
		for round := range cfg.Rounds + 1 { // the first round warms up
			a, ids, _, err := run(plain)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.Name, err)
			}
			if want == nil {
				want = ids
				if cfg.Prediction {
					drafting.Prediction = m.Detokenize(ids)
				}
			}
			b, got, u, err := run(drafting)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.Name, err)
			}
			row.Same = row.Same && slices.Equal(got, want)
			if round == 0 {
				continue
			}
			plainTS, draftTS, ratios = append(plainTS, a), append(draftTS, b), append(ratios, b/a)
			row.Drafted += u.Drafted
			row.Accepted += u.Accepted
		}
		row.Plain, row.Drafting, row.Speedup = median(plainTS), median(draftTS), median(ratios)
		rows = append(rows, row)
	}
	return rows, nil
}

// WriteSpecTable prints the rows and, over all prompts, the lowest and
// the median speedup.
func WriteSpecTable(w io.Writer, title string, rows []SpecRow) {
	fmt.Fprintln(w, title)
	fmt.Fprintf(w, "%-24s %9s %9s %8s %10s %10s %8s %6s\n", "prompt", "drafted", "accepted", "rate", "plain t/s", "draft t/s", "speedup", "same")
	var speedups []float64
	for _, r := range rows {
		rate := 0.0
		if r.Drafted > 0 {
			rate = float64(r.Accepted) / float64(r.Drafted)
		}
		same := "yes"
		if !r.Same {
			same = "NO"
		}
		fmt.Fprintf(w, "%-24s %9d %9d %8.2f %10.1f %10.1f %7.2fx %6s\n", r.Name, r.Drafted, r.Accepted, rate, r.Plain, r.Drafting, r.Speedup, same)
		speedups = append(speedups, r.Speedup)
	}
	if len(speedups) > 1 {
		fmt.Fprintf(w, "speedup: lowest %.2fx, median %.2fx\n", slices.Min(speedups), median(speedups))
	}
}
