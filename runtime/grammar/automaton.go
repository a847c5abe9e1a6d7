package grammar

import (
	"encoding/binary"
	"fmt"
	"slices"
	"unicode/utf8"
)

// The constraints of a string (its pattern, its format, a pattern in
// each schema of an allOf, the names propertyNames allows and those it
// must leave to the properties) are each an automaton over characters;
// the string's language is their intersection, made deterministic and
// minimal, with its length bounds (minLength, maxLength, a pattern's
// ^X{n,m}$) kept apart as a counted loop.

// maxAutomaton bounds the states of a string's automaton, in its
// making and once made.
const maxAutomaton = 4096

var errAutomaton = fmt.Errorf("more than %d states: too complex to enforce", maxAutomaton)

// nfa is an automaton with empty edges, as Thompson's construction makes
// it from a pattern.
type nfa struct {
	edges [][]nfaEdge
	start int
	final []bool
}

type nfaEdge struct {
	set *charSet // nil: an empty edge
	to  int
}

func (a *nfa) state() (int, error) {
	if len(a.edges) >= maxAutomaton {
		return 0, errAutomaton
	}
	a.edges = append(a.edges, nil)
	a.final = append(a.final, false)
	return len(a.edges) - 1, nil
}

func (a *nfa) edge(from int, set *charSet, to int) {
	a.edges[from] = append(a.edges[from], nfaEdge{set, to})
}

// anyChar is every character.
func anyChar() *charSet {
	s := &charSet{nonASCII: true}
	s.addASCII(0, 0x7f)
	return s
}

// patternNFA is the automaton of the strings a pattern matches: searched
// for, so one without ^ may have anything before it and one without $
// anything after. A pattern that is an alternation at its top has each
// alternative anchored or not (^a$|^b$).
func patternNFA(pattern string) (*nfa, error) {
	a := &nfa{}
	in, err := a.state()
	if err != nil {
		return nil, err
	}
	a.start = in
	for _, alt := range topAlternatives(pattern) {
		n, start, end, err := parsePattern(alt)
		if err != nil {
			return nil, err
		}
		from, err := a.state()
		if err != nil {
			return nil, err
		}
		a.edge(in, nil, from)
		if !start {
			a.edge(from, anyChar(), from)
		}
		out, err := a.node(n, from)
		if err != nil {
			return nil, err
		}
		if !end {
			a.edge(out, anyChar(), out)
		}
		a.final[out] = true
	}
	return a, nil
}

// topAlternatives splits a pattern at the | outside groups and classes.
func topAlternatives(pattern string) []string {
	var alts []string
	depth, class, from := 0, false, 0
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; {
		case c == '\\':
			i++
		case class:
			class = c != ']'
		case c == '[':
			class = true
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == '|' && depth == 0:
			alts = append(alts, pattern[from:i])
			from = i + 1
		}
	}
	return append(alts, pattern[from:])
}

// parsePattern reads a pattern without a top-level alternation: its
// tree, and whether it is anchored at the start and at the end.
func parsePattern(pattern string) (n *reNode, start, end bool, err error) {
	p := &reParser{s: pattern}
	start = p.more() && p.peek() == '^'
	if start {
		p.pos++
	}
	end = len(pattern) > p.pos && pattern[len(pattern)-1] == '$' && (len(pattern) < 2 || pattern[len(pattern)-2] != '\\')
	if end {
		p.s = pattern[:len(pattern)-1]
	}
	if n, err = p.alternation(0); err != nil {
		return nil, false, false, err
	}
	if p.more() {
		return nil, false, false, p.errf("an unmatched )")
	}
	return n, start, end, nil
}

// node builds n from state in and returns the state it ends at.
func (a *nfa) node(n *reNode, in int) (int, error) {
	out, err := a.state()
	if err != nil {
		return 0, err
	}
	for _, alt := range n.alts {
		cur := in
		for _, piece := range alt {
			if cur, err = a.piece(piece, cur); err != nil {
				return 0, err
			}
		}
		a.edge(cur, nil, out)
	}
	return out, nil
}

func (a *nfa) piece(p rePiece, in int) (int, error) {
	atom := func(in int) (int, error) {
		if p.group != nil {
			return a.node(p.group, in)
		}
		out, err := a.state()
		if err != nil {
			return 0, err
		}
		a.edge(in, p.set, out)
		return out, nil
	}
	cur := in
	var err error
	for range p.min {
		if cur, err = atom(cur); err != nil {
			return 0, err
		}
	}
	if p.max < 0 {
		loop, err := a.state()
		if err != nil {
			return 0, err
		}
		a.edge(cur, nil, loop)
		end, err := atom(loop)
		if err != nil {
			return 0, err
		}
		a.edge(end, nil, loop)
		return loop, nil
	}
	for range p.max - p.min {
		end, err := atom(cur)
		if err != nil {
			return 0, err
		}
		next, err := a.state()
		if err != nil {
			return 0, err
		}
		a.edge(cur, nil, next)
		a.edge(end, nil, next)
		cur = next
	}
	return cur, nil
}

// literalsNFA is the automaton of the strings in words.
func literalsNFA(words []string) *nfa {
	a := &nfa{edges: [][]nfaEdge{nil}, final: []bool{false}}
	for _, w := range words {
		cur := 0
		for _, r := range w {
			a.edges = append(a.edges, nil)
			a.final = append(a.final, false)
			next := len(a.edges) - 1
			a.edge(cur, single(r), next)
			cur = next
		}
		a.final[cur] = true
	}
	return a
}

// atoms part the characters into the classes no set of some automata
// tells apart: each ASCII class, each non-ASCII character a set lists
// (in or out), and the other non-ASCII characters.
type atoms struct {
	n     int
	class [128]int32 // an ASCII character's atom
	runes []rune     // the listed non-ASCII characters; atom ascii+i
	ascii int        // the ASCII atoms, 0 to ascii-1
	rest  int        // the other non-ASCII characters
	// first[k] is a character of ASCII atom k.
	first []byte
}

func newAtoms(sets []*charSet) *atoms {
	at := &atoms{}
	n := 1
	for _, s := range sets {
		n = refine(at.class[:], n, s.hasASCII)
	}
	at.ascii = n
	at.first = make([]byte, n)
	for c := 127; c >= 0; c-- {
		at.first[at.class[c]] = byte(c)
	}
	for _, s := range sets {
		for _, r := range append(slices.Clip(s.runes), s.except...) {
			if !slices.Contains(at.runes, r) {
				at.runes = append(at.runes, r)
			}
		}
	}
	slices.Sort(at.runes)
	at.rest = n + len(at.runes)
	at.n = at.rest + 1
	return at
}

// has reports whether set s holds the characters of atom k.
func (at *atoms) has(s *charSet, k int) bool {
	switch {
	case k < at.ascii:
		return s.hasASCII(at.first[k])
	case k < at.rest:
		return s.has(at.runes[k-at.ascii])
	}
	return s.nonASCII
}

// atomOf is the atom of character r.
func (at *atoms) atomOf(r rune) int {
	if r < 0x80 {
		return int(at.class[r])
	}
	if i, ok := slices.BinarySearch(at.runes, r); ok {
		return at.ascii + i
	}
	return at.rest
}

// numbering numbers the states of a construction by their keys, at
// most maxAutomaton of them.
type numbering[K comparable] map[K]int32

// add is k's number, and whether k is new (errAutomaton past the bound).
func (m numbering[K]) add(k K) (id int32, fresh bool, err error) {
	if id, ok := m[k]; ok {
		return id, false, nil
	}
	if len(m) >= maxAutomaton {
		return 0, false, errAutomaton
	}
	m[k] = int32(len(m))
	return m[k], true, nil
}

// add appends a state whose edges are still to come.
func (d *dfa) add(final bool) {
	d.final = append(d.final, final)
	d.next = append(d.next, nil)
}

// dfa is a deterministic automaton over atoms; state 0 is the start.
type dfa struct {
	next  [][]int32 // next[q][atom]; -1: no way on
	final []bool
}

// determinize is the subset construction of a over the atoms.
func (a *nfa) determinize(at *atoms) (*dfa, error) {
	// in[e] marks, for each edge with a set, the atoms it takes.
	closure := func(set []int) []int {
		seen := map[int]bool{}
		stack := append([]int(nil), set...)
		for _, q := range set {
			seen[q] = true
		}
		for len(stack) > 0 {
			q := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, e := range a.edges[q] {
				if e.set == nil && !seen[e.to] {
					seen[e.to] = true
					stack = append(stack, e.to)
				}
			}
		}
		out := make([]int, 0, len(seen))
		for q := range seen {
			out = append(out, q)
		}
		slices.Sort(out)
		return out
	}
	takes := map[*charSet][]bool{}
	takesOf := func(s *charSet) []bool {
		t, ok := takes[s]
		if !ok {
			t = make([]bool, at.n)
			for k := range at.n {
				t[k] = at.has(s, k)
			}
			takes[s] = t
		}
		return t
	}
	key := func(set []int) string {
		var b []byte
		for _, q := range set {
			b = binary.AppendUvarint(b, uint64(q))
		}
		return string(b)
	}
	d := &dfa{}
	var sets [][]int
	ids := numbering[string]{}
	add := func(set []int) (int32, error) {
		id, fresh, err := ids.add(key(set))
		if fresh {
			sets = append(sets, set)
			final := false
			for _, q := range set {
				final = final || a.final[q]
			}
			d.add(final)
		}
		return id, err
	}
	if _, err := add(closure([]int{a.start})); err != nil {
		return nil, err
	}
	for i := 0; i < len(sets); i++ {
		row := make([]int32, at.n)
		for k := range at.n {
			var moved []int
			for _, q := range sets[i] {
				for _, e := range a.edges[q] {
					if e.set != nil && takesOf(e.set)[k] && !slices.Contains(moved, e.to) {
						moved = append(moved, e.to)
					}
				}
			}
			row[k] = -1
			if len(moved) > 0 {
				id, err := add(closure(moved))
				if err != nil {
					return nil, err
				}
				row[k] = id
			}
		}
		d.next[i] = row
	}
	return d, nil
}

// intersect is the product of d and e, over the same atoms.
func (d *dfa) intersect(e *dfa) (*dfa, error) {
	if d.empty() || e.empty() {
		return &dfa{}, nil
	}
	n := len(d.next[0])
	out := &dfa{}
	var pairs [][2]int32
	ids := numbering[[2]int32]{}
	add := func(p [2]int32) (int32, error) {
		id, fresh, err := ids.add(p)
		if fresh {
			pairs = append(pairs, p)
			out.add(d.final[p[0]] && e.final[p[1]])
		}
		return id, err
	}
	add([2]int32{0, 0})
	for i := 0; i < len(pairs); i++ {
		p := pairs[i]
		row := make([]int32, n)
		for k := range n {
			a, b := d.next[p[0]][k], e.next[p[1]][k]
			row[k] = -1
			if a >= 0 && b >= 0 {
				id, err := add([2]int32{a, b})
				if err != nil {
					return nil, err
				}
				row[k] = id
			}
		}
		out.next[i] = row
	}
	return out, nil
}

// complement is the automaton of the strings d does not accept.
func (d *dfa) complement() *dfa {
	n := len(d.next[0])
	sink := int32(len(d.next))
	out := &dfa{final: make([]bool, len(d.final)+1)}
	for q, row := range d.next {
		r := make([]int32, n)
		for k, to := range row {
			r[k] = to
			if to < 0 {
				r[k] = sink
			}
		}
		out.next = append(out.next, r)
		out.final[q] = !d.final[q]
	}
	r := make([]int32, n)
	for k := range r {
		r[k] = sink
	}
	out.next = append(out.next, r)
	out.final[sink] = true
	return out
}

// minimize trims the states that cannot reach a final one (or cannot be
// reached) and merges those no string tells apart (Moore's refinement).
// A language without strings is a dfa with no state.
func (d *dfa) minimize() *dfa {
	n := len(d.next)
	if n == 0 {
		return d
	}
	atomsN := 0
	if n > 0 {
		atomsN = len(d.next[0])
	}
	// Useful states: reached from the start, and reaching a final one.
	reached := make([]bool, n)
	stack := []int32{0}
	reached[0] = true
	for len(stack) > 0 {
		q := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, to := range d.next[q] {
			if to >= 0 && !reached[to] {
				reached[to] = true
				stack = append(stack, to)
			}
		}
	}
	live := make([]bool, n)
	for changed := true; changed; {
		changed = false
		for q := range n {
			if live[q] || !reached[q] {
				continue
			}
			if d.final[q] {
				live[q], changed = true, true
				continue
			}
			for _, to := range d.next[q] {
				if to >= 0 && live[to] {
					live[q], changed = true, true
					break
				}
			}
		}
	}
	if !live[0] {
		return &dfa{}
	}
	// Moore: classes by finality, refined by the classes of the next
	// states (-1 for none or a useless one) until nothing splits.
	class := make([]int32, n)
	for q := range n {
		class[q] = -1
		if live[q] {
			class[q] = 0
			if d.final[q] {
				class[q] = 1
			}
		}
	}
	for {
		sig := map[string]int32{}
		next := make([]int32, n)
		var buf []byte
		for q := range n {
			if !live[q] {
				next[q] = -1
				continue
			}
			buf = binary.AppendVarint(buf[:0], int64(class[q]))
			for _, to := range d.next[q] {
				c := int32(-1)
				if to >= 0 {
					c = class[to]
				}
				buf = binary.AppendVarint(buf, int64(c))
			}
			id, ok := sig[string(buf)]
			if !ok {
				id = int32(len(sig))
				sig[string(buf)] = id
			}
			next[q] = id
		}
		// Each round refines the last: it is stable once no class split.
		done := countClasses(next) == countClasses(class)
		class = next
		if done {
			break
		}
	}
	// Number the classes from the start's, in the order they are met.
	order := map[int32]int32{class[0]: 0}
	queue := []int{0}
	rep := []int{0}
	for i := 0; i < len(queue); i++ {
		for _, to := range d.next[queue[i]] {
			if to < 0 || !live[to] {
				continue
			}
			if _, ok := order[class[to]]; !ok {
				order[class[to]] = int32(len(rep))
				rep = append(rep, int(to))
				queue = append(queue, int(to))
			}
		}
	}
	out := &dfa{next: make([][]int32, len(rep)), final: make([]bool, len(rep))}
	for i, q := range rep {
		row := make([]int32, atomsN)
		for k, to := range d.next[q] {
			row[k] = -1
			if to >= 0 && live[to] {
				row[k] = order[class[to]]
			}
		}
		out.next[i], out.final[i] = row, d.final[q]
	}
	return out
}

func countClasses(class []int32) int {
	seen := map[int32]bool{}
	for _, c := range class {
		if c >= 0 {
			seen[c] = true
		}
	}
	return len(seen)
}

// empty reports whether d accepts no string (once minimized).
func (d *dfa) empty() bool { return len(d.next) == 0 }

// matches reports whether d accepts s.
func (d *dfa) matches(at *atoms, s string) bool {
	if d.empty() {
		return false
	}
	q := int32(0)
	for _, r := range s {
		if q = d.next[q][at.atomOf(r)]; q < 0 {
			return false
		}
	}
	return d.final[q]
}

// lengths are the fewest characters d accepts, and the most (-1: no
// bound, a loop on the way to a final state).
func (d *dfa) lengths() (shortest, longest int) {
	n := len(d.next)
	dist := make([]int, n)
	for q := range dist {
		dist[q] = -1
	}
	dist[0] = 0
	queue := []int{0}
	shortest = -1
	for i := 0; i < len(queue); i++ {
		q := queue[i]
		if d.final[q] && shortest < 0 {
			shortest = dist[q]
		}
		for _, to := range d.next[q] {
			if to >= 0 && dist[to] < 0 {
				dist[to] = dist[q] + 1
				queue = append(queue, int(to))
			}
		}
	}
	// Every state of a minimal automaton is on a way to a final one, so
	// a cycle anywhere means no bound.
	const (
		unseen = iota
		active
		done
	)
	state := make([]uint8, n)
	long := make([]int, n)
	cyclic := false
	var visit func(q int) int
	visit = func(q int) int {
		switch state[q] {
		case active:
			cyclic = true
			return 0
		case done:
			return long[q]
		}
		state[q] = active
		best := -1
		if d.final[q] {
			best = 0
		}
		for _, to := range d.next[q] {
			if to >= 0 {
				if l := visit(int(to)); l >= 0 {
					best = max(best, l+1)
				}
			}
		}
		state[q], long[q] = done, best
		return best
	}
	longest = visit(0)
	if cyclic {
		longest = -1
	}
	return shortest, longest
}

// utf8Seqs appends to out the sequences of byte ranges whose texts are
// the UTF-8 encodings of the runes lo to hi (no surrogates among them),
// each sequence one encoding length and one range per byte.
func utf8Seqs(lo, hi rune, out [][][2]byte) [][][2]byte {
	if lo > hi {
		return out
	}
	for _, limit := range []rune{0x7f, 0x7ff, 0xffff} {
		if lo <= limit && hi > limit {
			out = utf8Seqs(lo, limit, out)
			return utf8Seqs(limit+1, hi, out)
		}
	}
	n := utf8.RuneLen(lo)
	for i := 1; i < n; i++ {
		m := rune(1)<<(6*i) - 1 // the bits of the last i bytes
		if lo&^m != hi&^m {
			if lo&m != 0 {
				out = utf8Seqs(lo, lo|m, out)
				return utf8Seqs((lo|m)+1, hi, out)
			}
			if hi&m != m {
				out = utf8Seqs(lo, hi&^m-1, out)
				return utf8Seqs(hi&^m, hi, out)
			}
		}
	}
	a, b := utf8.AppendRune(nil, lo), utf8.AppendRune(nil, hi)
	seq := make([][2]byte, n)
	for i := range n {
		seq[i] = [2]byte{a[i], b[i]}
	}
	return append(out, seq)
}
