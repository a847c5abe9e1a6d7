package engine

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/qwenc/qwenc/runtime/infer"
)

// loop is the engine's goroutine and what it keeps from step to step: the
// requests it runs, the sessions it keeps for later ones, and the step
// being made, whose slices are reused so that a step allocates little.
type loop struct {
	e      *Engine
	reuse  reuse
	active []*job
	// The step: each sequence, the job it belongs to, and how many prompt
	// tokens it takes (0: the job decodes).
	seqs     []infer.Seq
	owners   []*job
	prompt   []int
	decoders int
	logits   *logprobs
	mtp      mtpDrafts
	// sampled are the jobs admitted that took their first token from
	// logits the cache kept (a retried answer).
	sampled []*job
	// loading are the admitted jobs whose state is being read from disk
	// (load): they hold their slots, and the loop steps the others. The
	// reads hand them back in loaded, under loadMu, and wake the loop.
	loading []*job
	loadMu  sync.Mutex
	loaded  []*job
	reads   sync.WaitGroup
}

// loop runs steps while there is work, and waits for work otherwise. Each
// turn admits what the queue holds and the slots take, makes a step of the
// decoding conversations and chunks of the waiting prompts, runs it, and
// hands each job what its rows gave. A step that fails ends its requests
// with StopError and the reason; the others go on.
func (e *Engine) loop() {
	defer close(e.done)
	defer e.r.Close()
	if e.dr != nil {
		defer e.dr.Close()
	}
	l := &loop{e: e, reuse: newReuse(e.opts.CacheBytes), logits: newLogprobs(e.m)}
	if e.disk != nil {
		l.reuse.cache.disk = e.disk
		defer l.spillAll()
	}
	for {
		closing := l.admit()
		if len(l.active) == 0 {
			if closing && len(l.loading) == 0 {
				return
			}
			if !e.idle() {
				l.abandon()
				return
			}
			continue
		}
		if e.stopped() {
			for _, j := range l.active {
				e.end(j, StopShutdown, l.reuse)
			}
			l.abandon()
			return
		}
		if err := l.run(); err != nil {
			l.fail(err)
		}
		l.active = slices.DeleteFunc(l.active, ended)
	}
}

// spillAll writes the states kept in memory to disk as the engine
// stops, for the next run to start from: the most recently used that
// the disk's budget holds, written least recently used first, so that
// the order of use stays; then it waits for the writes.
func (l *loop) spillAll() {
	es := l.reuse.cache.entries
	first, bytes := len(es), int64(0)
	for first > 0 && bytes+es[first-1].Bytes() <= l.e.disk.budget {
		first--
		bytes += es[first].Bytes()
	}
	for _, s := range es[first:] {
		l.e.disk.spillWait(s)
	}
	l.e.disk.close()
}

// load starts reading job j's state from disk when a file reaches
// deeper into its prompt than the memory tier does, and reports whether
// it did: the job then waits in loading, its slot held, and is started
// when the read hands it back (admit).
func (l *loop) load(j *job) bool {
	c := l.reuse.of(j)
	if c.disk == nil {
		return false
	}
	most, whole := j.reach()
	_, keep := c.best(j.req.Prompt, j.req.KV, most, whole)
	r := c.disk.pick(j.req.Prompt, j.req.KV, most, whole, keep)
	if r == nil {
		return false
	}
	j.started = time.Now()
	l.loading = append(l.loading, j)
	l.reads.Add(1)
	go func() {
		defer l.reads.Done()
		j.read, j.readAt = c.disk.load(r, j.req.Prompt, most, whole, keep)
		l.loadMu.Lock()
		l.loaded = append(l.loaded, j)
		l.loadMu.Unlock()
		l.e.signal()
	}()
	return true
}

// takeLoaded returns the jobs whose reads have ended, out of loading.
func (l *loop) takeLoaded() []*job {
	l.loadMu.Lock()
	js := l.loaded
	l.loaded = nil
	l.loadMu.Unlock()
	for _, j := range js {
		l.loading = slices.DeleteFunc(l.loading, func(x *job) bool { return x == j })
	}
	return js
}

// abandon ends the jobs still loading as the engine stops, after their
// reads: what they read is kept, for the disk to have it back.
func (l *loop) abandon() {
	l.reads.Wait()
	for _, j := range l.takeLoaded() {
		if j.read != nil {
			l.reuse.of(j).put(j.read)
			j.read = nil
		}
		l.e.end(j, StopShutdown, l.reuse)
	}
}

// idle waits for work; it reports false when the grace period of a
// shutdown has ended instead.
func (e *Engine) idle() bool {
	select {
	case <-e.wake:
		return true
	case <-e.stop:
		return false
	}
}

// stopped reports whether the grace period of a shutdown has ended.
func (e *Engine) stopped() bool {
	select {
	case <-e.stop:
		return true
	default:
		return false
	}
}

// admit drops what was cancelled, clears the kept sessions when asked,
// moves the requests the slots take from the queue to the active jobs and
// starts them; it reports whether the engine is shutting down.
func (l *loop) admit() (closing bool) {
	e := l.e
	if e.clearCache.Swap(false) {
		l.reuse.cache.clear()
		l.reuse.pool.clear()
	}
	kept := l.active[:0]
	for _, j := range l.active {
		if j.ctx.Err() != nil {
			e.end(j, StopInterrupt, l.reuse)
			continue
		}
		kept = append(kept, j)
	}
	l.active = kept
	// The jobs whose states were read go on: in the cache, and a fork
	// of it to start from.
	n := len(l.active)
	for _, j := range l.takeLoaded() {
		if j.read != nil {
			j.from, j.fromAt = l.reuse.of(j).adopt(j.read, j.readAt), j.readAt
			j.read = nil
		}
		if j.ctx.Err() != nil {
			j.from = nil
			e.end(j, StopInterrupt, l.reuse)
			continue
		}
		l.active = append(l.active, j)
	}
	e.mu.Lock()
	closing = e.closing
	talking, scoring := 0, 0
	for _, js := range [][]*job{l.active, l.loading} {
		for _, j := range js {
			if j.scoring() {
				scoring++
			} else {
				talking++
			}
		}
	}
	// A cancelled request ends wherever it waits: behind a conversation
	// that waits for a slot, it would wait for that slot too.
	e.queue = slices.DeleteFunc(e.queue, func(j *job) bool {
		if j.ctx.Err() == nil {
			return false
		}
		j.finish(StopInterrupt)
		return true
	})
	// In order: a conversation waits for a slot, and what is behind it
	// waits too.
	for len(e.queue) > 0 {
		j := e.queue[0]
		count, limit := &talking, e.opts.Parallel
		if j.scoring() {
			count, limit = &scoring, MaxScoring
		}
		if *count >= limit {
			break
		}
		*count++
		e.queue = e.queue[1:]
		l.active = append(l.active, j)
		e.active.Add(1) // under the lock: never neither queued nor active
	}
	e.mu.Unlock()
	// Outside the lock: the prefix search and a new session need not
	// hold up Submit and Stats, and the cache is this goroutine's.
	sampled := l.sampled[:0]
	for _, j := range l.active[n:] {
		if j.started.IsZero() && l.load(j) {
			continue // started when its file has been read
		}
		if reason := l.start(j); reason != "" {
			// Its prompt is all in the cache and nothing more is asked,
			// or the token sampled from the logits kept there ends it.
			e.end(j, reason, l.reuse)
		} else if len(j.rest) == 0 {
			sampled = append(sampled, j)
		}
	}
	if len(sampled) > 0 && e.opts.MTP {
		// Their first step checks the MTP head's guess as any other
		// step does: it comes from the hidden state the cache kept.
		l.mtpGuess(sampled)
	}
	clear(sampled)
	l.sampled = sampled[:0]
	l.active = slices.DeleteFunc(l.active, ended)
	if !slices.ContainsFunc(l.active, (*job).oneShot) {
		// Nothing to pass them on to: the memory goes back.
		l.reuse.pool.clear()
	}
	e.cachedBytes.Store(l.reuse.bytes())
	c := l.reuse.cache
	e.cacheHits.Store(c.hits)
	e.cacheMisses.Store(c.misses)
	e.cacheEvictions.Store(c.evictions)
	e.countKV(l.active)
	return closing
}

// start starts job j (Engine.start). A retried prompt samples its first
// token there, from the logits kept, outside any step: a panic in it (a
// constraint's bug) must end this job alone with StopError, as in
// deliverOne, not the loop's goroutine and with it the process.
func (l *loop) start(j *job) (reason StopReason) {
	defer func() {
		if p := recover(); p != nil {
			j.err, reason = l.e.panicked(j, p), StopError
		}
	}()
	return l.e.start(j, l.reuse, l.logits)
}

// panicked logs a panic in job j's work and returns it as the job's
// error.
func (e *Engine) panicked(j *job, p any) error {
	e.log.Error("engine: a request's step panicked", "request", j.id, "panic", p, "stack", string(debug.Stack()))
	return fmt.Errorf("internal error: %v", p)
}

// run makes a step, runs it and delivers its rows. A panic in making or
// running it, a bug, is the step's failure, not the server's end.
func (l *loop) run() (err error) {
	defer func() {
		if p := recover(); p != nil {
			l.e.log.Error("engine: a step panicked", "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("internal error: %v", p)
		}
	}()
	l.plan()
	if err := l.e.r.Step(l.seqs); err != nil {
		// Submit and plan keep every step valid: this is a bug too.
		return fmt.Errorf("internal error: a step of %d sequences: %w", len(l.seqs), err)
	}
	l.count()
	l.deliver()
	if l.e.opts.MTP {
		l.mtpGuess(l.owners)
	}
	return nil
}

// plan makes the step: decode rows first (the drafts in the rows a step
// has spare after one per conversation), then prompt chunks in the budget
// left.
func (l *loop) plan() {
	e := l.e
	l.seqs, l.owners, l.prompt = l.seqs[:0], l.owners[:0], l.prompt[:0]
	decoding, waiting, first, onlyScoring, waited := 0, 0, 0, true, 0
	spare := e.m.MaxPrefill()
	for _, j := range l.active {
		if len(j.rest) == 0 {
			spare--
		}
	}
	e.drafts(l.active, spare)
	for _, j := range l.active {
		if j.err != nil && !ended(j) {
			e.end(j, StopError, l.reuse) // its constraint failed as its draft was cut (drafts)
			continue
		}
		if len(j.rest) == 0 {
			if decoding+len(j.feed) > e.m.MaxPrefill() {
				// More conversations decode than a step has rows: those
				// that started from a kept prompt's logits took no prefill
				// step to join the others in. The rest (with no draft:
				// spare is negative) wait for the next step.
				j.feed, j.waits = j.feed[:1], true
				waited++
				continue
			}
			l.seqs = append(l.seqs, infer.Seq{Session: j.sess, Tokens: j.feed, Logits: true, Last: len(j.feed)})
			l.owners, l.prompt = append(l.owners, j), append(l.prompt, 0)
			decoding += len(j.feed)
			continue
		}
		if waiting == 0 {
			first = len(j.rest)
		}
		waiting++
		onlyScoring = onlyScoring && j.scoring()
	}
	l.decoders = len(l.seqs)
	budget := e.m.MaxPrefill() - decoding
	switch {
	case decoding > 0:
		// The running streams wait for this step: one chunk of prompt
		// in all, however many prompts are waiting.
		budget = min(budget, e.opts.Chunk)
	case onlyScoring:
		// Nobody waits for a first token: the fullest steps.
	case waiting > 1:
		// Several prompts and nothing running: the first ones start
		// answering after a chunk rather than all after the whole
		// prefill (make bench-serve, 8 prompts of 64 tokens at once:
		// median time to first token 845 -> 493 ms).
		budget = min(budget, max(e.opts.Chunk, first))
	}
	for _, j := range l.active {
		if ended(j) || len(j.rest) == 0 || budget == 0 {
			continue
		}
		n := min(len(j.rest), budget)
		if len(j.marks) > 0 {
			// A chunk ends at the next mark, for the copy kept there.
			n = min(n, j.marks[0]-j.sess.Len())
		}
		last := n == len(j.rest)
		l.seqs = append(l.seqs, infer.Seq{Session: j.sess, Tokens: j.rest[:n], Logits: last && (j.req.MaxTokens != 0 || j.req.PromptLogits), Rows: j.req.Rows})
		l.owners, l.prompt = append(l.owners, j), append(l.prompt, n)
		budget -= n
	}
	if waited > 0 {
		// Those left out go first in the next step: else the ones before
		// them would take the rows again, step after step, until they
		// ended.
		slices.SortStableFunc(l.active, func(a, b *job) int {
			switch {
			case a.waits == b.waits:
				return 0
			case a.waits:
				return -1
			}
			return 1
		})
		for _, j := range l.active[:waited] {
			j.waits = false
		}
	}
}

// count adds the step to Stats' counters.
func (l *loop) count() {
	e := l.e
	if l.decoders > 0 {
		e.decodeSteps.Add(1)
		e.decoded.Add(int64(l.decoders))
	}
	if len(l.seqs) > l.decoders {
		e.prefills.Add(1)
		e.prefilled.Add(int64(len(l.seqs) - l.decoders))
	}
}

// deliver hands each job of the step what its rows gave.
func (l *loop) deliver() {
	now := time.Now()
	for i, j := range l.owners {
		l.deliverOne(i, j, now)
	}
}

// deliverOne hands job j, sequence i of the step, what its rows gave: the
// rest of its prompt to go, its prompt's logits, its next token (or, after
// a draft, the tokens kept), and its end. A panic here, a bug (a
// constraint's, a sampler's), ends this job alone with StopError.
func (l *loop) deliverOne(i int, j *job, now time.Time) {
	e := l.e
	defer func() {
		if p := recover(); p != nil {
			err := e.panicked(j, p)
			if !ended(j) {
				j.err = err
				e.end(j, StopError, l.reuse)
			}
		}
	}()
	j.rest = j.rest[l.prompt[i]:]
	if l.prompt[i] > 0 && len(j.rest) == 0 {
		j.usage.Prefill = now.Sub(j.started)
	}
	lg := e.r.Logits(i)
	if len(j.marks) > 0 && j.sess.Len() == j.marks[0] {
		// Where a later request is likely to part from this one (a
		// message's end, the prompt's): a session that cannot rewind by
		// itself keeps a copy here, and at the prompt's end the logits
		// too, for the same prompt again (a retried answer).
		j.sess.Checkpoint()
		if len(j.rest) == 0 && l.prompt[i] > 0 && len(lg) == e.m.Config.Vocab {
			j.sess.KeepLogits(lg)
		}
		j.marks = j.marks[1:]
	}
	if lg != nil && j.req.PromptLogits && j.usage.CompletionTokens == 0 {
		j.logits = append([]float32(nil), lg...) // before the sampler's penalties change it
	}
	switch {
	case len(j.rest) > 0:
		// a chunk of a prompt that goes on
	case j.req.MaxTokens == 0:
		e.end(j, StopLength, l.reuse)
	case l.prompt[i] == 0 && len(j.feed) > 1:
		if reason := e.check(j, lg, now, l.logits); reason != "" {
			e.end(j, reason, l.reuse)
		}
	default:
		reason := e.sample(j, lg, now, l.logits, j.sess.Len())
		if l.prompt[i] == 0 {
			j.shadow(j.next, reason)
		}
		if reason != "" {
			e.end(j, reason, l.reuse)
		}
	}
	if j.dsess != nil {
		// The draft model's cache keeps what the conversation kept of its
		// guesses (or goes back to its copy before them, and takes the
		// tokens it lacks in its next step).
		j.dsess.Rewind(j.dsess.RewindPoint(min(j.dsess.Len(), j.sess.Len())))
	}
}

// fail ends the step's requests that have not ended with StopError and
// err: their sessions may hold a half-run step, so they are not kept.
// The engine goes on with the others.
func (l *loop) fail(err error) {
	n := 0
	for _, j := range l.owners {
		if ended(j) {
			continue
		}
		j.err = err
		l.e.end(j, StopError, l.reuse)
		n++
	}
	l.e.log.Error("engine: a step failed; its requests end with an error", "requests", n, "err", err)
}

// logEnd logs a request's end at debug level.
func (e *Engine) logEnd(j *job, reason StopReason) {
	if !e.log.Enabled(j.ctx, slog.LevelDebug) {
		return
	}
	u := &j.usage
	e.log.Debug("engine: request ended", "request", j.id, "reason", string(reason),
		"prompt_tokens", u.PromptTokens, "cached_tokens", u.CachedTokens, "completion_tokens", u.CompletionTokens,
		"queued", u.Queued, "prefill", u.Prefill, "total", u.Total, "drafted", u.Drafted, "accepted", u.Accepted)
}
