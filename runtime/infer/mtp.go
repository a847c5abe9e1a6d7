package infer

import (
	"fmt"

	"github.com/qwenc/qwenc/format/arch"
	"github.com/qwenc/qwenc/format/graph"
)

// The multi-token-prediction block (arch.BuildMTP): a program of its own
// whose rows are a sequence's positions, each given the main model's
// residual stream there and the token that follows it; its last row's
// logits guess the token after that one. A session's MTP state (the MTP
// layer's KV cache) is made on its first MTP step, and follows the
// session's rewinds.

// mtpPrograms are the MTP block's bound programs and the states they
// declare.
type mtpPrograms struct {
	decode, prefill *program
	states          []graph.State
}

// bindMTP binds the MTP programs when the architecture has them and the
// file holds their plans (a file compiled without them still runs; only
// MTP drafts need them).
func (m *Model) bindMTP(a arch.Arch) error {
	if m.Config.MTPLayers == 0 {
		return nil
	}
	if _, ok := m.File.Header.Plan(arch.MTPDecode); !ok {
		return nil
	}
	build := func(mode string, tokens int) *graph.Graph {
		return arch.BuildMTP(a, &m.Config, mode, tokens, m.File.Header.SectionTypes())
	}
	if build(arch.MTPDecode, 1) == nil {
		return nil
	}
	p := &mtpPrograms{}
	var err error
	if p.decode, err = m.bind(arch.MTPDecode, build); err != nil {
		return err
	}
	if p.prefill, err = m.bind(arch.MTPPrefill, build); err != nil {
		return err
	}
	p.states = p.decode.g.States
	if err := checkStates(p.states); err != nil {
		return fmt.Errorf("MTP: %w", err)
	}
	m.mtp = p
	return nil
}

// HasMTP reports whether the model has an MTP block to run.
func (m *Model) HasMTP() bool { return m.mtp != nil }

// MTPSeq is one session's rows of an MTP step: the session's MTP
// positions [MTPLen, MTPLen + len(Next)), each with the main model's
// residual stream there (Hidden: the rows Step or FeedHidden return,
// before the final norm; len(Next) x hidden) and the token that follows
// it (Next).
type MTPSeq struct {
	Session *Session
	Hidden  []float32
	Next    []int32
	// Logits asks for the logits of the last row, which guess the token
	// after Next's last (Runner.MTPLogits).
	Logits bool
}

// MTPLen is how many positions the session's MTP rows cover.
func (s *Session) MTPLen() int { return s.mtpLen }

// StepMTP runs one MTP step over several sessions' rows, as Step runs the
// main model's. Each session's MTP rows must cover its positions up to
// where the seq starts (MTPLen), and may not pass the positions it holds.
func (r *Runner) StepMTP(seqs []MTPSeq) error {
	m := r.m
	if m.mtp == nil {
		return fmt.Errorf("MTP step: the model has no MTP block")
	}
	h := m.Config.Hidden
	total := 0
	for i, sq := range seqs {
		s := sq.Session
		n := len(sq.Next)
		switch {
		case s == nil || s.m != m:
			return fmt.Errorf("MTP step: sequence %d has no session of this runner's model", i)
		case n == 0 || len(sq.Hidden) != n*h:
			return fmt.Errorf("MTP step: sequence %d: %d rows of hidden state for %d tokens", i, len(sq.Hidden)/h, n)
		case s.mtpLen+n > len(s.tokens):
			return fmt.Errorf("MTP step: sequence %d: rows [%d, %d) past the %d positions the session holds", i, s.mtpLen, s.mtpLen+n, len(s.tokens))
		}
		for _, other := range seqs[:i] {
			if other.Session == s {
				return fmt.Errorf("MTP step: sequence %d repeats a session", i)
			}
		}
		for _, id := range sq.Next {
			if id < 0 || int(id) >= m.Config.Vocab {
				return fmt.Errorf("MTP step: sequence %d: token id %d outside the vocabulary", i, id)
			}
		}
		total += n
	}
	if total == 0 || total > m.mtp.prefill.g.Tokens {
		return fmt.Errorf("MTP step: %d rows, want 1 to %d", total, m.mtp.prefill.g.Tokens)
	}
	if r.mtpDecode.program == nil {
		r.mtpDecode = frame{m.mtp.decode, alignedFloats(m.mtp.decode.size)}
		r.mtpPrefill = frame{m.mtp.prefill, alignedFloats(m.mtp.prefill.size)}
	}
	r.segs, r.batchTokens, r.mtpHidden = r.segs[:0], r.batchTokens[:0], r.mtpHidden[:0]
	want := 0
	for _, sq := range seqs {
		s := sq.Session
		if err := s.makeMTP(); err != nil {
			return err
		}
		for _, st := range s.mtp {
			st.Reserve(s.mtpLen, s.mtpLen+len(sq.Next))
		}
		r.segs = append(r.segs, segment{states: s.mtp, row0: len(r.batchTokens), n: len(sq.Next), pos: s.mtpLen, wantLogit: sq.Logits, last: 1})
		r.batchTokens = append(r.batchTokens, sq.Next...)
		r.mtpHidden = append(r.mtpHidden, sq.Hidden...)
		if sq.Logits {
			want++
		}
	}
	f := &r.mtpPrefill
	if total == 1 {
		f = &r.mtpDecode
	}
	r.cur.hidden = r.mtpHidden
	x := r.step(f, r.batchTokens, r.segs, true)
	// The logits of each sequence's last row: the MTP block's norm, then
	// the main head.
	w := m.Config.Vocab
	if need := want * w; cap(r.batchLogits) < need {
		r.batchLogits = make([]float32, need)
	}
	r.batchLogits, r.logitRow, r.gather = r.batchLogits[:want*w], r.logitRow[:0], r.gather[:0]
	for i := range r.segs {
		sg := &r.segs[i]
		if !sg.wantLogit {
			r.logitRow = append(r.logitRow, -1)
			continue
		}
		r.logitRow = append(r.logitRow, len(r.gather)/h)
		last := sg.row0 + sg.n - 1
		r.gather = append(r.gather, x[last*h:(last+1)*h]...)
	}
	ops := f.ops
	r.normHeadInto(r.batchLogits, r.gather, &ops[f.finalNorm], &ops[len(ops)-1])
	for _, sq := range seqs {
		sq.Session.mtpLen += len(sq.Next)
	}
	return nil
}

// MTPLogits is the logits of seqs[i]'s last row of the last StepMTP, or
// nil if it did not ask: the guess of the token after its last Next. The
// slice is the Runner's, valid until its next step.
func (r *Runner) MTPLogits(i int) []float32 { return r.Logits(i) }

// makeMTP makes the session's MTP states on its first MTP step.
func (s *Session) makeMTP() error {
	if s.mtp != nil {
		return nil
	}
	for i := range s.m.mtp.states {
		st, err := newLayerState(&s.m.mtp.states[i], s.kv)
		if err != nil {
			return err
		}
		s.mtp = append(s.mtp, st)
	}
	return nil
}

func bindHiddenIn(m *Model, g *graph.Graph, o *boundOp) error {
	return checkWidth(g, o, o.Out, m.Config.Hidden, "hidden_size")
}

// runHiddenIn copies the rows the caller handed the step.
func runHiddenIn(s *step, i int) int {
	copy(s.view(s.op(i).Out), s.hidden)
	return i + 1
}
