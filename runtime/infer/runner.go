package infer

import (
	"fmt"
	"unsafe"

	"github.com/qwenc/qwenc/kernels"
)

// Runner executes forward steps of one Model: it owns what a step writes
// (the arenas, attention and head scratch, the worker pool and its tasks),
// so a Runner runs one step at a time while the Model stays shared.
type Runner struct {
	m       *Model
	k       kernels.Path
	pool    *kernels.Pool
	decode  frame
	prefill frame
	// The MTP block's frames, made on the first StepMTP, and the rows of
	// hidden state that step hands its HiddenIn op.
	mtpDecode, mtpPrefill frame
	mtpHidden             []float32
	// mtpSeg maps the last MTP step's sequences to its segments (-1: no
	// rows). mtpHead is the MTP head limited to its first mtpVocab rows
	// (Options.MTPVocab), mtpExtra the stop tokens past them, and mtpRows
	// the logits of those rows.
	mtpSeg   []int
	mtpVocab int
	mtpHead  *boundOp
	mtpExtra []int32
	mtpRows  []float32
	// work is per-worker attention scratch.
	work  []workspace
	tasks tasks
	cur   step // the step being run
	// head is the scratch of the LM head over several rows (HeadLogits and
	// batched steps), allocated on first use.
	head headScratch
	// A step's sequences (one for Session.Feed, several for Step) and the
	// rows they own, reused from step to step.
	segs        []segment
	rowPos      []int
	one         [1]segment
	batchTokens []int32
	// Step's logits: row logitRow[i] of batchLogits for sequence i; gather
	// holds the sequences' last hidden rows.
	batchLogits []float32
	logitRow    []int
	gather      []float32
	// Route's scratch: each expert's probability and running row.
	moeProb []float64
	moeNext []int32
}

// frame is a program with the Runner's arena for it.
type frame struct {
	*program
	arena []float32
}

// segment is one session's rows in a step: rows [row0, row0+n) are its
// tokens at positions pos, pos+1, ..., and states its LayerStates.
type segment struct {
	states    []LayerState
	row0, n   int
	pos       int
	wantLogit bool
	last      int       // the logits of this many last rows (1 or more)
	rows      []int32   // the head rows asked for, or nil: all
	rowLogits []float32 // their logits
}

// NewRunner makes a Runner for the model with its own worker pool and
// arenas (the model's planned sizes).
func (m *Model) NewRunner(opts Options) *Runner {
	threads := threadsOf(opts)
	r := &Runner{m: m, k: opts.Kernels.Resolve(), pool: kernels.NewPool(threads), mtpVocab: opts.MTPVocab}
	r.decode = frame{m.decode, alignedFloats(m.decode.size)}
	r.prefill = frame{m.prefill, alignedFloats(m.prefill.size)}
	r.work = make([]workspace, threads)
	for w := range r.work {
		r.work[w] = newWorkspace(&m.Config)
	}
	r.tasks.attn.minSpan = attnMinSpan
	r.rowPos = make([]int, m.prefill.g.Tokens)
	r.moeProb = make([]float64, m.Config.MoE.Experts)
	r.moeNext = make([]int32, m.Config.MoE.Experts)
	return r
}

// Close stops the Runner's workers.
func (r *Runner) Close() { r.pool.Close() }

// Model is the model the Runner runs.
func (r *Runner) Model() *Model { return r.m }

// alignedFloats allocates n float32s starting on a 64-byte boundary, so
// every 64-aligned arena offset is cache-line aligned in memory.
func alignedFloats(n int) []float32 {
	buf := make([]float32, n+16)
	skip := 0
	for uintptr(unsafe.Pointer(&buf[skip]))%64 != 0 {
		skip++
	}
	return buf[skip : skip+n : skip+n]
}

// view returns f32 tensor t of a frame for rows rows.
func (f *frame) view(t, rows int) []float32 {
	o := f.offset[t]
	return f.arena[o : o+rows*f.g.Tensors[t].Cols]
}

// rowBytes returns tensor t of a frame for rows rows as bytes, whether it
// holds f32 or quantized rows.
func (f *frame) rowBytes(t, rows int) []byte {
	if f.g.Tensors[t].Quantized {
		return f.quantView(t, rows)
	}
	v := f.view(t, rows)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// quantView returns quantized tensor t of a frame for rows rows.
func (f *frame) quantView(t, rows int) []byte {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f.arena))), 4*len(f.arena))
	o := 4 * f.offset[t]
	return b[o : o+rows*kernels.QActRowBytes(f.g.Tensors[t].Cols)]
}

// checkTokens refuses ids outside the vocabulary and a step that would pass
// the session's context.
func (s *Session) checkTokens(tokens []int32) error {
	if len(tokens) == 0 {
		return fmt.Errorf("feed: no tokens")
	}
	if len(s.tokens)+len(tokens) > s.ctx {
		return fmt.Errorf("%w: %d tokens in the cache + %d new > context %d", ErrContextFull, len(s.tokens), len(tokens), s.ctx)
	}
	for _, id := range tokens {
		if id < 0 || int(id) >= s.m.Config.Vocab {
			return fmt.Errorf("feed: token id %d outside the vocabulary [0, %d)", id, s.m.Config.Vocab)
		}
	}
	return nil
}
