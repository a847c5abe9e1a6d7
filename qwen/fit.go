package qwen

import (
	"fmt"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/mem"
	"github.com/qwenc/qwenc/runtime/infer"
)

// ContextError is a context that cannot be had: outside the model's range
// (Need is 0), or whose sequences' states (the attention layers' KV
// caches, and the recurrent layers' fixed-size states) need more memory
// than is available.
type ContextError struct {
	Context  int // asked for; 0 when the default did not fit either
	Max      int // the model's maximum
	Parallel int // conversations that each hold one
	// Need and Available are bytes: the states of Parallel conversations
	// of Context tokens (or of the first 256-token KV chunk each, when the
	// default did not fit), and the memory available.
	Need, Available int64
}

func (e *ContextError) Error() string {
	conv := ""
	if e.Parallel > 1 {
		conv = fmt.Sprintf(" for %d conversations", e.Parallel)
	}
	switch {
	case e.Need == 0:
		return fmt.Sprintf("context %d: want 1 to %d tokens (the model's maximum context)", e.Context, e.Max)
	case e.Context == 0:
		return fmt.Sprintf("a %d-token context%s needs %d MB of sequence state, more than the %d MB of memory available",
			format.KVChunkTokens, conv, e.Need/1e6, e.Available/1e6)
	}
	return fmt.Sprintf("a context of %d tokens%s needs %d MB of sequence state (KV cache and recurrent state), more than the %d MB of memory available",
		e.Context, conv, e.Need/1e6, e.Available/1e6)
}

// fitContext is the context of each of parallel conversations: want if
// set, or by default the model's maximum. The KV caches grow with a
// conversation, but a context it could never hold is refused up front
// rather than failing mid-answer; the default is lowered to what fits
// instead, and note says so. What a conversation holds is what the
// model's states say (infer.Model.SequenceBytes): a recurrent layer's
// state is the same at any length, a KV cache grows by chunks.
func fitContext(m *infer.Model, want int, set bool, parallel int, kv format.KVType) (n int, note string, err error) {
	max := m.Config.MaxContext()
	n = max
	if set {
		if want < 1 || want > max {
			return 0, "", &ContextError{Context: want, Max: max}
		}
		n = want
	}
	avail, known := mem.Available()
	need := int64(parallel) * m.SequenceBytes(n, kv)
	if !known || need <= avail {
		return n, "", nil
	}
	if set {
		return 0, "", &ContextError{Context: n, Max: max, Parallel: parallel, Need: need, Available: avail}
	}
	// Whole KV chunks over the fixed part: the longest context whose
	// states fit.
	fixed := m.SequenceBytes(0, kv)
	first := m.SequenceBytes(format.KVChunkTokens, kv)
	perChunk := first - fixed
	if int64(parallel)*first > avail {
		return 0, "", &ContextError{Max: max, Parallel: parallel, Need: int64(parallel) * first, Available: avail}
	}
	fit := int((avail/int64(parallel)-fixed)/perChunk) * format.KVChunkTokens
	conv := ""
	if parallel > 1 {
		conv = fmt.Sprintf(" for %d conversations", parallel)
	}
	return fit, fmt.Sprintf("context lowered from %d to %d tokens: that is what %d MB of available memory holds%s",
		n, fit, avail/1e6, conv), nil
}
