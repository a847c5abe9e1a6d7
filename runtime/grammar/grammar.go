package grammar

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// ByteSet is a set of byte values.
type ByteSet [4]uint64

// Has reports whether c is in the set.
func (s *ByteSet) Has(c byte) bool { return s[c>>6]&(1<<(c&63)) != 0 }

// Add puts the bytes lo through hi in the set.
func (s *ByteSet) Add(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s[c>>6] |= 1 << (c & 63)
	}
}

// Empty reports whether the set has no byte.
func (s *ByteSet) Empty() bool { return s[0]|s[1]|s[2]|s[3] == 0 }

// Elem is a symbol of a rule's sequence: a byte of a set, a rule, or a
// special token (an added token such as <tool_call>, which only its own
// id can match: text spelling it does not).
type Elem struct {
	kind  elemKind
	set   int32 // kBytes: an index into Grammar.sets
	ref   int32 // kRule
	token int32 // kToken
	// loop, for a rule of a loop (Builder.Loop), bounds the steps the text
	// takes through the loop from here; nil: any number.
	loop *loop
}

type elemKind uint8

const (
	kBytes elemKind = iota
	kRule
	kToken
)

type rule struct {
	name string
	alts [][]Elem
	// group, when not 0, is the loop the rule is one of (Builder.Loop),
	// member its index among the loop's rules.
	group  int32
	member int32
}

// group is a loop's rules as one: deadEnd is set when one of them has no
// step, so that a text can reach it with fewer than min steps, where
// only the count tells that it may not end.
type group struct{ deadEnd bool }

// loop bounds the steps a text takes through a loop's rules from where
// it enters them: a Matcher's stacks keep the count, so a bound costs
// no rules, and the tables, built for any count, are the same whatever
// the bounds.
type loop struct {
	group    int32
	min, max int32 // max < 0: no bound
	// For the states of an automaton (a string's pattern within its
	// lengths), not every member can leave the loop within the bounds
	// from every count: dist is each member's fewest steps to leaving,
	// maxDist the most of them, and below[c] which members can leave
	// within the bounds from c < min steps. nil dist: every member can.
	dist    []int32
	maxDist int32
	below   [][]bool
	// The fewest bytes to leave (distance.go): for a loop of one rule,
	// its cheapest step; for an automaton's, each member's from min on
	// (exitCost) and below it (belowCost[c]).
	stepCost  int32
	exitCost  []int32
	belowCost [][]int32
}

// alive reports whether the loop's member, entered with count steps
// taken, can still leave the loop within its bounds: a text that enters
// it otherwise could not be completed.
func (l *loop) alive(member, count int32) bool {
	switch {
	case l == nil || l.dist == nil || count == free:
		return true
	case count < l.min:
		return l.below[count][member]
	}
	return l.max < 0 || count+l.dist[member] <= l.max
}

// free is the count of a loop's frames in the tables, which are built
// once for every count: steps and leaving are always allowed.
const free = -1

// allows reports whether a loop's rule, entered with count steps taken,
// may take the alternative alt: a step below max, leaving at min or more.
// A step of an automaton's loop goes to a member (to) that must then be
// alive: checked here, before the step's first byte, as a step that
// cannot be completed must not begin; checked after it only, a token
// that ends inside a multi-byte character would pass and leave no way
// on.
func (l *loop) allows(alt []Elem, count, to int32) bool {
	if l == nil || count == free {
		return true
	}
	if len(alt) == 0 {
		return count >= l.min
	}
	return (l.max < 0 || count < l.max) && l.alive(to, count+1)
}

// Grammar is a compiled grammar: the rules, and the per-place token tables
// for one vocabulary.
type Grammar struct {
	rules []rule
	sets  []ByteSet
	root  int32
	// class[c] is byte c's class: the bytes no set tells apart (nclass).
	class  [256]uint8
	nclass int
	vocab  *Vocab
	stats  Stats
	// placeID numbers the places whose symbol is a byte set (places lists
	// them); byPlace is their tables, each the tokens accepted there
	// whatever the stack below (nil where the whole stack must be walked
	// instead), built when first met (built), with tabStacks, tabWalker
	// and followSets, under mu.
	placeID    [][][]int32
	places     []place
	byPlace    []*table
	built      []bool
	tabStacks  *stacks
	tabWalker  walker
	followSets []ByteSet
	// What the grammar's Matchers share, made as they meet it, under mu:
	// unions are the tables of sets of places met together; dfa is the
	// states met, with their successors and masks. A request's mask is
	// then most often one another request made.
	mu     sync.Mutex
	unions map[string]*table
	dfa    *stacks
	// relaxed are the schema keywords the grammar holds to less than
	// they ask (Compile).
	relaxed []Relaxation
	groups  []group
	// groupRules are each loop's rules; minLen each rule's fewest bytes
	// (distance.go).
	groupRules [][]int32
	minLen     []int32
	texts      map[int32][]int32 // rules' shortest texts, made as met (under mu)
}

// Relaxed lists the keywords of the answer's schemas that the grammar
// could not enforce and relaxed: a tool's parameters' always, the
// answer's schema's unless Answer.Strict refused them. A server reports
// them (a log line, a response header), since the answer may not be
// valid for them.
func (g *Grammar) Relaxed() []Relaxation { return slices.Clone(g.relaxed) }

// maxUnions bounds the combined tables a grammar keeps.
const maxUnions = 4096

// maxStates bounds the states a grammar's DFA keeps: past it, new
// Matchers start a new one (nested values make states without end).
const maxStates = 1 << 14

// Stats describes a compiled grammar: its rules and places, and the
// tables built so far (BuildTables builds them all).
type Stats struct {
	Rules, Places, Tables int
	// Uncertain is the number of tokens the tables leave to be checked
	// against the stack, over all tables.
	Uncertain int
}

// Stats returns the grammar's sizes.
func (g *Grammar) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stats
}

// Builder makes a Grammar's rules.
type Builder struct {
	rules  []rule
	sets   []ByteSet
	setID  map[ByteSet]int32
	lits   map[string]int32
	groups []group
	// repeats are Repeat's rules, by item and bounds, and loops its loops
	// by item: a repetition made again is the same rules, whose places
	// get one table.
	repeats map[string]Elem
	loops   map[string]int32
}

// NewBuilder starts a grammar.
func NewBuilder() *Builder {
	return &Builder{setID: map[ByteSet]int32{}, lits: map[string]int32{}, repeats: map[string]Elem{}, loops: map[string]int32{}}
}

// Rule declares a rule without alternatives yet, so that rules can refer
// to each other; Define gives them.
func (b *Builder) Rule(name string) int32 {
	b.rules = append(b.rules, rule{name: name})
	return int32(len(b.rules) - 1)
}

// Define sets a rule's alternatives, each a sequence. An empty sequence
// matches the empty string.
func (b *Builder) Define(r int32, alts ...[]Elem) { b.rules[r].alts = alts }

// New declares and defines a rule.
func (b *Builder) New(name string, alts ...[]Elem) int32 {
	r := b.Rule(name)
	b.Define(r, alts...)
	return r
}

// Set is a byte of the set.
func (b *Builder) Set(s ByteSet) Elem {
	id, ok := b.setID[s]
	if !ok {
		id = int32(len(b.sets))
		b.sets = append(b.sets, s)
		b.setID[s] = id
	}
	return Elem{kind: kBytes, set: id}
}

// Range is a byte from lo to hi.
func (b *Builder) Range(lo, hi byte) Elem {
	var s ByteSet
	s.Add(lo, hi)
	return b.Set(s)
}

// Byte is the byte c.
func (b *Builder) Byte(c byte) Elem { return b.Range(c, c) }

// Lit is the bytes of s, one after the other.
func (b *Builder) Lit(s string) []Elem {
	out := make([]Elem, len(s))
	for i := range len(s) {
		out[i] = b.Byte(s[i])
	}
	return out
}

// LitRule is a rule matching s alone, shared by every use of s.
func (b *Builder) LitRule(s string) Elem {
	if r, ok := b.lits[s]; ok {
		return Ref(r)
	}
	r := b.New(fmt.Sprintf("%q", s), b.Lit(s))
	b.lits[s] = r
	return Ref(r)
}

// Ref is the rule r.
func Ref(r int32) Elem { return Elem{kind: kRule, ref: r} }

// Token is the special token id.
func Token(id int32) Elem { return Elem{kind: kToken, token: id} }

// Seq joins Elems and sequences of them into one sequence.
func Seq(parts ...any) []Elem {
	var out []Elem
	for _, p := range parts {
		switch v := p.(type) {
		case Elem:
			out = append(out, v)
		case []Elem:
			out = append(out, v...)
		default:
			panic(fmt.Sprintf("grammar.Seq: %T", p))
		}
	}
	return out
}

// Loop makes rules one counted loop, entered at the first. Each
// alternative of its rules is either empty, which leaves the loop, or a
// step: symbols that match at least one byte, then a rule of the loop,
// which the Matcher enters with one more step counted. The loop, entered
// here, may be left once it has taken min steps, and takes at most max
// (max < 0: no bound). The count lives in the Matcher's stacks, so the
// grammar's size does not grow with the bounds (a string's maxLength of
// 524288 is one rule).
func (b *Builder) Loop(min, max int, rules ...int32) Elem {
	e, _ := b.bounded(b.group(rules), rules[0], min, max)
	return e
}

// group makes rules a loop's, and returns its id.
func (b *Builder) group(rules []int32) int32 {
	b.groups = append(b.groups, group{})
	id := int32(len(b.groups))
	for i, r := range rules {
		b.rules[r].group, b.rules[r].member = id, int32(i)
	}
	return id
}

// bounded is rule r of loop g entered with bounds.
func (b *Builder) bounded(g, r int32, min, max int) (Elem, *loop) {
	l := &loop{group: g, min: int32(min), max: int32(max), stepCost: far}
	e := Ref(r)
	e.loop = l
	return e, l
}

// unrolled bounds the rules Repeat makes for a bounded repetition as a
// chain of rules, one per count, each a place of its own in the tables:
// cheaper to step through than a counted loop (and the states of its
// counts keep their masks), but each place is a table built. A single
// byte (a digit, an indentation) is cheap to build and is unrolled
// further.
const (
	unrolled     = 4
	unrolledByte = 24
)

// Repeat is a rule matching min to max repetitions of item (max < 0: no
// bound). Its rules recur on the right, which a Matcher follows without
// growing its stack. Large bounds are a counted loop (Loop).
func (b *Builder) Repeat(name string, item []Elem, min, max int) Elem {
	key := fmt.Sprint(elemsKey(item), min, max)
	if e, ok := b.repeats[key]; ok {
		return e
	}
	e := b.repeat(name, item, min, max)
	b.repeats[key] = e
	return e
}

// elemsKey is a sequence as a key.
func elemsKey(seq []Elem) string {
	var sb strings.Builder
	for _, e := range seq {
		fmt.Fprintf(&sb, "%d.%d.%d.%d.%p ", e.kind, e.set, e.ref, e.token, e.loop)
	}
	return sb.String()
}

func (b *Builder) repeat(name string, item []Elem, min, max int) Elem {
	limit := unrolled
	if len(item) == 1 && item[0].kind == kBytes {
		limit = unrolledByte
	}
	if max < 0 || max > limit {
		// One rule for the item's repetitions whatever their bounds, so
		// that its places get one table.
		key := elemsKey(item)
		r, ok := b.loops[key]
		if !ok {
			r = b.Rule(name + "*")
			b.Define(r, Seq(item, Ref(r)), nil)
			b.group([]int32{r})
			b.loops[key] = r
		}
		if min == 0 && max < 0 {
			return Ref(r) // no bound: no count
		}
		e, _ := b.bounded(b.rules[r].group, r, min, max)
		return e
	}
	tail := b.New(name+"{0}", nil)
	for k := 1; k <= max-min; k++ {
		tail = b.New(fmt.Sprintf("%s{0,%d}", name, k), Seq(item, Ref(tail)), nil)
	}
	// The items that must come are a chain too, not one sequence: each
	// item is then followed by the rest of the chain in the same rule,
	// which is where the tables can see past it.
	for k := 1; k <= min; k++ {
		tail = b.New(fmt.Sprintf("%s{%d,%d}", name, k, k+max-min), Seq(item, Ref(tail)))
	}
	return Ref(tail)
}

// Optional is a rule matching seq or nothing.
func (b *Builder) Optional(name string, seq []Elem) Elem {
	return Ref(b.New(name+"?", seq, nil))
}

// Alt is a rule matching any of the sequences.
func (b *Builder) Alt(name string, alts ...[]Elem) Elem {
	return Ref(b.New(name, alts...))
}

// MaxRules bounds a grammar's size: a schema's lengths and counts become
// rules, and a grammar is compiled per request.
const MaxRules = 200000

// Build checks the rules and compiles the grammar rooted at root for the
// vocabulary.
func (b *Builder) Build(root int32, v *Vocab) (*Grammar, error) {
	if len(b.rules) > MaxRules {
		return nil, fmt.Errorf("the grammar has %d rules, more than %d: a length or count in the schema is too large", len(b.rules), MaxRules)
	}
	g := &Grammar{rules: b.rules, sets: b.sets, root: root, vocab: v, groups: b.groups, texts: map[int32][]int32{}}
	for _, r := range g.rules {
		for _, alt := range r.alts {
			for _, e := range alt {
				if e.kind == kRule && (e.ref < 0 || int(e.ref) >= len(g.rules)) {
					return nil, fmt.Errorf("rule %s refers to rule %d, which does not exist", r.name, e.ref)
				}
			}
		}
	}
	if err := g.checkLeftRecursion(); err != nil {
		return nil, err
	}
	if err := g.checkLoops(); err != nil {
		return nil, err
	}
	g.inline()
	g.groupRules = g.loopRules()
	g.distances()
	g.classify()
	g.buildTables()
	return g, nil
}

// classify parts the bytes into classes no byte set tells apart: a state
// steps alike on every byte of a class, so the DFA keeps a successor per
// class, made once for, say, all the letters a string may hold.
func (g *Grammar) classify() {
	n := 1
	for _, set := range g.sets {
		n = refine(g.class[:], n, set.Has)
	}
	g.nclass = n
}

// refine splits the classes of characters 0 to len(class)-1 (n of them)
// where in holds some of a class's characters and not others, and
// returns how many there are then: refined one set at a time, a class
// splits in two at most, so there are never more than the characters.
func refine[T uint8 | int32](class []T, n int, in func(c byte) bool) int {
	inside, all := make([]int, len(class)), make([]int, len(class))
	for c := range class {
		all[class[c]]++
		if in(byte(c)) {
			inside[class[c]]++
		}
	}
	to := make([]int, len(class)) // a class split: 1 + the class its characters in the set go to
	for c := range class {
		k := class[c]
		if !in(byte(c)) || inside[k] == all[k] {
			continue
		}
		if to[k] == 0 {
			to[k] = n + 1
			n++
		}
		class[c] = T(to[k] - 1)
	}
	return n
}

// maxInlined bounds the alternatives inlining may give a rule.
const maxInlined = 64

// inline splices rules made of byte sets alone (a character, a literal)
// into the sequences that use them. A table is built per place in a
// rule, and a place in a one-character rule leaves its rule after one
// byte, so almost every token would depend on the stack there; inlined,
// the place is in the loop that repeats the character (a string's body),
// which only the closing quote leaves.
func (g *Grammar) inline() {
	terminal := func(r int32) bool {
		if r == g.root || len(g.rules[r].alts) > 32 || g.rules[r].group != 0 {
			return false
		}
		for _, alt := range g.rules[r].alts {
			for _, e := range alt {
				if e.kind != kBytes {
					return false
				}
			}
		}
		return true
	}
	null := g.nullable() // inlining keeps each rule's language
	for changed := true; changed; {
		changed = false
		for r := range g.rules {
			var out [][]Elem
			grew := false
			for _, alt := range g.rules[r].alts {
				expanded := [][]Elem{nil}
				for i, e := range alt {
					// Last in a sequence, a rule is a tail call the tables
					// see through. A repeat's chain is one (it may match
					// nothing): inlined, it would make a place per count,
					// all of them in every state.
					chain := e.kind == kRule && i == len(alt)-1 && null[e.ref] && len(g.rules[e.ref].alts) > 1
					if e.kind == kRule && e.ref != int32(r) && !chain && terminal(e.ref) && len(expanded)*len(g.rules[e.ref].alts) <= maxInlined {
						var next [][]Elem
						for _, pre := range expanded {
							for _, talt := range g.rules[e.ref].alts {
								next = append(next, append(append([]Elem(nil), pre...), talt...))
							}
						}
						expanded, grew = next, true
						continue
					}
					for i := range expanded {
						expanded[i] = append(expanded[i], e)
					}
				}
				out = append(out, expanded...)
			}
			if grew && len(out) <= maxInlined {
				g.rules[r].alts, changed = out, true
			}
		}
	}
}

// nullable reports, for each rule, whether it matches the empty string.
func (g *Grammar) nullable() []bool {
	null := make([]bool, len(g.rules))
	for changed := true; changed; {
		changed = false
		for i, r := range g.rules {
			if null[i] {
				continue
			}
			for _, alt := range r.alts {
				if seqNullable(alt, null) {
					null[i], changed = true, true
					break
				}
			}
		}
	}
	return null
}

func seqNullable(seq []Elem, null []bool) bool {
	for _, e := range seq {
		if e.kind != kRule || !null[e.ref] {
			return false
		}
	}
	return true
}

// checkLoops checks that each alternative of a loop's rules is empty or
// a step (Builder.Loop): a step that matched nothing would be counted
// without a byte taken, and the count would not bound the text.
func (g *Grammar) checkLoops() error {
	null := g.nullable()
	steps := make([]int, len(g.groups)+1)
	for _, r := range g.rules {
		if r.group == 0 {
			continue
		}
		for _, alt := range r.alts {
			if len(alt) == 0 {
				continue
			}
			last := alt[len(alt)-1]
			if last.kind != kRule || g.rules[last.ref].group != r.group || last.loop != nil {
				return fmt.Errorf("rule %s of a loop: an alternative ends outside the loop", r.name)
			}
			if seqNullable(alt[:len(alt)-1], null) {
				return fmt.Errorf("rule %s of a loop: a step may match nothing", r.name)
			}
			steps[r.group]++
		}
	}
	for _, r := range g.rules {
		if r.group != 0 && !slices.ContainsFunc(r.alts, func(alt []Elem) bool { return len(alt) > 0 }) {
			g.groups[r.group-1].deadEnd = true
		}
	}
	return nil
}

// checkLeftRecursion refuses a rule that can reach itself without
// consuming anything: a Matcher would expand it forever.
func (g *Grammar) checkLeftRecursion() error {
	null := g.nullable()
	const (
		unseen = iota
		active
		done
	)
	state := make([]uint8, len(g.rules))
	var path []string
	var visit func(r int32) error
	visit = func(r int32) error {
		switch state[r] {
		case active:
			return fmt.Errorf("the grammar is left-recursive: %s", strings.Join(append(path, g.rules[r].name), " -> "))
		case done:
			return nil
		}
		state[r] = active
		path = append(path, g.rules[r].name)
		for _, alt := range g.rules[r].alts {
			for _, e := range alt {
				if e.kind != kRule {
					break
				}
				if err := visit(e.ref); err != nil {
					return err
				}
				if !null[e.ref] {
					break
				}
			}
		}
		path = path[:len(path)-1]
		state[r] = done
		return nil
	}
	for r := range g.rules {
		if err := visit(int32(r)); err != nil {
			return err
		}
	}
	return nil
}
