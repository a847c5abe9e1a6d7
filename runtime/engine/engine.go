package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/runtime/infer"
	"github.com/qwenc/qwenc/runtime/sampling"
)

// Options configure an Engine.
type Options struct {
	// Parallel is how many conversations decode together (default 4).
	Parallel int
	// Queue is how many requests may wait for a free slot; beyond it
	// Submit returns ErrBusy (default 4 x Parallel).
	Queue int
	// Ctx is each conversation's context length (default: the model's
	// maximum).
	Ctx int
	// Chunk is the most prompt tokens a step prefills, for all the new
	// prompts together, while other conversations are decoding (default
	// 128): long or many prompts delay the running streams by one chunk
	// per step, not by the whole prefill. With nothing decoding, a step
	// takes a whole prefill batch.
	Chunk int
	// CacheBytes bounds the KV caches kept of finished conversations for
	// prefix reuse (default 1 GiB; 0 keeps the default, < 0 none).
	CacheBytes int64
	// CacheDir, when not empty, is a directory where the conversations'
	// states that CacheBytes has no room for go, within CacheDiskBytes
	// (0: a quarter of the filesystem's free space counting the files
	// already there, at most 64 GiB; the least recently used file goes first), for later
	// requests to read back; a directory an earlier run of the same model
	// left serves this one (diskCache).
	CacheDir       string
	CacheDiskBytes int64
	// Runner configures the worker threads and kernels.
	Runner infer.Options
	// Drafter, when not nil, is a smaller model of the same vocabulary
	// whose greedy guesses the requests that ask (Draft.Model) have
	// checked. The engine runs it on a Runner of its own; the model stays
	// the caller's.
	Drafter *infer.Model
	// CheckpointEvery is how many prompt tokens a model whose layers
	// cannot go back by themselves may compute between two copies of its
	// states, beside Request.Marks (default 1024; < 0: none).
	CheckpointEvery int
	// MTP runs the model's multi-token-prediction block beside it, so
	// that requests may draft with it (Draft.MTP): every session keeps
	// its MTP rows up to date (one more layer's work a token), so that a
	// cached prefix has them too. The model must have an MTP block.
	MTP bool
	// Log takes the engine's logs: each request's start and end at debug
	// level, a failed step at error level (nil: none). Nothing of a
	// request's text is logged.
	Log *slog.Logger
}

// Request is one generation.
type Request struct {
	Prompt []int32
	Params sampling.Params
	// MaxTokens < 0 generates until a stop token or the end of the
	// context; 0 evaluates the prompt alone, its KV cache kept for later
	// requests.
	MaxTokens int
	Stop      []int32 // token ids that end generation; they are not emitted
	// Bias is added to the logits of its tokens before the sampler
	// (OpenAI's logit_bias); the log-probabilities are the model's,
	// without it. Ids are in the tokenizer's vocabulary.
	Bias map[int32]float32
	// TopLogprobs < 0 asks for no log-probabilities; 0 for the chosen
	// token's; n > 0 also for the n most likely tokens at each step.
	TopLogprobs int
	// PromptLogits asks for a copy of the logits of the prompt's last
	// position, before any sampling, in the first event.
	PromptLogits bool
	// KV is the conversation's KV cache type.
	KV format.KVType
	// Rows, with PromptLogits, asks for just these rows of the LM head
	// (infer.Seq.Rows): a reranker's "yes" and "no".
	Rows []int32
	// OneShot, with MaxTokens 0, says the prompt's cache is of no use
	// once the request has its output (an embedding, a score): it is not
	// kept for later requests, but passed on to the one-shot requests
	// running after it (see reuse).
	OneShot bool
	// Draft drafts tokens to check in each decode step (draft.go); the
	// text is the same as without.
	Draft Draft
	// Constraint, when not nil, holds the tokens to a grammar: only those
	// it allows are sampled, and the generation ends (StopEOS) when it is
	// complete. It is this request's alone.
	Constraint Constraint
	// Marks are positions in Prompt where a later request is likely to
	// part from this one (the ends of the chat's messages): a model whose
	// layers cannot go back by themselves keeps a copy of its states
	// there, for the state cache to start such a request from.
	Marks []int
}

// Constraint is a grammar followed through a generation.
type Constraint interface {
	// Allow sets the logits of the tokens that may not come next to -Inf.
	Allow(logits []float32)
	// Accept takes the token sampled.
	Accept(id int32) error
	// Done reports whether the text is complete: nothing may follow.
	Done() bool
	// Prefix reports how many of ids, from the first, Accept would take
	// one after the other; it changes nothing. Drafted tokens past it are
	// not checked.
	Prefix(ids []int32) int
}

// StopReason says why a generation ended: one set of reasons for every
// front end, the Go API, the terminal and the HTTP protocols.
type StopReason string

const (
	StopEOS       StopReason = "eos"       // a stop token came: the model ended its answer
	StopString    StopReason = "stop"      // a stop string came (the text layer above the engine finds them)
	StopLength    StopReason = "length"    // MaxTokens were generated, or the prompt alone was asked for
	StopContext   StopReason = "ctx"       // the context is full
	StopInterrupt StopReason = "interrupt" // the request's context ended (Ctrl-C, a client that left)
	StopShutdown  StopReason = "shutdown"  // the engine shut down
	StopError     StopReason = "error"     // the engine failed to run it (Event.Err says why); the others go on
)

// TokenLogprob is a token and its log-probability under the model (before
// sampling's penalties and temperature).
type TokenLogprob struct {
	Token   int32
	Logprob float32
}

// Event is one generated token, or with Done the end of the generation.
type Event struct {
	Token   int32
	Logprob float32        // with Request.TopLogprobs >= 0
	Top     []TokenLogprob // with Request.TopLogprobs > 0
	Time    time.Time
	// PromptLogits is the first event's, with Request.PromptLogits.
	PromptLogits []float32
	Done         bool
	Reason       StopReason // with Done
	Err          error      // with Done and StopError: what failed
	Usage        Usage      // with Done
}

// Usage counts a request's tokens and times.
type Usage struct {
	PromptTokens     int
	CachedTokens     int // prompt tokens whose KV came from an earlier conversation
	CompletionTokens int
	Queued           time.Duration // from Submit to the first step
	Prefill          time.Duration // from the first step to the prompt's last
	TimeToFirstToken time.Duration // from Submit
	Total            time.Duration
	// KVTokens and KVBytes are the conversation's KV cache at the end:
	// the positions it holds and the bytes of its chunks.
	KVTokens int
	KVBytes  int64
	// Drafted is the drafted tokens whose rows were sampled (none past
	// the row that ended the answer), Accepted those the sample matched.
	Drafted, Accepted int
}

// PromptTooLongError is a prompt longer than the context.
type PromptTooLongError struct {
	Index           int // the request's, of those submitted together
	Tokens, Context int
}

func (e *PromptTooLongError) Error() string {
	return fmt.Sprintf("the prompt has %d tokens, more than the context of %d", e.Tokens, e.Context)
}

// Stats is a snapshot of the engine's state.
type Stats struct {
	Active, Queued int
	KVBytes        int64 // caches of active conversations
	CachedBytes    int64 // caches kept for prefix reuse, and one-shot requests' to pass on
	// DecodeSteps counts the steps that decoded since New, and Decoded
	// the conversations they decoded, summed: Decoded / DecodeSteps is
	// the mean decode batch, how well concurrent requests share steps.
	DecodeSteps, Decoded int64
	// PrefillSteps counts the steps that prefilled prompts, and
	// Prefilled the prompts (or chunks of them) they took, summed:
	// Prefilled / PrefillSteps is the mean prefill batch, how well
	// prompts (an embedding request's inputs, several requests') share
	// steps.
	PrefillSteps, Prefilled int64
	// CacheHits counts the conversations that started from a kept
	// session (at a prefix of theirs), CacheMisses those that found none,
	// and CacheEvictions the kept sessions dropped for room.
	CacheHits, CacheMisses, CacheEvictions int64
	// With Options.CacheDir: DiskHits counts the conversations that
	// started from a state read back from disk, DiskWrites the states
	// written there, DiskEvictions the files removed for room,
	// DiskErrors the states that could not be written or read back
	// (each logged); DiskBytes is what the files hold and DiskBound
	// their bound.
	DiskHits, DiskWrites, DiskEvictions, DiskErrors, DiskBytes, DiskBound int64
}

var (
	// ErrBusy is returned when every slot is taken and the queue is full.
	ErrBusy = errors.New("too many requests: every slot is busy and the queue is full")
	// ErrClosed is returned after Shutdown. Its text names no server:
	// the engine runs in programs that have none, and the server says
	// its own.
	ErrClosed = errors.New("the model is shut down: it takes no more requests")
	// ErrCacheDirBusy is New's error when another engine holds the
	// model's state cache directory (Options.CacheDir).
	ErrCacheDirBusy = errors.New("the state cache directory is another engine's")
)

// Engine runs generations on one model. Submit and Stats may be called
// from any goroutine; one goroutine of the engine runs the steps.
type Engine struct {
	m    *infer.Model
	r    *infer.Runner
	opts Options
	// rewindable says the model's sessions go back anywhere by
	// themselves: they need no copies of their states.
	rewindable bool
	log        *slog.Logger
	ids        atomic.Int64 // the last request's number, for the logs
	// dr runs the draft model (nil: none); the loop owns it and ds, the
	// state of its drafting.
	dr *infer.Runner
	ds *modelDrafts
	// disk is the state cache's tier on disk (nil: none); the loop owns
	// it but for its counts.
	disk *diskCache

	mu       sync.Mutex
	queue    []*job
	closing  bool
	wake     chan struct{} // cap 1: something was queued or cancelled
	stop     chan struct{} // closed when the grace period ends
	stopOnce sync.Once
	done     chan struct{} // closed when the loop has exited

	active      atomic.Int32
	kvBytes     atomic.Int64
	cachedBytes atomic.Int64
	// The state cache's counts, as the loop last copied them.
	cacheHits, cacheMisses, cacheEvictions atomic.Int64
	decodeSteps                            atomic.Int64
	decoded                                atomic.Int64
	prefills                               atomic.Int64
	prefilled                              atomic.Int64
	// clearCache asks the loop, which owns the prefix cache, to empty it
	// before it admits anything more.
	clearCache atomic.Bool
}

// New starts an engine on m. It owns a Runner of its own; Shutdown stops
// it. The model stays the caller's.
func New(m *infer.Model, o Options) (*Engine, error) {
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if o.Queue <= 0 {
		o.Queue = 4 * o.Parallel
	}
	if o.Ctx <= 0 {
		o.Ctx = m.Config.MaxContext()
	}
	if o.Ctx > m.Config.MaxContext() {
		return nil, fmt.Errorf("context %d is larger than the model's maximum %d", o.Ctx, m.Config.MaxContext())
	}
	if o.Chunk <= 0 {
		o.Chunk = 128
	}
	if o.CheckpointEvery == 0 {
		o.CheckpointEvery = 1024
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.MTP && !m.HasMTP() {
		return nil, errors.New("MTP drafts: the model has no MTP block (its file was compiled without one)")
	}
	o.Chunk = min(o.Chunk, m.MaxPrefill())
	switch {
	case o.CacheBytes == 0:
		o.CacheBytes = 1 << 30
	case o.CacheBytes < 0:
		o.CacheBytes = 0
	}
	if d := o.Drafter; d != nil {
		switch {
		case d.Config.Embedding:
			return nil, errors.New("the draft model is an embedding model: it has no head to guess tokens with")
		case d.Config.Vocab != m.Config.Vocab:
			return nil, fmt.Errorf("the draft model's vocabulary is %d tokens, the model's %d: a draft model must share the vocabulary", d.Config.Vocab, m.Config.Vocab)
		case d.Config.MaxContext() < o.Ctx:
			return nil, fmt.Errorf("the draft model's context is at most %d tokens, less than the conversations' %d", d.Config.MaxContext(), o.Ctx)
		}
	}
	// The disk tier first: a runner once made has threads to stop.
	var disk *diskCache
	if o.CacheDir != "" {
		d, err := openDisk(m, o.Ctx, o.MTP, o.CacheDir, o.CacheDiskBytes, o.Log)
		if err != nil {
			return nil, err
		}
		disk = d
	}
	e := &Engine{
		m: m, r: m.NewRunner(o.Runner), opts: o, log: o.Log, rewindable: m.Rewindable(), disk: disk,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	if o.Drafter != nil {
		e.dr = o.Drafter.NewRunner(o.Runner)
		e.ds = newModelDrafts(e.dr)
	}
	go e.loop()
	return e, nil
}

// Model is the model the engine runs.
func (e *Engine) Model() *infer.Model { return e.m }

// Options are the engine's options, defaults filled in.
func (e *Engine) Options() Options { return e.opts }

// Submit queues a request and returns its stream of events. It fails at
// once for a prompt the context cannot hold, ErrBusy when the queue is
// full, and ErrClosed after Shutdown. When ctx ends, the generation stops
// within one step with StopInterrupt.
func (e *Engine) Submit(ctx context.Context, req Request) (*Stream, error) {
	ss, err := e.SubmitAll(ctx, []Request{req})
	if err != nil {
		return nil, err
	}
	return ss[0], nil
}

// MaxScoring is how many prompt-only requests (MaxTokens 0: embeddings,
// scores) may run at once, apart from the conversations: they hold a KV
// cache only as long as their prompt, for one pass, and the more share a
// step the better the weights are reused.
const MaxScoring = 64

// MaxQueuedScoring bounds the prompt-only requests waiting; beyond it
// SubmitAll fails with ErrBusy. A caller with more inputs submits them as
// earlier ones finish, as package qwen does.
const MaxQueuedScoring = 4096

// Check reports what SubmitAll would refuse of these requests whatever
// the engine's load: an empty prompt, one longer than the context, a
// token outside the vocabulary, a KV cache type the runtime lacks. A
// caller that submits a batch in parts checks it whole first, so that it
// fails before any part runs, with the index in the whole batch.
func (e *Engine) Check(reqs []Request) error {
	for i := range reqs {
		req := &reqs[i]
		if len(req.Prompt) == 0 {
			return fmt.Errorf("request %d: the prompt is empty", i)
		}
		if len(req.Prompt) > e.opts.Ctx {
			return &PromptTooLongError{Index: i, Tokens: len(req.Prompt), Context: e.opts.Ctx}
		}
		for _, id := range req.Prompt {
			if id < 0 || int(id) >= e.m.Config.Vocab {
				return fmt.Errorf("request %d: token id %d outside the vocabulary [0, %d)", i, id, e.m.Config.Vocab)
			}
		}
		if req.KV != format.KVF16 && req.KV != format.KVQ8 {
			return fmt.Errorf("request %d: KV cache type %v: want f16 or q8", i, req.KV)
		}
		if req.Draft.Model > 0 && e.dr == nil {
			return fmt.Errorf("request %d: drafts from a draft model, but the engine has none", i)
		}
		switch {
		case req.Draft.MTP < 0:
			return fmt.Errorf("request %d: Draft.MTP %d: want 0 or more", i, req.Draft.MTP)
		case req.Draft.MTP > 0 && !e.m.HasMTP():
			return fmt.Errorf("request %d: drafts from the model's MTP head, but the model has none", i)
		case req.Draft.MTP > 0 && !e.opts.MTP:
			return fmt.Errorf("request %d: drafts from the model's MTP head, which the engine does not run (Options.MTP)", i)
		}
		for _, id := range req.Draft.Prediction {
			if id < 0 || int(id) >= e.m.Config.Vocab {
				return fmt.Errorf("request %d: predicted token id %d outside the vocabulary [0, %d)", i, id, e.m.Config.Vocab)
			}
		}
		// Checked by the step, which would fail with it every request
		// it holds.
		if len(req.Rows) > 0 && e.m.Config.Embedding {
			return fmt.Errorf("request %d: head rows of an embedding model, which has no head", i)
		}
		for _, id := range req.Rows {
			if id < 0 || int(id) >= e.m.Config.Vocab {
				return fmt.Errorf("request %d: head row %d outside the vocabulary [0, %d)", i, id, e.m.Config.Vocab)
			}
		}
		// The row sample biases is cut at the tokenizer's ids.
		for id := range req.Bias {
			if id < 0 || int(id) >= e.m.Tokenizer.VocabSize() {
				return fmt.Errorf("request %d: biased token id %d outside the vocabulary [0, %d)", i, id, e.m.Tokenizer.VocabSize())
			}
		}
	}
	return nil
}

// SubmitAll queues requests together, all or none (a batch of inputs to
// embed): each fails as Submit would fail it. Prompt-only requests
// (MaxTokens 0) count against a bound of their own, MaxQueuedScoring, so
// that one batch of inputs does not fill the conversations' queue.
func (e *Engine) SubmitAll(ctx context.Context, reqs []Request) ([]*Stream, error) {
	if err := e.Check(reqs); err != nil {
		return nil, err
	}
	scoring := 0
	for i := range reqs {
		if reqs[i].MaxTokens == 0 {
			scoring++
		}
	}
	jobs := make([]*job, len(reqs))
	streams := make([]*Stream, len(reqs))
	now := time.Now()
	for i, req := range reqs {
		jobs[i] = &job{id: e.ids.Add(1), ctx: ctx, req: req, stream: newStream(), submitted: now, mtpShadow: -1}
		streams[i] = jobs[i].stream
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	queuedScoring := 0
	for _, j := range e.queue {
		if j.scoring() {
			queuedScoring++
		}
	}
	switch {
	case e.closing:
		return nil, ErrClosed
	case queuedScoring+scoring > MaxQueuedScoring, len(e.queue)-queuedScoring+len(reqs)-scoring > e.opts.Queue:
		return nil, ErrBusy
	}
	for _, j := range jobs {
		// A cancel wakes the loop: with no step to run (every slot held
		// by a read from disk) it would see it only when one ended.
		j.unwatch = context.AfterFunc(ctx, e.signal)
	}
	e.queue = append(e.queue, jobs...)
	e.signal()
	return streams, nil
}

// signal wakes the loop; it never blocks.
func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Stats reports the engine's load.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	q := len(e.queue)
	e.mu.Unlock()
	st := Stats{Active: int(e.active.Load()), Queued: q, KVBytes: e.kvBytes.Load(), CachedBytes: e.cachedBytes.Load(),
		CacheHits: e.cacheHits.Load(), CacheMisses: e.cacheMisses.Load(), CacheEvictions: e.cacheEvictions.Load(),
		DecodeSteps: e.decodeSteps.Load(), Decoded: e.decoded.Load(), PrefillSteps: e.prefills.Load(), Prefilled: e.prefilled.Load()}
	if e.disk != nil {
		d := e.disk.stats()
		st.DiskHits, st.DiskWrites, st.DiskEvictions, st.DiskErrors, st.DiskBytes, st.DiskBound = d.hits, d.writes, d.evictions, d.failures, d.bytes, d.bound
	}
	return st
}

// ClearCache drops the KV caches kept of finished conversations, before
// any request submitted after it starts.
func (e *Engine) ClearCache() {
	e.clearCache.Store(true)
	e.signal()
}

// Shutdown stops accepting requests: queued ones end at once with
// StopShutdown, running ones may finish until ctx ends, then they end with
// StopShutdown too. It returns when the engine has stopped; it may be
// called again, and returns at once then.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	if !e.closing {
		e.closing = true
		for _, j := range e.queue {
			j.finish(StopShutdown)
		}
		e.queue = nil
	}
	e.mu.Unlock()
	e.signal()
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
	}
	e.stopOnce.Do(func() { close(e.stop) })
	<-e.done
	return nil
}

// job is one request in the engine.
type job struct {
	id        int64 // in the logs
	ctx       context.Context
	unwatch   func() bool // ends the wake on ctx's cancel (SubmitAll)
	req       Request
	stream    *Stream
	submitted time.Time
	usage     Usage

	sess    *infer.Session
	sampler *sampling.Sampler
	started time.Time // admitted: the first step, or the read of a file
	rest    []int32   // prompt tokens still to prefill
	// A state on disk, read on a goroutine of its own (loop.load): read
	// and readAt are what it gave (nil: nothing), given to the loop with
	// the job; start takes the fork of it in from, at position fromAt.
	read, from *infer.Session
	readAt     int
	fromAt     int
	next       int32   // the token to feed in the next decode step
	feed       []int32 // a decode step's tokens: next, then the draft
	// snap is the session before a decode step that checks a draft, when
	// it cannot rewind by itself (Session.Speculate): Session.Keep ends it
	// after the tokens kept, with no token fed again.
	snap    *infer.Snapshot
	history []int32        // prompt and generated tokens, for the penalties
	draft   *drafter       // nil: no drafts from the text
	dsess   *infer.Session // the draft model's cache of the conversation (nil: none yet)
	guessed bool           // the feed's draft is the draft model's or the MTP head's, not the text's
	waits   bool           // left out of the step being planned: no row was left for it
	// mtpGuess is the MTP head's guesses for the next step (Draft.MTP),
	// and mtpGrew whether its last MTP row added one.
	mtpGuess []int32
	mtpGrew  bool
	// mtpShadow is the MTP head's first guess while its drafts rest
	// (mtpBack), compared with the token the step picks: when they agree
	// the rest ends. -1: none.
	mtpShadow  int32
	mtpDrafted bool // the feed's draft is the MTP head's
	// guessBack rests the draft model, mtpBack the MTP head's drafts,
	// after steps in a row that kept none of their guesses.
	guessBack, mtpBack backoff
	kvBytes            int64 // the cache's bytes as Stats last counted them
	// logits is the prompt's last logits, Request.PromptLogits, until an
	// event takes it.
	logits []float32
	// marks are the prompt positions still ahead where the session keeps
	// a copy of its states (Request.Marks, and every CheckpointEvery
	// tokens), in order.
	marks []int
	err   error // why it ends with StopError
}

func (j *job) emit(ev Event) {
	ev.PromptLogits, j.logits = j.logits, nil
	j.stream.push(ev)
}

// scoring reports whether the job is prompt-only (an embedding, a score).
func (j *job) scoring() bool { return j.req.MaxTokens == 0 }

// reach is how far into its prompt a kept session may take the job
// (prefixCache.take's most and whole): a step that continues needs one
// token to give logits, unless no logits are wanted at all; a prompt
// that generates may be taken whole where the logits after it were kept.
func (j *job) reach() (most int, whole bool) {
	most = len(j.req.Prompt) - 1
	if j.req.MaxTokens == 0 && !j.req.PromptLogits {
		most++
	}
	return most, !j.scoring()
}

// oneShot reports whether the job's session is of no use after it.
func (j *job) oneShot() bool { return j.scoring() && j.req.OneShot }

// finish sends a job's last event.
func (j *job) finish(reason StopReason) {
	if j.unwatch != nil {
		j.unwatch()
	}
	j.usage.Total = time.Since(j.submitted)
	j.emit(Event{Time: time.Now(), Done: true, Reason: reason, Err: j.err, Usage: j.usage})
}

// ended reports whether a job has ended: it has given its session back.
func ended(j *job) bool { return j.sess == nil }

// start gives a job its session, from the longest cached prefix of its
// prompt when there is one, and its sampler if it generates. A prompt
// that an ended request's was, its logits kept (Session.KeepLogits: a
// retried answer), takes its first token from them without a step. It
// returns why the job is already done, or "": a prompt alone was asked
// for and all of it is cached, or the first token ends it.
func (e *Engine) start(j *job, k reuse, lp *logprobs) StopReason {
	if j.started.IsZero() {
		j.started = time.Now()
	}
	j.usage.Queued = j.started.Sub(j.submitted)
	j.usage.PromptTokens = len(j.req.Prompt)
	sess, keep := j.from, j.fromAt
	j.from = nil
	if sess == nil {
		most, whole := j.reach()
		sess, keep = k.of(j).take(j.req.Prompt, j.req.KV, most, whole)
	}
	if sess == nil {
		sess, _ = e.m.NewSessionKV(e.opts.Ctx, j.req.KV) // Ctx was checked in New
		if e.opts.MTP {
			_ = sess.TrackMTP() // checked in New: the model has the block
		}
	}
	j.usage.CachedTokens = keep
	j.marks = j.marks[:0]
	// The step that ends the prompt gives its logits, kept with the copy
	// there (deliverOne), unless the request asks for none or for some
	// rows of the head only.
	logits := len(j.req.Rows) == 0 && (j.req.MaxTokens != 0 || j.req.PromptLogits)
	for _, m := range e.marks(j.req.Prompt, j.req.Marks, logits) {
		if m > keep {
			j.marks = append(j.marks, m)
		}
	}
	j.sess = sess
	j.rest = j.req.Prompt[keep:]
	e.log.Debug("engine: request started", "request", j.id, "prompt_tokens", len(j.req.Prompt), "cached_tokens", keep,
		"max_tokens", j.req.MaxTokens, "queued", j.usage.Queued)
	if j.scoring() {
		// Nothing to sample: a sampler's scratch is some bytes per token
		// of the vocabulary (3.3 MB for Qwen3's), allocated and cleared
		// for each of an embedding request's inputs.
		if len(j.rest) == 0 {
			return StopLength
		}
		return ""
	}
	j.sampler = sampling.New(e.m.Config.Vocab, j.req.Params)
	j.history = append(make([]int32, 0, len(j.req.Prompt)+64), j.req.Prompt...)
	if j.req.Draft.Max > 0 {
		j.draft = newDrafter(j.req.Draft, j.req.Prompt)
	}
	if len(j.rest) > 0 {
		return ""
	}
	// The sampler's penalties and a constraint's mask write into the
	// row: a copy, as the kept one serves the next retry too.
	now := time.Now()
	j.usage.Prefill = now.Sub(j.started)
	lg := slices.Clone(sess.LogitsAt(keep))
	if j.req.PromptLogits {
		j.logits = slices.Clone(lg)
	}
	return e.sample(j, lg, now, lp, keep)
}

// check samples at each row of a step that carried a draft, as sample
// would have one step at a time, keeping the drafted tokens while they
// are the ones picked; the cache forgets the rest.
func (e *Engine) check(j *job, l []float32, now time.Time, lp *logprobs) StopReason {
	vocab := e.m.Config.Vocab
	drafted := j.feed[1:]
	base := j.sess.Len() - len(j.feed) // the session before the step
	// kept is the drafted tokens the session keeps; checked and right
	// count those whose rows were sampled, and those the sample matched,
	// the last among them when it ended the answer (a stop token, the
	// length).
	kept, checked, right := 0, 0, 0
	var reason StopReason
	for r := 0; ; r++ {
		reason = e.sample(j, l[r*vocab:(r+1)*vocab], now, lp, base+1+r)
		if r < len(drafted) {
			checked++
			if j.next == drafted[r] {
				right++
			}
		}
		if reason != "" || r == len(drafted) || j.next != drafted[r] {
			break
		}
		kept++
	}
	if err := j.keep(base + 1 + kept); err != nil {
		// The snapshot was taken right before the step: a failure here is
		// a bug, and generating on from a wrong state would be silent.
		j.err = fmt.Errorf("internal error: going back within a draft's step: %w", err)
		return StopError
	}
	j.snap = nil
	if kept > 0 {
		j.shadow(drafted[0], "")
	} else {
		j.shadow(j.next, reason)
	}
	switch {
	case j.mtpDrafted:
		j.mtpBack.checked(kept > 0)
	case j.guessed:
		j.guessBack.checked(kept > 0)
	default:
		j.draft.checked(kept, len(drafted))
	}
	j.mtpDrafted, j.mtpShadow = false, -1
	j.usage.Drafted += checked
	j.usage.Accepted += right
	return reason
}

// shadow ends the resting MTP head's back-off when its guess (mtpShadow)
// is the token the step picked after the one it fed.
func (j *job) shadow(first int32, reason StopReason) {
	if j.mtpShadow >= 0 && reason == "" && first == j.mtpShadow {
		j.mtpBack = backoff{} // the resting head would have been right
	}
	j.mtpShadow = -1
}

// keep ends the job's session after its first n tokens, within the step
// just checked: a rewind, or back within the step from the copy taken
// before it.
func (j *job) keep(n int) error {
	if j.snap != nil {
		return j.sess.Keep(j.snap, n)
	}
	return j.sess.Rewind(n)
}

// sample picks the job's next token from its logits and emits it; it
// returns why the generation ends, or "" to go on. length is the tokens
// the cache holds up to the one these logits follow.
func (e *Engine) sample(j *job, l []float32, now time.Time, lp *logprobs, length int) StopReason {
	// The head may score more rows than the tokenizer has ids (Qwen3's
	// 151,936 for 151,669, Qwen3.5's 248,320 for 248,077): the rows past
	// them are padding, tokens without text, never sampled nor counted
	// in the log-probabilities.
	l = l[:e.m.Tokenizer.VocabSize()]
	ev := Event{Time: now}
	var raw []float32
	if j.req.TopLogprobs >= 0 {
		raw = lp.before(l)
	}
	for id, b := range j.req.Bias {
		l[id] += b
	}
	c := j.req.Constraint
	if c != nil {
		if c.Done() {
			return StopEOS
		}
		c.Allow(l)
	}
	id := j.sampler.Sample(l, j.history)
	if c != nil {
		if err := c.Accept(id); err != nil {
			// The mask allowed only what the grammar takes; a token it
			// refuses is a bug, and generating on would fail open.
			j.err = fmt.Errorf("internal error: the sampler chose a token the constraint refuses: %w", err)
			return StopError
		}
	}
	j.next = id // also when it ends the answer: check compares it with the draft
	for _, s := range j.req.Stop {
		if s == id {
			return StopEOS
		}
	}
	if raw != nil {
		ev.Logprob, ev.Top = lp.after(raw, id, j.req.TopLogprobs)
	}
	ev.Token = id
	if j.usage.CompletionTokens == 0 {
		j.usage.TimeToFirstToken = now.Sub(j.submitted)
	}
	j.usage.CompletionTokens++
	j.history = append(j.history, id)
	if j.draft != nil {
		j.draft.accepted(id)
	}
	j.emit(ev)
	switch {
	case j.req.MaxTokens >= 0 && j.usage.CompletionTokens >= j.req.MaxTokens:
		return StopLength
	case length >= j.sess.Ctx():
		return StopContext
	}
	return ""
}

// end finishes a running job and keeps its cache for later prefixes.
// Its last event goes out after the session is given back and the job
// no longer counts as active, so a caller that has read it sees Stats
// without it.
func (e *Engine) end(j *job, reason StopReason, k reuse) {
	e.kvBytes.Add(-j.kvBytes)
	j.kvBytes = 0
	if j.sess != nil && j.snap != nil {
		// Ended between a draft's step and its check: the session holds
		// what it was fed, and logs no more.
		j.sess.Keep(j.snap, j.sess.Len())
		j.snap = nil
	}
	if j.sess != nil {
		j.usage.KVTokens, j.usage.KVBytes = j.sess.Len(), j.sess.Bytes()
		if reason != StopError {
			// A failed request's session may hold half a step: not kept.
			k.of(j).put(j.sess)
		}
		j.sess, j.dsess = nil, nil
		e.cachedBytes.Store(k.bytes())
	}
	e.active.Add(-1)
	j.usage.Total = time.Since(j.submitted)
	e.logEnd(j, reason)
	j.finish(reason)
}

// countKV brings Stats' KV bytes up to the active caches' sizes. Each
// job's share is kept so that end can take it off at once: a caller that
// has read a job's last event sees Stats without its cache.
func (e *Engine) countKV(active []*job) {
	for _, j := range active {
		if j.sess != nil {
			b := j.sess.Bytes()
			if j.dsess != nil {
				b += j.dsess.Bytes()
			}
			e.kvBytes.Add(b - j.kvBytes)
			j.kvBytes = b
		}
	}
}

// marks are the prompt positions where a session that cannot go back by
// itself keeps a copy of its states: the request's, every
// CheckpointEvery tokens of a long prompt, and the prompt's end, in
// order. With logits the copy at the end keeps the logits after it, and
// the same prompt again (a retried answer) starts there and computes
// nothing; without, the token before the end has a copy too, where the
// same prompt starts to compute its last token again for its logits. A
// model whose sessions rewind anywhere needs none.
func (e *Engine) marks(prompt []int32, asked []int, logits bool) []int {
	if e.rewindable {
		return nil
	}
	var ms []int
	for _, m := range asked {
		if m > 0 && m < len(prompt) {
			ms = append(ms, m)
		}
	}
	if every := e.opts.CheckpointEvery; every > 0 {
		for m := every; m < len(prompt); m += every {
			ms = append(ms, m)
		}
	}
	if !logits {
		ms = append(ms, len(prompt)-1)
	}
	ms = append(ms, len(prompt))
	slices.Sort(ms)
	return slices.Compact(ms)
}
