package infer

import (
	"fmt"
)

// Seq is one session's part of a batched step.
type Seq struct {
	Session *Session
	Tokens  []int32
	// Logits asks for the logits of the last of Tokens (Runner.Logits).
	Logits bool
	// Rows, with Logits, asks for just these rows of the LM head, in this
	// order, rather than the vocabulary's: a reranker's "yes" and "no".
	Rows []int32
	// Last, with Logits, asks for the logits of the last Last tokens, not
	// just the last one (0 is 1): the checks of drafted tokens.
	Last int
}

// Step runs one forward step over the tokens of several sessions at once:
// each session's tokens go after those in its cache, with their own
// positions, and attend over their own cache only, but every product with
// the weights runs over all the rows together, so the weights are read
// once for all the sessions. This is how a server decodes many
// conversations (one token each) for about the cost of one, and prefills a
// new conversation's prompt in chunks between decode steps.
//
// The tokens of all seqs must fit in one step (Model.MaxPrefill), a session
// may appear once, and each must have room in its context. After Step,
// Logits(i) is the logits of seqs[i]'s last token if it asked, valid until
// the next step of the Runner. On an error nothing has run.
func (r *Runner) Step(seqs []Seq) error {
	total := 0
	for i, sq := range seqs {
		if sq.Session == nil || sq.Session.m != r.m {
			return fmt.Errorf("step: sequence %d has no session of this runner's model", i)
		}
		for _, other := range seqs[:i] {
			if other.Session == sq.Session {
				return fmt.Errorf("step: sequence %d repeats a session", i)
			}
		}
		if err := sq.Session.checkTokens(sq.Tokens); err != nil {
			return fmt.Errorf("step: sequence %d: %w", i, err)
		}
		if sq.Last < 0 || sq.Last > len(sq.Tokens) || (sq.Last > 1 && sq.Rows != nil) {
			return fmt.Errorf("step: sequence %d: logits of the last %d of %d tokens", i, sq.Last, len(sq.Tokens))
		}
		for _, id := range sq.Rows {
			if id < 0 || int(id) >= r.m.Config.Vocab || r.m.Config.Embedding {
				return fmt.Errorf("step: sequence %d: head row %d: not a row of this model's head", i, id)
			}
		}
		total += len(sq.Tokens)
	}
	if total == 0 || total > r.m.MaxPrefill() {
		return fmt.Errorf("step: %d tokens, want 1 to %d", total, r.m.MaxPrefill())
	}
	r.segs = r.segs[:0]
	r.batchTokens = r.batchTokens[:0]
	want := 0
	for _, sq := range seqs {
		s := sq.Session
		s.reserve(len(s.tokens) + len(sq.Tokens))
		last := max(sq.Last, 1)
		r.segs = append(r.segs, segment{states: s.states, row0: len(r.batchTokens), n: len(sq.Tokens), pos: len(s.tokens), wantLogit: sq.Logits, rows: sq.Rows, last: last})
		r.batchTokens = append(r.batchTokens, sq.Tokens...)
		if sq.Logits && sq.Rows == nil {
			want += last
		}
	}
	f := &r.prefill
	if total == 1 {
		f = &r.decode
	}
	x := r.step(f, r.batchTokens, r.segs, true)
	r.logitsOf(x, want)
	h := r.m.Config.Hidden
	for i, sq := range seqs {
		if sg := &r.segs[i]; sq.Session.mtpTrack {
			r.keepMTP(sq.Session, x[sg.row0*h:(sg.row0+sg.n)*h])
		}
		sq.Session.tokens = append(sq.Session.tokens, sq.Tokens...)
	}
	return nil
}

// Logits is the logits of seqs[i]'s last token of the last Step (of its
// last Seq.Last tokens, one row after the other), or nil if it did not
// ask for them. The slice is the Runner's, valid until its next step.
func (r *Runner) Logits(i int) []float32 {
	if i < 0 || i >= len(r.segs) || !r.segs[i].wantLogit {
		return nil
	}
	if sg := &r.segs[i]; sg.rows != nil {
		return sg.rowLogits
	}
	w := r.m.OutputWidth()
	j := r.logitRow[i]
	return r.batchLogits[j*w : (j+r.segs[i].last)*w]
}

// OutputWidth is the width of a step's output row: the vocabulary's
// logits, or for an embedding model the final-norm hidden state.
func (m *Model) OutputWidth() int {
	if m.Config.Embedding {
		return m.Config.Hidden
	}
	return m.Config.Vocab
}

// logitsOf computes the logits of the last rows of every segment that asked,
// from the residual stream x of the step, headRows rows at a time.
func (r *Runner) logitsOf(x []float32, want int) {
	m := r.m
	h, w := m.Config.Hidden, m.OutputWidth()
	if need := want * w; cap(r.batchLogits) < need {
		r.batchLogits = make([]float32, need)
	}
	r.batchLogits = r.batchLogits[:want*w]
	r.logitRow = r.logitRow[:0]
	rows := r.gather[:0]
	for i := range r.segs {
		sg := &r.segs[i]
		if !sg.wantLogit || sg.rows != nil {
			r.logitRow = append(r.logitRow, -1)
			if sg.wantLogit {
				last := sg.row0 + sg.n - 1
				sg.rowLogits = r.headRows(sg.rowLogits[:0], x[last*h:(last+1)*h], sg.rows)
			}
			continue
		}
		r.logitRow = append(r.logitRow, len(rows)/h)
		end := sg.row0 + sg.n
		rows = append(rows, x[(end-sg.last)*h:end*h]...)
	}
	r.gather = rows
	r.headInto(r.batchLogits, rows)
}
