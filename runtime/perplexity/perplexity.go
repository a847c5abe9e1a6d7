package perplexity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/kernels"
	"github.com/qwenc/qwenc/runtime/infer"
)

// Options configure one measurement.
type Options struct {
	Ctx int           // tokens per chunk
	KV  format.KVType // the KV cache type of the model (the base's is f16)
	// Base, if set, is compared with the model at every scored position.
	Base *infer.Model
	// Progress, if set, is called after each chunk with the figures so
	// far and the time since the first chunk began.
	Progress func(done, total int, elapsed time.Duration, sofar Result)
}

// Result is a perplexity measurement.
type Result struct {
	PPL          float64 `json:"ppl"`
	PPLStderr    float64 `json:"ppl_stderr"`
	Chunks       int     `json:"chunks"`
	TokensScored int     `json:"tokens_scored"`
	Ctx          int     `json:"ctx"`
	// With a base model: its perplexity over the same tokens, and the
	// comparison.
	BasePPL   *float64 `json:"base_ppl,omitempty"`
	KLMean    *float64 `json:"kl_mean,omitempty"`
	KLStderr  *float64 `json:"kl_stderr,omitempty"`
	Top1Agree *float64 `json:"top1_agree,omitempty"`
}

// stats accumulates per-token figures.
type stats struct {
	n           int
	nll, nll2   float64 // sums of -log p(token) and of its square
	baseNLL     float64 // the base model's sum of -log p(token)
	kl, kl2     float64
	same        int
	ctx, chunks int
	k           kernels.Path
	scratch     []float32 // exp(logits - max) of one row
}

func (s *stats) result(withBase bool) Result {
	r := Result{Chunks: s.chunks, TokensScored: s.n, Ctx: s.ctx}
	if s.n == 0 {
		return r
	}
	n := float64(s.n)
	mean := s.nll / n
	r.PPL = math.Exp(mean)
	// As llama-perplexity: the standard error of the mean log-likelihood,
	// carried to the perplexity by its derivative (d exp(x) = exp(x) dx).
	if s.n > 1 {
		if v := s.nll2/n - mean*mean; v > 0 {
			r.PPLStderr = math.Sqrt(v/(n-1)) * r.PPL
		}
	}
	if withBase {
		kl, same := s.kl/n, float64(s.same)/n
		var klErr float64
		if s.n > 1 {
			if v := s.kl2/n - kl*kl; v > 0 {
				klErr = math.Sqrt(v / (n - 1))
			}
		}
		basePPL := math.Exp(s.baseNLL / n)
		r.BasePPL, r.KLMean, r.KLStderr, r.Top1Agree = &basePPL, &kl, &klErr, &same
	}
	return r
}

// ErrTooShort is returned for a text shorter than two chunks.
var ErrTooShort = errors.New("text too short")

// Run measures the perplexity of m on tokens. The text must hold at least
// two chunks, as llama-perplexity requires.
func Run(ctx context.Context, m *infer.Model, tokens []int32, o Options) (Result, error) {
	n := o.Ctx
	if n < 4 || n > m.Config.MaxContext() {
		return Result{}, fmt.Errorf("perplexity: --ctx %d: want 4 to %d tokens (the model's maximum context)", n, m.Config.MaxContext())
	}
	if len(tokens) < 2*n {
		return Result{}, fmt.Errorf("%w: it has %d tokens, and perplexity with --ctx %d needs at least %d (two chunks)", ErrTooShort, len(tokens), n, 2*n)
	}
	if o.Base != nil {
		if o.Base.Config.Vocab != m.Config.Vocab {
			return Result{}, fmt.Errorf("perplexity: the base model has a vocabulary of %d, this model %d", o.Base.Config.Vocab, m.Config.Vocab)
		}
		if n > o.Base.Config.MaxContext() {
			return Result{}, fmt.Errorf("perplexity: --ctx %d is larger than the base model's maximum context %d", n, o.Base.Config.MaxContext())
		}
	}
	chunks := len(tokens) / n
	first := n / 2
	st := stats{ctx: n, k: m.Kernels(), scratch: make([]float32, m.Config.Vocab)}
	// The scored positions of a chunk are first .. n-2: the logits at
	// position j predict token j+1, and the chunk's last token has nothing
	// after it in the chunk.
	rows := n - 1 - first
	ev, err := newEvaluator(m, n, rows, o.KV)
	if err != nil {
		return Result{}, err
	}
	var base *evaluator
	if o.Base != nil {
		if base, err = newEvaluator(o.Base, n, rows, format.KVF16); err != nil {
			return Result{}, err
		}
	}
	start := time.Now()
	for c := range chunks {
		if err := ctx.Err(); err != nil {
			return st.result(base != nil), err
		}
		chunk := tokens[c*n : (c+1)*n]
		if err := ev.hidden(chunk[:n-1], first); err != nil {
			return Result{}, err
		}
		if base == nil {
			err = m.HeadLogits(ev.x, func(r int, logits []float32) error {
				st.add(logits, int(chunk[first+r+1]))
				return nil
			})
		} else {
			if err := base.hidden(chunk[:n-1], first); err != nil {
				return Result{}, err
			}
			err = st.compare(m, o.Base, ev.x, base.x, chunk[first+1:])
		}
		if err != nil {
			return Result{}, err
		}
		st.chunks++
		if o.Progress != nil {
			o.Progress(c+1, chunks, time.Since(start), st.result(base != nil))
		}
	}
	return st.result(base != nil), nil
}

// Measure does what llama-perplexity does with its files: it opens the
// model in the file at path, and the one at base unless base is "", with
// ro, and measures the perplexity of text under it (Tokens, Run), compared
// with the base's. It returns the result and the text's length in tokens,
// for Write.
func Measure(ctx context.Context, path, base, text string, ro infer.Options, o Options) (Result, int, error) {
	m, err := infer.Open(path, ro)
	if err != nil {
		return Result{}, 0, err
	}
	defer m.Close()
	if base != "" {
		if o.Base, err = infer.Open(base, ro); err != nil {
			return Result{}, 0, err
		}
		defer o.Base.Close()
	}
	tokens := Tokens(m, text)
	res, err := Run(ctx, m, tokens, o)
	return res, len(tokens), err
}

// evaluator holds one model's session and the hidden states of a chunk's
// scored positions.
type evaluator struct {
	s *infer.Session
	x []float32
}

func newEvaluator(m *infer.Model, ctx, rows int, kv format.KVType) (*evaluator, error) {
	s, err := m.NewSessionKV(ctx, kv)
	if err != nil {
		return nil, err
	}
	return &evaluator{s: s, x: make([]float32, rows*m.Config.Hidden)}, nil
}

// hidden evaluates tokens from an empty cache and keeps the hidden states
// of positions from on.
func (e *evaluator) hidden(tokens []int32, from int) error {
	e.s.Rewind(0)
	return e.s.FeedHidden(tokens, from, e.x)
}

// add scores one position: logits predict target. It returns the row's
// log-sum-exp, and leaves exp(logits - max) in s.scratch.
func (s *stats) add(logits []float32, target int) float64 {
	lse, _ := s.k.LogSumExp(logits, s.scratch)
	nll := lse - float64(logits[target])
	s.n++
	s.nll += nll
	s.nll2 += nll * nll
	return lse
}

// compare scores the positions whose hidden states are x (model m) and
// bx (base), the targets being next, a group of rows at a time: the logits
// of one group of both models are alive together. With p the model's and
// q the base's distribution, the divergence of a row is
// KL(q || p) = sum_i q_i (log q_i - log p_i)
//
//	= sum_i q_i (bl_i - l_i) + lse(l) - lse(bl)
//
// for logits l and bl, since the q_i sum to 1.
func (s *stats) compare(m, base *infer.Model, x, bx []float32, next []int32) error {
	h, bh, vocab := m.Config.Hidden, base.Config.Hidden, m.Config.Vocab
	rows := len(x) / h
	const group = 16
	bl := make([]float32, group*vocab) // the base's logits
	bq := make([]float32, group*vocab) // and probabilities
	blse := make([]float64, group)
	btop := make([]int, group)
	for g0 := 0; g0 < rows; g0 += group {
		g1 := min(g0+group, rows)
		err := base.HeadLogits(bx[g0*bh:g1*bh], func(r int, logits []float32) error {
			q := bq[r*vocab : (r+1)*vocab]
			lse, mx := s.k.LogSumExp(logits, q)
			s.k.Scale(q, float32(math.Exp(float64(mx)-lse)))
			copy(bl[r*vocab:], logits)
			blse[r], btop[r] = lse, s.k.Argmax(logits)
			return nil
		})
		if err != nil {
			return err
		}
		err = m.HeadLogits(x[g0*h:g1*h], func(r int, logits []float32) error {
			target := int(next[g0+r])
			lse := s.add(logits, target)
			s.baseNLL += blse[r] - float64(bl[r*vocab+target])
			q, b := bq[r*vocab:(r+1)*vocab], bl[r*vocab:(r+1)*vocab]
			var dot float64
			for i, qi := range q {
				dot += float64(qi) * float64(b[i]-logits[i])
			}
			kl := dot + lse - blse[r]
			s.kl += kl
			s.kl2 += kl * kl
			if btop[r] == s.k.Argmax(logits) {
				s.same++
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Tokens is text tokenized as llama-perplexity does: no BOS (Qwen has
// none), and special-token text stays text.
func Tokens(m *infer.Model, text string) []int32 { return m.Tokenizer.Encode(text, false) }

// Write prints the result as llama-perplexity does, for a text of tokens
// tokens.
func (r Result) Write(w io.Writer, tokens int) {
	fmt.Fprintf(w, "%d tokens, %d chunks of %d, %d tokens scored\n", tokens, r.Chunks, r.Ctx, r.TokensScored)
	fmt.Fprintf(w, "PPL = %.4f +/- %.5f\n", r.PPL, r.PPLStderr)
	if r.BasePPL != nil {
		fmt.Fprintf(w, "base PPL = %.4f (this model %+.3f%%)\n", *r.BasePPL, 100*(r.PPL / *r.BasePPL - 1))
	}
	if r.KLMean != nil {
		fmt.Fprintf(w, "KL divergence from the base: %.6f +/- %.6f; top-1 agreement %.3f%%\n", *r.KLMean, *r.KLStderr, 100**r.Top1Agree)
	}
}

// Progress prints the figures after each chunk, with the time left: on a
// terminal one line rewritten in place, elsewhere a line every tenth
// chunk and after the last. Its Chunk is an Options.Progress.
type Progress struct {
	w    io.Writer
	tty  bool
	open bool // a line rewritten in place is not ended yet
}

// NewProgress prints on w, a terminal if tty.
func NewProgress(w io.Writer, tty bool) *Progress {
	return &Progress{w: w, tty: tty}
}

// Chunk prints the figures after done chunks of total.
func (p *Progress) Chunk(done, total int, el time.Duration, r Result) {
	left := time.Duration(float64(el) / float64(done) * float64(total-done))
	line := fmt.Sprintf("chunk %d/%d: PPL %.4f ± %.4f, %.1f s, about %.0f s left", done, total, r.PPL, r.PPLStderr, el.Seconds(), left.Seconds())
	switch {
	case p.tty:
		fmt.Fprintf(p.w, "\r\x1b[K%s", line)
		p.open = done < total
		if !p.open {
			fmt.Fprintln(p.w)
		}
	case done == total || done%10 == 0:
		fmt.Fprintln(p.w, line)
	}
}

// End ends a line that a run stopped before its last chunk left open.
func (p *Progress) End() {
	if p.open {
		fmt.Fprintln(p.w)
		p.open = false
	}
}
