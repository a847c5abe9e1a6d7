package infer

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/qwenc/qwenc/format"
)

// ErrContextFull is returned when a step would go past the session's
// context length.
var ErrContextFull = errors.New("context full")

// Session is one sequence: the tokens whose keys and values are in its KV
// cache. Tokens are fed in steps: prompts in batches of up to the compiled
// max-prefill tokens, then one token at a time.
type Session struct {
	m      *Model
	KV     *KVCache
	ctx    int
	tokens []int32
	// MaxBatch caps the tokens of one prefill step below the compiled
	// maximum (tests use it to check that batching does not change results).
	MaxBatch int
}

// NewSession starts an empty sequence with an f16 KV cache that may grow
// to ctx positions (0: the model's maximum context).
func (m *Model) NewSession(ctx int) (*Session, error) { return m.NewSessionKV(ctx, format.KVF16) }

// NewSessionKV is NewSession with a KV cache of type kv.
func (m *Model) NewSessionKV(ctx int, kv format.KVType) (*Session, error) {
	if ctx <= 0 {
		ctx = m.Config.MaxContext()
	}
	if ctx > m.Config.MaxContext() {
		return nil, fmt.Errorf("context %d is larger than the model's maximum %d", ctx, m.Config.MaxContext())
	}
	return &Session{m: m, KV: NewKVCache(&m.Config, kv), ctx: ctx}, nil
}

// Len is the number of tokens in the cache.
func (s *Session) Len() int { return len(s.tokens) }

// Ctx is the session's context length.
func (s *Session) Ctx() int { return s.ctx }

// Tokens returns the tokens in the cache (do not modify).
func (s *Session) Tokens() []int32 { return s.tokens }

// Rewind forgets every token from position n on; the next Feed overwrites
// their cache rows. Chunks stay allocated.
func (s *Session) Rewind(n int) {
	if n < len(s.tokens) {
		s.tokens = s.tokens[:max(n, 0)]
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

// feed checks tokens, reserves the cache and runs them in batches on the
// Model's Runner, calling batchDone with the index in tokens of each
// batch's first token and what the step returned (the last logits, or with
// hidden the residual stream of the batch).
func (s *Session) feed(tokens []int32, hidden bool, batchDone func(first int, out []float32) error) error {
	if err := s.checkTokens(tokens); err != nil {
		return err
	}
	s.KV.Reserve(len(s.tokens) + len(tokens))
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
		r.one[0] = segment{kv: s.KV, n: n, pos: len(s.tokens)}
		out := r.step(f, tokens[first:first+n], r.one[:], hidden)
		s.tokens = append(s.tokens, tokens[first:first+n]...)
		if err := batchDone(first, out); err != nil {
			return err
		}
		first += n
	}
	return nil
}

// KVBytesFor is the KV cache of type kv for a full context, to refuse a
// context the machine cannot hold before allocating anything.
func (m *Model) KVBytesFor(ctx int, kv format.KVType) int64 {
	return int64(format.KVChunks(ctx)) * int64(m.Config.Layers) * m.Config.KVChunkBytes(kv)
}

// FillKV appends n positions of random keys and values (unit normal: the
// scale of RMS-normed keys) as token id 0, without running the model: to
// measure decode speed and memory at depths whose prefill would take
// hours. What such a session generates means nothing.
func (s *Session) FillKV(n int, seed uint64) error {
	if len(s.tokens)+n > s.ctx {
		return fmt.Errorf("%w: %d tokens in the cache + %d > context %d", ErrContextFull, len(s.tokens), n, s.ctx)
	}
	s.KV.Reserve(len(s.tokens) + n)
	c := &s.m.Config
	k := s.m.Kernels()
	// A pool of random vectors, taken at shifting offsets: drawing 2 x
	// head_dim normals per head, layer and position would take minutes.
	rng := rand.New(rand.NewPCG(seed, 0))
	pool := make([]float32, 4096+2*c.HeadDim)
	for i := range pool {
		pool[i] = float32(rng.NormFloat64())
	}
	tmp := newKVScratch(c)
	for pos := len(s.tokens); pos < len(s.tokens)+n; pos++ {
		for l := range c.Layers {
			for h := range c.KVHeads {
				o := rng.IntN(4096)
				s.KV.store(k, l, h, pos, pool[o:o+c.HeadDim], pool[o+c.HeadDim:o+2*c.HeadDim], &tmp)
			}
		}
	}
	s.tokens = append(s.tokens, make([]int32, n)...)
	return nil
}
