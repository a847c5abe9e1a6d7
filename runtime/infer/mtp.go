package infer

import (
	"errors"
	"fmt"
	"slices"

	"github.com/qwenc/qwenc/format"

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

// A session that tracks MTP (TrackMTP) keeps, for the MTP block, the
// main model's hidden state (after its final norm) at each position whose
// MTP row is not computed yet: Step adds its rows, StepMTP takes them. A
// position's MTP row also needs the token after it, so the last
// position's row waits for the token sampled there. The session keeps
// the hidden state of its last position too, and each copy of its states
// (Snapshot, Checkpoint) the one before the copy's position, so that
// where it goes back to, or a fork starts from, the row there can be
// computed again with the token that follows there now.

// TrackMTP makes the session keep what the MTP block needs from every
// later Step (the engine asks it of every session when it drafts with the
// MTP head, so that a fork of any of them can). It must come before the
// session's first token.
func (s *Session) TrackMTP() error {
	switch {
	case s.m.mtp == nil:
		return errors.New("track MTP: the model has no MTP block")
	case len(s.tokens) > 0:
		return fmt.Errorf("track MTP: the session holds %d tokens already", len(s.tokens))
	}
	s.mtpTrack = true
	return nil
}

// MTPReady reports whether the session's MTP rows can be brought up to
// its last position: it tracks MTP, and every position's row is either
// computed or waits with its hidden state (none was fed without Step).
func (s *Session) MTPReady() bool {
	return s.mtpTrack && s.mtpLen+len(s.mtpPend)/s.m.Config.Hidden == len(s.tokens)
}

// MTPLen is how many positions the session's MTP rows cover: with a
// chain of guesses (MTPSeq.Guess), past its last position.
func (s *Session) MTPLen() int { return s.mtpLen }

// keepMTP takes the rows of a Step that fed the session, before it
// counts their tokens: x is their residual stream, before the final norm.
func (r *Runner) keepMTP(s *Session, x []float32) {
	h := r.m.Config.Hidden
	n := len(x) / h
	norm, _ := r.m.headOps()
	eps := float32(r.m.Config.RMSNormEps)
	if !s.MTPReady() {
		s.mtpPend = s.mtpPend[:0] // behind for good: rows were fed without it
		return
	}
	at := len(s.mtpPend)
	s.mtpPend = slices.Grow(s.mtpPend, n*h)[:at+n*h]
	for i := range n {
		r.k.RMSNorm(s.mtpPend[at+i*h:at+(i+1)*h], x[i*h:(i+1)*h], norm.w32, eps)
	}
	s.mtpLast = append(s.mtpLast[:0], s.mtpPend[len(s.mtpPend)-h:]...)
}

// mtpRowAt is the hidden state the session holds at position p: a
// waiting row's, or its last position's; nil when it holds none there.
func (s *Session) mtpRowAt(p int) []float32 {
	h := s.m.Config.Hidden
	switch {
	case !s.mtpTrack || p < 0:
		return nil
	case p >= s.mtpLen && (p-s.mtpLen+1)*h <= len(s.mtpPend):
		return s.mtpPend[(p-s.mtpLen)*h : (p-s.mtpLen+1)*h]
	case p == len(s.tokens)-1 && len(s.mtpLast) == h:
		return s.mtpLast
	}
	return nil
}

// cutMTP follows the session back to n tokens: the MTP row of position
// n-1 took the token at n, which may change, so it is computed again,
// from the waiting rows or row (the hidden state at n-1 a copy kept);
// without either the session's MTP rows stay behind.
func (s *Session) cutMTP(n int, row []float32) {
	if !s.mtpTrack {
		s.mtpLen = min(s.mtpLen, n)
		return
	}
	s.mtpChain = s.mtpChain[:0]
	h := s.m.Config.Hidden
	keep := max(n-1, 0)
	switch {
	case n == 0:
		s.mtpLen, s.mtpPend, s.mtpLast = 0, s.mtpPend[:0], s.mtpLast[:0]
		return
	case s.mtpLen <= keep && (n-s.mtpLen)*h <= len(s.mtpPend):
		s.mtpPend = s.mtpPend[:(n-s.mtpLen)*h]
	case s.mtpLen >= keep && len(row) == h:
		s.mtpLen = keep
		s.mtpPend = append(s.mtpPend[:0], row...)
	default:
		s.mtpLen, s.mtpPend = min(s.mtpLen, keep), s.mtpPend[:0]
	}
	if r := s.mtpPend; len(r) >= h {
		s.mtpLast = append(s.mtpLast[:0], r[len(r)-h:]...)
	} else {
		s.mtpLast = s.mtpLast[:0]
	}
}

// MTPSeq is one session's part of an MTP step.
type MTPSeq struct {
	Session *Session
	// Next is the token after the session's last position (sampled from
	// its logits, or the prompt's next): the rows of every waiting
	// position are computed, the last one's with Next. -1: not known yet;
	// the last position's row waits.
	//
	// With Guess, the step instead adds one row past the session's
	// positions, which chains the guesses: it takes the MTP block's own
	// output at the session's last row of the step before (which asked
	// for Logits), and Next is the token guessed there. ForgetGuesses
	// drops these rows.
	Next  int32
	Guess bool
	// Max, when not 0, computes at most that many of the waiting rows
	// (the first); the rest wait for a later step.
	Max int
	// Logits asks for the logits of the last row, which guess the token
	// after its token (Runner.MTPLogits).
	Logits bool
}

// StepMTP runs one MTP step over several sessions, as Step runs the main
// model's: each MTPReady, or with Guess after a step that asked for its
// logits.
func (r *Runner) StepMTP(seqs []MTPSeq) error {
	m := r.m
	if m.mtp == nil {
		return fmt.Errorf("MTP step: the model has no MTP block")
	}
	h := m.Config.Hidden
	total := 0
	for i, sq := range seqs {
		s := sq.Session
		switch {
		case s == nil || s.m != m:
			return fmt.Errorf("MTP step: sequence %d has no session of this runner's model", i)
		case sq.Next >= int32(m.Config.Vocab) || (sq.Guess && sq.Next < 0):
			return fmt.Errorf("MTP step: sequence %d: token id %d outside the vocabulary", i, sq.Next)
		case sq.Guess && (len(s.mtpChain) != h || s.mtpLen < len(s.tokens)):
			return fmt.Errorf("MTP step: sequence %d: a chained guess without a guess before it", i)
		case !sq.Guess && !s.MTPReady():
			return fmt.Errorf("MTP step: sequence %d: the session's MTP rows are behind (rows fed without their hidden states)", i)
		}
		for _, other := range seqs[:i] {
			if other.Session == s {
				return fmt.Errorf("MTP step: sequence %d repeats a session", i)
			}
		}
		total += mtpRows(sq)
	}
	if total > m.mtp.prefill.g.Tokens {
		return fmt.Errorf("MTP step: %d rows, want at most %d", total, m.mtp.prefill.g.Tokens)
	}
	r.segs, r.batchTokens, r.mtpHidden, r.mtpSeg = r.segs[:0], r.batchTokens[:0], r.mtpHidden[:0], r.mtpSeg[:0]
	if total == 0 {
		for range seqs {
			r.mtpSeg = append(r.mtpSeg, -1)
		}
		return nil
	}
	if r.mtpDecode.program == nil {
		r.mtpDecode = frame{m.mtp.decode, alignedFloats(m.mtp.decode.size)}
		r.mtpPrefill = frame{m.mtp.prefill, alignedFloats(m.mtp.prefill.size)}
	}
	want := 0
	for _, sq := range seqs {
		s := sq.Session
		n := mtpRows(sq)
		if n == 0 {
			r.mtpSeg = append(r.mtpSeg, -1)
			continue
		}
		r.mtpSeg = append(r.mtpSeg, len(r.segs))
		if err := s.makeMTP(); err != nil {
			return err
		}
		for _, st := range s.mtp {
			st.Reserve(s.mtpLen, s.mtpLen+n)
		}
		r.segs = append(r.segs, segment{states: s.mtp, row0: len(r.batchTokens), n: n, pos: s.mtpLen, wantLogit: sq.Logits, last: 1})
		if sq.Guess {
			r.batchTokens = append(r.batchTokens, sq.Next)
			r.mtpHidden = append(r.mtpHidden, s.mtpChain...)
		} else {
			// Each waiting row takes the token after it: the session's,
			// then Next.
			r.batchTokens = append(r.batchTokens, s.tokens[s.mtpLen+1:min(s.mtpLen+n+1, len(s.tokens))]...)
			if s.mtpLen+n == len(s.tokens) { // the last row's is Next
				r.batchTokens = append(r.batchTokens, sq.Next)
			}
			r.mtpHidden = append(r.mtpHidden, s.mtpPend[:n*h]...)
		}
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
	// the main head's first rows (mtpHead).
	hd := r.mtpHeadOp()
	w := hd.w.n + len(r.mtpExtra)
	if need := want * w; cap(r.batchLogits) < need {
		r.batchLogits = make([]float32, need)
	}
	r.batchLogits, r.gather, r.logitRow = r.batchLogits[:want*w], r.gather[:0], r.logitRow[:0]
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
	norm := &ops[f.finalNorm]
	eps := float32(m.Config.RMSNormEps)
	for i, sq := range seqs {
		s := sq.Session
		n := mtpRows(sq)
		if k := r.mtpSeg[i]; k >= 0 && r.logitRow[k] >= 0 {
			j := r.logitRow[k]
			// The next guess of a chain takes this row's output after
			// mtp.norm.
			s.mtpChain = slices.Grow(s.mtpChain[:0], h)[:h]
			r.k.RMSNorm(s.mtpChain, r.gather[j*h:(j+1)*h], norm.w32, eps)
		}
		if !sq.Guess {
			s.mtpPend = s.mtpPend[:copy(s.mtpPend, s.mtpPend[n*h:])]
		}
		s.mtpLen += n
	}
	// The rows of the head, then the stop tokens past them, each row's
	// logits one after the other.
	r.mtpRows = slices.Grow(r.mtpRows[:0], want*hd.w.n)[:want*hd.w.n]
	r.normHeadInto(r.mtpRows, r.gather, norm, hd)
	for j := range want {
		row := r.batchLogits[j*w : (j+1)*w]
		copy(row, r.mtpRows[j*hd.w.n:(j+1)*hd.w.n])
		r.headRowsNorm(row[hd.w.n:hd.w.n], r.gather[j*h:(j+1)*h], r.mtpExtra, norm)
	}
	return nil
}

// mtpHeadOp is the head of the MTP program limited to its first rows
// (Options.MTPVocab), made on first use: a view of the same tiles.
func (r *Runner) mtpHeadOp() *boundOp {
	if r.mtpHead != nil {
		return r.mtpHead
	}
	m := r.m
	ops := m.mtp.prefill.ops
	hd := ops[len(ops)-1]
	if n := r.mtpVocab; n > 0 && n < hd.w.n {
		n = (n + format.TileRows - 1) / format.TileRows * format.TileRows
		hd.w.tiles = hd.w.tiles[:n/format.TileRows*hd.w.typ.TileBytes(hd.w.k)]
		hd.w.n = n
		for _, id := range m.File.Header.Generation.EOS {
			if int(id) >= n && !slices.Contains(r.mtpExtra, id) {
				r.mtpExtra = append(r.mtpExtra, id)
			}
		}
	}
	r.mtpHead = &hd
	return r.mtpHead
}

// mtpRows is how many rows an MTP step computes for sq.
func mtpRows(sq MTPSeq) int {
	if sq.Guess {
		return 1
	}
	s := sq.Session
	n := len(s.mtpPend) / s.m.Config.Hidden
	if sq.Next < 0 && n > 0 && s.mtpLen+n == len(s.tokens) {
		n-- // the last position waits for its next token
	}
	if sq.Max > 0 {
		n = min(n, sq.Max)
	}
	return n
}

// MTPWaiting is how many positions' MTP rows wait for a step: with the
// next token known, an MTP step computes them all.
func (s *Session) MTPWaiting() int { return len(s.mtpPend) / s.m.Config.Hidden }

// MTPRows is the most rows one MTP step computes.
func (m *Model) MTPRows() int {
	if m.mtp == nil {
		return 0
	}
	return m.mtp.prefill.g.Tokens
}

// MTPLogits is the logits of seqs[i]'s last row of the last StepMTP, or
// nil if it did not ask (or had no row to compute): the guess of the
// token after that row's. With Options.MTPVocab they are the logits of
// the first token ids only, then of the stop tokens past them
// (MTPTokenAt). The slice is the Runner's, valid until its next step.
func (r *Runner) MTPLogits(i int) []float32 {
	if i < 0 || i >= len(r.mtpSeg) || r.mtpSeg[i] < 0 {
		return nil
	}
	k := r.mtpSeg[i]
	j := r.logitRow[k]
	if j < 0 {
		return nil
	}
	w := r.mtpHead.w.n + len(r.mtpExtra)
	return r.batchLogits[j*w : (j+1)*w]
}

// MTPTokenAt is the token id of column c of MTPLogits' rows.
func (r *Runner) MTPTokenAt(c int) int32 {
	if n := r.mtpHead.w.n; c >= n {
		return r.mtpExtra[c-n]
	}
	return int32(c)
}

// ForgetGuesses drops the session's chained guess rows (MTPSeq.Guess),
// which the main model has not checked.
func (s *Session) ForgetGuesses() {
	s.mtpLen = min(s.mtpLen, len(s.tokens))
	s.mtpChain = s.mtpChain[:0]
}

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
