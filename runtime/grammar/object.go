package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxDependents bounds the names dependentRequired ties together, and
// maxMinProperties the minProperties counted: each is a state of the
// members' rules.
const (
	maxDependents    = 6
	maxMinProperties = 3
	maxPatternProps  = 4
)

// member is a property an object may have: its key and value, as the
// schema says (a name it lists, or one required or dependentRequired
// asks for).
type member struct {
	name     string
	text     []Elem // key, colon, value
	required bool
	absent   bool // no value is valid: it may not come
}

// object is an object with the schema's properties in its order, then
// any others additionalProperties and patternProperties allow.
func (c *schemaCompiler) object(n node, path string) (Elem, error) {
	b, j := c.b, c.j
	constrained := false
	for _, k := range []string{"properties", "required", "additionalProperties", "patternProperties", "propertyNames", "dependentRequired", "minProperties", "maxProperties"} {
		constrained = constrained || n[k] != nil
	}
	if !constrained {
		return j.object, nil
	}
	names, err := objectKeys(n["properties"])
	if err != nil {
		return Elem{}, &SchemaError{Path: path, Keyword: "properties", Reason: "want an object"}
	}
	var props, patternProps map[string]json.RawMessage
	json.Unmarshal(n["properties"], &props)
	if n["patternProperties"] != nil && json.Unmarshal(n["patternProperties"], &patternProps) != nil {
		return Elem{}, &SchemaError{Path: path, Keyword: "patternProperties", Reason: "want an object of schemas"}
	}
	var required []string
	if n["required"] != nil {
		if err := json.Unmarshal(n["required"], &required); err != nil {
			return Elem{}, &SchemaError{Path: path, Keyword: "required", Reason: "want an array of strings"}
		}
	}
	var deps map[string][]string
	if n["dependentRequired"] != nil && json.Unmarshal(n["dependentRequired"], &deps) != nil {
		return Elem{}, &SchemaError{Path: path, Keyword: "dependentRequired", Reason: "want an object of arrays of strings"}
	}
	minProps, maxProps, err := c.bounds(n, "minProperties", "maxProperties", path)
	if err != nil {
		return Elem{}, err
	}
	ap := n["additionalProperties"]
	if ap == nil && n["patternProperties"] == nil && minProps > len(names) {
		// The narrower choice, no extra property, would leave no instance.
		ap = json.RawMessage("true")
	}
	// Names required or tied by dependentRequired are listed too, held
	// to what holds an unlisted name.
	for _, r := range required {
		if !slices.Contains(names, r) {
			names = append(names, r)
		}
	}
	for _, trigger := range slices.Sorted(maps.Keys(deps)) {
		for _, r := range append([]string{trigger}, deps[trigger]...) {
			if !slices.Contains(names, r) {
				names = append(names, r)
			}
		}
	}
	patterns := slices.Sorted(maps.Keys(patternProps))
	if len(patterns) > maxPatternProps {
		return Elem{}, unsupported(path, "patternProperties", fmt.Sprintf("more than %d patterns", maxPatternProps))
	}
	pn, err := c.propertyNames(n, path)
	if err != nil {
		return Elem{}, err
	}
	// valueOf is the schema a name's value is held to: its property's,
	// the patterns' it matches, or additionalProperties' when neither.
	valueOf := func(name string) (json.RawMessage, string, error) {
		var parts []json.RawMessage
		at := path + "/properties/" + escapePointer(name)
		if props[name] != nil {
			parts = append(parts, props[name])
		}
		for _, p := range patterns {
			ok, err := c.patternMatches(p, name, path)
			if err != nil {
				return nil, "", err
			}
			if ok {
				parts = append(parts, patternProps[p])
				if len(parts) == 1 {
					at = path + "/patternProperties/" + escapePointer(p)
				}
			}
		}
		if len(parts) == 0 {
			if ap == nil {
				return json.RawMessage("true"), at, nil
			}
			return ap, path + "/additionalProperties", nil
		}
		return allOf(parts...), at, nil
	}
	var members []member
	for _, name := range names {
		m := member{name: name, required: slices.Contains(required, name)}
		ok, err := pn.admits(name)
		if err != nil {
			return Elem{}, err
		}
		var v Elem
		if ok {
			schema, at, err := valueOf(name)
			if err != nil {
				return Elem{}, err
			}
			v, err = c.compile(schema, at)
			if _, none := err.(noInstance); none {
				if m.required {
					return Elem{}, empty(path, "required", fmt.Sprintf("%q is required, and no value is valid for it (%v)", name, refusal(err)))
				}
				err = nil // the object is valid without it, and only so
				ok = false
			}
			if err != nil {
				return Elem{}, err
			}
		}
		if !ok {
			if m.required {
				return Elem{}, empty(path, "required", fmt.Sprintf("%q is required, and propertyNames does not allow it", name))
			}
			m.absent = true
		} else {
			// A rule of its own: the states of the members share its places.
			key, _ := json.Marshal(name)
			m.text = []Elem{Ref(b.New("member", Seq(b.LitRule(string(key)), j.ws, b.Byte(':'), j.ws, v)))}
		}
		members = append(members, m)
	}
	extras, err := c.extraMembers(names, patterns, patternProps, ap, pn, path)
	if err != nil {
		return Elem{}, err
	}
	// maxProperties is held where the members alone keep within it.
	if maxProps >= 0 && (extras != nil || len(members) > maxProps) {
		return Elem{}, unsupported(path, "maxProperties", "beyond what the properties listed already keep to")
	}
	if minProps > maxMinProperties && minProps > len(required) {
		return Elem{}, unsupported(path, "minProperties", fmt.Sprintf("above %d, beyond what required already asks", maxMinProperties))
	}
	return c.members(members, extras, deps, min(minProps, maxMinProperties), path)
}

// objectState is where an object's members are: whether one came (the
// next needs a comma), how many (up to the minProperties counted), and
// which names dependentRequired now asks for (must) or forbids (may not,
// having passed one it would need).
type objectState struct {
	written   bool
	count     int
	must, not uint64
}

// members is the text of an object's members: each listed one in order,
// present or absent as its state allows, then the extras.
func (c *schemaCompiler) members(members []member, extras []Elem, deps map[string][]string, minProps int, path string) (Elem, error) {
	b, j := c.b, c.j
	// bits numbers the names dependentRequired ties, for the states.
	bits := map[string]uint64{}
	for _, t := range slices.Sorted(maps.Keys(deps)) {
		for _, name := range append([]string{t}, deps[t]...) {
			if _, ok := bits[name]; !ok {
				bits[name] = 1 << len(bits)
			}
		}
	}
	if len(bits) > maxDependents {
		return Elem{}, unsupported(path, "dependentRequired", fmt.Sprintf("ties more than %d names together", maxDependents))
	}
	sep := Seq(j.ws, b.Byte(','), j.ws)
	type key struct {
		i  int
		st objectState
	}
	rules := map[key]Elem{}
	viable := map[key]bool{}
	// A state is viable when the members from i on can end it: no name
	// must still come that cannot, and minProperties can be reached.
	var canEnd func(i int, st objectState) bool
	canEnd = func(i int, st objectState) bool {
		k := key{i, st}
		if v, ok := viable[k]; ok {
			return v
		}
		viable[k] = false // a state never leads back to itself
		ok := false
		if i == len(members) {
			ok = st.must == 0 && (st.count >= minProps || extras != nil)
		} else {
			for _, present := range []bool{true, false} {
				if next, allowed := step(members, bits, deps, i, st, present, minProps); allowed && canEnd(i+1, next) {
					ok = true
				}
			}
		}
		viable[k] = ok
		return ok
	}
	var rest func(i int, st objectState) Elem
	rest = func(i int, st objectState) Elem {
		k := key{i, st}
		if e, ok := rules[k]; ok {
			return e
		}
		var alts [][]Elem
		if i == len(members) {
			alts = c.extraAlts(extras, sep, st.written, st.count, minProps)
		} else {
			for _, present := range []bool{true, false} {
				next, allowed := step(members, bits, deps, i, st, present, minProps)
				if !allowed || !canEnd(i+1, next) {
					continue
				}
				if !present {
					alts = append(alts, []Elem{rest(i+1, next)})
					continue
				}
				alt := Seq(members[i].text, rest(i+1, next))
				if st.written {
					alt = Seq(sep, alt)
				}
				alts = append(alts, alt)
			}
		}
		e := b.Alt("members", alts...)
		rules[k] = e
		return e
	}
	if !canEnd(0, objectState{}) {
		return Elem{}, empty(path, "required", "no set of the properties meets required, dependentRequired and minProperties together: no instance is valid")
	}
	return Ref(b.New("object", Seq(b.Byte('{'), j.ws, rest(0, objectState{}), j.ws, b.Byte('}')))), nil
}

// step is the state after member i, present or not, and whether that
// may be.
func step(members []member, bits map[string]uint64, deps map[string][]string, i int, st objectState, present bool, minProps int) (objectState, bool) {
	m := members[i]
	bit := bits[m.name] // 0 for a name no dependency ties
	switch {
	case present && (m.absent || st.not&bit != 0):
		return st, false
	case !present && (m.required || st.must&bit != 0):
		return st, false
	}
	st.must &^= bit
	if !present {
		// A name passed forbids those that would need it.
		for t, ds := range deps {
			if slices.Contains(ds, m.name) {
				st.not |= bits[t]
			}
		}
		return st, true
	}
	st.written = true
	st.count = min(st.count+1, minProps)
	for _, d := range deps[m.name] {
		// A dependent that came before is there: had it been passed, m
		// would be forbidden.
		if slices.IndexFunc(members[:i], func(x member) bool { return x.name == d }) < 0 {
			st.must |= bits[d]
		}
	}
	return st, true
}

// extraAlts are the ways an object's members end: the extras, each
// counted towards minProperties.
func (c *schemaCompiler) extraAlts(extras []Elem, sep []Elem, written bool, count, minProps int) [][]Elem {
	b := c.b
	var alts [][]Elem
	if count >= minProps {
		alts = append(alts, nil)
	}
	if extras == nil {
		return alts
	}
	// The first extras count towards minProperties; past it, a loop.
	var more Elem
	if count >= minProps {
		more = b.Repeat("extra", Seq(sep, extras), 0, -1)
	} else {
		more = b.Alt("extras", c.extraAlts(extras, sep, true, count+1, minProps)...)
	}
	first := Seq(extras, more)
	if written {
		first = Seq(sep, first)
	}
	return append(alts, first)
}

// extraMembers is a member whose name the schema does not list, as
// patternProperties, additionalProperties and propertyNames allow; nil
// when none may come. Left out, additionalProperties allows none here
// (narrower), unless patternProperties describe some.
func (c *schemaCompiler) extraMembers(names, patterns []string, patternProps map[string]json.RawMessage, ap json.RawMessage, pn *nameRule, path string) ([]Elem, error) {
	b, j := c.b, c.j
	closed := ap == nil || string(bytes.TrimSpace(ap)) == "false"
	if closed && len(patterns) == 0 {
		return nil, nil
	}
	if !pn.constrained() && len(patterns) == 0 {
		v, err := c.compile(ap, path+"/additionalProperties")
		if _, none := err.(noInstance); none {
			return nil, nil // the object is valid without extras, and only so
		}
		if err != nil {
			return nil, err
		}
		return Seq(c.keyOutside(names), j.ws, b.Byte(':'), j.ws, v), nil
	}
	// The names the patterns match, each set of them apart: a name held
	// to those patterns' schemas and no other, or, matching none, to
	// additionalProperties.
	var alts [][]Elem
	for set := range 1 << len(patterns) {
		sp := pn.spec()
		var parts []json.RawMessage
		at := path + "/additionalProperties"
		for i, p := range patterns {
			a, err := patternNFA(p)
			if err != nil {
				return nil, unsupported(path+"/patternProperties", "pattern", err.Error())
			}
			if set&(1<<i) != 0 {
				sp.must = append(sp.must, a)
				parts = append(parts, patternProps[p])
				at = path + "/patternProperties/" + escapePointer(p)
			} else {
				sp.mustNot = append(sp.mustNot, a)
			}
		}
		schema := allOf(parts...)
		if set == 0 {
			if closed {
				continue
			}
			schema = ap
		}
		if len(names) > 0 {
			sp.mustNot = append(sp.mustNot, literalsNFA(names))
		}
		lang, err := sp.compile()
		if err != nil {
			return nil, unsupported(path, "patternProperties", err.Error())
		}
		if lang.empty() {
			continue
		}
		v, err := c.compile(schema, at)
		if _, none := err.(noInstance); none {
			continue
		}
		if err != nil {
			return nil, err
		}
		key, err := c.stringRule(lang)
		if err != nil {
			return nil, unsupported(path, "patternProperties", err.Error())
		}
		alts = append(alts, Seq(key, j.ws, b.Byte(':'), j.ws, v))
	}
	if len(alts) == 0 {
		return nil, nil
	}
	return []Elem{b.Alt("extra", alts...)}, nil
}

// patternMatches reports whether a patternProperties pattern matches a
// name.
func (c *schemaCompiler) patternMatches(pattern, name, path string) (bool, error) {
	l, err := c.stringLang(node{"pattern": mustJSON(pattern)}, path+"/patternProperties")
	if err != nil {
		return false, err
	}
	return l.matches(name), nil
}

// nameRule is what propertyNames asks of every name: nil, nothing.
type nameRule struct {
	values []string // an enum's or const's names; nil: not one
	n      node     // the string keywords
	c      *schemaCompiler
	path   string
}

// propertyNames reads propertyNames: an enum or const of names, or the
// keywords of a string (a type other than string allows no name).
func (c *schemaCompiler) propertyNames(n node, path string) (*nameRule, error) {
	raw := n["propertyNames"]
	if raw == nil {
		return nil, nil
	}
	at := path + "/propertyNames"
	pn, anything, err := c.parse(raw, at)
	if _, none := err.(noInstance); none {
		return &nameRule{values: []string{}, c: c, path: at}, nil // no name at all
	}
	if err != nil || anything {
		return nil, err
	}
	if combining(pn) {
		if pn, err = c.combine(pn, at); err != nil {
			return nil, err
		}
	}
	for k := range pn {
		if !annotation(k) && k != "type" && k != "enum" && k != "const" && keywordTypes[k] != "string" {
			return nil, unsupported(at, k, "in propertyNames, beside the keywords of a string")
		}
	}
	if t := pn["type"]; t != nil {
		types, err := c.types(pn, at)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(types, "string") {
			return &nameRule{values: []string{}, c: c, path: at}, nil
		}
	}
	r := &nameRule{n: pn, c: c, path: at}
	for _, k := range []string{"const", "enum"} {
		if pn[k] == nil {
			continue
		}
		values, err := enumValues(pn, k, at)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, v := range values {
			if s, ok := v.(string); ok {
				if ok, err := c.admitsString(without(pn, "enum", "const"), s, at, 0); err != nil {
					return nil, err
				} else if ok {
					names = append(names, s)
				}
			}
		}
		if r.values != nil {
			names = slices.DeleteFunc(names, func(s string) bool { return !slices.Contains(r.values, s) })
		}
		r.values = append([]string{}, names...)
	}
	return r, nil
}

// constrained reports whether the rule asks anything of a name.
func (r *nameRule) constrained() bool {
	if r == nil {
		return false
	}
	if r.values != nil {
		return true
	}
	sp, err := r.c.stringSpec(r.n, r.path)
	return err != nil || len(sp.must) > 0 || len(sp.mustNot) > 0 || sp.lo > 0 || sp.hi >= 0
}

// admits reports whether a name may be an object's.
func (r *nameRule) admits(name string) (bool, error) {
	if r == nil {
		return true, nil
	}
	if r.values != nil {
		return slices.Contains(r.values, name), nil
	}
	l, err := r.c.stringLang(r.n, r.path)
	if err != nil {
		return false, err
	}
	return l.matches(name), nil
}

// spec is the names the rule allows, as a string's spec.
func (r *nameRule) spec() *strSpec {
	if r == nil {
		return &strSpec{hi: -1}
	}
	if r.values != nil {
		return &strSpec{must: []*nfa{literalsNFA(r.values)}, hi: -1}
	}
	sp, err := r.c.stringSpec(r.n, r.path)
	if err != nil {
		return &strSpec{hi: -1} // the error came out of admits first
	}
	return sp
}

// keyOutside is a key that is none of names. Keys there are written
// without escapes, so their text is their value and the grammar can tell
// them from names: a trie of the names, left as soon as the key differs.
func (c *schemaCompiler) keyOutside(names []string) Elem {
	b, j := c.b, c.j
	free := b.Repeat("key", []Elem{j.plain}, 0, -1)
	if len(names) == 0 {
		return Ref(b.New("key", Seq(b.Byte('"'), free, b.Byte('"'))))
	}
	var other ByteSet // a plain ASCII character
	other.Add(0x20, 0x7e)
	other[0] &^= 1 << '"'
	other[1] &^= 1 << ('\\' - 64)
	var node func(prefix string) Elem
	node = func(prefix string) Elem {
		var alts [][]Elem
		var children ByteSet
		for _, n := range names {
			if len(n) > len(prefix) && strings.HasPrefix(n, prefix) {
				children.Add(n[len(prefix)], n[len(prefix)])
			}
		}
		for ch := range 256 {
			if children.Has(byte(ch)) {
				alts = append(alts, Seq(b.Byte(byte(ch)), node(prefix+string([]byte{byte(ch)}))))
			}
		}
		if !utf8.ValidString(prefix) {
			return b.Alt("key:"+prefix, alts...) // within a character: only the names go on
		}
		if !slices.Contains(names, prefix) {
			alts = append(alts, []Elem{b.Byte('"')})
		}
		// A character no name goes on with leaves the names behind; a
		// non-ASCII one only where no name has one next (narrower).
		ascii := other
		for i := range ascii {
			ascii[i] &^= children[i]
		}
		alts = append(alts, Seq(b.Set(ascii), free, b.Byte('"')))
		if children[2]|children[3] == 0 {
			alts = append(alts, Seq(j.utf8, free, b.Byte('"')))
		}
		return b.Alt("key:"+prefix, alts...)
	}
	return Ref(b.New("key", Seq(b.Byte('"'), node(""))))
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// objectKeys returns an object's keys in their order.
func objectKeys(raw json.RawMessage) ([]string, error) {
	if raw == nil {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("want an object")
	}
	var keys []string
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		k := t.(string)
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// array is an array with the schema's items and counts.
func (c *schemaCompiler) array(n node, path string) (Elem, error) {
	b, j := c.b, c.j
	minItems, maxItems, err := c.bounds(n, "minItems", "maxItems", path)
	if err != nil {
		return Elem{}, err
	}
	schemas, items, err := itemSchemas(n, path)
	if err != nil {
		return Elem{}, err
	}
	var prefix []Elem
	for i, s := range schemas {
		e, err := c.compile(s, fmt.Sprintf("%s/prefixItems/%d", path, i))
		if err != nil && i >= minItems {
			err = refusal(err) // the array is valid without it
		}
		if err != nil {
			return Elem{}, err
		}
		prefix = append(prefix, e)
	}
	var item Elem
	itemsAllowed := true
	switch {
	case items == nil:
		item = j.value
	case string(bytes.TrimSpace(items)) == "false":
		itemsAllowed = false
	default:
		if item, err = c.compile(items, path+"/items"); err != nil {
			if minItems <= len(prefix) {
				err = refusal(err) // the array is valid without items
			}
			return Elem{}, err
		}
	}
	k := len(prefix)
	if maxItems >= 0 && maxItems < k {
		prefix, k = prefix[:maxItems], maxItems
	}
	if !itemsAllowed {
		if minItems > k {
			return Elem{}, empty(path, "minItems", "more than prefixItems allows with items false")
		}
		maxItems = k
	}
	if k == 0 {
		return j.arrayOf("array", item, minItems, maxItems), nil
	}
	sep := Seq(j.ws, b.Byte(','), j.ws)
	// After the prefix: the items, each after a comma.
	var tail Elem
	switch {
	case maxItems == k:
		tail = b.Alt("end", nil)
	default:
		hi := -1
		if maxItems >= 0 {
			hi = maxItems - k
		}
		tail = b.Repeat("items", Seq(sep, item), max(minItems-k, 0), hi)
	}
	// rest[i]: the items from prefix item i on, i > 0.
	next := tail
	for i := k - 1; i >= 1; i-- {
		with := Seq(sep, prefix[i], next)
		if i >= minItems {
			next = b.Alt("prefix?", nil, with)
		} else {
			next = Ref(b.New("prefix", with))
		}
	}
	full := Seq(b.Byte('['), j.ws, prefix[0], next, j.ws, b.Byte(']'))
	if minItems == 0 {
		return b.Alt("array", Seq(b.Byte('['), j.ws, b.Byte(']')), full), nil
	}
	return Ref(b.New("array", full)), nil
}

// itemSchemas reads prefixItems and items; items as an array of schemas
// is draft 7's tuple (TypeBox writes them), its additionalItems the
// items after.
func itemSchemas(n node, path string) (prefix []json.RawMessage, items json.RawMessage, err error) {
	if n["prefixItems"] != nil && json.Unmarshal(n["prefixItems"], &prefix) != nil {
		return nil, nil, &SchemaError{Path: path, Keyword: "prefixItems", Reason: "want an array of schemas"}
	}
	items = n["items"]
	if bytes.HasPrefix(bytes.TrimSpace(items), []byte("[")) {
		if prefix != nil {
			return nil, nil, &SchemaError{Path: path, Keyword: "items", Reason: "an array of schemas beside prefixItems"}
		}
		if json.Unmarshal(items, &prefix) != nil {
			return nil, nil, &SchemaError{Path: path, Keyword: "items", Reason: "want a schema or an array of schemas"}
		}
		return prefix, n["additionalItems"], nil
	}
	return prefix, items, nil
}
