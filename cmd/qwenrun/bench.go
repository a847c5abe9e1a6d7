package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/infer"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/kernels"
	"github.com/urfave/cli/v2"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench",
		Usage:     "measure prefill and decode speed against the machine's read bandwidth",
		ArgsUsage: "MODEL.qbin [MODEL.qbin ...]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "threads", Value: "1,2", Usage: "thread counts to measure"},
			&cli.StringFlag{Name: "kernels", Value: "all", Usage: "kernel paths to measure (all, or a list of auto, generic, avx2, avx512, avx512vnni)"},
			&cli.IntFlag{Name: "pp", Value: 512, Usage: "prompt tokens for the prefill measurement"},
			&cli.IntFlag{Name: "tg", Value: 128, Usage: "tokens for the decode measurement"},
			&cli.IntFlag{Name: "reps", Value: 5, Usage: "repetitions (the table shows medians: the machine is shared)"},
			&cli.StringFlag{Name: "kv-type", Value: "f16", Usage: "KV cache types to measure (a list: f16,q8)"},
			&cli.StringFlag{Name: "depth", Value: "0", Usage: "tokens already in the KV cache before each measurement, as llama-bench -d (a list: 0,4096,16384)"},
			&cli.StringFlag{Name: "fill", Value: "prefill", Usage: "how the depth gets into the cache: prefill (as llama-bench), or random keys and values (for depths whose prefill takes hours: decode and memory are measured the same)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object per measurement instead of the table"},
		},
		Action:       bench,
		OnUsageError: cliutil.OnUsageError,
	}
}

type benchRow struct {
	model            benchModel
	path             kernels.Path
	threads          int
	kv               format.KVType
	depth            int
	pp, tg           int
	ppRate, tgRate   float64
	bandwidth, ratio float64
	ttft             time.Duration
	// The session's KV cache and the process's private memory at the end.
	kvBytes, private int64
}

// benchModel is what the table says of one file.
type benchModel struct {
	path        string
	weightType  format.DType
	fileSize    int64
	decodeBytes uint64 // weight bytes one decode step reads
	config      format.Config
}

// stepBytes is what one decode step reads at a depth: the weights and the
// KV cache (of type kv) of every position before it.
func (bm *benchModel) stepBytes(depth int, kv format.KVType) float64 {
	perToken := float64(bm.config.KVChunkBytes(kv)) * float64(bm.config.Layers) / format.KVChunkTokens
	return float64(bm.decodeBytes) + float64(depth)*perToken
}

func openBenchModel(path string) (benchModel, error) {
	f, err := format.Open(path)
	if err != nil {
		return benchModel{}, err
	}
	defer f.Close()
	rep := format.Report(f.Header, nil, format.KVF16)
	return benchModel{path: path, weightType: f.Header.WeightType(), fileSize: f.Size, decodeBytes: rep.DecodeWeightBytes, config: f.Header.Config}, nil
}

func bench(c *cli.Context) error {
	if c.NArg() < 1 {
		return cliutil.Usagef(c, "bench: want one or more MODEL.qbin arguments")
	}
	threads, err := intList(c.String("threads"))
	if err != nil {
		return fmt.Errorf("--threads: %w", err)
	}
	for _, t := range threads {
		if err := checkThreads(os.Stderr, "--threads", t); err != nil {
			return err
		}
	}
	kvTypes, err := parseList(c.String("kv-type"), func(f string) (format.KVType, error) { return format.ParseKVType(strings.TrimSpace(f)) })
	if err != nil {
		return fmt.Errorf("--kv-type: %w", err)
	}
	randomFill := false
	switch c.String("fill") {
	case "prefill":
	case "random":
		randomFill = true
	default:
		return fmt.Errorf("--fill %q: want prefill or random", c.String("fill"))
	}
	depths, err := depthList(c.String("depth"))
	if err != nil {
		return fmt.Errorf("--depth: %w", err)
	}
	for _, f := range []string{"pp", "tg", "reps"} {
		if n := c.Int(f); n < 1 {
			return fmt.Errorf("--%s %d: want 1 or more", f, n)
		}
	}
	paths := kernels.SupportedPaths()
	if k := c.String("kernels"); k != "all" {
		if paths, err = parseList(k, func(f string) (kernels.Path, error) { return kernels.ParsePath(strings.TrimSpace(f)) }); err != nil {
			return err
		}
	}
	w := io.Writer(os.Stdout)
	if c.Bool("json") {
		w = os.Stderr // stdout has the JSON objects only
	}
	var models []benchModel
	for _, path := range c.Args().Slice() {
		bm, err := openBenchModel(path)
		if err != nil {
			return err
		}
		models = append(models, bm)
		fmt.Fprintf(w, "model %s: %s, hidden %d, %d layers, vocab %d, weights %s; %d bytes of weights read per decoded token\n",
			path, bm.config.ModelType, bm.config.Hidden, bm.config.Layers, bm.config.Vocab, bm.weightType, bm.decodeBytes)
	}
	fmt.Fprintf(w, "machine: %d CPUs usable; kernel paths supported: %v\n", runtime.GOMAXPROCS(0), kernels.SupportedPaths())

	// The bandwidth is measured right before each decode measurement, with
	// the same threads: on a shared host it drifts, and the ratio is only
	// meaningful between figures taken together.
	bw := newBandwidthProbe()
	var rows []benchRow
	for _, bm := range models {
		ttft, err := timeToFirstToken(bm.path, c.Int("reps")+3)
		if err != nil {
			return err
		}
		for _, p := range paths {
			for _, t := range threads {
				pp, tg := c.Int("pp"), c.Int("tg")
				if p == kernels.Generic {
					// The portable path is for correctness, not speed.
					if t != threads[len(threads)-1] {
						continue
					}
					pp, tg = min(pp, 32), min(tg, 8)
					if bm.weightType.Quantized() {
						pp, tg = min(pp, 8), min(tg, 4)
					}
				}
				m, err := infer.Open(bm.path, infer.Options{Threads: t, Kernels: p})
				if err != nil {
					return err
				}
				for _, kv := range kvTypes {
					for _, d := range depths {
						r, err := benchOne(m, p, t, kv, d, pp, tg, c.Int("reps"), randomFill, bw, bm)
						if err != nil {
							m.Close()
							return err
						}
						r.model, r.ttft = bm, ttft
						rows = append(rows, r)
						fmt.Fprintf(os.Stderr, "  %s %s, %d thread(s), %s KV, depth %d: pp%d %.1f tok/s, tg%d %.2f tok/s, read bandwidth %.1f GB/s\n",
							bm.weightType, p, t, kv, d, pp, r.ppRate, tg, r.tgRate, r.bandwidth/1e9)
					}
				}
				m.Close()
			}
		}
	}
	if c.Bool("json") {
		return printBenchJSON(os.Stdout, rows)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w)
	fmt.Fprintf(tw, "weights\tkernels\tthreads\tKV\tdepth\tprefill tok/s\tdecode tok/s\tdecode GB/s\tread bandwidth GB/s\tratio\tfile MB\tfirst token ms\t\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\tpp%d %.1f\ttg%d %.2f\t%.1f\t%.1f\t%.2f\t%.1f\t%.1f\t\n", r.model.weightType, r.path, r.threads, r.kv, r.depth,
			r.pp, r.ppRate, r.tg, r.tgRate, r.model.stepBytes(r.depth, r.kv)*r.tgRate/1e9, r.bandwidth/1e9, r.ratio, float64(r.model.fileSize)/1e6, ms(r.ttft))
	}
	tw.Flush()
	fmt.Fprintf(w, "medians of the repetitions; ratio = bytes read per decoded token (weights, and the KV cache of the depth's positions) x decode tok/s / read bandwidth (vector sum over 1 GiB, same threads, measured just before each decode window)\n")
	fmt.Fprintf(w, "first token = process start to exit after one token from a 1-token prompt, warm page cache, default kernels and threads\n")
	return nil
}

// parseList parses the items of a comma-separated list.
func parseList[T any](s string, parse func(item string) (T, error)) ([]T, error) {
	var out []T
	for _, f := range strings.Split(s, ",") {
		v, err := parse(f)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// intList parses a list of positive numbers.
func intList(s string) ([]int, error) {
	return parseList(s, func(f string) (int, error) {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return 0, fmt.Errorf("%q is not a positive number", f)
		}
		return v, nil
	})
}

// bandwidthProbe measures read bandwidth: a sum over a 1 GiB buffer with
// the kernels' vector loads, split across a worker pool like the model's.
type bandwidthProbe struct{ buf []float32 }

func newBandwidthProbe() *bandwidthProbe {
	buf := make([]float32, 1<<28)
	for i := range buf {
		buf[i] = 1 // touch every page: untouched ones all map the zero page
	}
	return &bandwidthProbe{buf: buf}
}

// measure returns the best of reps sums, in bytes per second.
func (b *bandwidthProbe) measure(p kernels.Path, threads, reps int) float64 {
	pool := kernels.NewPool(threads)
	defer pool.Close()
	task := kernels.TaskFunc(func(w, n int) {
		s, e := kernels.Split(len(b.buf), n, w)
		p.Sum(b.buf[s:e])
	})
	best := time.Hour
	for range reps {
		t0 := time.Now()
		pool.Run(task)
		best = min(best, time.Since(t0))
	}
	return float64(4*len(b.buf)) / best.Seconds()
}

// benchOne measures prefill of pp random tokens and decode of tg tokens
// after depth tokens already in the cache (from a one-token context at
// depth 0, as llama-bench's tg does), reps times each. The depth is
// prefilled once, untimed; each measurement rewinds to it. Each decode
// window follows a bandwidth measurement with the same threads, and its
// ratio is taken against that: the host's bandwidth drifts by tens of
// percent within minutes. The row has the medians.
func benchOne(m *infer.Model, p kernels.Path, threads int, kv format.KVType, depth, pp, tg, reps int, randomFill bool, bw *bandwidthProbe, bm benchModel) (benchRow, error) {
	r := benchRow{path: p, threads: threads, kv: kv, depth: depth, pp: pp, tg: tg}
	ctx := depth + max(pp, tg+1)
	if ctx > m.Config.MaxContext() {
		return r, fmt.Errorf("--depth %d: %d tokens with the measurement, more than the model's maximum context %d", depth, ctx, m.Config.MaxContext())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := min(m.Config.Vocab, m.Tokenizer.VocabSize())
	tokens := make([]int32, ctx)
	for i := range tokens {
		tokens[i] = int32(rng.IntN(vocab))
	}
	s, err := m.NewSessionKV(ctx, kv)
	if err != nil {
		return r, err
	}
	// The depth, then one untimed prefill: the first pass over the
	// weights also maps their pages and touches the arenas.
	if randomFill {
		if err := s.FillKV(depth, 3); err != nil {
			return r, err
		}
		copy(tokens, s.Tokens())
		if _, err := s.Feed(tokens[depth : depth+pp]); err != nil {
			return r, err
		}
	} else if _, err := s.Feed(tokens[:depth+pp]); err != nil {
		return r, err
	}
	var ppRates, tgRates, bws, ratios []float64
	for range reps {
		s.Rewind(depth)
		t0 := time.Now()
		if _, err := s.Feed(tokens[depth : depth+pp]); err != nil {
			return r, err
		}
		ppRates = append(ppRates, float64(pp)/time.Since(t0).Seconds())

		s.Rewind(depth)
		if depth == 0 {
			s.Feed(tokens[:1])
		}
		bandwidth := bw.measure(kernels.Detect(), threads, 3)
		t0 = time.Now()
		for _, id := range tokens[s.Len() : s.Len()+tg] {
			if _, err := s.Feed([]int32{id}); err != nil {
				return r, err
			}
		}
		rate := float64(tg) / time.Since(t0).Seconds()
		tgRates, bws = append(tgRates, rate), append(bws, bandwidth)
		ratios = append(ratios, bm.stepBytes(depth, kv)*rate/bandwidth)
	}
	r.ppRate, r.tgRate, r.bandwidth, r.ratio = median(ppRates), median(tgRates), median(bws), median(ratios)
	r.kvBytes = s.KV.Bytes()
	if b, ok := privateMemory(); ok {
		r.private = b
	}
	return r, nil
}

// depthList parses --depth: non-negative token counts.
func depthList(s string) ([]int, error) {
	return parseList(s, func(f string) (int, error) {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 0 {
			return 0, fmt.Errorf("%q is not a number of tokens", f)
		}
		return v, nil
	})
}

// printBenchJSON prints one object per row, one per line.
func printBenchJSON(w io.Writer, rows []benchRow) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		if err := enc.Encode(map[string]any{
			"model": r.model.path, "weights": r.model.weightType.String(), "kernels": r.path.String(), "threads": r.threads,
			"kv_type": r.kv.String(), "depth": r.depth, "pp": r.pp, "tg": r.tg, "prefill_tok_s": r.ppRate, "decode_tok_s": r.tgRate,
			"decode_bytes_per_token": r.model.stepBytes(r.depth, r.kv), "kv_bytes": r.kvBytes, "private_bytes": r.private, "read_bandwidth_gbs": r.bandwidth / 1e9, "ratio": r.ratio,
		}); err != nil {
			return err
		}
	}
	return nil
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// timeToFirstToken runs this program on a one-token prompt for one token
// and keeps the best wall time; the first run warms the page cache.
func timeToFirstToken(path string, reps int) (time.Duration, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	best := time.Hour
	for i := 0; i <= reps; i++ {
		cmd := exec.Command(exe, path, "--tokens", "1", "-n", "1", "--temp", "0")
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("time to first token: %w", err)
		}
		if i > 0 {
			best = min(best, time.Since(t0))
		}
	}
	return best, nil
}
