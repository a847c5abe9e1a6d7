package infer

import (
	"errors"
	"fmt"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/kernels"
)

// headRows is how many positions share one LM-head product when the logits
// of many positions are wanted: enough rows for the GEMM kernels to reuse
// each weight tile, few enough that the logits stay a few MB.
const headRows = 16

// headScratch holds the normalised hidden states (and their quantized
// form, for a quantized head) and the logits of one group of positions.
type headScratch struct {
	xn, logits []float32
	xq         []byte
}

// FeedHidden feeds tokens like Feed and copies the final hidden state (the
// residual stream before the final norm) of positions [from, len(tokens))
// of tokens into dst, one row of hidden_size values each. HeadLogits turns
// them into logits. Perplexity needs every position's logits, where Feed
// computes the LM head for the last position only.
func (s *Session) FeedHidden(tokens []int32, from int, dst []float32) error {
	h := s.m.Config.Hidden
	if from < 0 || from > len(tokens) || len(dst) < (len(tokens)-from)*h {
		return fmt.Errorf("feed hidden: rows [%d, %d) do not fit in %d values", from, len(tokens), len(dst))
	}
	return s.feed(tokens, true, func(first int, x []float32) error {
		n := len(x) / h
		if lo := max(from, first); lo < first+n {
			copy(dst[(lo-from)*h:(first+n-from)*h], x[(lo-first)*h:])
		}
		return nil
	})
}

// HeadLogits applies the final norm and the LM head to rows of hidden
// states (as FeedHidden gives them) on the Model's own Runner and calls
// fn(r, logits) for each row in order; logits is valid only during the
// call, and fn must not feed this model.
func (m *Model) HeadLogits(hidden []float32, fn func(r int, logits []float32) error) error {
	if m.Config.Embedding {
		return errors.New("an embedding model has no LM head: it gives no logits")
	}
	return m.runner().headLogits(hidden, fn)
}

func (run *Runner) headLogits(hidden []float32, fn func(r int, logits []float32) error) error {
	h, vocab := run.m.Config.Hidden, run.m.Config.Vocab
	sc := run.headScratch()
	if sc.logits == nil {
		// Only here: a batched step's logits go into its own buffer.
		sc.logits = make([]float32, headRows*vocab)
	}
	total := len(hidden) / h
	for r0 := 0; r0 < total; r0 += headRows {
		rows := min(headRows, total-r0)
		run.headInto(sc.logits[:rows*vocab], hidden[r0*h:(r0+rows)*h])
		for r := range rows {
			if err := fn(r0+r, sc.logits[r*vocab:(r+1)*vocab]); err != nil {
				return err
			}
		}
	}
	return nil
}

// headInto writes the logits of rows of hidden states into dst (rows x
// vocab), the final norm and the LM head applied headRows rows at a time;
// for an embedding model, the final-norm states (rows x hidden).
func (run *Runner) headInto(dst, hidden []float32) {
	norm, head := run.m.headOps()
	run.normHeadInto(dst, hidden, norm, head)
}

// normHeadInto is headInto with the final norm and the head of a program
// of the caller's (the MTP block's norm before the main head, or before
// its first rows alone: dst's rows are head.w.n wide).
func (run *Runner) normHeadInto(dst, hidden []float32, norm, head *boundOp) {
	m := run.m
	c := &m.Config
	h, vocab := c.Hidden, head.w.n
	eps := float32(c.RMSNormEps)
	total := len(hidden) / h
	if c.Embedding {
		// No head: the output is the final norm's.
		for r := range total {
			run.k.RMSNorm(dst[r*h:(r+1)*h], hidden[r*h:(r+1)*h], norm.w32, eps)
		}
		return
	}
	sc := run.headScratch()
	for r0 := 0; r0 < total; r0 += headRows {
		rows := min(headRows, total-r0)
		for r := range rows {
			run.k.RMSNorm(sc.xn[r*h:(r+1)*h], hidden[(r0+r)*h:(r0+r+1)*h], norm.w32, eps)
		}
		out := dst[r0*vocab : (r0+rows)*vocab]
		if head.w.typ.Quantized() {
			run.k.QuantizeActs(sc.xq, sc.xn, h, rows, h)
			run.matmul(head, out, nil, sc.xq, rows)
		} else {
			run.matmul(head, out, sc.xn[:rows*h], nil, rows)
		}
	}
}

// headScratch allocates the head's scratch on first use.
func (run *Runner) headScratch() *headScratch {
	sc := &run.head
	if sc.xn == nil {
		h := run.m.Config.Hidden
		sc.xn = make([]float32, headRows*h)
		sc.xq = make([]byte, headRows*kernels.QActRowBytes(h))
	}
	return sc
}

// headRows appends to dst the logits of just the given rows of the LM head
// for one hidden state: the final norm, then each row decoded from its
// tile and dotted in float64. A reranker needs two of the 151,669.
func (run *Runner) headRows(dst, hidden []float32, rows []int32) []float32 {
	norm, _ := run.m.headOps()
	return run.headRowsNorm(dst, hidden, rows, norm)
}

// headRowsNorm is headRows with the norm of a program of the caller's
// (the MTP block's).
func (run *Runner) headRowsNorm(dst, hidden []float32, rows []int32, norm *boundOp) []float32 {
	m := run.m
	c := &m.Config
	h := c.Hidden
	_, head := m.headOps()
	sc := run.headScratch()
	xn, w := sc.xn[:h], sc.xn[h:2*h]
	run.k.RMSNorm(xn, hidden, norm.w32, float32(c.RMSNormEps))
	tb := head.w.typ.TileBytes(h)
	for _, id := range rows {
		tile := int(id) / format.TileRows
		head.w.typ.DequantizeRow(w, head.w.tiles[tile*tb:(tile+1)*tb], int(id)%format.TileRows, h)
		var sum float64
		for j := range h {
			sum += float64(xn[j]) * float64(w[j])
		}
		dst = append(dst, float32(sum))
	}
	return dst
}

// headOps returns the final norm and the LM head of the prefill program:
// the head is the last op of every program, and the final norm, the last
// norm outside the layers, comes before it (an embedding model's last op).
func (m *Model) headOps() (norm, head *boundOp) {
	ops := m.prefill.ops
	return &ops[m.prefill.finalNorm], &ops[len(ops)-1]
}
