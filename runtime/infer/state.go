package infer

import (
	"fmt"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/graph"
	"github.com/qwenc/qwenc/kernels"
)

// LayerState is what one sequence keeps of one part of the model between
// steps, one per graph.State of the model's forward step: an attention
// layer's keys and values (KVCache), a recurrent layer's fixed-size state
// (recurrentState). A Session holds one of each; the ops that name a
// state read and write the session's.
type LayerState interface {
	// Bytes is the memory the state holds now (with what it shares with
	// others: Fork).
	Bytes() int64
	// Reserve makes room for positions [0, to) before a step writes
	// positions [from, to).
	Reserve(from, to int)
	// Fork returns a new state holding this one's first n positions,
	// sharing what it can (a KV cache's chunks, copied when the new state
	// first writes into one); a recurrent state, which holds only its
	// last position, comes back empty, for the session to restore.
	Fork(n int) LayerState
	// Rewindable reports whether the state can go back to any earlier
	// position by itself (an attention KV cache); one that cannot goes
	// back only to a copy taken there (Snapshot).
	Rewindable() bool
	// Snapshot copies what Restore needs to bring the state back to now;
	// nil for a Rewindable state, which needs no copy.
	Snapshot() StateCopy
	// Restore brings the state back to a copy Snapshot took of it, or
	// with nil to its empty state (before the first position).
	Restore(StateCopy)
	// save writes what the state holds of its first n positions to a
	// session file, and load reads it back into an empty state
	// (persist.go); saveCopy and loadCopy do the same for one of its
	// copies (nil for a Rewindable state).
	save(e *sessEncoder, n int)
	load(d *sessDecoder, n int) error
	saveCopy(e *sessEncoder, c StateCopy)
	loadCopy(d *sessDecoder) (StateCopy, error)
}

// StateCopy is a LayerState's copy of itself, for its own Restore.
type StateCopy interface {
	// Bytes is the memory the copy holds.
	Bytes() int64
}

// checkStates refuses a model whose forward step declares a state this
// runtime does not keep, at Open rather than at a session's start.
func checkStates(states []graph.State) error {
	for i := range states {
		switch s := &states[i]; s.Kind {
		case graph.AttentionKV:
			if s.KVHeads <= 0 || s.HeadDim <= 0 {
				return fmt.Errorf("layer %d: attention state of %d heads x %d", s.Layer, s.KVHeads, s.HeadDim)
			}
		case graph.Recurrent:
			if s.Floats <= 0 {
				return fmt.Errorf("layer %d: recurrent state of %d values", s.Layer, s.Floats)
			}
		default:
			return fmt.Errorf("layer %d: state %s: this runtime does not keep it", s.Layer, s.Kind)
		}
	}
	return nil
}

// newLayerState makes the empty state of s for a sequence whose attention
// layers keep their keys and values in kv.
func newLayerState(s *graph.State, kv format.KVType) (LayerState, error) {
	switch s.Kind {
	case graph.AttentionKV:
		return newKVCache(s, kv), nil
	case graph.Recurrent:
		return &recurrentState{v: make([]float32, s.Floats)}, nil
	}
	return nil, fmt.Errorf("layer %d: state %s: this runtime does not keep it", s.Layer, s.Kind)
}

// recurrentState is a graph.Recurrent state: a fixed number of f32 values
// the ops of its layer read and overwrite each step, zero before the
// first position. It holds no earlier position, so it goes back only to a
// copy.
type recurrentState struct {
	v []float32
	// While logging (Session.Speculate), the op that writes v appends
	// what it reads of each token to log, a row of logWidth per token,
	// and names itself in logOp: Session.Keep then brings v from a copy
	// taken before the step to any position within it, by running that
	// op again over the first rows (replay), with no other layer's work.
	logging  bool
	log      []float32
	logWidth int
	logOp    *boundOp
	scratch  []float32 // the replay's outputs, which it drops
}

// logRows appends a step's rows of what the state's op reads (width each,
// ld apart, from first) to the log.
func (r *recurrentState) logRows(op *boundOp, width int, src []float32, ld, rows int) {
	r.logOp, r.logWidth = op, width
	for t := range rows {
		r.log = append(r.log, src[t*ld:t*ld+width]...)
	}
}

// replay runs the logged op again over the first n logged tokens, from
// the state the log started at (restored first; Session.Keep checked
// that the log holds them).
func (r *recurrentState) replay(m *Model, k kernels.Path, n int) {
	if n == 0 {
		return
	}
	switch r.logOp.Kind {
	case graph.CausalConv:
		replayCausalConv(r, k, n)
	case graph.GatedDeltaRule:
		replayGatedDeltaRule(r, m, k, n)
	default:
		panic(fmt.Sprintf("infer: replay: op %s logs no steps", r.logOp.Kind))
	}
}

// grow returns the state's scratch of at least n floats.
func (r *recurrentState) grow(n int) []float32 {
	if cap(r.scratch) < n {
		r.scratch = make([]float32, n)
	}
	return r.scratch[:n]
}

func (r *recurrentState) Bytes() int64     { return 4 * int64(len(r.v)) }
func (r *recurrentState) Reserve(_, _ int) {}
func (r *recurrentState) Rewindable() bool { return false }
func (r *recurrentState) Fork(int) LayerState {
	return &recurrentState{v: make([]float32, len(r.v))}
}

func (r *recurrentState) Snapshot() StateCopy {
	return recurrentCopy(append([]float32(nil), r.v...))
}

func (r *recurrentState) Restore(c StateCopy) {
	if c == nil {
		clear(r.v)
		return
	}
	copy(r.v, c.(recurrentCopy))
}

// recurrentCopy is a recurrentState's values at a position.
type recurrentCopy []float32

func (c recurrentCopy) Bytes() int64 { return 4 * int64(len(c)) }
