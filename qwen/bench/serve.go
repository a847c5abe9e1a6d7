package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/runtime/sampling"
)

// ServeConfig is what Serve measures: the engine every front end runs on,
// with concurrent streams.
type ServeConfig struct {
	Model   string
	Streams []int // concurrent streams to measure
	PP, TG  int   // prompt tokens and generated tokens of each request
	// Requests is how many requests each client sends one after another
	// in the back-to-back measurement (at least 2: each client's first is
	// left out).
	Requests int
	// Reps is the rounds over the stream counts; each multiple of one
	// stream is taken within a round.
	Reps int
	// Options open the model (threads, kernels, KV cache type).
	Options []qwen.Option
	Log     io.Writer
}

// ServeRow is one stream count's figures in one round.
type ServeRow struct {
	// From N requests submitted at one instant: TokS counts the steps
	// where all N decode; TTFT is every request's.
	TokS           float64
	TTFT50, TTFT99 time.Duration
	ITL50, ITL99   time.Duration
	// From N clients sending requests back to back (closed loop), each
	// client's first request left out: the arrivals are then spread as a
	// busy server sees them.
	LoopTTFT50, LoopTTFT99 time.Duration
	LoopTokS               float64
}

// ServeResult is every round: Rounds[i][r] is stream count Streams[i] in
// round r.
type ServeResult struct {
	Streams  []int
	Rounds   [][]ServeRow
	Requests int
}

// Serve measures the engine with N concurrent streams two ways: N
// requests submitted at once (a burst, the worst case for the time to
// first token, and the aggregate decode rate while all N decode), and N
// clients each sending requests one after another.
func Serve(cfg ServeConfig) (ServeResult, error) {
	res := ServeResult{Streams: cfg.Streams, Rounds: make([][]ServeRow, len(cfg.Streams)), Requests: cfg.Requests}
	switch {
	case cfg.Reps < 1:
		return res, fmt.Errorf("--reps %d: want 1 or more", cfg.Reps)
	case cfg.Requests < 2:
		return res, fmt.Errorf("--requests %d: want 2 or more (each client's first is left out)", cfg.Requests)
	}
	log := cfg.Log
	if log == nil {
		log = io.Discard
	}
	// Each round measures every count in turn, so a multiple compares
	// figures minutes apart at most.
	for r := range cfg.Reps {
		for i, n := range cfg.Streams {
			row, err := cfg.run(n, uint64(r))
			if err != nil {
				return res, err
			}
			res.Rounds[i] = append(res.Rounds[i], row)
			fmt.Fprintf(log, "  round %d, %d streams: %.1f tok/s, TTFT p50 %.0f ms at once, %.0f ms back to back\n",
				r+1, n, row.TokS, ms(row.TTFT50), ms(row.LoopTTFT50))
		}
	}
	return res, nil
}

// WriteHeader says what Serve measures: the model, the requests, and
// the kernels, threads and KV cache type the model opens with.
func (cfg ServeConfig) WriteHeader(w io.Writer) error {
	m, err := qwen.Open(cfg.Model, cfg.Options...)
	if err != nil {
		return err
	}
	info := m.Info()
	m.Close()
	_, err = fmt.Fprintf(w, "model %s; %d prompt tokens and %d generated per request; kernels %s, %d threads, %s KV cache\n",
		cfg.Model, cfg.PP, cfg.TG, info.Kernels, info.Threads, info.KVType)
	return err
}

// WriteTables prints the medians of the rounds.
func (res ServeResult) WriteTables(w io.Writer) {
	// med is the median over rounds of f for count i; within the median
	// over rounds of f's ratio to the first count in the same round.
	med := func(i int, f func(ServeRow) float64) float64 {
		var v []float64
		for _, r := range res.Rounds[i] {
			v = append(v, f(r))
		}
		return median(v)
	}
	within := func(i int, f func(ServeRow) float64) float64 {
		var v []float64
		for r := range res.Rounds[i] {
			v = append(v, f(res.Rounds[i][r])/f(res.Rounds[0][r]))
		}
		return median(v)
	}
	dur := func(f func(ServeRow) time.Duration) func(ServeRow) float64 {
		return func(r ServeRow) float64 { return ms(f(r)) }
	}
	var (
		tokS     = func(r ServeRow) float64 { return r.TokS }
		loopTokS = func(r ServeRow) float64 { return r.LoopTokS }
		ttft50   = dur(func(r ServeRow) time.Duration { return r.TTFT50 })
		ttft99   = dur(func(r ServeRow) time.Duration { return r.TTFT99 })
		itl50    = dur(func(r ServeRow) time.Duration { return r.ITL50 })
		itl99    = dur(func(r ServeRow) time.Duration { return r.ITL99 })
		loop50   = dur(func(r ServeRow) time.Duration { return r.LoopTTFT50 })
		loop99   = dur(func(r ServeRow) time.Duration { return r.LoopTTFT99 })
	)

	fmt.Fprintf(w, "\nN requests submitted at once:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "streams\tdecode tok/s\tx first count\tTTFT p50 ms\tTTFT p99 ms\tx first count\tinter-token p50 ms\tinter-token p99 ms\t\n")
	for i, n := range res.Streams {
		fmt.Fprintf(tw, "%d\t%.1f\t%.2f\t%.0f\t%.0f\t%.2f\t%.1f\t%.1f\t\n", n, med(i, tokS), within(i, tokS),
			med(i, ttft50), med(i, ttft99), within(i, ttft50), med(i, itl50), med(i, itl99))
	}
	tw.Flush()
	fmt.Fprintln(w, "decode tok/s = the tokens of the steps where all N streams decode (from the last first token to the first last token) / that time; TTFT from submission")

	fmt.Fprintf(w, "\nN clients, each sending %d requests one after another:\n", res.Requests)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "streams\ttok/s\tTTFT p50 ms\tTTFT p99 ms\tx first count\t\n")
	for i, n := range res.Streams {
		fmt.Fprintf(tw, "%d\t%.1f\t%.0f\t%.0f\t%.2f\t\n", n, med(i, loopTokS), med(i, loop50), med(i, loop99), within(i, loop50))
	}
	tw.Flush()
	fmt.Fprintln(w, "tok/s = all tokens generated / the wall time (prefills included); TTFT of every request but each client's first, which all arrive at once")
	fmt.Fprintf(w, "\nmedians of %d rounds; x first count = the median over rounds of the ratio to the first stream count in the same round\n", len(res.Rounds[0]))
}

// trace is one request's deltas: its time to first token and when each
// token came.
type trace struct {
	ttft  time.Duration
	times []time.Time
}

// run measures n streams on a model opened for n conversations, prompts
// drawn from a generator seeded by n and the round.
func (cfg ServeConfig) run(n int, round uint64) (ServeRow, error) {
	m, err := qwen.Open(cfg.Model, append(slices.Clip(cfg.Options), qwen.WithParallel(n), qwen.WithContext(cfg.PP+cfg.TG+1))...)
	if err != nil {
		return ServeRow{}, err
	}
	defer m.Close()
	rng := rand.New(rand.NewPCG(uint64(n), round))
	// One request of the measured length first, so the arenas' rows and a
	// cache are allocated and touched before anything is timed (with a
	// 3-token one, a lone 64-token prompt's TTFT was 177-225 ms at once
	// against 138-160 ms back to back).
	if _, err := cfg.request(m, cfg.prompt(m, rng), 2); err != nil {
		return ServeRow{}, err
	}
	row, err := cfg.burst(m, rng, n)
	if err != nil {
		return row, err
	}
	return row, cfg.closedLoop(m, rng, n, &row)
}

func (cfg ServeConfig) prompt(m *qwen.Model, rng *rand.Rand) []int32 {
	vocab := m.Info().Vocab
	p := make([]int32, cfg.PP)
	for j := range p {
		p[j] = int32(rng.IntN(vocab))
	}
	return p
}

// request submits one greedy generation of tg tokens and follows it.
func (cfg ServeConfig) request(m *qwen.Model, prompt []int32, tg int) (trace, error) {
	s, err := submit(m, prompt, tg)
	if err != nil {
		return trace{}, err
	}
	return follow(s)
}

// submit starts a greedy generation of exactly tg tokens: past any token
// that would end an answer.
func submit(m *qwen.Model, prompt []int32, tg int) (*qwen.Stream, error) {
	return m.Start(context.Background(), qwen.Request{Tokens: prompt, MaxTokens: tg, Sampling: &sampling.Params{}, IgnoreEOS: true})
}

// follow reads a stream to its end.
func follow(s *qwen.Stream) (trace, error) {
	var tr trace
	for d, err := range s.Deltas() {
		if err != nil {
			return tr, err
		}
		for range d.IDs {
			tr.times = append(tr.times, d.Time)
		}
		if d.Stop != "" {
			tr.ttft = d.Usage.TimeToFirstToken
		}
	}
	return tr, nil
}

// burst submits n requests at one instant: from one goroutine, so the
// engine sees them within microseconds, then follows each.
func (cfg ServeConfig) burst(m *qwen.Model, rng *rand.Rand, n int) (ServeRow, error) {
	prompts := make([][]int32, n)
	for i := range prompts {
		prompts[i] = cfg.prompt(m, rng)
	}
	streams := make([]*qwen.Stream, n)
	for i, p := range prompts {
		var err error
		if streams[i], err = submit(m, p, cfg.TG); err != nil {
			return ServeRow{}, err
		}
	}
	traces := make([]trace, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Go(func() { traces[i], errs[i] = follow(s) })
	}
	wg.Wait()
	var row ServeRow
	if err := errors.Join(errs...); err != nil {
		return row, err
	}
	var ttfts, gaps []time.Duration
	var from, to time.Time // while all n decode
	for i, tr := range traces {
		if len(tr.times) == 0 {
			return row, fmt.Errorf("stream %d generated nothing", i)
		}
		ttfts = append(ttfts, tr.ttft)
		for j := 1; j < len(tr.times); j++ {
			gaps = append(gaps, tr.times[j].Sub(tr.times[j-1]))
		}
		if first := tr.times[0]; first.After(from) {
			from = first
		}
		if last := tr.times[len(tr.times)-1]; to.IsZero() || last.Before(to) {
			to = last
		}
	}
	decoded := 0
	for _, tr := range traces {
		for _, t := range tr.times {
			if t.After(from) && !t.After(to) {
				decoded++
			}
		}
	}
	if !to.After(from) {
		return row, fmt.Errorf("%d streams never all decoded together: raise --tg", n)
	}
	row.TokS = float64(decoded) / to.Sub(from).Seconds()
	row.TTFT50, row.TTFT99 = percentile(ttfts, 0.5), percentile(ttfts, 0.99)
	row.ITL50, row.ITL99 = percentile(gaps, 0.5), percentile(gaps, 0.99)
	return row, nil
}

// closedLoop runs n clients that each send cfg.Requests requests one
// after another, as chat front ends and agents do.
func (cfg ServeConfig) closedLoop(m *qwen.Model, rng *rand.Rand, n int, row *ServeRow) error {
	prompts := make([][][]int32, n)
	for i := range prompts {
		for range cfg.Requests {
			prompts[i] = append(prompts[i], cfg.prompt(m, rng))
		}
	}
	traces := make([][]trace, n)
	errs := make([]error, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for _, p := range prompts[i] {
				tr, err := cfg.request(m, p, cfg.TG)
				if err != nil {
					errs[i] = err
					return
				}
				traces[i] = append(traces[i], tr)
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var ttfts []time.Duration
	generated := 0
	for _, trs := range traces {
		for j, tr := range trs {
			generated += len(tr.times)
			if j > 0 {
				ttfts = append(ttfts, tr.ttft)
			}
		}
	}
	row.LoopTokS = float64(generated) / wall.Seconds()
	row.LoopTTFT50, row.LoopTTFT99 = percentile(ttfts, 0.5), percentile(ttfts, 0.99)
	return nil
}

// percentile is the nearest-rank percentile of d: the ceil(p*n)-th
// smallest value. Rounding p*n to the nearest instead took the rank
// below whenever its fraction was under a half (the p99 of 70 values
// was the 69th).
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	// The margin keeps a product that should be whole (0.07*100 is
	// 7.000000000000001) from going up a rank.
	i := int(math.Ceil(p*float64(len(s))-1e-9)) - 1
	return s[min(max(i, 0), len(s)-1)]
}
