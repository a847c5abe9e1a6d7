package bench

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/qwenc/qwenc/infer"
	"github.com/qwenc/qwenc/kernels"
)

// DraftConfig is what DraftCost measures: the cost of a decode step that
// checks k tokens (the sampled one and k-1 drafted), against one token.
type DraftConfig struct {
	Model   string
	Threads int
	Kernels kernels.Path
	Rows    []int // the k to measure (1 is always measured)
	Depth   int   // tokens in the cache before each step
	Reps    int
}

// DraftRow is one k's figures.
type DraftRow struct {
	Rows  int
	Step  time.Duration // the median step
	Cost  float64       // Step over the one-token step's
	Pays  float64       // the acceptance rate above which drafting k-1 tokens pays (NaN: never)
	Gains float64       // the speedup were every draft kept: k / Cost
}

// DraftCost times steps of each row count, alternating them within each
// repetition, from the same cache (rewound after each step).
func DraftCost(cfg DraftConfig) ([]DraftRow, error) {
	if cfg.Reps < 1 || cfg.Depth < 1 {
		return nil, fmt.Errorf("bench draft: reps %d, depth %d: want 1 or more", cfg.Reps, cfg.Depth)
	}
	m, err := infer.Open(cfg.Model, infer.Options{Threads: cfg.Threads, Kernels: cfg.Kernels})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	rows := append([]int{1}, cfg.Rows...)
	most := 0
	for _, k := range rows {
		if k < 1 || k > m.MaxPrefill() {
			return nil, fmt.Errorf("bench draft: %d rows, want 1 to the prefill batch %d", k, m.MaxPrefill())
		}
		most = max(most, k)
	}
	r := m.NewRunner(infer.Options{Threads: cfg.Threads, Kernels: cfg.Kernels})
	defer r.Close()
	s, err := m.NewSession(cfg.Depth + most)
	if err != nil {
		return nil, err
	}
	tokens := make([]int32, cfg.Depth+most)
	for i := range tokens {
		tokens[i] = int32(1000 + (i*7919)%100000)
	}
	for at := 0; at < cfg.Depth; at += m.MaxPrefill() {
		if err := r.Step([]infer.Seq{{Session: s, Tokens: tokens[at:min(at+m.MaxPrefill(), cfg.Depth)]}}); err != nil {
			return nil, err
		}
	}
	times := make([][]float64, len(rows))
	for rep := range cfg.Reps + 1 { // the first round warms up
		for i, k := range rows {
			start := time.Now()
			if err := r.Step([]infer.Seq{{Session: s, Tokens: tokens[cfg.Depth : cfg.Depth+k], Logits: true, Last: k}}); err != nil {
				return nil, err
			}
			d := time.Since(start)
			s.Rewind(cfg.Depth)
			if rep > 0 {
				times[i] = append(times[i], d.Seconds())
			}
		}
	}
	one := median(times[0])
	out := make([]DraftRow, len(rows))
	for i, k := range rows {
		t := median(times[i])
		cost := t / one
		out[i] = DraftRow{Rows: k, Step: time.Duration(t * float64(time.Second)), Cost: cost, Pays: breakEven(k, cost), Gains: float64(k) / cost}
	}
	return out, nil
}

// breakEven is the per-token acceptance rate a at which a step of k rows
// (k-1 drafted, each kept with probability a while the ones before were)
// yields cost tokens: E = 1 + a + ... + a^(k-1) = cost.
func breakEven(k int, cost float64) float64 {
	expect := func(a float64) float64 {
		e, p := 0.0, 1.0
		for range k {
			e += p
			p *= a
		}
		return e
	}
	switch {
	case cost <= 1:
		return 0
	case expect(1) < cost:
		return math.NaN()
	}
	lo, hi := 0.0, 1.0
	for range 60 {
		mid := (lo + hi) / 2
		if expect(mid) < cost {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// WriteDraftTable prints the rows.
func WriteDraftTable(w io.Writer, cfg DraftConfig, rows []DraftRow) {
	fmt.Fprintf(w, "%s, %d threads, %s, %d tokens in the cache: a step checking k tokens against one\n", cfg.Model, cfg.Threads, cfg.Kernels, cfg.Depth)
	fmt.Fprintf(w, "%5s %10s %8s %14s %14s\n", "k", "step ms", "x one", "pays above", "all kept")
	for _, r := range rows {
		pays := "never"
		if !math.IsNaN(r.Pays) {
			pays = fmt.Sprintf("%.2f", r.Pays)
		}
		fmt.Fprintf(w, "%5d %10.2f %8.2f %14s %13.2fx\n", r.Rows, ms(r.Step), r.Cost, pays, r.Gains)
	}
}
