package grammar

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// strSpec is what a string must be: accepted by each automaton of must,
// by none of mustNot, and of lo to hi characters (hi < 0: no bound).
type strSpec struct {
	must, mustNot []*nfa
	lo, hi        int
}

// strLang is a string's language made: the automaton of its characters
// (nil: any), over its atoms, and its length bounds.
type strLang struct {
	at     *atoms
	d      *dfa
	lo, hi int
}

// compile makes the spec's language: its automata's intersection,
// minimal. An automaton too large to make is errAutomaton.
func (sp *strSpec) compile() (*strLang, error) {
	lang := &strLang{lo: sp.lo, hi: sp.hi}
	if len(sp.must) == 0 && len(sp.mustNot) == 0 {
		return lang, nil
	}
	var sets []*charSet
	for _, a := range append(slices.Clip(sp.must), sp.mustNot...) {
		for _, edges := range a.edges {
			for _, e := range edges {
				if e.set != nil {
					sets = append(sets, e.set)
				}
			}
		}
	}
	lang.at = newAtoms(sets)
	var d *dfa
	add := func(e *dfa) error {
		if d == nil {
			d = e
			return nil
		}
		var err error
		d, err = d.intersect(e)
		if err == nil {
			d = d.minimize()
		}
		return err
	}
	for _, a := range sp.must {
		e, err := a.determinize(lang.at)
		if err != nil {
			return nil, err
		}
		if err := add(e.minimize()); err != nil {
			return nil, err
		}
	}
	for _, a := range sp.mustNot {
		e, err := a.determinize(lang.at)
		if err != nil {
			return nil, err
		}
		if d == nil {
			d = (&dfa{next: [][]int32{make([]int32, lang.at.n)}, final: []bool{true}})
			for k := range d.next[0] {
				d.next[0][k] = 0
			}
		}
		if err := add(e.minimize().complete(lang.at.n).complement()); err != nil {
			return nil, err
		}
	}
	lang.d = d.minimize()
	return lang, nil
}

// complete is d with no missing edge, which complement needs; a dfa
// without states is one that accepts nothing.
func (d *dfa) complete(atoms int) *dfa {
	if d.empty() {
		return &dfa{next: [][]int32{make([]int32, atoms)}, final: []bool{false}}
	}
	return d
}

// matches reports whether s is in the language.
func (l *strLang) matches(s string) bool {
	n := 0
	for range s {
		n++
	}
	if n < l.lo || l.hi >= 0 && n > l.hi {
		return false
	}
	return l.d == nil || l.d.matches(l.at, s)
}

// empty reports whether no string is in the language.
func (l *strLang) empty() bool {
	if l.hi >= 0 && l.lo > l.hi {
		return true
	}
	if l.d == nil {
		return false
	}
	if l.d.empty() {
		return true
	}
	// A string of at least lo characters has one of lo to lo+n too (a
	// longer one has a cycle to take out), so looking that far is enough.
	n := len(l.d.next)
	limit := l.lo + n
	if l.hi >= 0 {
		limit = min(limit, l.hi)
	}
	cur := make([]bool, n)
	cur[0] = true
	for length := 0; length <= limit; length++ {
		next := make([]bool, n)
		any := false
		for q, in := range cur {
			if !in {
				continue
			}
			if length >= l.lo && l.d.final[q] {
				return false
			}
			for _, to := range l.d.next[q] {
				if to >= 0 {
					next[to], any = true, true
				}
			}
		}
		if !any {
			return true
		}
		cur = next
	}
	return true
}

// maxBelow bounds the counts times states a loop's members are checked
// for below its min: a minLength of thousands on a large pattern.
const maxBelow = 1 << 20

// stringRule is a string of the language, quotes included: its
// characters spelled as appendQuoted spells them (each one way), those
// of a language with no automaton as any JSON text of them.
func (c *schemaCompiler) stringRule(l *strLang) (Elem, error) {
	b, j := c.b, c.j
	if l.d == nil {
		if l.lo == 0 && l.hi < 0 {
			return j.str, nil
		}
		return Ref(b.New("string", Seq(b.Byte('"'), b.Repeat("chars", []Elem{j.char}, l.lo, l.hi), b.Byte('"')))), nil
	}
	body, err := c.automaton(l.d, l.at, l.lo, l.hi)
	if err != nil {
		return Elem{}, err
	}
	return Ref(b.New("string", Seq(b.Byte('"'), body, b.Byte('"')))), nil
}

// automaton is the text of the strings d accepts, of lo to hi characters
// (hi < 0: no bound), each character spelled as in a JSON string: a rule
// per state, with a counted loop over them for bounds d does not keep by
// itself.
func (c *schemaCompiler) automaton(d *dfa, at *atoms, lo, hi int) (Elem, error) {
	return c.automatonSpelled(d, at, lo, hi, c.spell)
}

// automatonSpelled is automaton with each character spelled by spell.
func (c *schemaCompiler) automatonSpelled(d *dfa, at *atoms, lo, hi int, spell func(at *atoms, in []bool) Elem) (Elem, error) {
	b := c.b
	shortest, longest := d.lengths()
	if shortest >= lo {
		lo = 0
	}
	if hi >= 0 && longest >= 0 && longest <= hi {
		hi = -1
	}
	rules := make([]int32, len(d.next))
	for q := range rules {
		rules[q] = b.Rule(fmt.Sprintf("dfa%d", q))
	}
	in := make([]bool, at.n)
	for q, row := range d.next {
		var alts [][]Elem
		done := map[int32]bool{}
		for _, to := range row {
			if to < 0 || done[to] {
				continue
			}
			done[to] = true
			for k := range in {
				in[k] = row[k] == to
			}
			alts = append(alts, Seq(spell(at, in), Ref(rules[to])))
		}
		if d.final[q] {
			alts = append(alts, nil)
		}
		b.Define(rules[q], alts...)
	}
	if lo == 0 && hi < 0 {
		return Ref(rules[0]), nil
	}
	e, lp := b.bounded(b.group(rules), rules[0], lo, hi)
	if err := lp.bound(d); err != nil {
		return Elem{}, err
	}
	return e, nil
}

// bound gives a loop over an automaton's states what it needs to keep
// every text it allows completable: each state's fewest steps to a
// final one, and below min which states can still end within bounds.
func (l *loop) bound(d *dfa) error {
	n := len(d.next)
	// A breadth-first walk back from the final states.
	back := make([][]int32, n)
	dist := make([]int32, n)
	var queue []int32
	for q, row := range d.next {
		dist[q] = -1
		if d.final[q] {
			dist[q] = 0
			queue = append(queue, int32(q))
		}
		for _, to := range row {
			if to >= 0 && !slices.Contains(back[to], int32(q)) {
				back[to] = append(back[to], int32(q))
			}
		}
	}
	for i := 0; i < len(queue); i++ {
		for _, q := range back[queue[i]] {
			if dist[q] < 0 {
				dist[q] = dist[queue[i]] + 1
				queue = append(queue, q)
			}
		}
	}
	l.dist = dist
	for _, v := range dist {
		l.maxDist = max(l.maxDist, v)
	}
	if int(l.min)*n > maxBelow {
		return errAutomaton
	}
	l.below = make([][]bool, l.min)
	for c := l.min - 1; c >= 0; c-- {
		row := make([]bool, n)
		for q := range n {
			if l.max >= 0 && c >= l.max {
				continue
			}
			for _, to := range d.next[q] {
				if to >= 0 && l.alive(to, c+1) {
					row[q] = true
					break
				}
			}
		}
		l.below[c] = row
	}
	return nil
}

// spell is a character of the atoms in, as JSON string text: the
// characters that need it escaped (appendQuoted's escapes), the others
// as they are.
func (c *schemaCompiler) spell(at *atoms, in []bool) Elem {
	b := c.b
	var plain ByteSet
	var short ByteSet           // \" \\ \n \t \r \f \b
	long := map[byte]*ByteSet{} // \u00XY, by X
	for ch := range 128 {
		if !in[at.class[ch]] {
			continue
		}
		esc := escapeByte(byte(ch))
		switch {
		case esc == "":
			plain.Add(byte(ch), byte(ch))
		case len(esc) == 2:
			short.Add(esc[1], esc[1])
		default:
			x := esc[4]
			if long[x] == nil {
				long[x] = &ByteSet{}
			}
			long[x].Add(esc[5], esc[5])
		}
	}
	var alts [][]Elem
	if !plain.Empty() {
		alts = append(alts, []Elem{b.Set(plain)})
	}
	if !short.Empty() {
		alts = append(alts, Seq(b.Byte('\\'), b.Set(short)))
	}
	for _, x := range []byte("01234567") {
		if s := long[x]; s != nil {
			alts = append(alts, Seq(b.Lit(`\u00`+string(x)), b.Set(*s)))
		}
	}
	return b.Alt("char", c.nonASCII(alts, at, in)...)
}

// nonASCII appends to alts the non-ASCII characters of the atoms in, in
// UTF-8: those the atoms list, then the rest.
func (c *schemaCompiler) nonASCII(alts [][]Elem, at *atoms, in []bool) [][]Elem {
	for i, r := range at.runes {
		if in[at.ascii+i] {
			alts = append(alts, c.b.Lit(string(r)))
		}
	}
	if in[at.rest] {
		alts = append(alts, []Elem{c.utf8Rest(at)})
	}
	return alts
}

// utf8Rest is a non-ASCII character that is none of the atoms' listed
// ones, in UTF-8.
func (c *schemaCompiler) utf8Rest(at *atoms) Elem {
	key := fmt.Sprint(at.runes)
	if e, ok := c.rests[key]; ok {
		return e
	}
	b := c.b
	var seqs [][][2]byte
	// The non-ASCII characters but the surrogates, which no UTF-8 text
	// holds, and but the listed ones (sorted).
	for _, span := range [][2]rune{{0x80, 0xd7ff}, {0xe000, 0x10ffff}} {
		from := span[0]
		for _, r := range at.runes {
			if r < from || r > span[1] {
				continue
			}
			seqs = utf8Seqs(from, r-1, seqs)
			from = r + 1
		}
		seqs = utf8Seqs(from, span[1], seqs)
	}
	var alts [][]Elem
	for _, seq := range seqs {
		var alt []Elem
		for _, rg := range seq {
			alt = append(alt, b.Range(rg[0], rg[1]))
		}
		alts = append(alts, alt)
	}
	e := b.Alt("utf8", alts...)
	c.rests[key] = e
	return e
}

// lengthPattern reads a pattern that is a class repeated, ^X{n,m}$ (a
// length in the form of a pattern): the class, and its bounds; nil when
// the pattern is another.
func lengthPattern(pattern string) (set *charSet, lo, hi int) {
	if len(topAlternatives(pattern)) > 1 {
		return nil, 0, 0
	}
	n, start, end, err := parsePattern(pattern)
	if err != nil || !start || !end || len(n.alts) != 1 || len(n.alts[0]) != 1 {
		return nil, 0, 0
	}
	p := n.alts[0][0]
	if p.set == nil {
		return nil, 0, 0
	}
	return p.set, p.min, p.max
}

// classNFA is the automaton of any number of characters of set.
func classNFA(set *charSet) *nfa {
	a := &nfa{edges: [][]nfaEdge{nil}, final: []bool{true}}
	a.edge(0, set, 0)
	return a
}

// str is a string with the schema's length, pattern, format and
// content encoding, all of them held at once.
func (c *schemaCompiler) str(n node, path string) (Elem, error) {
	lang, err := c.stringLang(n, path)
	if err != nil {
		return Elem{}, err
	}
	if lang.empty() {
		return Elem{}, empty(path, stringKeyword(n), "no string is valid under the string keywords together")
	}
	key := fmt.Sprint(lang.lo, lang.hi, stringKey(n))
	if e, ok := c.strings[key]; ok {
		return e, nil
	}
	e, err := c.stringRule(lang)
	if err != nil {
		return Elem{}, unsupported(path, stringKeyword(n), err.Error())
	}
	c.strings[key] = e
	return e, nil
}

// stringKeys are the keywords that constrain a string's text.
var stringKeys = []string{"pattern", "format", "contentEncoding", "minLength", "maxLength", patternsKey, notStringsKey}

// stringKey is the string keywords' values, as a key.
func stringKey(n node) string {
	var b strings.Builder
	for _, k := range stringKeys {
		b.WriteString(k)
		b.Write(n[k])
	}
	return b.String()
}

// stringKeyword names the first string keyword a schema has, for errors
// about them all.
func stringKeyword(n node) string {
	for _, k := range stringKeys {
		if n[k] != nil {
			return k
		}
	}
	return "type"
}

// stringLang is the language of a string the schema allows.
func (c *schemaCompiler) stringLang(n node, path string) (*strLang, error) {
	key := stringKey(n)
	if l, ok := c.langs[key]; ok {
		return l, nil
	}
	sp, err := c.stringSpec(n, path)
	if err != nil {
		return nil, err
	}
	l, err := sp.compile()
	if err != nil {
		return nil, unsupported(path, stringKeyword(n), err.Error())
	}
	c.langs[key] = l
	return l, nil
}

// stringSpec reads the keywords that constrain a string's text.
func (c *schemaCompiler) stringSpec(n node, path string) (*strSpec, error) {
	lo, hi, err := c.bounds(n, "minLength", "maxLength", path)
	if err != nil {
		return nil, err
	}
	sp := &strSpec{lo: lo, hi: hi}
	var patterns []string
	if p := n["pattern"]; p != nil {
		var re string
		if err := json.Unmarshal(p, &re); err != nil {
			return nil, &SchemaError{Path: path, Keyword: "pattern", Reason: "want a string"}
		}
		patterns = append(patterns, re)
	}
	if p := n[patternsKey]; p != nil {
		var more []string
		json.Unmarshal(p, &more)
		patterns = append(patterns, more...)
	}
	for _, re := range patterns {
		if err := addPattern(sp, re); err != nil {
			return nil, unsupported(path, "pattern", err.Error())
		}
	}
	if f := n["format"]; f != nil {
		var name string
		if err := json.Unmarshal(f, &name); err != nil {
			return nil, &SchemaError{Path: path, Keyword: "format", Reason: "want a string"}
		}
		if !slices.Contains(annotationFormats, name) {
			def, ok := formatOf(name)
			if !ok {
				return nil, unsupported(path, "format", fmt.Sprintf("%q is not supported", name))
			}
			if err := addPattern(sp, def.pattern); err != nil {
				return nil, err
			}
			if def.maxLen >= 0 && (sp.hi < 0 || def.maxLen < sp.hi) {
				sp.hi = def.maxLen
			}
		}
	}
	if e := n["contentEncoding"]; e != nil {
		var name string
		json.Unmarshal(e, &name)
		pattern, ok := map[string]string{"base64": base64Pattern, "base64url": base64urlPattern}[name]
		if !ok {
			return nil, unsupported(path, "contentEncoding", fmt.Sprintf("%q is not supported (base64, base64url)", name))
		}
		if err := addPattern(sp, pattern); err != nil {
			return nil, err
		}
	}
	if raw := n[notStringsKey]; raw != nil {
		var not []string
		json.Unmarshal(raw, &not)
		sp.mustNot = append(sp.mustNot, literalsNFA(not))
	}
	return sp, nil
}

// addPattern adds a pattern to sp: a length in the form of a pattern
// (^X{n,m}$) as bounds, which cost no states.
func addPattern(sp *strSpec, re string) error {
	if set, lo, hi := lengthPattern(re); set != nil {
		sp.must = append(sp.must, classNFA(set))
		sp.lo = max(sp.lo, lo)
		if hi >= 0 && (sp.hi < 0 || hi < sp.hi) {
			sp.hi = hi
		}
		return nil
	}
	a, err := patternNFA(re)
	if err != nil {
		return err
	}
	sp.must = append(sp.must, a)
	return nil
}
