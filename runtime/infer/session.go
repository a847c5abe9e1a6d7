package infer

import (
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"unsafe"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/graph"
)

// ErrContextFull is returned when a step would go past the session's
// context length.
var ErrContextFull = errors.New("context full")

// Session is one sequence: the tokens it has taken and, for each state of
// the model's forward step, its LayerState. Tokens are fed in steps:
// prompts in batches of up to the compiled max-prefill tokens, then one
// token at a time.
//
// A session goes back to an earlier position with Rewind: at once where
// every state is Rewindable (attention alone), else to a copy of its
// states taken there (Checkpoint, or a Snapshot the caller holds), from
// where the tokens after it are fed again.
type Session struct {
	m      *Model
	kv     format.KVType
	states []LayerState
	// rewindable says every state is: no copies are ever needed.
	rewindable bool
	ctx        int
	tokens     []int32
	// checkpoints are copies of the states at earlier positions, sorted
	// by position, each taken of the tokens the session still holds.
	checkpoints []*Snapshot
	// epoch counts the rewinds: a Snapshot of an earlier epoch may hold
	// tokens the session no longer has.
	epoch int
	// mtp are the MTP block's states, made on the first MTP step, and
	// mtpLen the positions its rows cover (mtp.go). A session that tracks
	// MTP (mtpTrack) keeps the final-norm hidden states of the positions
	// [mtpLen, Len) whose rows wait (mtpPend), that of its last position
	// (mtpLast), and the MTP output a chained guess takes (mtpChain).
	mtp                        []LayerState
	mtpLen                     int
	mtpTrack                   bool
	mtpPend, mtpLast, mtpChain []float32
	// logFrom is the position the recurrent states' logs start at
	// (Speculate), -1 while they do not log.
	logFrom int
	// MaxBatch caps the tokens of one prefill step below the compiled
	// maximum (tests use it to check that batching does not change results).
	MaxBatch int
}

// maxCheckpoints bounds the copies a session keeps; the shallowest goes
// first, as a later request is most likely to share the deepest. The
// engine's state cache bounds them all by bytes.
const maxCheckpoints = 64

// Snapshot is a copy of a session's states at one position, for Restore.
type Snapshot struct {
	s      *Session
	pos    int
	epoch  int
	copies []StateCopy // per state; nil for a Rewindable one
	bytes  int64
	// mtpRow is the hidden state at pos-1 of a session that tracks MTP,
	// from which the MTP row there is computed again after a Restore.
	mtpRow []float32
	// logged: Speculate took it, and the recurrent states log from it.
	logged bool
	// logits is the head's row for the token after pos (KeepLogits): the
	// same tokens again need no step for it.
	logits []float32
}

// Pos is the position the snapshot was taken at: the tokens the session
// held.
func (sn *Snapshot) Pos() int { return sn.pos }

// NewSession starts an empty sequence whose attention layers keep f16
// keys and values, with room for ctx positions (0: the model's maximum
// context).
func (m *Model) NewSession(ctx int) (*Session, error) { return m.NewSessionKV(ctx, format.KVF16) }

// NewSessionKV is NewSession with a KV cache of type kv.
func (m *Model) NewSessionKV(ctx int, kv format.KVType) (*Session, error) {
	if ctx <= 0 {
		ctx = m.Config.MaxContext()
	}
	if ctx > m.Config.MaxContext() {
		return nil, fmt.Errorf("context %d is larger than the model's maximum %d", ctx, m.Config.MaxContext())
	}
	s := &Session{m: m, kv: kv, ctx: ctx, rewindable: true, logFrom: -1}
	for i := range m.states {
		st, err := newLayerState(&m.states[i], kv)
		if err != nil {
			return nil, err
		}
		s.states = append(s.states, st)
		s.rewindable = s.rewindable && st.Rewindable()
	}
	return s, nil
}

// Rewindable reports whether the model's sessions go back to any
// position by themselves: every state is Rewindable (attention alone).
func (m *Model) Rewindable() bool {
	for i := range m.states {
		if !m.states[i].Rewindable() {
			return false
		}
	}
	return true
}

// States are the model's per-sequence states, as its forward step
// declares them (do not modify).
func (m *Model) States() []graph.State { return m.states }

// SequenceBytes is what one sequence of n positions holds in every state,
// with KV cache type kv: what a session allocates, to refuse a context the
// machine cannot hold before allocating anything.
func (m *Model) SequenceBytes(n int, kv format.KVType) int64 {
	return graph.SequenceBytes(m.states, n, kv)
}

// Len is the number of tokens the session has taken.
func (s *Session) Len() int { return len(s.tokens) }

// Ctx is the session's context length.
func (s *Session) Ctx() int { return s.ctx }

// Tokens returns the tokens the session has taken (do not modify).
func (s *Session) Tokens() []int32 { return s.tokens }

// KVType is how the session's attention layers keep keys and values.
func (s *Session) KVType() format.KVType { return s.kv }

// Rewindable reports whether the session goes back to any earlier
// position by itself (every state is Rewindable), with no copies.
func (s *Session) Rewindable() bool { return s.rewindable }

// Bytes is the memory the session holds: its states and its checkpoints.
func (s *Session) Bytes() int64 {
	var b int64
	for _, st := range s.states {
		b += st.Bytes()
	}
	for _, st := range s.mtp {
		b += st.Bytes()
	}
	for _, c := range s.checkpoints {
		b += c.bytes + int64(4*len(c.logits))
	}
	return b
}

// RewindPoint is the deepest position at most n the session can go back
// to: n itself when it is Rewindable (or n is where it is), else its
// deepest checkpoint at most n, else 0 (the empty state).
func (s *Session) RewindPoint(n int) int {
	return rewindPoint(n, len(s.tokens), s.rewindable, func(yield func(int) bool) {
		for _, c := range s.checkpoints {
			if !yield(c.pos) {
				return
			}
		}
	})
}

// rewindPoint is RewindPoint of a session of end tokens whose copies are
// at copies, in order.
func rewindPoint(n, end int, rewindable bool, copies iter.Seq[int]) int {
	n = min(max(n, 0), end)
	if rewindable || n == end {
		return n
	}
	p := 0
	for c := range copies {
		if c <= n {
			p = c
		}
	}
	return p
}

// CanRewind reports whether Rewind(n) would succeed.
func (s *Session) CanRewind(n int) bool { return s.RewindPoint(n) == n }

// Rewind forgets every token from position n on (none when n >= Len);
// the next step writes their positions again. A session that is not
// Rewindable goes back only to a checkpoint or to 0: RewindPoint says
// where, and any other n is an error.
func (s *Session) Rewind(n int) error {
	n = max(n, 0)
	if n >= len(s.tokens) {
		return nil
	}
	if p := s.RewindPoint(n); p != n {
		return fmt.Errorf("rewind to %d: the session keeps no copy there (the deepest before it is at %d)", n, p)
	}
	var at *Snapshot
	for _, c := range s.checkpoints {
		if c.pos == n {
			at = c
		}
	}
	if !s.rewindable {
		s.restore(at)
	}
	s.cut(n, at)
	return nil
}

// restore brings every state that is not Rewindable back to sn, or with
// nil to its empty state.
func (s *Session) restore(sn *Snapshot) {
	for i, st := range s.states {
		if st.Rewindable() {
			continue
		}
		if sn == nil {
			st.Restore(nil)
		} else {
			st.Restore(sn.copies[i])
		}
	}
}

// cut ends the tokens at n after a rewind there (to at, a copy taken at
// n, or nil), drops the checkpoints past it and starts a new epoch.
func (s *Session) cut(n int, at *Snapshot) {
	var row []float32
	if at != nil {
		row = at.mtpRow
	}
	if row == nil {
		row = s.mtpRowAt(n - 1)
	}
	s.tokens = s.tokens[:n]
	s.stopLogging()
	s.cutMTP(n, row) // the MTP layer's KV cache rewinds by itself
	s.checkpoints = slices.DeleteFunc(s.checkpoints, func(c *Snapshot) bool { return c.pos > n })
	s.epoch++
	for _, c := range s.checkpoints {
		c.epoch = s.epoch
	}
}

// Fork returns a new session holding this one's first n tokens, at a
// position this one can rewind to (CanRewind): its KV caches share this
// one's chunks (each copies a shared chunk before it writes into it), its
// recurrent states are the copies kept at n (or this one's own, at Len),
// and it keeps this one's checkpoints at or before n. The engine keeps
// finished conversations' sessions and forks the next requests' from
// them, so that several requests share one prompt's prefix, and none
// computes it again.
func (s *Session) Fork(n int) (*Session, error) {
	n = max(n, 0)
	if p := s.RewindPoint(n); p != n {
		return nil, fmt.Errorf("fork at %d: the session keeps no copy there (the deepest before it is at %d)", n, p)
	}
	f := &Session{m: s.m, kv: s.kv, rewindable: s.rewindable, ctx: s.ctx, tokens: slices.Clone(s.tokens[:n]), MaxBatch: s.MaxBatch, logFrom: -1}
	var at *Snapshot
	for _, c := range s.checkpoints {
		if c.pos == n {
			at = c
		}
	}
	for i, st := range s.states {
		fs := st.Fork(n)
		switch {
		case st.Rewindable() || n == 0:
		case n == len(s.tokens):
			fs.Restore(st.Snapshot())
		default:
			fs.Restore(at.copies[i])
		}
		f.states = append(f.states, fs)
	}
	f.mtpLen, f.mtpTrack = s.mtpLen, s.mtpTrack
	f.mtpPend = slices.Clone(s.mtpPend)
	row := s.mtpRowAt(n - 1)
	if at != nil && at.mtpRow != nil {
		row = at.mtpRow
	}
	f.cutMTP(n, row)
	for _, st := range s.mtp {
		f.mtp = append(f.mtp, st.Fork(f.mtpLen))
	}
	for _, c := range s.checkpoints {
		if c.pos <= n {
			// The copies are never written: the fork may hold them too.
			cp := *c
			cp.s, cp.epoch = f, f.epoch
			f.checkpoints = append(f.checkpoints, &cp)
		}
	}
	return f, nil
}

// Memory calls yield with every part of memory the session holds: its KV
// chunks, its recurrent states, its checkpoints' copies, each with an
// identity, so that a caller counting sessions that share parts (Fork)
// counts each once.
func (s *Session) Memory(yield func(id *byte, bytes int64)) {
	for _, st := range slices.Concat(s.states, s.mtp) {
		switch st := st.(type) {
		case *KVCache:
			for _, c := range st.mem {
				yield(&c[0], int64(len(c)))
			}
		case *recurrentState:
			yield(floatID(st.v), st.Bytes())
			// A drafted step's log and its replay's outputs stay allocated
			// after it, for the next one: memory the session holds all the
			// same.
			for _, v := range [][]float32{st.log, st.scratch} {
				if cap(v) > 0 {
					yield(floatID(v), 4*int64(cap(v)))
				}
			}
		}
	}
	if cap(s.mtpPend) > 0 {
		yield(floatID(s.mtpPend), 4*int64(cap(s.mtpPend)))
	}
	for _, c := range s.checkpoints {
		for _, cp := range c.copies {
			if rc, ok := cp.(recurrentCopy); ok {
				yield(floatID(rc), rc.Bytes())
			}
		}
		if len(c.logits) > 0 {
			yield(floatID(c.logits), int64(4*len(c.logits)))
		}
	}
}

// Trim lets go of what only steps use: the recurrent states' logs of a
// drafted step and their replay's outputs, and the spare room of the
// rows that wait for the MTP block. A session kept for later requests
// (the engine's state cache, which counts Memory against its bound) runs
// no step until it is forked, and a fork starts without them; a session
// that steps again allocates them again. Within a drafted step (after
// Speculate, before Keep) it does nothing: Keep needs the logs.
func (s *Session) Trim() {
	if s.logFrom >= 0 {
		return
	}
	for _, st := range s.states {
		if r, ok := st.(*recurrentState); ok {
			r.log, r.logOp, r.scratch = nil, nil, nil
		}
	}
	if cap(s.mtpPend) > len(s.mtpPend) {
		s.mtpPend = append([]float32(nil), s.mtpPend...)
	}
}

// floatID is the identity of a float slice's memory.
func floatID(v []float32) *byte { return (*byte)(unsafe.Pointer(unsafe.SliceData(v))) }

// Points lists the positions the session can be forked or rewound at
// without computing anything again, when it is not Rewindable (which
// can be at any): its checkpoints' and its end.
func (s *Session) Points() []int {
	var ps []int
	for _, c := range s.checkpoints {
		ps = append(ps, c.pos)
	}
	return append(ps, len(s.tokens))
}

// Snapshot copies the session's states at its current position, for
// Restore. A Rewindable session's snapshot copies nothing. It is valid
// until the session next goes back (Rewind or Restore).
func (s *Session) Snapshot() *Snapshot {
	sn := &Snapshot{s: s, pos: len(s.tokens), epoch: s.epoch, copies: make([]StateCopy, len(s.states))}
	if row := s.mtpRowAt(len(s.tokens) - 1); row != nil {
		sn.mtpRow = slices.Clone(row)
	}
	for i, st := range s.states {
		if c := st.Snapshot(); c != nil {
			sn.copies[i] = c
			sn.bytes += c.Bytes()
		}
	}
	return sn
}

// Restore brings the session back to a snapshot taken of it since it last
// went back.
func (s *Session) Restore(sn *Snapshot) error {
	switch {
	case sn.s != s:
		return errors.New("restore: a snapshot of another session")
	case sn.epoch != s.epoch || sn.pos > len(s.tokens):
		return fmt.Errorf("restore: the snapshot at %d is stale: the session went back since", sn.pos)
	case sn.pos == len(s.tokens):
		return nil
	}
	s.restore(sn)
	s.cut(sn.pos, sn)
	return nil
}

// Speculate is Snapshot before a step whose tokens may not all be kept
// (a draft to check): besides the copy, the recurrent states log what
// their layers read in the steps until the session next goes back, so
// that Keep can end the session at any position within them without
// feeding a token again. A Rewindable session copies and logs nothing.
func (s *Session) Speculate() *Snapshot {
	sn := s.Snapshot()
	if s.rewindable {
		return sn
	}
	for _, st := range s.states {
		if r, ok := st.(*recurrentState); ok {
			r.logging, r.log, r.logOp = true, r.log[:0], nil
		}
	}
	sn.logged, s.logFrom = true, len(s.tokens)
	return sn
}

// Keep ends the session at n, a position between a Speculate's snapshot
// sn and Len: a Rewindable session rewinds; any other goes back to sn and
// runs its recurrent layers alone over the logged tokens up to n (a pass
// over each head's state a token, a small part of a step), so the states
// are those the step had at n. Afterwards the session no longer logs.
func (s *Session) Keep(sn *Snapshot, n int) error {
	switch {
	case sn.s != s:
		return errors.New("keep: a snapshot of another session")
	case sn.epoch != s.epoch || n < sn.pos || n > len(s.tokens):
		return fmt.Errorf("keep %d: the snapshot at %d is stale or the position outside it (the session holds %d)", n, sn.pos, len(s.tokens))
	case n == len(s.tokens):
		s.stopLogging()
		return nil
	case s.rewindable:
		return s.Rewind(n)
	case !sn.logged:
		return fmt.Errorf("keep %d: the snapshot at %d was not taken by Speculate", n, sn.pos)
	case n > sn.pos && s.logFrom != sn.pos:
		return fmt.Errorf("keep %d: the session logs no steps from the snapshot at %d", n, sn.pos)
	}
	for _, st := range s.states {
		if r, ok := st.(*recurrentState); ok && n > sn.pos && (r.logOp == nil || len(r.log) < (n-sn.pos)*r.logWidth) {
			return fmt.Errorf("keep %d: a recurrent state logged %d of the %d tokens after %d", n, len(r.log)/max(r.logWidth, 1), n-sn.pos, sn.pos)
		}
	}
	s.restore(sn)
	for _, st := range s.states {
		if r, ok := st.(*recurrentState); ok {
			r.replay(s.m, s.m.opts.Kernels, n-sn.pos)
		}
	}
	s.cut(n, nil)
	return nil
}

// stopLogging ends what Speculate started.
func (s *Session) stopLogging() {
	s.logFrom = -1
	for _, st := range s.states {
		if r, ok := st.(*recurrentState); ok {
			r.logging, r.log = false, r.log[:0]
		}
	}
}

// Checkpoint keeps a copy of the states at the current position, so that
// a later Rewind (a request that shares the tokens up to here) can go
// back to it. It does nothing for a Rewindable session, which needs none;
// beyond maxCheckpoints the shallowest copy goes.
func (s *Session) Checkpoint() {
	if s.rewindable || len(s.tokens) == 0 {
		return
	}
	n := len(s.tokens)
	if i := len(s.checkpoints) - 1; i >= 0 && s.checkpoints[i].pos == n {
		return
	}
	s.checkpoints = append(s.checkpoints, s.Snapshot())
	if len(s.checkpoints) > maxCheckpoints {
		s.checkpoints[0] = nil
		s.checkpoints = s.checkpoints[1:]
	}
}

// DropCheckpoints forgets every copy Checkpoint kept: a session that
// goes back only to its latest copy (a draft model's) keeps one at a time.
func (s *Session) DropCheckpoints() {
	clear(s.checkpoints)
	s.checkpoints = s.checkpoints[:0]
}

// KeepLogits keeps logits, the head's row for the token after the
// session's last position, with the checkpoint there (Checkpoint, called
// first; without one it does nothing). A request whose prompt is exactly
// these tokens (a retried answer, the same question again) then starts
// from the fork there and samples at once: no step, not even for the
// prompt's last token. It is a copy; the row is never written.
func (s *Session) KeepLogits(logits []float32) {
	if i := len(s.checkpoints) - 1; i >= 0 && s.checkpoints[i].pos == len(s.tokens) {
		s.checkpoints[i].logits = slices.Clone(logits)
	}
}

// LogitsAt is the row KeepLogits kept for the token after position n:
// nil when the session keeps none there. The caller must not write it.
func (s *Session) LogitsAt(n int) []float32 {
	for _, c := range s.checkpoints {
		if c.pos == n {
			return c.logits
		}
	}
	return nil
}

// reserve makes room in every state for positions [0, n), of which the
// next step writes those from Len on.
func (s *Session) reserve(n int) {
	for _, st := range s.states {
		st.Reserve(len(s.tokens), n)
	}
}

// Feed runs tokens through the model after those already in the cache and
// returns the logits of the last one: a view into the Model's Runner's
// arena, valid until its next step (the next Feed on any session of the
// model). Feed uses the Model's own Runner: sessions of one model are fed
// one at a time.
func (s *Session) Feed(tokens []int32) ([]float32, error) {
	var logits []float32
	err := s.feed(tokens, false, func(_ int, out []float32) error {
		logits = out
		return nil
	})
	return logits, err
}

// feed checks tokens, reserves the states and runs them in batches on the
// Model's Runner, calling batchDone with the index in tokens of each
// batch's first token and what the step returned (the last logits, or with
// hidden the residual stream of the batch).
func (s *Session) feed(tokens []int32, hidden bool, batchDone func(first int, out []float32) error) error {
	if err := s.checkTokens(tokens); err != nil {
		return err
	}
	s.reserve(len(s.tokens) + len(tokens))
	r := s.m.runner()
	batch := s.m.prefill.g.Tokens
	if s.MaxBatch > 0 {
		batch = min(batch, s.MaxBatch)
	}
	for first := 0; first < len(tokens); {
		n := min(len(tokens)-first, batch)
		f := &r.prefill
		if n == 1 {
			f = &r.decode
		}
		r.one[0] = segment{states: s.states, n: n, pos: len(s.tokens)}
		out := r.step(f, tokens[first:first+n], r.one[:], hidden)
		s.tokens = append(s.tokens, tokens[first:first+n]...)
		if err := batchDone(first, out); err != nil {
			return err
		}
		first += n
	}
	return nil
}

// FillKV appends n positions of random keys and values (unit normal: the
// scale of RMS-normed keys) as token id 0, without running the model: to
// measure decode speed and memory at depths whose prefill would take
// hours. Recurrent states keep what they hold: their cost does not depend
// on the depth. What such a session generates means nothing.
func (s *Session) FillKV(n int, seed uint64) error {
	if len(s.tokens)+n > s.ctx {
		return fmt.Errorf("%w: %d tokens in the cache + %d > context %d", ErrContextFull, len(s.tokens), n, s.ctx)
	}
	s.reserve(len(s.tokens) + n)
	k := s.m.Kernels()
	// A pool of random vectors, taken at shifting offsets: drawing 2 x
	// head_dim normals per head, layer and position would take minutes.
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, st := range s.states {
		kv, ok := st.(*KVCache)
		if !ok {
			continue
		}
		hd := kv.headDim
		pool := make([]float32, 4096+2*hd)
		for i := range pool {
			pool[i] = float32(rng.NormFloat64())
		}
		tmp := newKVScratch(hd)
		for pos := len(s.tokens); pos < len(s.tokens)+n; pos++ {
			for h := range kv.kvHeads {
				o := rng.IntN(4096)
				kv.store(k, h, pos, pool[o:o+hd], pool[o+hd:o+2*hd], &tmp)
			}
		}
	}
	s.tokens = append(s.tokens, make([]int32, n)...)
	return nil
}
