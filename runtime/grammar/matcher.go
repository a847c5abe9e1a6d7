package grammar

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Matcher follows one generation through a grammar. It is not safe for
// concurrent use; each sequence of a batch has its own. Matchers of one
// grammar share its states, so they may run in different goroutines.
type Matcher struct {
	g      *Grammar
	s      *stacks // the grammar's DFA when the Matcher started
	cur    *dstate
	done   bool  // an end-of-answer token was taken
	walk   state // scratch: the stacks walked whole
	w      walker
	mask   Mask    // Allow's
	places []int32 // compute's scratch
	// limit, when not negative, is the tokens the answer may still take,
	// the end-of-answer one included (Limit); forced the tokens it then
	// follows; after is compute's bound on the distance a token allowed
	// leaves.
	limit  int
	forced []int32
	after  int32
	// recheckIDs is recheck's scratch.
	recheckIDs []int32
	key        []byte
	path       []*dstate // check's scratch
}

// maxCached bounds the masks a grammar keeps for the states it has seen.
const maxCached = 512

// maxCachedCount is the largest count of a loop in a state whose mask is
// kept: the states past it are each met once (a long string's).
const maxCachedCount = 16

// NewMatcher starts a generation at the grammar's root.
func (g *Grammar) NewMatcher() *Matcher {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dfa == nil || len(g.dfa.dstates) > maxStates {
		g.dfa = newStacks(g)
	}
	s := g.dfa
	var st state
	for a := range g.rules[g.root].alts {
		st = append(st, s.expand(s.intern(g.root, int32(a), 0, 0, nil, s.accept))...)
	}
	return &Matcher{g: g, s: s, cur: s.dstateOf(normalize(st)), limit: -1}
}

// Limit has the answer complete within n more tokens, its end included:
// from now on only tokens after which the text can still be completed in
// time, or is complete as it is, are allowed, so that near the end the
// text takes the shortest way to its end (closing a string, an object, a
// tool call) instead of being cut off; a text that is complete as it
// goes (free text, before a call) may still be cut. When only the
// state's own completion still fits (or nothing does), its tokens are
// the only ones allowed, one after the other. Each token taken counts.
func (m *Matcher) Limit(n int) { m.limit = n }

// Remaining is the tokens of a completion of the text from here, its end
// included: at most the fewest it needs and Limit allows.
func (m *Matcher) Remaining() int {
	if m.Done() {
		return 0
	}
	if len(m.forced) > 0 {
		return len(m.forced) + 1
	}
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	return int(m.s.distOf(m.cur)) + 1
}

// Done reports whether the text is complete and nothing more may come:
// the answer should end here.
func (m *Matcher) Done() bool {
	return m.done || (len(m.cur.st) == 1 && m.cur.accept)
}

// CanEnd reports whether the text so far is in the grammar's language.
func (m *Matcher) CanEnd() bool { return m.done || m.cur.accept }

// Accept takes the token sampled; it fails, and changes nothing, when the
// token was not allowed.
func (m *Matcher) Accept(id int32) error {
	v := m.g.vocab
	switch {
	case m.done:
		return fmt.Errorf("token %d after the end", id)
	case id < 0 || int(id) >= v.size:
		return fmt.Errorf("token %d is outside the vocabulary", id)
	case m.isEOS(id):
		if !m.CanEnd() {
			return fmt.Errorf("the end-of-answer token %d before the text is complete", id)
		}
		m.done = true
		m.taken()
		return nil
	}
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	d := m.stateAfter(id)
	if d == m.s.dead {
		return fmt.Errorf("token %d (%q) does not fit the grammar here", id, v.text[id])
	}
	m.cur = d
	m.taken()
	if len(m.forced) > 0 {
		if m.forced[0] == id {
			m.forced = m.forced[1:]
		} else {
			m.forced = nil
		}
	}
	return nil
}

// taken counts a token taken against the limit.
func (m *Matcher) taken() {
	if m.limit > 0 {
		m.limit--
	}
}

// Prefix reports how many of ids, from the first, the grammar would take
// one after the other from here; it changes nothing. It checks drafted
// tokens before a step spends rows on them.
func (m *Matcher) Prefix(ids []int32) int {
	if len(m.forced) > 0 {
		n := 0
		for n < len(ids) && n < len(m.forced) && ids[n] == m.forced[n] {
			n++
		}
		return n
	}
	c := Matcher{g: m.g, s: m.s, cur: m.cur, done: m.done, limit: m.limit}
	for i, id := range ids {
		// Within a limit, a token that would leave too much to complete
		// in time ends the prefix too: the mask would not allow it.
		if c.limit >= 0 && !c.isEOS(id) && !c.fits(id) || c.Accept(id) != nil {
			return i
		}
	}
	return len(ids)
}

// fits reports whether the text, after ordinary token id (which the
// grammar may refuse), could still be completed within the limit.
func (m *Matcher) fits(id int32) bool {
	v := m.g.vocab
	if id < 0 || int(id) >= v.size {
		return false
	}
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	d := m.stateAfter(id)
	return d.accept || int(m.s.distOf(d)) <= m.limit-2
}

// stateAfter is the state after token id, a text or special token of the
// vocabulary (s.dead when it does not fit). The caller holds g.mu.
func (m *Matcher) stateAfter(id int32) *dstate {
	v := m.g.vocab
	if v.special[id] {
		return m.s.dstateOf(m.s.advanceToken(nil, m.cur.st, id))
	}
	d := m.cur
	for _, c := range v.text[id] {
		d = m.s.step(d, c)
	}
	return d
}

func (m *Matcher) isEOS(id int32) bool {
	for _, e := range m.g.vocab.eos {
		if e == id {
			return true
		}
	}
	return false
}

// Fill sets mask to the tokens allowed next.
func (m *Matcher) Fill(mask Mask) {
	if m.done {
		clear(mask)
		return
	}
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	if m.limit >= 0 && len(m.forced) == 0 && !m.cur.accept && int(m.s.distOf(m.cur))+1 >= m.limit {
		m.force() // the state's own completion, which fits just
	}
	if len(m.forced) > 0 {
		clear(mask)
		mask.set(m.forced[0])
		return
	}
	after := m.fill(mask)
	if m.limit >= 0 && int(after) > m.limit-2 {
		m.within(mask)
	}
}

// force has the Matcher follow the completion of its state. The caller
// holds g.mu.
func (m *Matcher) force() {
	m.forced = m.s.completion(m.cur)
	if slices.Contains(m.forced, -1) {
		m.forced = nil // a byte no token spells: left to the grammar
	}
}

// fill sets mask to the tokens the grammar allows next, and returns the
// most distance one of them may leave. The caller holds g.mu.
func (m *Matcher) fill(mask Mask) int32 {
	if c := m.cur.mask; c != nil {
		copy(mask, c)
		return m.cur.after
	}
	clear(mask)
	m.compute(mask)
	s := m.s
	if m.cur.counted > maxCachedCount {
		return m.after // met once: a long loop's count
	}
	if len(s.masked) >= maxCached {
		for _, d := range s.masked {
			d.mask = nil
		}
		s.masked = s.masked[:0]
	}
	m.cur.mask, m.cur.after = append(Mask(nil), mask...), m.after
	s.masked = append(s.masked, m.cur)
	return m.after
}

// within keeps in mask the tokens after which the text can still be
// completed within the limit (a token then needs its distance and the end
// in the tokens left after it), or is complete already: an answer cut
// there by the limit is still whole (free text, a call ended). When none
// can, the state's own completion is followed. The caller holds g.mu.
func (m *Matcher) within(mask Mask) {
	s, v := m.s, m.g.vocab
	budget := int32(m.limit - 2)
	check := func(id int32, after *dstate) {
		if after.accept || s.distOf(after) <= budget { // complete if cut there, or in time
			return
		}
		mask.clear(id)
	}
	for _, f := range m.cur.st {
		if f != s.accept {
			if e := s.elem(f); e.kind == kToken && mask.Has(e.token) {
				check(e.token, m.stateAfter(e.token))
			}
		}
	}
	m.w.walk(s, v, m.cur, func(i int32, after *dstate) {
		v.tokensAt(i, func(id int32) {
			if mask.Has(id) {
				check(id, after)
			}
		})
	}, nil)
	if slices.ContainsFunc(mask, func(w uint64) bool { return w != 0 }) {
		return
	}
	if m.force(); len(m.forced) > 0 {
		mask.set(m.forced[0])
	}
}

// compute fills mask from the tables of the stacks' places, combined
// once per set of places and kept by the grammar (a string's body is the
// same dozen places at every step), checks the tokens they leave
// uncertain against the whole state, and walks the trie with the stacks
// that have no table.
func (m *Matcher) compute(mask Mask) {
	g, s := m.g, m.s
	m.walk, m.places = m.walk[:0], m.places[:0]
	// The tables of a loop's places are built for any count: a token
	// they accept is only sure where the count leaves it room. Past
	// exact, the longer ones are checked against the state.
	exact := math.MaxInt
	// after bounds the distance a token leaves: for one a table accepts,
	// what the table says it leaves in the place's rule (and what a
	// loop's count may add), then the callers' rest; for the others,
	// stepped here, their own.
	m.after = 0
	for _, f := range m.cur.st {
		if f == s.accept {
			for _, id := range g.vocab.eos {
				if int(id) < g.vocab.size {
					mask.set(id)
				}
			}
			continue
		}
		e := s.elem(f)
		switch {
		case e.kind == kToken:
			mask.set(e.token)
			m.after = max(m.after, s.dist(s.next(f)))
		case g.table(g.placeID[f.rule][f.alt][f.pos]) == nil:
			m.walk = append(m.walk, f)
		default:
			p := g.placeID[f.rule][f.alt][f.pos]
			m.places = append(m.places, p)
			m.after = max(m.after, addDist(addDist(g.byPlace[p].grow, g.slack(f)), s.dist(s.next(f.parent))))
			if l := f.loop; l != nil {
				exact = min(exact, sureLength(l, g.groups[l.group-1].deadEnd, f.count))
			}
		}
	}
	if len(m.places) > 0 {
		t := g.combined(m.places, &m.key)
		t.addTo(mask)
		m.check(t, mask)
		if exact < g.vocab.longest {
			m.recheck(mask, exact)
		}
	}
	if len(m.walk) > 0 {
		v := g.vocab
		m.w.walk(s, v, s.dstateOf(m.walk), func(i int32, after *dstate) {
			if v.ntok[i] >= 0 {
				v.tokensAt(i, mask.set)
				m.after = max(m.after, s.distOf(after))
			}
		}, nil)
	}
}

// combined returns the union of the places' tables, its uncertain tokens
// without those another place accepts, made once per set of places. The
// caller holds g.mu.
func (g *Grammar) combined(places []int32, key *[]byte) *table {
	slices.Sort(places)
	places = slices.Compact(places)
	if len(places) == 1 {
		return g.byPlace[places[0]]
	}
	*key = (*key)[:0]
	for _, p := range places {
		*key = binary.AppendUvarint(*key, uint64(p))
	}
	if t, ok := g.unions[string(*key)]; ok {
		return t
	}
	v := g.vocab
	t := &table{accepted: v.NewMask()}
	for _, p := range places {
		g.byPlace[p].addTo(t.accepted)
	}
	// Marked by rank, the uncertain tokens come out in the trie's order.
	seen := make(Mask, (len(v.byRank)+63)/64)
	for _, p := range places {
		for _, id := range g.byPlace[p].uncertain {
			if !t.accepted.Has(id) {
				seen.set(v.rank[id])
			}
		}
	}
	for w, word := range seen {
		for ; word != 0; word &= word - 1 {
			t.uncertain = append(t.uncertain, v.byRank[w*64+bits.TrailingZeros64(word)])
		}
	}
	t.sharePrefixes(v)
	if len(g.unions) >= maxUnions {
		clear(g.unions)
	}
	g.unions[string(*key)] = t
	return t
}

// sureLength is the longest token a table of a loop's place accepts for
// sure with count steps taken: each byte begins a step at most, and
// every rule a token's bytes enter must leave a way on, which a step
// does below max, and every member entered must still be able to leave
// within it. Below min, where a rule with no step may be reached, no
// length is sure.
func sureLength(l *loop, deadEnd bool, count int32) int {
	if count < l.min && (deadEnd || l.dist != nil) {
		return 0
	}
	if l.max < 0 {
		return math.MaxInt
	}
	return int(l.max - count - 1 - l.maxDist)
}

// recheck checks again the tokens of mask longer than n bytes against
// the whole state: the tables of a loop near its bounds may accept what
// the count refuses.
func (m *Matcher) recheck(mask Mask, n int) {
	v := m.g.vocab
	ids := m.recheckIDs[:0]
	for _, id := range v.byRank { // the trie's order, as check wants
		if len(v.text[id]) > n && mask.Has(id) {
			mask.clear(id)
			ids = append(ids, id)
		}
	}
	m.recheckIDs = ids
	m.checkList(ids, nil, mask)
}

// check sets in mask the uncertain tokens of t whose bytes can be taken
// from the current state. Each token starts from the states of the bytes
// it shares with the last one stepped, as a walk of their trie would,
// and a token whose shared bytes failed fails too.
func (m *Matcher) check(t *table, mask Mask) { m.checkList(t.uncertain, t.lcp, mask) }

// checkList is check of ids, in the trie's order; lcp[i] is what ids[i]
// shares with ids[i-1] (nil: found here).
func (m *Matcher) checkList(ids []int32, lcp []uint16, mask Mask) {
	v, s := m.g.vocab, m.s
	path := append(m.path[:0], m.cur) // path[k]: the state after k bytes of the last token stepped
	failed := -1                      // it failed on its byte failed
	// shared is what the token shares with the last one stepped: the
	// least lcp since, the tokens being in order.
	shared := 0
	var prev []byte
	for i, id := range ids {
		text := v.text[id]
		if lcp != nil {
			shared = min(shared, int(lcp[i]))
		} else {
			shared = min(shared, commonPrefix(prev, text))
			prev = text
		}
		if mask.Has(id) || (failed >= 0 && shared > failed) {
			continue
		}
		path, failed = path[:shared+1], -1
		d := path[shared]
		for k := shared; k < len(text); k++ {
			if d = s.step(d, text[k]); d == s.dead {
				failed = k
				break
			}
			path = append(path, d)
		}
		if failed < 0 {
			mask.set(id)
			m.after = max(m.after, s.distOf(d))
		}
		shared = math.MaxInt
	}
	m.path = path
}

// walker walks a vocabulary's trie from a state, keeping the state of
// each depth of the current path.
type walker struct{ depth []*dstate }

// walk calls took for each node whose bytes, from the root, can be taken
// from d, with the state after them, and failed for each node whose last
// byte cannot be (its subtree is skipped), with the state before it.
func (w *walker) walk(s *stacks, v *Vocab, d *dstate, took func(i int32, d *dstate), failed func(i int32, before *dstate)) {
	if len(w.depth) == 0 {
		w.depth = make([]*dstate, 1, 32)
	}
	w.depth[0] = d
	for i := int32(0); i < int32(len(v.nb)); {
		k := int(v.nd[i])
		for len(w.depth) <= k {
			w.depth = append(w.depth, nil)
		}
		next := s.step(w.depth[k-1], v.nb[i])
		w.depth[k] = next
		if next == s.dead {
			if failed != nil {
				failed(i, w.depth[k-1])
			}
			i = v.nend[i]
			continue
		}
		took(i, next)
		i++
	}
}

// Allow sets the logits of the tokens that may not come next to -Inf
// (logits has one per id of the vocabulary, the padded ones included).
func (m *Matcher) Allow(logits []float32) {
	if m.mask == nil {
		m.mask = m.g.vocab.NewMask()
	}
	m.Fill(m.mask)
	ninf := float32(math.Inf(-1))
	for w, word := range m.mask {
		if word == ^uint64(0) {
			continue
		}
		base := w * 64
		for i := 0; i < 64 && base+i < len(logits); i++ {
			if word&(1<<i) == 0 {
				logits[base+i] = ninf
			}
		}
	}
	for i := len(m.mask) * 64; i < len(logits); i++ {
		logits[i] = ninf
	}
}
