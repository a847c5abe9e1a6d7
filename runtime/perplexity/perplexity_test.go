package perplexity

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
	"github.com/qwenc/qwenc/kernels"
	"github.com/qwenc/qwenc/runtime/infer"
)

func tinyShape(seed uint64, vocab int) synth.Shape {
	return synth.Shape{ModelType: "qwen3", Hidden: 48, Intermediate: 80, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 12,
		Vocab: vocab, MaxPositions: 256, Tied: true, DType: "BF16", Seed: seed, EOS: synth.MiniEOS}
}

func open(t *testing.T, path string) *infer.Model {
	m, err := infer.Open(path, infer.Options{Threads: 2, Kernels: kernels.Detect()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func tokens(n, vocab int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32((i*7919 + i*i*31) % vocab)
	}
	return ids
}

// handPPL computes what Run must give the plain way: every chunk fed one
// token at a time from an empty session, -log softmax in float64 of the
// target at positions n/2 .. n-2, the mean, its exponential, and
// llama-perplexity's error estimate. With base it also computes the mean
// KL(base || model) and the top-1 agreement.
func handPPL(t *testing.T, m, base *infer.Model, ids []int32, n int) (ppl, stderr, kl, agree float64) {
	logProbs := func(l []float32) []float64 {
		mx := math.Inf(-1)
		for _, v := range l {
			mx = math.Max(mx, float64(v))
		}
		var s float64
		for _, v := range l {
			s += math.Exp(float64(v) - mx)
		}
		out := make([]float64, len(l))
		for i, v := range l {
			out[i] = float64(v) - mx - math.Log(s)
		}
		return out
	}
	argmax := func(x []float64) int {
		b := 0
		for i, v := range x {
			if v > x[b] {
				b = i
			}
		}
		return b
	}
	var nll, nll2 float64
	var count, same int
	for c := 0; c+n <= len(ids); c += n {
		chunk := ids[c : c+n]
		s, _ := m.NewSession(n)
		var bs *infer.Session
		if base != nil {
			bs, _ = base.NewSession(n)
		}
		for j := 0; j < n-1; j++ {
			l, err := s.Feed(chunk[j : j+1])
			if err != nil {
				t.Fatal(err)
			}
			lp := logProbs(l)
			var blp []float64
			if bs != nil {
				bl, err := bs.Feed(chunk[j : j+1])
				if err != nil {
					t.Fatal(err)
				}
				blp = logProbs(bl)
			}
			if j < n/2 {
				continue
			}
			v := -lp[chunk[j+1]]
			nll += v
			nll2 += v * v
			count++
			if blp != nil {
				for i := range blp {
					kl += math.Exp(blp[i]) * (blp[i] - lp[i])
				}
				if argmax(blp) == argmax(lp) {
					same++
				}
			}
		}
	}
	N := float64(count)
	mean := nll / N
	ppl = math.Exp(mean)
	stderr = math.Sqrt((nll2/N-mean*mean)/(N-1)) * ppl
	return ppl, stderr, kl / N, float64(same) / N
}

func TestRunMatchesHandComputation(t *testing.T) {
	path := synthtest.Compile(t, tinyShape(3, 300), 64)
	other := synthtest.Compile(t, tinyShape(4, 300), 64)
	m, base := open(t, path), open(t, other)
	const n = 24
	ids := tokens(2*n+n/2+5, 300) // two chunks and a remainder that is dropped
	for _, withBase := range []bool{false, true} {
		var b *infer.Model
		if withBase {
			b = base
		}
		var progress []int
		var times []time.Duration
		got, err := Run(context.Background(), m, ids, Options{Ctx: n, Base: b, Progress: func(done, total int, el time.Duration, _ Result) {
			progress, times = append(progress, done, total), append(times, el)
		}})
		if err != nil {
			t.Fatal(err)
		}
		ppl, stderr, kl, agree := handPPL(t, m, b, ids, n)
		t.Logf("base %v: PPL %.6g ± %.6g (hand %.6g ± %.6g), KL %.6g, top-1 %.4f (hand)", withBase, got.PPL, got.PPLStderr, ppl, stderr, kl, agree)
		if got.Chunks != 2 || got.TokensScored != 2*(n-1-n/2) || got.Ctx != n {
			t.Errorf("chunks %d, scored %d, ctx %d; want 2, %d, %d", got.Chunks, got.TokensScored, got.Ctx, 2*(n-1-n/2), n)
		}
		if len(progress) != 4 || progress[0] != 1 || progress[2] != 2 || progress[3] != 2 || times[1] < times[0] {
			t.Errorf("progress calls %v after %v, want (1, 2), (2, 2), the second no sooner", progress, times)
		}
		if math.Abs(got.PPL-ppl) > 1e-4*ppl || math.Abs(got.PPLStderr-stderr) > 1e-3*stderr {
			t.Errorf("PPL %.6f ± %.6f, hand computation %.6f ± %.6f", got.PPL, got.PPLStderr, ppl, stderr)
		}
		if !withBase {
			if got.KLMean != nil || got.Top1Agree != nil {
				t.Errorf("KL figures without a base model")
			}
			continue
		}
		if bp, _, _, _ := handPPL(t, base, nil, ids, n); got.BasePPL == nil || math.Abs(*got.BasePPL-bp) > 1e-4*bp {
			t.Errorf("base PPL %v, hand computation %v", got.BasePPL, bp)
		}
		if got.KLMean == nil || math.Abs(*got.KLMean-kl) > 1e-4*kl+1e-6 || math.Abs(*got.Top1Agree-agree) > 1e-9 {
			t.Errorf("KL %v, top-1 %v; hand computation %v, %v", *got.KLMean, *got.Top1Agree, kl, agree)
		}
	}
	// Against itself: no divergence, every top token the same.
	self, err := Run(context.Background(), m, ids, Options{Ctx: n, Base: m})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(*self.KLMean) > 1e-6 || *self.Top1Agree != 1 {
		t.Errorf("against itself: KL %v, top-1 %v; want 0, 1", *self.KLMean, *self.Top1Agree)
	}
}

func TestRunRefuses(t *testing.T) {
	m := open(t, synthtest.Compile(t, tinyShape(3, 300), 64))
	other := open(t, synthtest.Compile(t, tinyShape(3, 320), 64))
	_, err := Run(context.Background(), m, tokens(47, 300), Options{Ctx: 24})
	if !errors.Is(err, ErrTooShort) || err.Error() != "text too short: it has 47 tokens, and perplexity with --ctx 24 needs at least 48 (two chunks)" {
		t.Errorf("47 tokens at ctx 24: %v", err)
	}
	if _, err := Run(context.Background(), m, tokens(100, 300), Options{Ctx: 24, Base: other}); err == nil {
		t.Errorf("a base with another vocabulary was accepted")
	}
	if _, err := Run(context.Background(), m, tokens(1000, 300), Options{Ctx: 257}); err == nil {
		t.Errorf("a --ctx beyond the model's maximum was accepted")
	}
	if _, err := Run(context.Background(), m, tokens(100, 300), Options{Ctx: 2}); err == nil {
		t.Errorf("--ctx 2 was accepted")
	}
}

// Measure opens the files and gives what Run gives on the text's tokens,
// with the base compared; a file that does not open is its error.
func TestMeasure(t *testing.T) {
	path := synthtest.Compile(t, tinyShape(3, 300), 64)
	other := synthtest.Compile(t, tinyShape(4, 300), 64)
	text := strings.Repeat("the quick brown fox jumps over the lazy dog; ", 20)
	ro := infer.Options{Threads: 2, Kernels: kernels.Detect()}
	got, n, err := Measure(context.Background(), path, other, text, ro, Options{Ctx: 24})
	if err != nil {
		t.Fatal(err)
	}
	m := open(t, path)
	ids := Tokens(m, text)
	want, err := Run(context.Background(), m, ids, Options{Ctx: 24, Base: open(t, other)})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(ids) || got.PPL != want.PPL || got.BasePPL == nil || *got.BasePPL != *want.BasePPL || *got.KLMean != *want.KLMean {
		t.Errorf("Measure: %d tokens, %+v; Run: %d tokens, %+v", n, got, len(ids), want)
	}
	for _, files := range [][2]string{{path + ".missing", ""}, {path, other + ".missing"}} {
		if _, _, err := Measure(context.Background(), files[0], files[1], text, ro, Options{Ctx: 24}); err == nil || !strings.Contains(err.Error(), ".missing") {
			t.Errorf("%q: %v, want the missing file's error", files, err)
		}
	}
}

// Progress rewrites one line on a terminal, ended after the last chunk
// or by End; elsewhere it writes every tenth chunk and the last.
func TestProgress(t *testing.T) {
	var b strings.Builder
	p := NewProgress(&b, true)
	for i := 1; i <= 3; i++ {
		p.Chunk(i, 3, time.Duration(i)*time.Second, Result{PPL: 2})
	}
	p.End()
	if got := b.String(); strings.Count(got, "\r\x1b[K") != 3 || strings.Count(got, "\n") != 1 || !strings.HasSuffix(got, "\n") ||
		!strings.Contains(got, "chunk 3/3: PPL 2.0000 ± 0.0000") {
		t.Errorf("terminal: %q", got)
	}
	b.Reset()
	p = NewProgress(&b, true)
	p.Chunk(1, 3, 2*time.Second, Result{PPL: 2})
	p.End()
	p.End()
	if got := b.String(); !strings.HasSuffix(got, "2.0 s, about 4 s left\n") || strings.Count(got, "\n") != 1 {
		t.Errorf("stopped after one chunk: %q", got)
	}
	b.Reset()
	p = NewProgress(&b, false)
	for i := 1; i <= 25; i++ {
		p.Chunk(i, 25, time.Duration(i)*time.Second, Result{PPL: 2})
	}
	p.End()
	if got := b.String(); strings.Count(got, "\n") != 3 || strings.Contains(got, "\r") || !strings.Contains(got, "chunk 10/25") || !strings.Contains(got, "chunk 25/25") {
		t.Errorf("not a terminal: %q", got)
	}
}
