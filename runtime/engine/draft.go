package engine

import (
	"fmt"
	"math"
	"slices"

	"github.com/qwenc/qwenc/kernels"
	"github.com/qwenc/qwenc/runtime/infer"
)

// Drafts are guesses of the tokens a conversation will generate next,
// taken from the text itself: the tokens that followed the last n tokens
// where they occurred before, in the prompt, the text generated so far,
// or a prediction the request gives (OpenAI's Predicted Outputs). The
// engine checks a draft in the conversation's next decode step, which
// then carries the drafted tokens after the sampled one: the model's
// logits at each of them say what it would have sampled there, and the
// sampler picks from them exactly as without a draft, so the text is the
// same; it keeps the drafted tokens up to the first it would not have
// picked, plus its own pick there. A step of several rows costs little
// more than one while decoding reads the weights.
//
// A draft model (Options.Drafter) guesses where the text has nothing to
// offer: it keeps a cache of the conversation of its own and picks its
// most likely token, one step per token, while it is confident enough.
// Its guesses are as deterministic as the text's, so for sampling too
// the check above is the rejection rule of speculative sampling with a
// point-mass proposal q: a drafted token x is kept with probability
// min(1, p(x)/q(x)) = p(x), the chance the sampler picks it, and
// otherwise the token comes from p without x, renormalised, which is what
// the sampler picked. The text's distribution is the model's.

// Draft configures the drafts of a request.
type Draft struct {
	// Max is the most tokens drafted from the text for one step; 0 drafts
	// nothing from it.
	Max int
	// Min is the fewest worth a step's rows: a shorter guess is not made.
	Min int
	// Prediction is tokens the answer is expected to hold (the file being
	// edited); they are drafted first, then looked up like the rest.
	Prediction []int32
	// Model is the most tokens the engine's draft model guesses for one
	// step when the text offers none; 0 asks it for nothing.
	Model int
	// PMin stops the draft model's guesses at the first whose probability
	// under it is below PMin.
	PMin float32
	// MTP is the most tokens the model's own multi-token-prediction head
	// guesses for one step (chained: each guess from the last); 0 asks
	// it for nothing. Its chains are not cut by their confidence: on the
	// trained Qwen3.5 demo the head's probabilities tell its kept guesses
	// from its refused ones too poorly for a cut at any of 0.5 to 0.9 to
	// pay for the tokens it loses (chains of 2 give 2.35 tokens a step
	// uncut, 1.95 cut at 0.5, 1.76 at 0.75, against 1.82 for one guess).
	MTP int
}

// drafts sets the feed of each decoding job: the token to feed, then the
// draft to check, from the text first and else from the draft model,
// within the spare rows of the step. A draft the job's constraint would
// refuse is cut where it would.
func (e *Engine) drafts(active []*job, spare int) {
	ds := e.ds
	if ds != nil {
		ds.jobs, ds.room = ds.jobs[:0], ds.room[:0]
	}
	for _, j := range active {
		if len(j.rest) > 0 {
			continue
		}
		j.feed, j.guessed = append(j.feed[:0], j.next), false
		room := min(spare, j.sess.Ctx()-j.sess.Len()-1)
		if j.req.MaxTokens > 0 {
			room = min(room, j.req.MaxTokens-j.usage.CompletionTokens-1) // the last token needs no draft
		}
		if j.draft != nil {
			j.feed = j.draft.propose(j.feed, room)
		}
		j.mtpDrafted, j.mtpShadow = false, -1
		if len(j.feed) == 1 && min(len(j.mtpGuess), room) >= max(j.req.Draft.Min, 1) {
			if j.mtpBack.rest > 0 {
				j.mtpBack.rest--
				j.mtpShadow = j.mtpGuess[0]
			} else {
				j.feed = append(j.feed, j.mtpGuess[:min(len(j.mtpGuess), room)]...)
				j.guessed, j.mtpDrafted = true, true
			}
		}
		j.mtpGuess = j.mtpGuess[:0]
		if len(j.feed) == 1 && j.req.Draft.Model > 0 && j.guessBack.rest > 0 {
			j.guessBack.rest--
		} else if len(j.feed) == 1 && j.req.Draft.Model > 0 && room >= max(j.req.Draft.Min, 1) {
			k := min(room, j.req.Draft.Model)
			ds.jobs, ds.room = append(ds.jobs, j), append(ds.room, k)
			j.guessed = true
			spare -= k
			continue
		}
		spare -= len(j.feed) - 1
	}
	if ds != nil && len(ds.jobs) > 0 {
		e.modelGuess(ds)
	}
	for _, j := range active {
		if len(j.rest) > 0 {
			continue
		}
		if c := j.req.Constraint; c != nil && len(j.feed) > 1 {
			n, err := e.prefix(j, j.feed[1:])
			if err != nil {
				// The step's plan (l.plan) ends the job before its rows.
				j.err, j.feed = err, j.feed[:1]
				continue
			}
			if n < max(j.req.Draft.Min, 1) {
				n = 0
			}
			j.feed = j.feed[:1+n]
		}
		if len(j.feed) > 1 && !j.sess.Rewindable() {
			// check goes back within the step if the draft is not all kept.
			j.snap = j.sess.Speculate()
		}
	}
}

// prefix is how much of a draft job j's constraint takes (Prefix). A
// panic in it, a constraint's bug, comes back as an error for the job
// alone: the step is not planned yet, so failing it would end no request
// and the next step would fail the same way. So does a count outside
// the draft, which would cut the feed past its tokens, into stale ones.
func (e *Engine) prefix(j *job, ids []int32) (n int, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = e.panicked(j, p)
		}
	}()
	if n = j.req.Constraint.Prefix(ids); n < 0 || n > len(ids) {
		return 0, fmt.Errorf("internal error: the constraint takes %d of %d drafted tokens", n, len(ids))
	}
	return n, nil
}

// modelDrafts is the draft model's work of one step, kept from step to
// step by the engine's loop.
type modelDrafts struct {
	jobs    []*job
	room    []int // the most tokens each job's draft may hold
	seqs    []infer.Seq
	who     []int // the job of each sequence
	scratch []float32
	k       kernels.Path
}

func newModelDrafts(r *infer.Runner) *modelDrafts {
	m := r.Model()
	return &modelDrafts{scratch: make([]float32, m.Config.Vocab), k: m.Kernels()}
}

// modelGuess appends the draft model's guesses to the feeds of ds.jobs.
// Each job's cache of the draft model first takes the conversation's
// tokens it lacks (the prompt, the first time; a long one over a few
// steps, drafting nothing meanwhile), then every job guesses one token
// per step, together, until its room is full, its guess is a stop token
// or the model's confidence falls under PMin. The guesses the target
// does not keep are rewound after its step.
func (e *Engine) modelGuess(ds *modelDrafts) {
	dm := e.dr.Model()
	seqs, who := ds.seqs[:0], ds.who[:0]
	budget := dm.MaxPrefill()
	for i, j := range ds.jobs {
		if j.dsess == nil {
			s, err := dm.NewSessionKV(e.opts.Ctx, j.req.KV)
			if err != nil {
				continue // New checked the context: a KV type the draft model lacks, at worst, and no drafts
			}
			j.dsess = s
		}
		lack := j.history[j.dsess.Len():] // the prompt and the tokens generated, the last not fed yet
		n := min(len(lack), budget)
		if n == 0 {
			continue
		}
		budget -= n
		seqs = append(seqs, infer.Seq{Session: j.dsess, Tokens: lack[:n], Logits: n == len(lack)})
		who = append(who, i)
	}
	for len(seqs) > 0 {
		if err := e.dr.Step(seqs); err != nil {
			break // the sequences are checked above; no drafts rather than a failed request
		}
		next, nextWho := seqs[:0], who[:0]
		for k := range seqs {
			l := e.dr.Logits(k)
			if l == nil {
				continue
			}
			i := who[k]
			j := ds.jobs[i]
			id, p := top(ds.k, l, ds.scratch)
			if p < j.req.Draft.PMin {
				if len(j.feed) == 1 {
					j.guessBack.checked(false) // a step of the draft model for nothing
				}
				continue
			}
			if len(j.feed) == 1 {
				// Caught up with the conversation: a draft model that
				// cannot rewind by itself keeps a copy to go back to past
				// the guesses the conversation does not keep.
				j.dsess.DropCheckpoints() // the rewinds go back to this one alone
				j.dsess.Checkpoint()
			}
			j.feed = append(j.feed, id)
			if len(j.feed)-1 >= ds.room[i] || slices.Contains(j.req.Stop, id) {
				continue
			}
			next = append(next, infer.Seq{Session: j.dsess, Tokens: j.feed[len(j.feed)-1:], Logits: true})
			nextWho = append(nextWho, i)
		}
		seqs, who = next, nextWho
	}
	ds.seqs, ds.who = seqs, who
	for _, j := range ds.jobs {
		if len(j.feed)-1 < max(j.req.Draft.Min, 1) {
			j.feed = j.feed[:1]
		}
	}
}

// top returns the most likely token of a logits row (the lowest id of a
// tie) and its probability; scratch holds a row.
func top(k kernels.Path, l, scratch []float32) (int32, float32) {
	lse, m := k.LogSumExp(l, scratch)
	best := 0
	for i, v := range l {
		if v == m {
			best = i
			break
		}
	}
	return int32(best), float32(math.Exp(float64(m) - lse))
}

// maxGram is the longest n-gram looked up; longer matches are tried first.
const maxGram = 4

// drafter keeps a conversation's n-gram index: for each n-gram of its
// corpus (the prediction, then the prompt and the generated tokens), the
// position after its latest occurrence. Adding a token costs maxGram
// hashes, a lookup as many: O(1) per step, never a scan.
type drafter struct {
	corpus     []int32 // the prediction, a -1 fence, the prompt and the generated tokens
	prediction []int32
	index      map[uint64]int32
	// cursor is where the prediction is expected to go on (-1: it has
	// parted from the text, and only the index may find it again).
	cursor int
	limit  int // the most to draft now: halved on a miss, doubled on a hit
	max    int
	min    int
	// rest is how many steps to draft nothing, after misses at one token;
	// misses doubles it each time, up to maxRest.
	rest, misses int
}

// maxRest bounds the steps a conversation whose drafts keep missing goes
// without: it tries again now and then, as the text may start to repeat.
const maxRest = 32

func newDrafter(d Draft, prompt []int32) *drafter {
	dr := &drafter{index: map[uint64]int32{}, prediction: d.Prediction, max: d.Max, min: max(d.Min, 1), limit: d.Max, cursor: -1}
	if len(d.Prediction) > 0 {
		dr.cursor = 0
	}
	dr.corpus = make([]int32, 0, len(d.Prediction)+1+len(prompt)+256)
	for _, id := range d.Prediction {
		dr.add(id)
	}
	dr.add(-1)
	for _, id := range prompt {
		dr.add(id)
	}
	return dr
}

// gramKey hashes the n tokens ending at corpus[end-1] (FNV-1a over their
// ids, with n mixed in).
func gramKey(c []int32, end, n int) uint64 {
	h := uint64(14695981039346656037) ^ uint64(n)
	for _, id := range c[end-n : end] {
		h ^= uint64(uint32(id))
		h *= 1099511628211
	}
	return h
}

// add appends a token, indexing the n-grams that end at the token before
// it: the newest n-grams would find only themselves.
func (dr *drafter) add(id int32) {
	dr.corpus = append(dr.corpus, id)
	end := len(dr.corpus) - 1 // the n-grams end before the new token
	for n := 1; n <= maxGram && n <= end; n++ {
		if dr.fenced(end-n, end) {
			break
		}
		dr.index[gramKey(dr.corpus, end, n)] = int32(end)
	}
}

// fenced reports whether corpus[lo:hi] holds the fence.
func (dr *drafter) fenced(lo, hi int) bool {
	for _, id := range dr.corpus[lo:hi] {
		if id < 0 {
			return true
		}
	}
	return false
}

// accepted records a generated token: it extends the corpus, and the
// prediction's cursor follows it or loses it.
func (dr *drafter) accepted(id int32) {
	if dr.cursor >= 0 {
		if dr.cursor < len(dr.prediction) && dr.prediction[dr.cursor] == id {
			dr.cursor++
		} else {
			dr.cursor = -1
		}
	}
	dr.add(id)
}

// propose appends to dst up to room drafted tokens to follow the corpus
// (whose last token is the one about to be fed).
func (dr *drafter) propose(dst []int32, room int) []int32 {
	if dr.rest > 0 {
		dr.rest--
		return dst
	}
	k := min(dr.limit, room)
	if k < dr.min {
		return dst
	}
	if p := dr.prediction; dr.cursor >= 0 && dr.cursor < len(p) {
		return append(dst, p[dr.cursor:min(dr.cursor+k, len(p))]...)
	}
	c := dr.corpus
	for n := min(maxGram, len(c)); n >= 1; n-- {
		if dr.fenced(len(c)-n, len(c)) {
			continue
		}
		p, ok := dr.index[gramKey(c, len(c), n)]
		if !ok {
			continue
		}
		end := int(p) + k
		if end > len(c) {
			end = len(c)
		}
		out := c[p:end]
		for i, id := range out {
			if id < 0 {
				out = out[:i]
				break
			}
		}
		if len(out) >= dr.min {
			return append(dst, out...)
		}
		return dst
	}
	return dst
}

// checked adapts the draft length to how the last draft of k tokens did:
// all kept, it may grow back to Max; none, it halves (to 1), and misses
// at 1 rest the drafts for 1, 3, 7, ... steps, so a conversation whose
// guesses keep missing spends little on them.
func (dr *drafter) checked(kept, k int) {
	switch {
	case kept == k:
		dr.limit = min(dr.max, max(2*dr.limit, 1))
		dr.misses = 0
	case kept == 0 && dr.limit == 1:
		dr.misses++
		dr.rest = min(1<<min(dr.misses, 6)-1, maxRest)
	case kept == 0:
		dr.limit = max(dr.limit/2, 1)
	default:
		dr.misses = 0
	}
}

// backoff adapts how often guesses are checked: a checked step that
// kept none of them rests them for 1, then 3, 7, ... steps (up to
// maxRest); a hit ends the back-off. The draft model's (a step of its
// own where it guessed nothing or nothing kept) spends few of its steps
// on a text it cannot follow, and catches up with the steps it rested in
// one step of its own. The MTP head's, on a text it cannot follow (a
// model of random weights, a text unlike its training), costs its
// guesses alone, not steps of two rows for one token; while it rests,
// a guess that would have been kept ends the rest.
type backoff struct{ rest, misses int }

func (b *backoff) checked(hit bool) {
	if hit {
		b.misses = 0
		return
	}
	b.misses++
	b.rest = min(1<<min(b.misses, 6)-1, maxRest)
}

// mtpGuess runs the model's MTP block after a step: every session's MTP
// rows are brought up to its last position (each takes the main model's
// hidden state there and the token after it: the prompt's next, or the
// one just sampled; a finished request's last row waits in its cached
// session), so that any request, and any fork of its session, can draft
// with it. For the jobs that draft with it (Draft.MTP) the last row's
// logits are the first guess; each further guess of the chain is a row
// past the session's positions, which takes the MTP layer's own output
// at the guess before, forgotten after the chain. The guesses are the
// next step's draft.
func (l *loop) mtpGuess(jobs []*job) {
	e := l.e
	ms := &l.mtp
	limit := e.m.MTPRows()
	ms.seqs, ms.jobs = ms.seqs[:0], ms.jobs[:0]
	rows := 0
	run := func() bool {
		if len(ms.seqs) == 0 {
			return true
		}
		if err := e.r.StepMTP(ms.seqs); err != nil {
			e.log.Error("engine: an MTP step failed; no guesses", "err", err)
			return false
		}
		for i, j := range ms.jobs {
			if lg := e.r.MTPLogits(i); lg != nil {
				l.mtpTake(j, lg)
			}
		}
		ms.seqs, ms.jobs, rows = ms.seqs[:0], ms.jobs[:0], 0
		return true
	}
	for _, j := range jobs {
		j.mtpGuess = j.mtpGuess[:0]
		if ended(j) || !j.sess.MTPReady() {
			continue
		}
		next := int32(-1)
		switch {
		case len(j.rest) > 0:
			next = j.rest[0]
		case !j.scoring():
			next = j.next
		}
		guess := next >= 0 && len(j.rest) == 0 && j.req.Draft.MTP > 0
		left := j.sess.MTPWaiting()
		if next < 0 {
			left--
		}
		for left > 0 {
			if rows == limit && !run() {
				return
			}
			k := min(left, limit-rows)
			ms.seqs = append(ms.seqs, infer.MTPSeq{Session: j.sess, Next: next, Max: k, Logits: guess && k == left})
			ms.jobs = append(ms.jobs, j)
			rows, left = rows+k, left-k
			if left > 0 && !run() { // a session once a step
				return
			}
		}
	}
	if !run() {
		return
	}
	// The chains: one row a job a step.
	for _, j := range jobs {
		if !ended(j) && len(j.mtpGuess) > 0 && len(j.mtpGuess) < j.req.Draft.MTP && j.mtpBack.rest == 0 {
			ms.chain = append(ms.chain, j)
		}
	}
	for len(ms.chain) > 0 {
		more := ms.chain[:0]
		for _, j := range ms.chain {
			if rows == limit && !run() {
				return
			}
			if len(j.mtpGuess) < j.req.Draft.MTP && !slices.Contains(j.req.Stop, j.mtpGuess[len(j.mtpGuess)-1]) {
				ms.seqs = append(ms.seqs, infer.MTPSeq{Session: j.sess, Next: j.mtpGuess[len(j.mtpGuess)-1], Guess: true, Logits: true})
				ms.jobs = append(ms.jobs, j)
				rows++
				more = append(more, j)
			}
		}
		if !run() {
			break
		}
		// A job whose guess was not taken stops its chain.
		ms.chain = slices.DeleteFunc(more, func(j *job) bool { return !j.mtpGrew })
	}
	ms.chain = ms.chain[:0]
	for _, j := range jobs {
		if !ended(j) {
			j.sess.ForgetGuesses()
		}
	}
}

// mtpTake adds the MTP head's guess to a job's draft, unless it is no
// token of the model's vocabulary.
func (l *loop) mtpTake(j *job, lg []float32) {
	j.mtpGrew = false
	id := l.e.r.MTPTokenAt(l.e.r.Model().Kernels().Argmax(lg))
	if int(id) >= l.e.m.Config.Vocab {
		return
	}
	j.mtpGuess = append(j.mtpGuess, id)
	j.mtpGrew = true
}

// mtpDrafts is the MTP head's work of one step, kept from step to step by
// the engine's loop: the sequences of an MTP step and their jobs, and the
// jobs whose chains go on.
type mtpDrafts struct {
	seqs  []infer.MTPSeq
	jobs  []*job
	chain []*job
}
