package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"
	"unsafe"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/arch"
	"github.com/qwenc/qwenc/format/graph"
	"github.com/qwenc/qwenc/internal/mem"
	"github.com/qwenc/qwenc/kernels"
	"github.com/qwenc/qwenc/runtime/infer"
)

// Config is what Run measures.
type Config struct {
	Models  []string       // .qbin paths
	Threads []int          // thread counts
	Kernels []kernels.Path // kernel paths
	KV      []format.KVType
	Depths  []int // tokens in the KV cache before each measurement
	PP, TG  int   // prompt tokens of a prefill, tokens of a decode
	Reps    int   // repetitions; the figures are medians
	// RandomFill writes random keys and values for the depth instead of
	// prefilling it: for depths whose prefill takes hours.
	RandomFill bool
	// FirstToken, if set, measures a model's time to first token as a
	// user gets it (a whole process, from start to exit).
	FirstToken func(model string, reps int) (time.Duration, error)
	// Log receives what is known before the table and a line per
	// measurement as it ends.
	Log io.Writer
}

// Row is one measurement.
type Row struct {
	Model            Model
	Kernels          kernels.Path
	Threads          int
	KV               format.KVType
	Depth            int
	PP, TG           int
	PPRate, TGRate   float64 // tokens/s
	Bandwidth, Ratio float64 // bytes/s; decode's use of it
	FirstToken       time.Duration
	// The session's KV cache and the process's private memory at the end.
	KVBytes, Private int64
}

// Model is what the table says of one file.
type Model struct {
	Path        string
	WeightType  format.DType
	FileSize    int64
	DecodeBytes uint64 // weight bytes one decode step reads
	Config      format.Config
	States      []graph.State // what each sequence keeps between steps
}

// StepBytes is what one decode step moves at a depth: the weights, the
// KV caches (of type kv) of every position before it, and the recurrent
// states, read and written back.
func (bm *Model) StepBytes(depth int, kv format.KVType) float64 {
	b := float64(bm.DecodeBytes)
	for i := range bm.States {
		switch s := &bm.States[i]; s.Kind {
		case graph.AttentionKV:
			b += float64(depth) * float64(graph.KVChunkBytes(s.KVHeads, s.HeadDim, kv)) / format.KVChunkTokens
		case graph.Recurrent:
			b += 2 * float64(s.Bytes(depth, kv))
		}
	}
	return b
}

func openModel(path string) (Model, error) {
	f, err := format.Open(path)
	if err != nil {
		return Model{}, err
	}
	defer f.Close()
	// Validate also gives the sections of an older file their kinds, which
	// the report reads.
	reg := arch.Builtin()
	if err := reg.Validate(f.Header); err != nil {
		return Model{}, fmt.Errorf("%s: %w", path, err)
	}
	rep := format.Report(f.Header)
	a, err := reg.For(f.Header.Config.ModelType)
	if err != nil {
		return Model{}, fmt.Errorf("%s: %w", path, err)
	}
	return Model{Path: path, WeightType: f.Header.WeightType(), FileSize: f.Size, DecodeBytes: rep.DecodeWeightBytes,
		Config: f.Header.Config, States: arch.States(a, &f.Header.Config)}, nil
}

// Run measures every model with every kernel path, thread count, KV type
// and depth.
func Run(cfg Config) ([]Row, error) {
	for _, c := range []struct {
		flag string
		n    int
	}{{"pp", cfg.PP}, {"tg", cfg.TG}, {"reps", cfg.Reps}} {
		if c.n < 1 {
			return nil, fmt.Errorf("--%s %d: want 1 or more", c.flag, c.n)
		}
	}
	log := cfg.Log
	if log == nil {
		log = io.Discard
	}
	var models []Model
	for _, path := range cfg.Models {
		bm, err := openModel(path)
		if err != nil {
			return nil, err
		}
		models = append(models, bm)
		fmt.Fprintf(log, "model %s: %s, hidden %d, %d layers, vocab %d, weights %s; %d bytes of weights read per decoded token\n",
			path, bm.Config.ModelType, bm.Config.Hidden, bm.Config.Layers, bm.Config.Vocab, bm.WeightType, bm.DecodeBytes)
	}
	fmt.Fprintf(log, "machine: %d CPUs usable; kernel paths supported: %v\n", runtime.GOMAXPROCS(0), kernels.SupportedPaths())

	var rows []Row
	// The heap buffer of the models too small to probe over their own
	// file, made once for the run.
	var heap []float32
	for _, bm := range models {
		var ttft time.Duration
		if cfg.FirstToken != nil {
			var err error
			if ttft, err = cfg.FirstToken(bm.Path, cfg.Reps+3); err != nil {
				return nil, err
			}
		}
		for _, p := range cfg.Kernels {
			for _, t := range cfg.Threads {
				pp, tg := cfg.PP, cfg.TG
				if p == kernels.Generic {
					// The portable path is for correctness, not speed.
					if t != cfg.Threads[len(cfg.Threads)-1] {
						continue
					}
					pp, tg = min(pp, 32), min(tg, 8)
					if bm.WeightType.Quantized() {
						pp, tg = min(pp, 8), min(tg, 4)
					}
				}
				m, err := infer.Open(bm.Path, infer.Options{Threads: t, Kernels: p})
				if err != nil {
					return nil, err
				}
				// The bandwidth is measured right before each decode
				// measurement, with the same threads: on a shared host it
				// drifts, and the ratio is only meaningful between figures
				// taken together.
				bw, err := newBandwidthProbe(m.File, &heap)
				if err != nil {
					m.Close()
					return nil, err
				}
				for _, kv := range cfg.KV {
					for _, d := range cfg.Depths {
						r, err := measure(m, p, t, kv, d, pp, tg, cfg.Reps, cfg.RandomFill, bw, bm)
						if err != nil {
							m.Close()
							return nil, err
						}
						r.Model, r.FirstToken = bm, ttft
						rows = append(rows, r)
						fmt.Fprintf(log, "  %s %s, %d thread(s), %s KV, depth %d: pp%d %.1f tok/s, tg%d %.2f tok/s, read bandwidth %.1f GB/s\n",
							bm.WeightType, p, t, kv, d, pp, r.PPRate, tg, r.TGRate, r.Bandwidth/1e9)
					}
				}
				m.Close()
			}
		}
	}
	return rows, nil
}

// WriteTable prints the rows as a table, with what its columns mean.
func WriteTable(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w)
	fmt.Fprintf(tw, "weights\tkernels\tthreads\tKV\tdepth\tprefill tok/s\tdecode tok/s\tdecode GB/s\tread bandwidth GB/s\tratio\tfile MB\tfirst token ms\t\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\tpp%d %.1f\ttg%d %.2f\t%.1f\t%.1f\t%.2f\t%.1f\t%.1f\t\n", r.Model.WeightType, r.Kernels, r.Threads, r.KV, r.Depth,
			r.PP, r.PPRate, r.TG, r.TGRate, r.Model.StepBytes(r.Depth, r.KV)*r.TGRate/1e9, r.Bandwidth/1e9, r.Ratio, float64(r.Model.FileSize)/1e6, ms(r.FirstToken))
	}
	tw.Flush()
	fmt.Fprintf(w, "medians of the repetitions; ratio = bytes read per decoded token (weights, and the KV cache of the depth's positions) x decode tok/s / read bandwidth (a vector sum over the model's mapped file, 1 GiB at most, same threads, measured just before each decode window)\n")
	fmt.Fprintf(w, "first token = process start to exit after one token from a 1-token prompt, warm page cache, default kernels and threads\n")
}

// WriteJSON prints one object per row, one per line.
func WriteJSON(w io.Writer, rows []Row) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		if err := enc.Encode(map[string]any{
			"model": r.Model.Path, "weights": r.Model.WeightType.String(), "kernels": r.Kernels.String(), "threads": r.Threads,
			"kv_type": r.KV.String(), "depth": r.Depth, "pp": r.PP, "tg": r.TG, "prefill_tok_s": r.PPRate, "decode_tok_s": r.TGRate,
			"decode_bytes_per_token": r.Model.StepBytes(r.Depth, r.KV), "kv_bytes": r.KVBytes, "private_bytes": r.Private, "read_bandwidth_gbs": r.Bandwidth / 1e9, "ratio": r.Ratio,
		}); err != nil {
			return err
		}
	}
	return nil
}

// bandwidthProbe measures read bandwidth as decode meets it: a sum over
// the model's own mapped sections, with the kernels' vector loads, split
// across a worker pool like the model's. Not over a heap buffer: the page
// cache can hold a file in large folios, which read faster than the
// heap's 4 KiB pages, so a heap probe understated the limit (on a Zen 4
// EPYC, 2 threads: 47 GB/s from the heap where the file's pages gave 62).
// A model too small to leave the caches is measured over a heap buffer
// instead, of probeBytes.
type bandwidthProbe struct {
	parts [][]float32
	bytes int
	// heap is the size of the run's heap buffer when it has one: private
	// memory no model uses, taken out of the report's.
	heap int64
}

// probeBytes is how much a probe reads; a model of fewer bytes is
// probed over a heap buffer of this size.
const probeBytes = 1 << 30

// newBandwidthProbe returns the probe of the model mapped in f; a small
// model's reads *heap, made on first use and kept for the run's others.
func newBandwidthProbe(f *format.File, heap *[]float32) (*bandwidthProbe, error) {
	b := &bandwidthProbe{}
	for _, sec := range f.Header.Sections {
		if b.bytes >= probeBytes {
			break
		}
		raw, err := f.Bytes(sec.Name)
		if err != nil {
			return nil, err
		}
		// The values do not matter, only the loads: the sections are
		// page-aligned, so their bytes read as float32.
		x := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(raw))), min(len(raw), probeBytes-b.bytes)/4)
		if len(x) > 0 {
			b.parts = append(b.parts, x)
			b.bytes += 4 * len(x)
		}
	}
	if b.bytes < probeBytes/4 {
		if *heap == nil {
			*heap = make([]float32, probeBytes/4)
			for i := range *heap {
				(*heap)[i] = 1 // touch every page: untouched ones all map the zero page
			}
		}
		b.parts, b.bytes = [][]float32{*heap}, probeBytes
	}
	b.heap = int64(4 * len(*heap))
	return b, nil
}

// measure returns the best of reps sums, in bytes per second.
func (b *bandwidthProbe) measure(p kernels.Path, threads, reps int) float64 {
	pool := kernels.NewPool(threads)
	defer pool.Close()
	task := kernels.TaskFunc(func(w, nw int) { b.sum(p, w, nw) })
	best := time.Hour
	for range reps {
		t0 := time.Now()
		pool.Run(task)
		best = min(best, time.Since(t0))
	}
	return float64(b.bytes) / best.Seconds()
}

// sum is worker w's share of the probe's values (of nw workers), summed.
func (b *bandwidthProbe) sum(p kernels.Path, w, nw int) float32 {
	s, e := kernels.Split(b.bytes/4, nw, w)
	var t float32
	for _, x := range b.parts {
		if s < len(x) && e > 0 {
			t += p.Sum(x[max(s, 0):min(e, len(x))])
		}
		s, e = s-len(x), e-len(x)
	}
	return t
}

// measure runs prefill of pp random tokens and decode of tg tokens
// after depth tokens already in the cache (from a one-token context at
// depth 0, as llama-bench's tg does), reps times each. The depth is
// prefilled once, untimed; each measurement rewinds to it. Each decode
// window follows a bandwidth measurement with the same threads, and its
// ratio is taken against that: the host's bandwidth drifts by tens of
// percent within minutes. The row has the medians.
func measure(m *infer.Model, p kernels.Path, threads int, kv format.KVType, depth, pp, tg, reps int, randomFill bool, bw *bandwidthProbe, bm Model) (Row, error) {
	r := Row{Kernels: p, Threads: threads, KV: kv, Depth: depth, PP: pp, TG: tg}
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
	// The depth, kept to come back to (a recurrent layer's state cannot
	// go back by itself), then one untimed prefill: the first pass over
	// the weights also maps their pages and touches the arenas.
	if randomFill {
		if err := s.FillKV(depth, 3); err != nil {
			return r, err
		}
		copy(tokens, s.Tokens())
	} else if depth > 0 {
		if _, err := s.Feed(tokens[:depth]); err != nil {
			return r, err
		}
	}
	s.Checkpoint()
	if _, err := s.Feed(tokens[depth : depth+pp]); err != nil {
		return r, err
	}
	var ppRates, tgRates, bws, ratios []float64
	for range reps {
		if err := s.Rewind(depth); err != nil {
			return r, err
		}
		t0 := time.Now()
		if _, err := s.Feed(tokens[depth : depth+pp]); err != nil {
			return r, err
		}
		ppRates = append(ppRates, float64(pp)/time.Since(t0).Seconds())

		if err := s.Rewind(depth); err != nil {
			return r, err
		}
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
		ratios = append(ratios, bm.StepBytes(depth, kv)*rate/bandwidth)
	}
	r.PPRate, r.TGRate, r.Bandwidth, r.Ratio = median(ppRates), median(tgRates), median(bws), median(ratios)
	r.KVBytes = s.Bytes()
	r.Private, _ = mem.Private()
	r.Private -= bw.heap
	return r, nil
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
