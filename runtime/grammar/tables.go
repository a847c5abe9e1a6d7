package grammar

// table is what a place in a rule accepts whatever the stack below it:
// the tokens accepted there for sure, and those that leave the rule with
// bytes still to match, which only the stack can decide.
type table struct {
	accepted  Mask    // nil when few are: they are in few
	few       []int32 // the accepted tokens, when there are no more than maxFew
	uncertain []int32 // in the trie's order
	// lcp[i] is the length of the prefix uncertain[i] shares with the
	// token before it, so a check need not compare bytes to know it.
	lcp []uint16
	// grow is the most distance (distance.go) an accepted token leaves
	// within the place's rule, to its end.
	grow int32
}

// sharePrefixes fills lcp.
func (t *table) sharePrefixes(v *Vocab) {
	t.lcp = make([]uint16, len(t.uncertain))
	var prev []byte
	for i, id := range t.uncertain {
		text := v.text[id]
		t.lcp[i], prev = uint16(commonPrefix(prev, text)), text
	}
}

// commonPrefix is the length of the prefix a and b share.
func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// maxFew is where a list of accepted tokens is as quick to set in a mask
// as a mask to OR into it. Most places accept a few tokens (a keyword, an
// indent, a digit) and a state may hold dozens of them.
const maxFew = 2048

// addTo sets the table's accepted tokens in mask.
func (t *table) addTo(mask Mask) {
	if t.accepted != nil {
		mask.or(t.accepted)
	}
	for _, id := range t.few {
		mask.set(id)
	}
}

// maxUncertain bounds a table's uncertain tokens; a place with more is
// walked with its whole stack at each step, which prunes the trie there.
const maxUncertain = 6000

// buildTables numbers the places whose symbol is a byte set, whose
// tables are built the first time a Matcher meets them (table): a list
// of tools makes thousands of places, and an answer meets few of them
// (one tool's, the properties it writes).
func (g *Grammar) buildTables() {
	g.stats.Rules = len(g.rules)
	reach := g.reachable()
	g.followSets = g.follow(reach)
	g.tabStacks = newStacks(g)
	g.placeID = make([][][]int32, len(g.rules))
	g.unions = map[string]*table{}
	for r, ru := range g.rules {
		if !reach[r] {
			continue
		}
		g.placeID[r] = make([][]int32, len(ru.alts))
		for a, seq := range ru.alts {
			g.placeID[r][a] = make([]int32, len(seq))
			for p, e := range seq {
				if e.kind != kBytes {
					continue
				}
				g.placeID[r][a][p] = int32(len(g.places))
				g.places = append(g.places, place{int32(r), int32(a), int32(p)})
			}
		}
	}
	g.byPlace = make([]*table, len(g.places))
	g.built = make([]bool, len(g.places))
	g.stats.Places = len(g.places)
}

// place is a position in a rule whose symbol is a byte set.
type place struct{ rule, alt, pos int32 }

// table is the table of place p, built once (nil: too many tokens are
// uncertain there, the whole stack is walked instead). The caller holds
// g.mu.
func (g *Grammar) table(p int32) *table {
	if g.built[p] {
		return g.byPlace[p]
	}
	pl := g.places[p]
	s := g.tabStacks
	count := int32(0)
	if g.rules[pl.rule].group != 0 {
		count = free
	}
	f := s.intern(pl.rule, pl.alt, pl.pos, count, nil, s.exit)
	t := g.buildTable(s, &g.tabWalker, f, &g.followSets[pl.rule])
	g.built[p], g.byPlace[p] = true, t
	if t != nil {
		g.stats.Tables++
		g.stats.Uncertain += len(t.uncertain)
	}
	return t
}

// BuildTables builds every place's table now, as a grammar used at once
// by many requests may want, rather than as Matchers meet them.
func (g *Grammar) BuildTables() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for p := range g.places {
		g.table(int32(p))
	}
}

// buildTable walks the trie from f, a place over the exit: a token is
// accepted when its bytes can be taken within f's rule (or end exactly
// where the rule does), uncertain when they can only be taken by leaving
// the rule with a byte that can follow it somewhere. nil when too many
// are uncertain.
func (g *Grammar) buildTable(s *stacks, w *walker, f *frame, follow *ByteSet) *table {
	v := g.vocab
	t := &table{}
	// Most places accept a few tokens: a mask, 19 KB for Qwen's
	// vocabulary, is made only past maxFew of them.
	accept := func(id int32) {
		switch {
		case t.accepted != nil:
			t.accepted.set(id)
		case len(t.few) < maxFew:
			t.few = append(t.few, id)
		default:
			t.accepted = v.NewMask()
			for _, x := range t.few {
				t.accepted.set(x)
			}
			t.accepted.set(id)
			t.few = nil
		}
	}
	// viaExit[d]: the path to depth d left the rule on a byte that can
	// follow it, so what comes below may be taken by the stack.
	viaExit := make([]bool, 1, 32)
	exitAt := func(i int32, parent *dstate) bool {
		d := int(v.nd[i])
		return viaExit[d-1] || (parent.exit && follow.Has(v.nb[i]))
	}
	tooMany := false
	w.walk(s, v, s.dstateOf(state{f}), func(i int32, after *dstate) {
		d := int(v.nd[i])
		// The state after node i's parent is one up the path, which the
		// walker holds.
		exit := exitAt(i, w.depth[d-1])
		viaExit = append(viaExit[:d], exit)
		if v.ntok[i] >= 0 {
			v.tokensAt(i, accept)
			t.grow = max(t.grow, s.distOf(after))
		}
	}, func(i int32, parent *dstate) {
		if tooMany || !exitAt(i, parent) {
			return
		}
		for j := i; j < v.nend[i]; j++ {
			v.tokensAt(j, func(id int32) { t.uncertain = append(t.uncertain, id) })
		}
		tooMany = len(t.uncertain) > maxUncertain
	})
	if tooMany {
		return nil
	}
	t.sharePrefixes(v)
	return t
}

// reachable marks the rules the root can reach; a builder makes rules a
// schema may not use (the free JSON value), and inlining leaves others
// unused.
func (g *Grammar) reachable() []bool {
	reach := make([]bool, len(g.rules))
	stack := []int32{g.root}
	reach[g.root] = true
	for len(stack) > 0 {
		r := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, alt := range g.rules[r].alts {
			for _, e := range alt {
				if e.kind == kRule && !reach[e.ref] {
					reach[e.ref] = true
					stack = append(stack, e.ref)
				}
			}
		}
	}
	return reach
}

// first returns, for each rule, the bytes its text can begin with.
func (g *Grammar) first(null []bool) []ByteSet {
	first := make([]ByteSet, len(g.rules))
	for changed := true; changed; {
		changed = false
		for r, ru := range g.rules {
			before := first[r]
			for _, alt := range ru.alts {
				g.seqFirst(alt, first, null, &first[r])
			}
			changed = changed || before != first[r]
		}
	}
	return first
}

// seqFirst adds the bytes seq can begin with to out, and reports whether
// seq matches the empty string.
func (g *Grammar) seqFirst(seq []Elem, first []ByteSet, null []bool, out *ByteSet) bool {
	for _, e := range seq {
		switch e.kind {
		case kBytes:
			orSet(out, &g.sets[e.set])
			return false
		case kToken:
			return false
		case kRule:
			orSet(out, &first[e.ref])
			if !null[e.ref] {
				return false
			}
		}
	}
	return true
}

func orSet(dst, src *ByteSet) {
	for i := range dst {
		dst[i] |= src[i]
	}
}

// follow returns, for each rule, the bytes that can come right after it
// anywhere in the grammar.
func (g *Grammar) follow(reach []bool) []ByteSet {
	null := g.nullable()
	first := g.first(null)
	follow := make([]ByteSet, len(g.rules))
	for changed := true; changed; {
		changed = false
		for r, ru := range g.rules {
			if !reach[r] {
				// What an unused rule calls may not follow in this grammar.
				continue
			}
			for _, alt := range ru.alts {
				for i, e := range alt {
					if e.kind != kRule {
						continue
					}
					before := follow[e.ref]
					if g.seqFirst(alt[i+1:], first, null, &follow[e.ref]) {
						orSet(&follow[e.ref], &follow[r])
					}
					changed = changed || before != follow[e.ref]
				}
			}
		}
	}
	return follow
}
