package engine

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

// Draft configures the drafts of a request.
type Draft struct {
	// Max is the most tokens drafted for one step; 0 drafts nothing.
	Max int
	// Min is the fewest worth a step's rows: a shorter guess is not made.
	Min int
	// Prediction is tokens the answer is expected to hold (the file being
	// edited); they are drafted first, then looked up like the rest.
	Prediction []int32
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
