package qwen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/arch"
	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/internal/mem"
	"github.com/qwenc/qwenc/kernels"
	"github.com/qwenc/qwenc/runtime/engine"
	"github.com/qwenc/qwenc/runtime/infer"
	"github.com/qwenc/qwenc/runtime/sampling"
)

// An Option configures Open.
type Option func(*config)

type config struct {
	threads    int
	kernels    string
	ctx        int
	ctxSet     bool
	parallel   int
	queue      int
	kv         string
	chunk      int
	cacheBytes int64
	cacheSet   bool
	cacheDir   string
	cacheDisk  int64
	draft      string
	mtp        bool
	mtpAuto    bool
	log        *slog.Logger
}

// WithThreads sets the worker threads of the forward steps (default: the
// CPUs this process may use).
func WithThreads(n int) Option { return func(c *config) { c.threads = n } }

// WithKernels forces a kernel path: "auto", "generic", "avx2", "avxvnni",
// "avx512" or "avx512vnni". By default, and with "auto", the fastest path this CPU
// runs. The package reads no environment: qwenrun's --kernels, or its
// $QWEN_KERNELS when the flag is absent, is passed here.
func WithKernels(path string) Option { return func(c *config) { c.kernels = path } }

// WithContext sets each conversation's context, 1 to the model's maximum.
// By default it is the model's maximum, lowered to what the KV caches of
// WithParallel conversations fit in the available memory (Info says so);
// a context given here that memory cannot hold is refused.
func WithContext(tokens int) Option {
	return func(c *config) { c.ctx, c.ctxSet = tokens, true }
}

// WithParallel sets how many conversations decode together (default 4);
// more requests wait in a queue.
func WithParallel(n int) Option { return func(c *config) { c.parallel = n } }

// WithQueue sets how many requests may wait for a free conversation
// (default 4 x WithParallel); beyond it Start fails with ErrBusy.
func WithQueue(n int) Option { return func(c *config) { c.queue = n } }

// WithKVType sets the default KV cache type of the conversations: "f16"
// (the default) or "q8", which holds about half the bytes. A Request may
// choose its own.
func WithKVType(kv string) Option { return func(c *config) { c.kv = kv } }

// WithPrefillChunk sets the most prompt tokens a step prefills while
// other conversations decode (default 128): a long prompt delays the
// running answers by one chunk per step rather than by its whole prefill.
func WithPrefillChunk(tokens int) Option { return func(c *config) { c.chunk = tokens } }

// WithStateCache bounds the states kept of finished requests for later
// ones that start with the same tokens (their KV caches, and a hybrid
// model's recurrent states with the copies kept where a conversation's
// messages end), each shared part counted once: a conversation's next
// turn, an edited message or a retried answer then computes only what is
// new. By default a quarter of the memory available at Open, at least
// 256 MiB and at most 16 GiB; 0 keeps none.
func WithStateCache(bytes int64) Option {
	return func(c *config) { c.cacheBytes, c.cacheSet = bytes, true }
}

// WithStateCacheDir gives the state cache a second tier on disk: the
// states that WithStateCache has no room for are written to files in dir
// (created if need be), at most bytes of them (0: a quarter of the
// filesystem's free space, counting the files already there, at most 64
// GiB), the least
// recently used going first, and a request whose prompt a file reaches
// deeper into than any state in memory reads it back. The files outlive
// the process: at Open, those an earlier run of the same model file left
// in dir serve it (a long agent session goes on after a restart), and
// another model's, another format version's or a damaged one are
// removed; at Close the states in memory are written too. A file holds
// a state's tokens, KV chunks and copies of recurrent states, about the
// bytes it holds in memory. The model's directory serves one Model at a
// time: another's holding it fails Open with ErrStateCacheDirBusy.
func WithStateCacheDir(dir string, bytes int64) Option {
	return func(c *config) { c.cacheDir, c.cacheDisk = dir, bytes }
}

// WithDraftModel opens a second, smaller model of the same vocabulary
// (Qwen3-0.6B for Qwen3-8B, or the model itself at q4) whose greedy
// guesses the requests that ask (Request.DraftModel) have checked in
// their decode steps. A model of another vocabulary is refused.
func WithDraftModel(path string) Option { return func(c *config) { c.draft = path } }

// WithMTP runs the model's multi-token-prediction block (Qwen3.5's, and
// its successors') beside it, so that requests may draft with it
// (Request.DraftMTP): every conversation's MTP rows are kept up to date,
// one more layer's work a token, so that a conversation continued from
// the state cache has them too. Its guesses come from the head's first
// DefaultMTPVocab token ids and the stop tokens, a share of the full
// head's cost. A model without an MTP block is refused.
func WithMTP() Option { return func(c *config) { c.mtp = true } }

// WithAutoMTP is WithMTP where it pays (Info.MTPPays), and nothing
// otherwise: a server's default.
func WithAutoMTP() Option { return func(c *config) { c.mtpAuto = true } }

// DefaultMTPVocab is how many of the first token ids the MTP head guesses
// among (with the stop tokens): a byte-level BPE numbers its tokens in
// the order it merged them, the most frequent first, and on Go code the
// trained Qwen3.5 demo keeps 0.904 of its guesses among the first 32768
// against 0.915 among all 151,936, while a draft step of the Qwen3.5-4B
// shape reads 84M of the head's 636M weights.
const DefaultMTPVocab = 32768

// WithLogger sends the engine's log records to l (default: discarded).
// A request's text is logged at debug only.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// Model is an open model and the engine that runs its requests.
type Model struct {
	m          *infer.Model
	draftModel *infer.Model // nil: none
	e          *engine.Engine
	info       Info
	kv         format.KVType
	format     *chat.Format // nil: the model has no chat template
	stopIDs    []int32
	defaults   sampling.Params
	grammars   grammars

	// The tokenizer, the chat template and the weights are in the file's
	// mapping, which Close unmaps: every use of them holds mapped (a read
	// lock) and first checks closed, so a call racing Close ends with
	// ErrClosed instead of touching unmapped memory.
	mapped sync.RWMutex
	closed atomic.Bool
}

// hold keeps the mapping until release; ErrClosed after Close. Holds do
// not nest (a waiting Close would block the inner one).
func (m *Model) hold() (release func(), err error) {
	m.mapped.RLock()
	if m.closed.Load() {
		m.mapped.RUnlock()
		return nil, ErrClosed
	}
	return m.mapped.RUnlock, nil
}

// mustHold is hold for the methods that return no error: using a closed
// Model is a programming error, said plainly rather than as a fault in
// unmapped memory.
func (m *Model) mustHold() (release func()) {
	release, err := m.hold()
	if err != nil {
		panic("qwen: Model used after Close")
	}
	return release
}

// Info describes a Model.
type Info struct {
	// Name is the file's base name without .qbin: the model's name in the
	// HTTP protocols.
	Name, Path string
	// Architecture is the checkpoint's model_type: qwen3, qwen2,
	// qwen3_moe.
	Architecture string
	// WeightType is the matrices' type: f16, q8 or q4.
	WeightType string
	// ChatTemplate is the name of the model's chat format (one of
	// chat.Names: qwen3, qwen2.5, ...; Model.ChatFormat says what it
	// does), "" when it has none and takes raw prompts only.
	ChatTemplate string
	// Parameters counts the weights (a tied embedding once);
	// ActiveParameters those one token uses (all but the experts it is not
	// routed to).
	Parameters, ActiveParameters uint64
	Layers, Hidden, Vocab        int
	// MaxContext is the model's; Context each conversation's, and
	// ContextNote, when not empty, says why Context is below MaxContext
	// without WithContext.
	MaxContext, Context int
	ContextNote         string
	Parallel            int
	KVType              string // the default KV cache type
	Kernels             string
	Threads             int
	FileSize            int64
	Modified            time.Time
	// Sampling is what the model's generation config asks for (greedy
	// unless it samples); a Request without Sampling gets it, with a
	// random seed.
	Sampling sampling.Params
	// DraftModel is the draft model's path (WithDraftModel), or "".
	DraftModel string
	// MTP: the model has a multi-token-prediction block; MTPDrafts: it
	// runs, and requests may draft with it (WithMTP). MTPCost is the
	// weight bytes one of its guesses reads (its layer and the head's
	// first DefaultMTPVocab rows) over those a decode step reads: about
	// what a guess costs of a step on a model large enough that reading
	// the weights is most of the work.
	MTP, MTPDrafts bool
	MTPCost        float64
	// Embedding: the model embeds text (and scores it, as a reranker)
	// and does not generate.
	Embedding bool
}

// Errors of Start and Generate besides a bad request.
var (
	// ErrBusy: every conversation is busy and the queue is full.
	ErrBusy = engine.ErrBusy
	// ErrClosed: the Model is shutting down.
	ErrClosed = engine.ErrClosed
	// ErrStateCacheDirBusy: Open's error when another Model, of this
	// process or another, holds the model's directory under
	// WithStateCacheDir's dir.
	ErrStateCacheDirBusy = engine.ErrCacheDirBusy
	// ErrNoChatTemplate: a request with Messages to a model without a chat
	// template.
	ErrNoChatTemplate = errors.New("this model has no chat template: give it a raw Prompt")
	// ErrEmbeddingModel: a generation or reranking request to an
	// embedding model.
	ErrEmbeddingModel = errors.New("this is an embedding model: it embeds text and does not generate")
	// ErrGeneration: the engine failed to run a request (its last Delta
	// has StopError); the Model goes on with the others.
	ErrGeneration = errors.New("the generation failed")
)

// PromptTooLongError is a prompt longer than the context.
type PromptTooLongError = engine.PromptTooLongError

// Stats is a snapshot of the Model's load.
type Stats struct {
	// Active conversations generate; Queued requests wait for one.
	Active, Queued int
	// KVBytes is the active conversations' states, CachedBytes those the
	// state cache keeps of finished ones.
	KVBytes, CachedBytes int64
	// DecodeSteps counts the steps that decoded, and Decoded the
	// conversations they decoded, summed: Decoded / DecodeSteps is the
	// mean decode batch, how well concurrent requests share steps.
	DecodeSteps, Decoded int64
	// PrefillSteps counts the steps that prefilled prompts, and Prefilled
	// the prompts (or their chunks) they took, summed.
	PrefillSteps, Prefilled int64
	// CacheHits counts the conversations that started from the state
	// cache (at a prefix of theirs), CacheMisses those that found none,
	// and CacheEvictions the states dropped for room.
	CacheHits, CacheMisses, CacheEvictions int64
	// With WithStateCacheDir: DiskHits counts the conversations that
	// started from a state read back from disk, DiskWrites the states
	// written there, DiskEvictions the files removed for room,
	// DiskErrors the states that could not be written or read back
	// (each logged); DiskBytes is what the files hold and DiskBound
	// their bound.
	DiskHits, DiskWrites, DiskEvictions, DiskErrors, DiskBytes, DiskBound int64
}

// Open maps a .qbin file and starts its engine. The weights stay in the
// file's read-only mapping: several processes that open one file share
// its pages.
func Open(path string, opts ...Option) (*Model, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.parallel == 0 {
		c.parallel = 4
	}
	switch {
	case c.threads < 0:
		return nil, fmt.Errorf("threads %d: want 1 or more", c.threads)
	case c.parallel < 1:
		return nil, fmt.Errorf("parallel %d: want 1 or more conversations", c.parallel)
	case c.queue < 0:
		return nil, fmt.Errorf("queue %d: not negative", c.queue)
	case c.chunk < 0:
		return nil, fmt.Errorf("prefill chunk %d: want 1 or more tokens, or 0 for the default", c.chunk)
	case c.cacheBytes < 0:
		return nil, fmt.Errorf("state cache %d: want 0 (none) or more bytes", c.cacheBytes)
	case c.cacheDisk < 0:
		return nil, fmt.Errorf("state cache directory bound %d: want 1 or more bytes, or 0 for the default", c.cacheDisk)
	}
	kp, err := kernels.ParsePath(c.kernels)
	if err != nil {
		return nil, err
	}
	kv, err := format.ParseKVType(orDefault(c.kv, "f16"))
	if err != nil {
		return nil, err
	}
	ro := infer.Options{Threads: c.threads, Kernels: kp}
	im, err := infer.Open(path, ro)
	if err != nil {
		return nil, err
	}
	var dm *infer.Model
	if c.draft != "" {
		if dm, err = openDraft(c.draft, im, ro); err != nil {
			im.Close()
			return nil, err
		}
	}
	m, err := newModel(im, dm, path, c, kv, ro)
	if err != nil {
		im.Close()
		if dm != nil {
			dm.Close()
		}
		return nil, err
	}
	return m, nil
}

// openDraft opens a draft model for im: a generating model whose tokens
// are im's, id for id.
func openDraft(path string, im *infer.Model, ro infer.Options) (*infer.Model, error) {
	dm, err := infer.Open(path, ro)
	if err != nil {
		return nil, fmt.Errorf("draft model: %w", err)
	}
	a, b := im.Tokenizer, dm.Tokenizer
	err = nil
	switch {
	case dm.Config.Embedding:
		err = errors.New("an embedding model, which does not generate")
	case dm.Config.Vocab != im.Config.Vocab || a.VocabSize() != b.VocabSize():
		err = fmt.Errorf("its vocabulary is %d tokens in %d rows, the model's %d tokens in %d rows: a draft model must share the vocabulary",
			b.VocabSize(), dm.Config.Vocab, a.VocabSize(), im.Config.Vocab)
	default:
		for id := range int32(a.VocabSize()) {
			if !bytes.Equal(a.TokenBytes(id), b.TokenBytes(id)) || a.IsSpecial(id) != b.IsSpecial(id) {
				err = fmt.Errorf("token %d is %q, the model's %q: a draft model must share the vocabulary", id, b.TokenBytes(id), a.TokenBytes(id))
				break
			}
		}
	}
	if err != nil {
		dm.Close()
		return nil, fmt.Errorf("draft model %s: %w", path, err)
	}
	return dm, nil
}

func newModel(im, dm *infer.Model, path string, c config, kv format.KVType, ro infer.Options) (*Model, error) {
	h := im.File.Header
	ctx, note, err := fitContext(im, c.ctx, c.ctxSet, c.parallel, kv)
	if err != nil {
		return nil, err
	}
	cf, err := chat.Lookup(h.ChatFamily)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m := &Model{m: im, draftModel: dm, kv: kv, format: cf, stopIDs: chat.StopTokens(im.Tokenizer, h.Generation.EOS, cf), defaults: sampling.Defaults(h.Generation)}
	m.info = fileInfo(h, path, im.File.Size)
	m.info.Context, m.info.ContextNote, m.info.Parallel = ctx, note, c.parallel
	m.info.KVType, m.info.Kernels, m.info.Threads, m.info.DraftModel = kv.String(), im.Kernels().String(), im.Threads(), c.draft
	m.info.MTPDrafts = c.mtp || (c.mtpAuto && m.info.MTPPays())
	if m.info.MTPDrafts {
		ro.MTPVocab = DefaultMTPVocab
	}
	m.e, err = engine.New(im, engine.Options{Parallel: c.parallel, Queue: c.queue, Ctx: ctx, Chunk: c.chunk,
		CacheBytes: cacheOption(c), CacheDir: c.cacheDir, CacheDiskBytes: c.cacheDisk, Runner: ro, Drafter: dm, MTP: m.info.MTPDrafts, Log: c.log})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// fileInfo is what the file says of a model: Info less what opening it
// for generation sets.
func fileInfo(h *format.Header, path string, size int64) Info {
	rep := format.Report(h)
	base := filepath.Base(path)
	info := Info{
		Name: strings.TrimSuffix(base, filepath.Ext(base)), Path: path,
		Architecture: h.Config.ModelType, WeightType: h.WeightType().String(), ChatTemplate: h.ChatFamily,
		Parameters: rep.Parameters, ActiveParameters: rep.ActiveParameters,
		Layers: h.Config.Layers, Hidden: h.Config.Hidden, Vocab: h.Config.Vocab,
		MaxContext: h.Config.MaxContext(), FileSize: size, Sampling: sampling.Defaults(h.Generation),
		MTP: h.Config.MTPLayers > 0, MTPCost: mtpCost(h, rep),
		Embedding: h.Config.Embedding,
	}
	if st, err := os.Stat(path); err == nil {
		info.Modified = st.ModTime()
	}
	return info
}

// Inspect describes the model in a .qbin file without opening it to
// generate: what the file says, the fields of an open Model's engine
// (Context, Parallel, KVType, Kernels, Threads, DraftModel) left zero. A
// server lists the models it could load with it.
func Inspect(path string) (Info, error) {
	f, err := format.Open(path)
	if err != nil {
		return Info{}, err
	}
	defer f.Close()
	// The architecture knows an older file's section kinds, which the
	// report reads.
	if err := arch.Builtin().Validate(f.Header); err != nil {
		return Info{}, fmt.Errorf("%s: %w", path, err)
	}
	return fileInfo(f.Header, path, f.Size), nil
}

// mtpCost is Info.MTPCost.
func mtpCost(h *format.Header, rep format.MemoryReport) float64 {
	if h.Config.MTPLayers == 0 || rep.DecodeWeightBytes == 0 {
		return 0
	}
	share := min(1, float64(DefaultMTPVocab)/float64(h.Config.Vocab))
	return (float64(rep.MTPWeightBytes) + share*float64(rep.EmbeddingsTileMajorBytes)) / float64(rep.DecodeWeightBytes)
}

// MTPPays reports whether drafting with the model's MTP block is likely
// to pay: it has one, and a guess reads at most a fifth of a decode
// step's bytes (MTPCost), so that at the acceptance rate of 0.5 one
// guess a step yields 1.5 tokens for about 1.25 steps' cost. On the
// small models, where other work than reading weights weighs more, the
// measured cost is higher than MTPCost says (qwenrun bench-draft --mtp).
func (i Info) MTPPays() bool { return i.MTP && i.MTPCost > 0 && i.MTPCost <= 0.2 }

// cacheOption maps WithStateCache onto the engine's option, whose < 0 is
// none: by default a quarter of the memory available now, within [256
// MiB, 16 GiB] (1 GiB where the system does not say).
func cacheOption(c config) int64 {
	switch {
	case !c.cacheSet:
		avail, known := mem.Available()
		if !known {
			return 1 << 30
		}
		return min(max(avail/4, 256<<20), 16<<30)
	case c.cacheBytes == 0:
		return -1
	}
	return c.cacheBytes
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Info describes the model.
func (m *Model) Info() Info { return m.info }

// ChatFormat is the model's chat format: how its template renders a
// conversation, whether and how the model thinks, how it writes tool
// calls. It is nil when the model has no chat template.
func (m *Model) ChatFormat() *chat.Format { return m.format }

// Stats reports the engine's load.
func (m *Model) Stats() Stats { return Stats(m.e.Stats()) }

// Verify recomputes every section's checksum: it reads the whole file.
func (m *Model) Verify() error {
	release, err := m.hold()
	if err != nil {
		return err
	}
	defer release()
	return m.m.File.Verify()
}

// ClearCache drops the KV caches kept of finished requests, freeing their
// memory (and removing their files, with WithStateCacheDir); later
// requests prefill their prompts whole.
func (m *Model) ClearCache() { m.e.ClearCache() }

// Tokenize encodes text as a raw prompt is: added tokens written in it
// (<|im_start|>, <think>, ...) are recognised, as Hugging Face's
// tokenizer does.
// It panics after Close.
func (m *Model) Tokenize(text string) []int32 {
	defer m.mustHold()()
	return m.m.Tokenizer.Encode(text, true)
}

// Detokenize is the text of ids; bytes of a character that the ids cut
// become U+FFFD. It panics after Close.
func (m *Model) Detokenize(ids []int32) string {
	defer m.mustHold()()
	return m.m.Tokenizer.Decode(ids)
}

// Shutdown stops accepting requests: queued ones end at once, running
// ones may go on until ctx ends, then end with StopShutdown. It returns
// when the engine has stopped; Close then unmaps the model.
func (m *Model) Shutdown(ctx context.Context) error { return m.e.Shutdown(ctx) }

// Close ends every request (StopShutdown) and unmaps the model. Calls
// made after it, or racing it, end with ErrClosed (Tokenize and
// Detokenize, which return no error, panic), and a Stream being read
// ends with ErrClosed; the Deltas already read stay valid. To let
// running generations end and be read, call Shutdown first.
func (m *Model) Close() error {
	if m.closed.Swap(true) {
		return nil
	}
	// Shutdown first: it ends the engine's waits, which Embed and Rerank
	// make while holding the mapping; the lock then waits for the holds
	// still running.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m.e.Shutdown(ctx)
	m.mapped.Lock()
	defer m.mapped.Unlock()
	if m.draftModel != nil {
		m.draftModel.Close()
	}
	return m.m.Close()
}
