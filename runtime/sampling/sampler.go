package sampling

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/qwenc/qwenc/format"
)

// Defaults are the sampling parameters a model's generation config asks
// for (greedy unless it samples), seed 0: what qwenrun and the server
// start from before their flags or requests.
func Defaults(g format.Generation) Params {
	p := Params{Temperature: g.Temperature, TopK: int(g.TopK), TopP: g.TopP, MinP: g.MinP,
		RepeatPenalty: g.RepetitionPenalty, PresencePenalty: g.PresencePenalty}
	if !g.DoSample {
		p.Temperature = 0
	}
	return p
}

// Params configures a Sampler. Zero values mean "off" for every filter so that
// a partly filled literal behaves predictably; the zero Params is greedy.
type Params struct {
	Temperature float32 // <= 0 (or tiny enough that 1/T overflows): greedy, lowest index on ties
	TopK        int     // <= 0 or >= vocab: off
	TopP        float32 // <= 0 or >= 1: off; the named top_p 0 (Settings) keeps the best token alone by setting the smallest float32
	MinP        float32 // <= 0: off; keeps tokens with p >= MinP * p_max (capped at 1)

	// RepeatPenalty uses llama.cpp semantics: for each distinct token in the
	// window, logit > 0 ? logit/pen : logit*pen. 1 (or <= 0) is off.
	RepeatPenalty float32
	// RepeatLastN is the penalty window over history: 0 means llama.cpp's
	// default of 64, -1 the whole history (Check refuses less).
	RepeatLastN int
	// PresencePenalty is subtracted once from every token in the window.
	PresencePenalty float32
	// FrequencyPenalty is subtracted once per occurrence in the window
	// (llama.cpp/OpenAI frequency_penalty).
	FrequencyPenalty float32

	Seed uint64
}

// DefaultRepeatLastN is the penalty window used when Params.RepeatLastN is 0.
const DefaultRepeatLastN = 64

// pcgStream is the PCG increment half of the seed; fixed so that a Sampler is
// fully determined by Params.Seed.
const pcgStream = 0x9e3779b97f4a7c15

// Sampler holds preallocated scratch sized to the vocabulary so that Sample
// does not allocate. It is not safe for concurrent use.
type Sampler struct {
	p     Params
	vocab int
	lastN int // < 0: whole history
	pen   bool

	pcg *rand.PCG
	rng *rand.Rand

	cands  []cand    // top-k heap / surviving candidates
	e      []float32 // unnormalised probabilities, full-vocabulary path
	bucket []uint16  // histogram bucket per token, full-vocabulary path
	hist   [numBuckets]float64
	sub    [subBuckets]float64 // the boundary bucket's histogram, when it is large
	marks  []uint64            // a bit per token: the ids of a large run of equal weights
	exp    expTable

	counts []int32 // occurrences in the penalty window; all zero between calls
	seen   []int32 // distinct tokens of the window, to reset counts cheaply
}

// cand is a token with, depending on the stage, its logit or its
// unnormalised probability.
type cand struct {
	id int32
	v  float32
}

// New returns a Sampler for rows of vocab logits. It panics if vocab <= 0,
// since that can only be a programming error.
func New(vocab int, p Params) *Sampler {
	if vocab <= 0 {
		panic(fmt.Sprintf("sampling: vocabulary size %d must be positive", vocab))
	}
	if !(p.Temperature > 0) || math.IsInf(float64(1/p.Temperature), 0) {
		p.Temperature = 0 // includes NaN and temperatures whose inverse overflows
	}
	if p.RepeatPenalty <= 0 {
		p.RepeatPenalty = 1
	}
	if p.TopK < 0 || p.TopK >= vocab {
		p.TopK = 0
	}
	if !(p.TopP > 0 && p.TopP < 1) {
		p.TopP = 1
	}
	if !(p.MinP > 0) {
		p.MinP = 0
	}
	// Above 1 nothing would survive, not even the best token.
	p.MinP = min(p.MinP, 1)
	s := &Sampler{
		p:      p,
		vocab:  vocab,
		lastN:  p.RepeatLastN,
		pen:    p.RepeatPenalty != 1 || p.PresencePenalty != 0 || p.FrequencyPenalty != 0,
		cands:  make([]cand, vocab),
		e:      make([]float32, vocab),
		bucket: make([]uint16, vocab),
		marks:  make([]uint64, (vocab+63)/64),
		counts: make([]int32, vocab),
		seen:   make([]int32, 0, vocab),
	}
	if s.lastN == 0 {
		s.lastN = DefaultRepeatLastN
	}
	s.exp.init()
	s.pcg = rand.NewPCG(p.Seed, pcgStream)
	s.rng = rand.New(s.pcg)
	return s
}

// Params returns the effective parameters after normalisation by New.
func (s *Sampler) Params() Params { return s.p }

// Reset reseeds the random stream; the next Sample calls then repeat the
// sequence of a fresh Sampler built with that seed.
func (s *Sampler) Reset(seed uint64) {
	s.p.Seed = seed
	s.pcg.Seed(seed, pcgStream)
}

// Sample returns the next token id. history holds the prompt and generated
// tokens so far (ids outside the vocabulary are ignored); only its tail is
// read, for penalties.
//
// Sample modifies logits in place: penalties are applied to the caller's
// slice. len(logits) may be smaller than the vocabulary size given to New
// (never larger, which panics), so callers can slice off padding ids.
func (s *Sampler) Sample(logits []float32, history []int32) int32 {
	if len(logits) == 0 || len(logits) > s.vocab {
		panic(fmt.Sprintf("sampling: got %d logits, sampler built for 1..%d", len(logits), s.vocab))
	}
	if s.pen {
		s.applyPenalties(logits, history)
	}
	switch {
	case s.p.Temperature <= 0 || s.p.TopK == 1:
		return int32(argmax(logits))
	case s.p.TopK > 0 && s.p.TopK < len(logits):
		return int32(s.sampleTopK(logits))
	}
	return int32(s.sampleFull(logits))
}

// argmax returns the index of the largest logit, the lowest on ties. NaNs
// never win; a row of only NaN/-Inf yields 0.
func argmax(logits []float32) int {
	best, bi := float32(math.Inf(-1)), 0
	for i, v := range logits {
		if v > best {
			best, bi = v, i
		}
	}
	return bi
}

// sampleTopK runs top-k, temperature, top-p and min-p over the K best logits.
func (s *Sampler) sampleTopK(logits []float32) int {
	return s.draw(s.filterTopK(logits))
}

// filterTopK returns the survivors of top-k, top-p and min-p, sorted by
// descending probability, weighted by unnormalised probability.
func (s *Sampler) filterTopK(logits []float32) []cand {
	c := s.selectTopK(logits, s.p.TopK)
	top := c[0].v
	if math.IsInf(float64(top), 0) {
		// +Inf dominates everything; all -Inf leaves nothing to weigh.
		c[0].v = 1
		return c[:1]
	}
	invT := 1 / s.p.Temperature
	var z float64
	for i := range c {
		w := float32(0)
		if x := (c[i].v - top) * invT; x > expUnderflow {
			w = s.exp.neg(x)
		}
		c[i].v = w
		z += float64(w)
	}
	n := len(c)
	if s.p.TopP < 1 {
		n = nucleusPrefix(c, 0, float64(s.p.TopP)*z)
	}
	if s.p.MinP > 0 {
		// Sorted descending, so the min-p survivors are a prefix too.
		m := 1
		for m < n && c[m].v >= s.p.MinP {
			m++
		}
		n = m
	}
	return c[:n]
}

// nucleusPrefix returns how many leading candidates (sorted by descending
// probability) are kept by top-p: the shortest prefix whose mass, added to
// the mass already kept, reaches target. At least one is kept.
func nucleusPrefix(c []cand, kept, target float64) int {
	for i := range c {
		kept += float64(c[i].v)
		if kept >= target {
			return i + 1
		}
	}
	return len(c)
}

// draw picks one candidate with probability proportional to its weight.
func (s *Sampler) draw(c []cand) int {
	var z float64
	for i := range c {
		z += float64(c[i].v)
	}
	u := s.rng.Float64() * z
	var acc float64
	last := 0
	for i := range c {
		if c[i].v <= 0 {
			continue
		}
		acc += float64(c[i].v)
		if u < acc {
			return int(c[i].id)
		}
		last = i
	}
	// Only reachable through rounding (u within an ulp of z).
	return int(c[last].id)
}
