package grammar

import "math"

// A constrained answer must be complete within the tokens it may still
// take (a request's max_tokens): near the end, only the tokens after
// which the text can still be completed in time may come. What a state
// still needs is its distance: the tokens of a short completion, made
// of the shortest text of each frame's rest, each piece cut greedily
// into the vocabulary's longest tokens (a special token counts one).
// Any completion is an upper bound on the fewest tokens; going along it
// lowers the distance by one a token, and when another state's own
// completion would not, the Matcher follows the one it has (see Limit).
// Lengths in bytes (minLen, a loop's costs) choose the shortest texts.

// far is the distance of what cannot be completed (a rule no text
// matches); sums of distances saturate at it.
const far = math.MaxInt32 / 4

func addDist(a, b int32) int32 { return min(a+b, far) }

// distances computes, once the rules are final, each rule's fewest bytes
// (its loops free) and each loop's costs of leaving from each count
// below its min.
func (g *Grammar) distances() {
	g.minLen = make([]int32, len(g.rules))
	for r := range g.minLen {
		g.minLen[r] = far
	}
	loops := map[*loop]bool{}
	for _, r := range g.rules {
		for _, alt := range r.alts {
			for _, e := range alt {
				if e.loop != nil {
					loops[e.loop] = true
				}
			}
		}
	}
	// A fixpoint: a rule's length from its alternatives', a loop's costs
	// from its steps', each only going down.
	for changed := true; changed; {
		changed = false
		for r, ru := range g.rules {
			for _, alt := range ru.alts {
				if n := g.seqLen(alt); n < g.minLen[r] {
					g.minLen[r], changed = n, true
				}
			}
		}
		for l := range loops {
			changed = g.loopCosts(l) || changed
		}
	}
}

// seqLen is the fewest bytes of a sequence.
func (g *Grammar) seqLen(seq []Elem) int32 {
	n := int32(0)
	for _, e := range seq {
		n = addDist(n, g.elemLen(e))
	}
	return n
}

// elemLen is the fewest bytes of a symbol; a loop entered with bounds
// from its start, with its min to take.
func (g *Grammar) elemLen(e Elem) int32 {
	switch {
	case e.kind != kRule:
		return 1
	case e.loop != nil:
		return g.loopRemain(e.loop, e.ref, 0)
	}
	return g.minLen[e.ref]
}

// stepLen is the fewest bytes of a step alternative of a loop's rule,
// the rule it steps to left out.
func (g *Grammar) stepLen(alt []Elem) int32 { return g.seqLen(alt[:len(alt)-1]) }

// loopCosts updates a loop's costs of leaving: for a loop of one rule,
// its cheapest step (each of the steps still owed costs it); for an
// automaton's, each member's cost of leaving by its fewest steps (the
// cheapest of those), and below min the cheapest way to take the steps
// owed. It reports whether one went down.
func (g *Grammar) loopCosts(l *loop) bool {
	members := g.groupRules[l.group-1]
	changed := false
	if l.dist == nil {
		for _, alt := range g.rules[members[0]].alts {
			if len(alt) > 0 && g.stepLen(alt) < l.stepCost {
				l.stepCost, changed = g.stepLen(alt), true
			}
		}
		return changed
	}
	if l.exitCost == nil {
		l.exitCost = make([]int32, len(members))
		for m := range l.exitCost {
			l.exitCost[m] = far
		}
		l.belowCost = make([][]int32, len(l.below))
		for c := range l.belowCost {
			l.belowCost[c] = make([]int32, len(members))
			for m := range l.belowCost[c] {
				l.belowCost[c][m] = far
			}
		}
	}
	update := func(cur *int32, v int32) {
		if v < *cur {
			*cur, changed = v, true
		}
	}
	for m, r := range members {
		for _, alt := range g.rules[r].alts {
			if len(alt) == 0 {
				if l.dist[m] == 0 {
					update(&l.exitCost[m], 0)
				}
				continue
			}
			to := g.rules[alt[len(alt)-1].ref].member
			if l.dist[to] >= 0 && l.dist[to] == l.dist[m]-1 {
				update(&l.exitCost[m], addDist(g.stepLen(alt), l.exitCost[to]))
			}
		}
	}
	for c := len(l.below) - 1; c >= 0; c-- {
		for m, r := range members {
			for _, alt := range g.rules[r].alts {
				if len(alt) == 0 {
					continue
				}
				to := g.rules[alt[len(alt)-1].ref].member
				if l.alive(to, int32(c+1)) {
					update(&l.belowCost[c][m], addDist(g.stepLen(alt), g.loopRemain(l, alt[len(alt)-1].ref, int32(c+1))))
				}
			}
		}
	}
	return changed
}

// loopRules lists each loop's rules, by their member index.
func (g *Grammar) loopRules() [][]int32 {
	out := make([][]int32, len(g.groups))
	for r, ru := range g.rules {
		if ru.group == 0 {
			continue
		}
		rules := &out[ru.group-1]
		for int(ru.member) >= len(*rules) {
			*rules = append(*rules, -1)
		}
		(*rules)[ru.member] = int32(r)
	}
	return out
}

// loopRemain is the fewest bytes from entering rule of a loop with count
// steps taken to leaving the loop within its bounds (l nil or the count
// free: no bounds, the rule's own fewest).
func (g *Grammar) loopRemain(l *loop, rule, count int32) int32 {
	member := g.rules[rule].member
	switch {
	case l == nil || count == free:
		return g.minLen[rule]
	case l.dist == nil:
		return int32(min(int64(max(l.min-count, 0))*int64(l.stepCost), far))
	case !l.alive(member, count) || l.exitCost == nil:
		return far
	case count < l.min:
		return l.belowCost[count][member]
	}
	return l.exitCost[member]
}

// dist is the tokens of the completion of the stack f tops (f's symbol
// still to come): the rest of its rule, then of its callers'. The caller
// holds the grammar's lock.
func (s *stacks) dist(f *frame) int32 {
	if f == s.accept || f == s.exit {
		return 0
	}
	if f.dist != 0 {
		return f.dist - 1
	}
	s.units = s.g.piece(f, s.units[:0])
	d := addDist(s.g.vocab.countTokens(s.units), s.dist(s.next(f.parent)))
	f.dist = d + 1
	return d
}

// piece appends the shortest text of what frame f's own rule still has to
// match: a unit is a byte, or -1-id for a special token.
func (g *Grammar) piece(f *frame, out []int32) []int32 {
	ru := g.rules[f.rule]
	alt := ru.alts[f.alt]
	if ru.group == 0 || len(alt) == 0 || int(f.pos) >= len(alt) {
		for _, e := range alt[f.pos:] {
			out = g.elemText(e, out)
		}
		return out
	}
	// In a loop's step: the rest of it, then the loop to its end from
	// the rule stepped to, with one more step counted.
	for _, e := range alt[f.pos : len(alt)-1] {
		out = g.elemText(e, out)
	}
	count := f.count
	if count != free {
		count++
	}
	return g.loopText(f.loop, alt[len(alt)-1].ref, count, out)
}

// completion is the tokens of the completion of the state's nearest
// stack, each frame's piece cut apart: what Limit follows when nothing
// else fits.
func (s *stacks) completion(d *dstate) []int32 {
	var best *frame
	for _, f := range d.st {
		if best == nil || s.dist(f) < s.dist(best) {
			best = f
		}
	}
	var ids []int32
	for f := best; f != nil && f != s.accept && f != s.exit; f = s.next(f.parent) {
		ids = s.g.vocab.tokens(s.g.piece(f, nil), ids)
	}
	return ids
}

// elemText appends the shortest text of a symbol.
func (g *Grammar) elemText(e Elem, out []int32) []int32 {
	switch e.kind {
	case kBytes:
		set := &g.sets[e.set]
		for c := range 256 {
			if set.Has(byte(c)) {
				return append(out, int32(c))
			}
		}
		return out
	case kToken:
		return append(out, -1-e.token)
	}
	if e.loop != nil {
		return g.loopText(e.loop, e.ref, 0, out)
	}
	return append(out, g.shortest(e.ref)...)
}

// shortest is a rule's shortest text, made once: its alternative of the
// fewest bytes (the first of them), its symbols' shortest texts.
func (g *Grammar) shortest(r int32) []int32 {
	if t, ok := g.texts[r]; ok {
		return t
	}
	g.texts[r] = nil // a rule met again within itself: no text (never the shortest)
	var out []int32
	best := -1
	for a, alt := range g.rules[r].alts {
		if n := g.seqLen(alt); n < far && (best < 0 || n < g.seqLen(g.rules[r].alts[best])) {
			best = a
		}
	}
	if best >= 0 {
		for _, e := range g.rules[r].alts[best] {
			if e.kind == kRule && e.loop == nil && e.ref != r && g.rules[e.ref].group != 0 && g.rules[e.ref].group == g.rules[r].group {
				out = append(out, g.shortest(e.ref)...) // a free loop's next step
				continue
			}
			out = g.elemText(e, out)
		}
	}
	g.texts[r] = out
	return out
}

// loopText appends the shortest text from entering rule of a loop with
// count steps taken to leaving it within its bounds: the steps owed, each
// the cheapest one that keeps the cost loopRemain says.
func (g *Grammar) loopText(l *loop, rule, count int32, out []int32) []int32 {
	if l == nil || count == free {
		return append(out, g.shortest(rule)...)
	}
	for steps := 0; steps <= maxAutomaton+int(l.min); steps++ {
		need := g.loopRemain(l, rule, count)
		if need == 0 || need >= far {
			return out
		}
		var next int32 = -1
		var step []Elem
		for _, alt := range g.rules[rule].alts {
			if len(alt) == 0 {
				continue
			}
			to := alt[len(alt)-1].ref
			if l.alive(g.rules[to].member, count+1) && addDist(g.stepLen(alt), g.loopRemain(l, to, count+1)) == need {
				next, step = to, alt[:len(alt)-1]
				break
			}
		}
		if next < 0 {
			return out
		}
		for _, e := range step {
			out = g.elemText(e, out)
		}
		rule, count = next, count+1
	}
	return out
}

// distOf is a state's distance: its nearest stack's.
func (s *stacks) distOf(d *dstate) int32 {
	if d == s.dead {
		return far
	}
	if d.dist == 0 {
		best := int32(far)
		for _, f := range d.st {
			best = min(best, s.dist(f))
		}
		d.dist = best + 1
	}
	return d.dist - 1
}

// slack is how much more than the tables say the rest of a loop may
// need, for a frame of a loop with bounds: the most bytes any member
// still owes from its count on (less as the count grows; a byte is a
// token at most).
func (g *Grammar) slack(f *frame) int32 {
	l := f.loop
	if l == nil || f.count == free {
		return 0
	}
	most := int32(0)
	for m, r := range g.groupRules[l.group-1] {
		if l.alive(int32(m), f.count+1) {
			most = max(most, g.loopRemain(l, r, f.count+1))
		}
	}
	return most
}
