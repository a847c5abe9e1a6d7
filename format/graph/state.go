package graph

import (
	"fmt"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/wtype"
)

// StateKind is what a layer keeps of each sequence from one step to the
// next.
type StateKind uint8

const (
	// AttentionKV is an attention layer's keys and values: one row per
	// position so far, in chunks of format.KVChunkTokens positions that
	// are allocated as the sequence reaches them. It can go back to any
	// earlier position by itself: the rows past it are simply written
	// again.
	AttentionKV StateKind = iota + 1
	// Recurrent is a fixed number of f32 values that each step reads and
	// overwrites (a causal convolution's last inputs, a linear attention's
	// matrix): its size does not grow with the sequence, but it holds no
	// earlier position, so going back needs a copy taken there.
	Recurrent
)

func (k StateKind) String() string {
	switch k {
	case AttentionKV:
		return "attention_kv"
	case Recurrent:
		return "recurrent"
	}
	return fmt.Sprintf("state(%d)", uint8(k))
}

// State is one part of what a sequence keeps between steps: ops that
// carry its index (Op.State) read and write it, each sequence its own.
type State struct {
	Kind  StateKind
	Layer int
	// KVHeads and HeadDim shape an AttentionKV state.
	KVHeads, HeadDim int
	// Floats is a Recurrent state's size in f32 values.
	Floats int
}

// Bytes is the memory the state holds for a sequence of n positions,
// with KV cache type kv: what the runtime allocates, to the byte.
func (s *State) Bytes(n int, kv format.KVType) int64 {
	switch s.Kind {
	case AttentionKV:
		return int64(KVChunks(n)) * KVChunkBytes(s.KVHeads, s.HeadDim, kv)
	case Recurrent:
		return 4 * int64(s.Floats)
	}
	return 0
}

// Rewindable reports whether the state can go back to an earlier
// position by itself.
func (s *State) Rewindable() bool { return s.Kind == AttentionKV }

// AddState adds a state and returns its index, for the ops that use it.
func (g *Graph) AddState(s State) int {
	g.States = append(g.States, s)
	return len(g.States) - 1
}

// KVChunks is the number of chunks a sequence of n positions occupies.
func KVChunks(n int) int { return (n + format.KVChunkTokens - 1) / format.KVChunkTokens }

// KVHeadChunkBytes is the size of one KV head's chunk of
// format.KVChunkTokens positions (K and V). The runtime stores it
// tile-major (K as [256, head_dim], V as [head_dim, 256], V padded to
// whole 32-row tiles when head_dim is not a multiple of 32). In q8 the V
// scales come first, then K as a q8 matrix of head_dim rounded up to 32
// columns, and V as a q8 matrix; every part stays 64-byte aligned.
func KVHeadChunkBytes(headDim int, t format.KVType) int64 {
	const n = format.KVChunkTokens
	if t == format.KVQ8 {
		kCols := format.Tiles(headDim) * format.TileRows
		k := int64(format.Tiles(n)) * int64(wtype.Q8.TileBytes(kCols))
		v := int64(format.Tiles(headDim)) * int64(wtype.Q8.TileBytes(n))
		return n*4 + k + v
	}
	return 2 * int64(format.TileMajorElems(n, headDim)+format.TileMajorElems(headDim, n))
}

// KVChunkBytes is the size of one chunk of one layer, every KV head's K
// and V.
func KVChunkBytes(kvHeads, headDim int, t format.KVType) int64 {
	return int64(kvHeads) * KVHeadChunkBytes(headDim, t)
}

// SequenceBytes is what one sequence of n positions holds in all the
// states: the per-sequence memory a model needs beside its weights and
// arenas.
func SequenceBytes(states []State, n int, kv format.KVType) int64 {
	var b int64
	for i := range states {
		b += states[i].Bytes(n, kv)
	}
	return b
}

// ReportStates sizes what one sequence of each length in seqs holds in
// these states, with KV cache type kv: inspect's table, and to the byte
// what a session allocates.
func ReportStates(states []State, seqs []int, kv format.KVType) format.KVReport {
	r := format.KVReport{Type: kv.String(), ChunkTokens: format.KVChunkTokens, BySeq: []format.KVForSeq{}}
	recurrent := map[int]bool{} // a layer may keep several recurrent states
	for i := range states {
		switch s := &states[i]; s.Kind {
		case AttentionKV:
			r.AttentionLayers++
			r.ChunkBytesPerLayer = uint64(KVChunkBytes(s.KVHeads, s.HeadDim, kv))
		case Recurrent:
			recurrent[s.Layer] = true
			r.RecurrentBytes += uint64(s.Bytes(0, kv))
		}
	}
	r.RecurrentLayers = len(recurrent)
	for _, n := range seqs {
		chunks := KVChunks(n)
		r.BySeq = append(r.BySeq, format.KVForSeq{Seq: n, Chunks: chunks, PerLayerBytes: uint64(chunks) * r.ChunkBytesPerLayer,
			TotalBytes: uint64(SequenceBytes(states, n, kv))})
	}
	return r
}
