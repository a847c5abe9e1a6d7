package bench

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"runtime"
	"time"

	"github.com/qwenc/qwenc/kernels"
	"github.com/qwenc/qwenc/runtime/infer"
)

// DraftConfig is what DraftCost measures: the cost of a decode step that
// checks k tokens (the sampled one and k-1 drafted), against one token.
type DraftConfig struct {
	Model   string
	Threads int // 0: GOMAXPROCS, as infer.Options
	Kernels kernels.Path
	Rows    []int // the k to measure (1 is always measured)
	Depth   int   // tokens in the cache before each step
	Reps    int
	// MTP also times a step of the model's MTP block guessing one token
	// (one row, then the head's first MTPVocab rows; 0: all), alternating
	// with the others.
	MTP      bool
	MTPVocab int
}

// MTPCost is what DraftCost measured of the MTP block: its median guess
// step, and that over the one-token decode step's.
type MTPCost struct {
	Step  time.Duration
	Ratio float64
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
// repetition, from the same cache (rewound after each step), and with
// cfg.MTP the MTP block's guess steps among them.
func DraftCost(cfg DraftConfig) ([]DraftRow, MTPCost, error) {
	var mc MTPCost
	if cfg.Reps < 1 || cfg.Depth < 1 {
		return nil, mc, fmt.Errorf("bench draft: reps %d, depth %d: want 1 or more", cfg.Reps, cfg.Depth)
	}
	m, err := infer.Open(cfg.Model, infer.Options{Threads: cfg.Threads, Kernels: cfg.Kernels})
	if err != nil {
		return nil, mc, err
	}
	defer m.Close()
	if cfg.MTP && !m.HasMTP() {
		return nil, mc, fmt.Errorf("bench draft: %s has no MTP block", cfg.Model)
	}
	rows := append([]int{1}, cfg.Rows...)
	most := 0
	for _, k := range rows {
		if k < 1 || k > m.MaxPrefill() {
			return nil, mc, fmt.Errorf("bench draft: %d rows, want 1 to the prefill batch %d", k, m.MaxPrefill())
		}
		most = max(most, k)
	}
	r := m.NewRunner(infer.Options{Threads: cfg.Threads, Kernels: cfg.Kernels, MTPVocab: cfg.MTPVocab})
	defer r.Close()
	s, err := m.NewSession(cfg.Depth + most)
	if err != nil {
		return nil, mc, err
	}
	if cfg.MTP {
		if err := s.TrackMTP(); err != nil {
			return nil, mc, err
		}
	}
	tokens := make([]int32, cfg.Depth+most)
	for i := range tokens {
		tokens[i] = int32(1000 + (i*7919)%(m.Config.Vocab-1000))
	}
	for at := 0; at < cfg.Depth; at += m.MaxPrefill() {
		if err := r.Step([]infer.Seq{{Session: s, Tokens: tokens[at:min(at+m.MaxPrefill(), cfg.Depth)]}}); err != nil {
			return nil, mc, err
		}
		if cfg.MTP {
			if err := mtpCatchUp(r, s, tokens[min(at+m.MaxPrefill(), cfg.Depth)]); err != nil {
				return nil, mc, err
			}
		}
	}
	s.Checkpoint() // each measured step goes back here
	times := make([][]float64, len(rows))
	var mtpTimes []float64
	for rep := range cfg.Reps + 1 { // the first round warms up
		for i, k := range rows {
			start := time.Now()
			if err := r.Step([]infer.Seq{{Session: s, Tokens: tokens[cfg.Depth : cfg.Depth+k], Logits: true, Last: k}}); err != nil {
				return nil, mc, err
			}
			d := time.Since(start)
			if err := s.Rewind(cfg.Depth); err != nil {
				return nil, mc, err
			}
			if rep > 0 {
				times[i] = append(times[i], d.Seconds())
			}
		}
		if cfg.MTP {
			// The rewind left the row of the last position waiting (it
			// is computed again with the token after it): a decode
			// step's MTP guess.
			start := time.Now()
			if err := r.StepMTP([]infer.MTPSeq{{Session: s, Next: tokens[cfg.Depth], Logits: true}}); err != nil {
				return nil, mc, err
			}
			if rep > 0 {
				mtpTimes = append(mtpTimes, time.Since(start).Seconds())
			}
		}
	}
	one := median(times[0])
	if cfg.MTP {
		t := median(mtpTimes)
		mc = MTPCost{Step: time.Duration(t * float64(time.Second)), Ratio: t / one}
	}
	out := make([]DraftRow, len(rows))
	for i, k := range rows {
		t := median(times[i])
		cost := t / one
		out[i] = DraftRow{Rows: k, Step: time.Duration(t * float64(time.Second)), Cost: cost, Pays: breakEven(k, cost), Gains: float64(k) / cost}
	}
	return out, mc, nil
}

// mtpCatchUp brings s's MTP rows up to its last position, whose next
// token is next.
func mtpCatchUp(r *infer.Runner, s *infer.Session, next int32) error {
	for s.MTPWaiting() > 0 {
		max := r.Model().MTPRows()
		last := s.MTPWaiting() <= max
		if err := r.StepMTP([]infer.MTPSeq{{Session: s, Next: next, Max: max, Logits: last}}); err != nil {
			return err
		}
	}
	return nil
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
	fmt.Fprintf(w, "%s, %d threads, %s, %d tokens in the cache: a step checking k tokens against one\n", cfg.Model, cmp.Or(cfg.Threads, runtime.GOMAXPROCS(0)), cfg.Kernels, cfg.Depth)
	fmt.Fprintf(w, "%5s %10s %8s %14s %14s\n", "k", "step ms", "x one", "pays above", "all kept")
	for _, r := range rows {
		pays := "never"
		if !math.IsNaN(r.Pays) {
			pays = fmt.Sprintf("%.2f", r.Pays)
		}
		fmt.Fprintf(w, "%5d %10.2f %8.2f %14s %13.2fx\n", r.Rows, ms(r.Step), r.Cost, pays, r.Gains)
	}
}

// Projection is the speedup a draft model would give: for a draft of k
// tokens (a step of k+1 rows of the measured curve) whose tokens are each
// kept with probability a while the ones before were, a verification
// step yields E = 1 + a + ... + a^k tokens and costs k draft steps
// (ratio r of a target step each: about the two models' bytes read per
// decode step) and the target's step of k+1 rows.
type Projection struct {
	Drafted int
	Speedup []float64 // one per acceptance rate
}

// Project projects the speedups of rows with draft ratio r at each
// acceptance rate of accept.
func Project(rows []DraftRow, r float64, accept []float64) []Projection {
	var out []Projection
	for _, row := range rows {
		k := row.Rows - 1
		if k < 1 {
			continue
		}
		p := Projection{Drafted: k}
		for _, a := range accept {
			e, pa := 0.0, 1.0
			for range k + 1 {
				e += pa
				pa *= a
			}
			p.Speedup = append(p.Speedup, e/(float64(k)*r+row.Cost))
		}
		out = append(out, p)
	}
	return out
}

// WriteMTPCost prints what the MTP block's guess costs.
func WriteMTPCost(w io.Writer, cfg DraftConfig, mc MTPCost) {
	vocab := "every token id"
	if cfg.MTPVocab > 0 {
		vocab = fmt.Sprintf("the first %d token ids and the stop tokens", cfg.MTPVocab)
	}
	fmt.Fprintf(w, "an MTP guess (one row of the MTP layer, the head over %s): %.2f ms, %.3f of a one-token decode step\n", vocab, ms(mc.Step), mc.Ratio)
}

// WriteProjection prints the projections.
func WriteProjection(w io.Writer, r float64, accept []float64, ps []Projection) {
	fmt.Fprintf(w, "projected speedup of drafts whose guesses cost %.3f of a step each, by drafted tokens and acceptance rate\n", r)
	fmt.Fprintf(w, "%8s", "drafted")
	for _, a := range accept {
		fmt.Fprintf(w, " %8s", fmt.Sprintf("a=%.2f", a))
	}
	fmt.Fprintln(w)
	for _, p := range ps {
		fmt.Fprintf(w, "%8d", p.Drafted)
		for _, s := range p.Speedup {
			fmt.Fprintf(w, " %7.2fx", s)
		}
		fmt.Fprintln(w)
	}
}
