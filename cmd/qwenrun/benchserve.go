package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/infer"
	"github.com/qwenc/qwenc/serve"
	"github.com/urfave/cli/v2"
)

func benchServeCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench-serve",
		Usage:     "measure the server's engine with concurrent streams: throughput, time to first token, inter-token latency",
		ArgsUsage: "MODEL.qbin",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "streams", Value: "1,4,8,16", Usage: "concurrent streams to measure"},
			&cli.IntFlag{Name: "pp", Value: 64, Usage: "prompt tokens of each request"},
			&cli.IntFlag{Name: "tg", Value: 64, Usage: "tokens each request generates"},
			&cli.IntFlag{Name: "requests", Value: 3, Usage: "requests each client sends one after another in the back-to-back measurement"},
			&cli.IntFlag{Name: "reps", Value: 3, Usage: "rounds over the stream counts; the table has medians, and each multiple of one stream is taken within a round (the host's bandwidth drifts between rounds)"},
			kvTypeFlag(),
			threadsFlag(),
			kernelsFlag(),
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the run to `PATH` (for development)"},
		},
		Action: benchServe,
	}
}

// serveRow is one concurrency's figures.
type serveRow struct {
	// From N requests submitted at one instant: tokS counts the steps
	// where all N decode; ttft is every request's.
	tokS           float64
	ttft50, ttft99 time.Duration
	itl50, itl99   time.Duration
	// From N clients sending requests back to back (closed loop), each
	// client's first request left out: the arrivals are then spread as a
	// busy server sees them.
	loopTTFT50, loopTTFT99 time.Duration
	loopTokS               float64
}

// benchServe measures the engine with N concurrent streams two ways: N
// requests submitted at once (a burst, the worst case for the time to
// first token, and the aggregate decode rate while all N decode), and N
// clients each sending requests one after another.
func benchServe(c *cli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("bench-serve: want one MODEL.qbin argument")
	}
	streams, err := intList(c.String("streams"))
	if err != nil {
		return err
	}
	kp, err := kernelPath(c)
	if err != nil {
		return err
	}
	kvt, err := kvType(c)
	if err != nil {
		return err
	}
	reps, requests := c.Int("reps"), c.Int("requests")
	if reps < 1 {
		return fmt.Errorf("--reps %d: want 1 or more", reps)
	}
	if requests < 2 {
		return fmt.Errorf("--requests %d: want 2 or more (each client's first is left out)", requests)
	}
	opts := infer.Options{Threads: c.Int("threads"), Kernels: kp}
	m, err := infer.Open(c.Args().First(), opts)
	if err != nil {
		return err
	}
	defer m.Close()
	stop, err := startProfile(c.String("cpuprofile"))
	if err != nil {
		return err
	}
	defer stop()
	b := benchLoad{m: m, opts: opts, kv: kvt, pp: c.Int("pp"), tg: c.Int("tg"), requests: requests}
	fmt.Printf("model %s; %d prompt tokens and %d generated per request; kernels %s, %d threads, %s KV cache\n",
		c.Args().First(), b.pp, b.tg, kp, m.Threads(), kvt)
	// rounds[i][r] is stream count i in round r; each round measures every
	// count in turn, so a multiple compares figures minutes apart at most.
	rounds := make([][]serveRow, len(streams))
	for r := range reps {
		for i, n := range streams {
			row, err := b.run(n, uint64(r))
			if err != nil {
				return err
			}
			rounds[i] = append(rounds[i], row)
			fmt.Fprintf(os.Stderr, "  round %d, %d streams: %.1f tok/s, TTFT p50 %.0f ms at once, %.0f ms back to back\n",
				r+1, n, row.tokS, ms(row.ttft50), ms(row.loopTTFT50))
		}
	}
	printServeTables(streams, rounds, b.requests)
	return nil
}

// printServeTables prints the medians of the rounds: rounds[i][r] is
// stream count streams[i] in round r.
func printServeTables(streams []int, rounds [][]serveRow, requests int) {
	// med is the median over rounds of f for count i; within the median
	// over rounds of f's ratio to the first count in the same round.
	med := func(i int, f func(serveRow) float64) float64 {
		var v []float64
		for _, r := range rounds[i] {
			v = append(v, f(r))
		}
		return median(v)
	}
	within := func(i int, f func(serveRow) float64) float64 {
		var v []float64
		for r := range rounds[i] {
			v = append(v, f(rounds[i][r])/f(rounds[0][r]))
		}
		return median(v)
	}
	dur := func(f func(serveRow) time.Duration) func(serveRow) float64 {
		return func(r serveRow) float64 { return ms(f(r)) }
	}
	var (
		tokS     = func(r serveRow) float64 { return r.tokS }
		loopTokS = func(r serveRow) float64 { return r.loopTokS }
		ttft50   = dur(func(r serveRow) time.Duration { return r.ttft50 })
		ttft99   = dur(func(r serveRow) time.Duration { return r.ttft99 })
		itl50    = dur(func(r serveRow) time.Duration { return r.itl50 })
		itl99    = dur(func(r serveRow) time.Duration { return r.itl99 })
		loop50   = dur(func(r serveRow) time.Duration { return r.loopTTFT50 })
		loop99   = dur(func(r serveRow) time.Duration { return r.loopTTFT99 })
	)

	fmt.Printf("\nN requests submitted at once:\n")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "streams\tdecode tok/s\tx first count\tTTFT p50 ms\tTTFT p99 ms\tx first count\tinter-token p50 ms\tinter-token p99 ms\t\n")
	for i, n := range streams {
		fmt.Fprintf(tw, "%d\t%.1f\t%.2f\t%.0f\t%.0f\t%.2f\t%.1f\t%.1f\t\n", n, med(i, tokS), within(i, tokS),
			med(i, ttft50), med(i, ttft99), within(i, ttft50), med(i, itl50), med(i, itl99))
	}
	tw.Flush()
	fmt.Println("decode tok/s = the tokens of the steps where all N streams decode (from the last first token to the first last token) / that time; TTFT from submission")

	fmt.Printf("\nN clients, each sending %d requests one after another:\n", requests)
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "streams\ttok/s\tTTFT p50 ms\tTTFT p99 ms\tx first count\t\n")
	for i, n := range streams {
		fmt.Fprintf(tw, "%d\t%.1f\t%.0f\t%.0f\t%.2f\t\n", n, med(i, loopTokS), med(i, loop50), med(i, loop99), within(i, loop50))
	}
	tw.Flush()
	fmt.Println("tok/s = all tokens generated / the wall time (prefills included); TTFT of every request but each client's first, which all arrive at once")
	fmt.Printf("\nmedians of %d rounds; x first count = the median over rounds of the ratio to the first stream count in the same round\n", len(rounds[0]))
}

// benchLoad is what every measurement of bench-serve shares.
type benchLoad struct {
	m        *infer.Model
	opts     infer.Options
	kv       format.KVType
	pp, tg   int
	requests int
}

// trace is one request's events: its time to first token and when each
// token came.
type trace struct {
	ttft  time.Duration
	times []time.Time
}

// run measures n streams on a fresh engine of n slots, prompts drawn
// from a generator seeded by n and the round.
func (b benchLoad) run(n int, round uint64) (serveRow, error) {
	e, err := serve.New(b.m, serve.Options{Parallel: n, Ctx: b.pp + b.tg + 1, KV: b.kv, Runner: b.opts})
	if err != nil {
		return serveRow{}, err
	}
	defer e.Shutdown(context.Background())
	rng := rand.New(rand.NewPCG(uint64(n), round))
	// One request of the measured length first, so the arenas' rows and a
	// cache are allocated and touched before anything is timed (with a
	// 3-token one, a lone 64-token prompt's TTFT was 177-225 ms at once
	// against 138-160 ms back to back).
	if _, err := b.request(e, b.prompt(rng), 2); err != nil {
		return serveRow{}, err
	}
	row, err := b.burst(e, rng, n)
	if err != nil {
		return row, err
	}
	return row, b.closedLoop(e, rng, n, &row)
}

func (b benchLoad) prompt(rng *rand.Rand) []int32 {
	vocab := min(b.m.Config.Vocab, b.m.Tokenizer.VocabSize())
	p := make([]int32, b.pp)
	for j := range p {
		p[j] = int32(rng.IntN(vocab))
	}
	return p
}

// request submits one greedy generation of tg tokens and follows it.
func (b benchLoad) request(e *serve.Engine, prompt []int32, tg int) (trace, error) {
	s, err := b.submit(e, prompt, tg)
	if err != nil {
		return trace{}, err
	}
	return follow(s)
}

func (b benchLoad) submit(e *serve.Engine, prompt []int32, tg int) (*serve.Stream, error) {
	return e.Submit(context.Background(), serve.Request{Prompt: prompt, MaxTokens: tg, TopLogprobs: -1})
}

// follow reads a stream to its end.
func follow(s *serve.Stream) (trace, error) {
	var tr trace
	for {
		ev, err := s.Next(context.Background())
		if err != nil {
			return tr, err
		}
		if ev.Done {
			tr.ttft = ev.Usage.TimeToFirstToken
			return tr, nil
		}
		tr.times = append(tr.times, ev.Time)
	}
}

// burst submits n requests at one instant: from one goroutine, so the
// engine sees them within microseconds, then follows each.
func (b benchLoad) burst(e *serve.Engine, rng *rand.Rand, n int) (serveRow, error) {
	prompts := make([][]int32, n)
	for i := range prompts {
		prompts[i] = b.prompt(rng)
	}
	streams := make([]*serve.Stream, n)
	for i, p := range prompts {
		var err error
		if streams[i], err = b.submit(e, p, b.tg); err != nil {
			return serveRow{}, err
		}
	}
	traces := make([]trace, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Go(func() { traces[i], errs[i] = follow(s) })
	}
	wg.Wait()
	var row serveRow
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
	row.tokS = float64(decoded) / to.Sub(from).Seconds()
	row.ttft50, row.ttft99 = percentile(ttfts, 0.5), percentile(ttfts, 0.99)
	row.itl50, row.itl99 = percentile(gaps, 0.5), percentile(gaps, 0.99)
	return row, nil
}

// closedLoop runs n clients that each send b.requests requests one after
// another, as chat front ends and agents do.
func (b benchLoad) closedLoop(e *serve.Engine, rng *rand.Rand, n int, row *serveRow) error {
	prompts := make([][][]int32, n)
	for i := range prompts {
		for range b.requests {
			prompts[i] = append(prompts[i], b.prompt(rng))
		}
	}
	traces := make([][]trace, n)
	errs := make([]error, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for _, p := range prompts[i] {
				tr, err := b.request(e, p, b.tg)
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
	row.loopTokS = float64(generated) / wall.Seconds()
	row.loopTTFT50, row.loopTTFT99 = percentile(ttfts, 0.5), percentile(ttfts, 0.99)
	return nil
}

// percentile is the nearest-rank percentile of d.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
