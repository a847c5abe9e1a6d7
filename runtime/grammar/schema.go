package grammar

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// SchemaError is a schema that cannot be enforced: the keyword at fault
// and where it is (a JSON pointer into the schema). A schema is refused
// whole rather than enforced in part, unless its keywords may be relaxed
// (see Relaxation).
type SchemaError struct {
	Path    string // "" for the root
	Keyword string
	Reason  string
	// relaxable is set for a keyword the grammar cannot enforce, as
	// opposed to one the schema gets wrong: leaving it out holds the text
	// to a superset of the schema's instances.
	relaxable bool
}

func (e *SchemaError) Error() string {
	at := e.Path
	if at == "" {
		at = "#"
	}
	return fmt.Sprintf("json schema %s: %s: %s", at, e.Keyword, e.Reason)
}

// unsupported is the SchemaError of a keyword the grammar cannot enforce.
func unsupported(path, keyword, reason string) *SchemaError {
	return &SchemaError{Path: path, Keyword: keyword, Reason: reason + ", so it could not be enforced", relaxable: true}
}

// Relaxation is a keyword of a schema that the grammar could not enforce
// and held to less: it left the keyword out, or (oneOf, if) took a
// superset of what it allows. The text is then valid for the rest of the
// schema, and may not be for the keyword.
type Relaxation struct {
	Tool    string // the tool whose parameters the schema is; "" for the answer's schema
	Path    string // a JSON pointer into the schema; "" for the root
	Keyword string
	Reason  string
}

func (r Relaxation) String() string {
	at := r.Path
	if at == "" {
		at = "#"
	}
	if r.Tool != "" {
		return fmt.Sprintf("tool %s: json schema %s: %s: %s", r.Tool, at, r.Keyword, r.Reason)
	}
	return fmt.Sprintf("json schema %s: %s: %s", at, r.Keyword, r.Reason)
}

// noInstance is the SchemaError of a schema no instance is valid for.
// As an alternative (a type of a list, a branch of anyOf or oneOf) such
// a schema is left out, and the schema is refused only when no
// alternative is left; where a part without instances leaves the whole
// with some (an optional property, say), the error is plain: refused.
type noInstance struct{ *SchemaError }

func (e noInstance) Unwrap() error { return e.SchemaError }

// empty is a noInstance error.
func empty(path, keyword, reason string) error {
	return noInstance{&SchemaError{Path: path, Keyword: keyword, Reason: reason}}
}

// refusal is err as the schema's refusal: a SchemaError, not noInstance.
func refusal(err error) error {
	if e, ok := err.(noInstance); ok {
		return e.SchemaError
	}
	return err
}

// alternatives compiles each of a choice's schemas, leaving out those no
// instance is valid for; with none left, the first one's error.
func alternatives(n int, compile func(i int) (Elem, error)) ([][]Elem, error) {
	var alts [][]Elem
	var none error
	for i := range n {
		e, err := compile(i)
		if _, ok := err.(noInstance); ok {
			none = cmp.Or(none, err)
			continue
		}
		if err != nil {
			return nil, err
		}
		alts = append(alts, []Elem{e})
	}
	if len(alts) == 0 {
		return nil, none
	}
	return alts, nil
}

// The keywords a schema may use. Annotations are ignored, as they do not
// constrain an instance; so are x-* ones and the private ones a merge
// writes (merge.go) are read.
var (
	annotations = []string{"title", "description", "default", "examples", "example", "$schema", "$id", "$anchor", "$dynamicAnchor",
		"$comment", "$vocabulary", "deprecated", "readOnly", "writeOnly", "contentMediaType", "contentSchema", "$defs", "definitions",
		"discriminator", "externalDocs", "xml", "markdownDescription", "enumDescriptions",
		// OpenAPI's nullable allows null where JSON Schema's validators do
		// not: left out, the grammar is narrower than both.
		"nullable"}
	keywordTypes = map[string]string{
		"properties": "object", "required": "object", "additionalProperties": "object", "patternProperties": "object",
		"propertyNames": "object", "dependentRequired": "object", "minProperties": "object", "maxProperties": "object",
		"items": "array", "prefixItems": "array", "additionalItems": "array", "minItems": "array", "maxItems": "array", "uniqueItems": "array",
		"minLength": "string", "maxLength": "string", "pattern": "string", "format": "string", "contentEncoding": "string",
		patternsKey: "string", notStringsKey: "string",
		// Bounds are held for any number, but a schema without a type that
		// bounds its numbers is held to integers, which is narrower.
		"minimum": "integer", "maximum": "integer", "exclusiveMinimum": "integer", "exclusiveMaximum": "integer", "multipleOf": "integer",
	}
	// combinators are the keywords besides those of a type.
	combinators = []string{"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "if", "then", "else"}
	jsonTypes   = []string{"object", "array", "string", "number", "integer", "boolean", "null"}
)

// annotation reports whether keyword k only annotates.
func annotation(k string) bool {
	return slices.Contains(annotations, k) || strings.HasPrefix(k, "x-")
}

// schemaCompiler turns a schema into rules.
type schemaCompiler struct {
	j    *jsonRules
	b    *Builder
	doc  json.RawMessage
	refs map[string]int32 // a $ref's rule, made once, so recursion is a rule that calls itself
	// refErrs are the errors of the $refs whose schemas no instance is
	// valid for, met once.
	refErrs map[string]error
	// resolved is what each $ref points to, found once: an enum's
	// values are each checked through the $refs beside them.
	resolved map[string]json.RawMessage
	ranges   map[[2]string]Elem
	// langs are the strings' languages by their keywords' values, and
	// strings their rules; rests the UTF-8 rules of non-ASCII characters
	// other than an automaton's listed ones.
	langs   map[string]*strLang
	strings map[string]Elem
	rests   map[string]Elem
	// compiled are the rules of the schemas compiled, by path and text: a
	// schema met again there (additionalProperties for each name it
	// holds) is one rule.
	compiled map[string]Elem
	// strict refuses a keyword that cannot be enforced; otherwise it is
	// relaxed, and listed in relaxed.
	strict  bool
	relaxed []Relaxation
}

// Schema compiles a JSON Schema to the grammar of the JSON texts that are
// valid instances of it, for the vocabulary, refusing a keyword it
// cannot enforce. Supported: type (one or a list),
// enum and const (their values held to the keywords beside them: a value
// those refuse is left out), anyOf, oneOf (when its branches cannot
// overlap: different types, or objects told apart by a required
// property's const or enum), allOf and keywords beside $ref, anyOf and
// oneOf (merged: see merge.go), if, then and else (exactly when if asks
// a property for a const or enum of strings or booleans), $ref to #,
// #/$defs/... and #/definitions/... (recursion included); for objects
// properties (written in the schema's order), required (a name not in
// properties held to additionalProperties), additionalProperties (false,
// true or a schema), patternProperties, propertyNames, dependentRequired,
// minProperties up to 3 and what required or the properties already
// imply; for arrays items, prefixItems, minItems, maxItems; for strings
// minLength, maxLength, pattern (see regexp.go), format (date, time,
// date-time, duration, uuid, uri, email, hostname, ipv4, ipv6,
// json-pointer; aliases and annotation-only formats in format.go) and
// contentEncoding base64 and base64url, all of them at once; for numbers
// minimum, maximum, their exclusive forms and multipleOf (see number.go).
// A type of a list or a branch of anyOf or oneOf that no instance is
// valid for is left out. Where a schema leaves a choice the grammar may
// take a narrower one, as every instance it allows is still valid:
// additionalProperties left out allows none, integers have at most 16
// digits, free values nest at most 6 deep. Bounds on lengths and counts
// cost no rules however large (Builder.Loop).
func Schema(v *Vocab, schema []byte) (*Grammar, error) {
	b := NewBuilder()
	j := newJSONRules(b)
	value, _, err := schemaRule(j, schema, true)
	if err != nil {
		return nil, err
	}
	return b.Build(b.New("root", []Elem{value}), v)
}

// schemaRule compiles a JSON Schema into j's builder and returns the rule
// of its valid instances' JSON text (see Schema). Strict, a keyword the
// grammar cannot enforce is refused with a *SchemaError; otherwise it is
// relaxed: left out, or held to a superset, and returned.
func schemaRule(j *jsonRules, schema []byte, strict bool) (Elem, []Relaxation, error) {
	c := newSchemaCompiler(j, schema)
	c.strict = strict
	e, err := c.compile(schema, "")
	return e, c.relaxed, refusal(err)
}

func newSchemaCompiler(j *jsonRules, doc json.RawMessage) *schemaCompiler {
	return &schemaCompiler{j: j, b: j.b, doc: doc, refs: map[string]int32{}, refErrs: map[string]error{}, resolved: map[string]json.RawMessage{},
		ranges: map[[2]string]Elem{}, langs: map[string]*strLang{}, strings: map[string]Elem{}, rests: map[string]Elem{},
		compiled: map[string]Elem{}}
}

// relax is err, a keyword that cannot be enforced, as the compiler
// takes it: refused when strict, otherwise listed (once) and nil.
func (c *schemaCompiler) relax(path string, err *SchemaError) error {
	if c.strict || !err.relaxable {
		return err
	}
	r := Relaxation{Path: path, Keyword: err.Keyword, Reason: err.Reason}
	if !slices.Contains(c.relaxed, r) {
		c.relaxed = append(c.relaxed, r)
	}
	return nil
}

// node is a schema object's members.
type node map[string]json.RawMessage

func (c *schemaCompiler) parse(raw json.RawMessage, path string) (node, bool, error) {
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "true":
		return nil, true, nil
	case "false":
		return nil, false, empty(path, "false", "no instance is valid")
	}
	var n node
	if err := json.Unmarshal(raw, &n); err != nil || n == nil {
		return nil, false, &SchemaError{Path: path, Keyword: "schema", Reason: "want an object or a boolean"}
	}
	return n, false, nil
}

// compile is the rule of the schema raw's instances. A keyword of its
// own that cannot be enforced is relaxed (left out, or held to less: see
// relaxKeyword) when the compiler is not strict, and the rest compiled.
func (c *schemaCompiler) compile(raw json.RawMessage, path string) (Elem, error) {
	n, anything, err := c.parse(raw, path)
	if err != nil {
		return Elem{}, err
	}
	if anything {
		return c.j.value, nil
	}
	key := path + "\x00" + string(raw)
	if e, ok := c.compiled[key]; ok {
		return e, nil
	}
	for {
		e, err := c.compileNode(n, path)
		se, ok := err.(*SchemaError)
		if !ok || se.Path != path || n[se.Keyword] == nil {
			if err == nil {
				c.compiled[key] = e
			}
			return e, err
		}
		if err := c.relax(path, se); err != nil {
			return Elem{}, err
		}
		n = relaxKeyword(n, se.Keyword)
	}
}

// relaxKeyword is n held to less than keyword k: without it, or for a
// oneOf whose branches may overlap, an anyOf of them.
func relaxKeyword(n node, k string) node {
	out := without(n, k)
	if k == "oneOf" {
		out["anyOf"] = n[k]
	}
	return out
}

func (c *schemaCompiler) compileNode(n node, path string) (Elem, error) {
	if err := c.checkKeywords(n, path); err != nil {
		return Elem{}, err
	}
	if combining(n) {
		var err error
		if n, err = c.combine(n, path); err != nil {
			return Elem{}, err
		}
	}
	switch {
	case n["$ref"] != nil:
		return c.ref(n["$ref"], path)
	case n["anyOf"] != nil, n["oneOf"] != nil:
		return c.combination(n, path)
	case n["const"] != nil:
		return c.enum(n, "const", path)
	case n["enum"] != nil:
		return c.enum(n, "enum", path)
	}
	types, err := c.types(n, path)
	if err != nil {
		return Elem{}, err
	}
	alts, err := alternatives(len(types), func(i int) (Elem, error) { return c.typed(n, types[i], path) })
	if err != nil {
		return Elem{}, err
	}
	if len(alts) == 1 {
		return alts[0][0], nil
	}
	return c.b.Alt("types", alts...), nil
}

// checkKeywords finds a keyword that is neither enforced nor an
// annotation: unsupported, so relaxed or refused.
func (c *schemaCompiler) checkKeywords(n node, path string) error {
	for _, k := range slices.Sorted(maps.Keys(n)) {
		if annotation(k) || keywordTypes[k] != "" || slices.Contains(combinators, k) {
			continue
		}
		return unsupported(path, k, "not supported")
	}
	if u, ok := n["uniqueItems"]; ok && string(bytes.TrimSpace(u)) != "false" {
		return unsupported(path, "uniqueItems", "not supported")
	}
	return nil
}

// types are the JSON types an instance may have: the type keyword's, or
// those the other keywords speak of, or all.
func (c *schemaCompiler) types(n node, path string) ([]string, error) {
	raw, ok := n["type"]
	if !ok {
		var implied []string
		for k := range n {
			if t := keywordTypes[k]; t != "" && !slices.Contains(implied, t) {
				implied = append(implied, t)
			}
		}
		if len(implied) == 0 {
			return []string{"any"}, nil
		}
		// A keyword constrains its type only; the others are free, and
		// keeping to the constrained types is narrower, so valid.
		slices.Sort(implied)
		return implied, nil
	}
	var one string
	var list []string
	if json.Unmarshal(raw, &one) == nil {
		list = []string{one}
	} else if err := json.Unmarshal(raw, &list); err != nil || len(list) == 0 {
		return nil, &SchemaError{Path: path, Keyword: "type", Reason: "want a type name or a non-empty list of them"}
	}
	for _, t := range list {
		if !slices.Contains(jsonTypes, t) {
			return nil, &SchemaError{Path: path, Keyword: "type", Reason: fmt.Sprintf("%q is not a JSON Schema type", t)}
		}
	}
	if slices.Contains(list, "number") && slices.Contains(list, "integer") {
		list = slices.DeleteFunc(list, func(t string) bool { return t == "integer" })
	}
	return list, nil
}

func (c *schemaCompiler) typed(n node, t, path string) (Elem, error) {
	b, j := c.b, c.j
	switch t {
	case "any":
		return j.value, nil
	case "null":
		return b.LitRule("null"), nil
	case "boolean":
		return b.Alt("boolean", b.Lit("true"), b.Lit("false")), nil
	case "string":
		return c.str(n, path)
	case "integer":
		return c.integer(n, path)
	case "number":
		return c.number(n, path)
	case "object":
		return c.object(n, path)
	case "array":
		return c.array(n, path)
	}
	return Elem{}, &SchemaError{Path: path, Keyword: "type", Reason: fmt.Sprintf("%q is not a JSON Schema type", t)}
}

// ref resolves a $ref within the document.
func (c *schemaCompiler) ref(raw json.RawMessage, path string) (Elem, error) {
	ref, target, err := c.refTarget(raw, path)
	if err != nil {
		return Elem{}, err
	}
	if r, ok := c.refs[ref]; ok {
		return Ref(r), nil
	}
	if err := c.refErrs[ref]; err != nil {
		return Elem{}, err
	}
	r := c.b.Rule(ref)
	c.refs[ref] = r
	e, err := c.compile(target, strings.TrimPrefix(ref, "#"))
	if err != nil {
		delete(c.refs, ref) // r is left without alternatives: no text
		c.refErrs[ref] = err
		return Elem{}, err
	}
	c.b.Define(r, []Elem{e})
	return Ref(r), nil
}

// refTarget reads the $ref raw and finds what it points to.
func (c *schemaCompiler) refTarget(raw json.RawMessage, path string) (ref string, target json.RawMessage, err error) {
	if err := json.Unmarshal(raw, &ref); err != nil {
		return "", nil, &SchemaError{Path: path, Keyword: "$ref", Reason: "want a string"}
	}
	if target, err = c.resolve(ref); err != nil {
		return "", nil, &SchemaError{Path: path, Keyword: "$ref", Reason: err.Error()}
	}
	return ref, target, nil
}

// resolve finds what a $ref points to within the document.
func (c *schemaCompiler) resolve(ref string) (json.RawMessage, error) {
	if ref == "#" {
		return c.doc, nil
	}
	if target, ok := c.resolved[ref]; ok {
		return target, nil
	}
	if !strings.HasPrefix(ref, "#/$defs/") && !strings.HasPrefix(ref, "#/definitions/") {
		return nil, fmt.Errorf("%q: only #, #/$defs/... and #/definitions/... are supported", ref)
	}
	target := c.doc
	for _, p := range strings.Split(ref[2:], "/") {
		p = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
		var n node
		if err := json.Unmarshal(target, &n); err != nil || n[p] == nil {
			return nil, fmt.Errorf("%q does not resolve in the schema", ref)
		}
		target = n[p]
	}
	c.resolved[ref] = target
	return target, nil
}

// combination compiles anyOf and oneOf, alone in their schema (combine
// merges what is beside them).
func (c *schemaCompiler) combination(n node, path string) (Elem, error) {
	k := "anyOf"
	if n["oneOf"] != nil {
		k = "oneOf"
	}
	branches, err := branchesOf(n, k, path)
	if err != nil {
		return Elem{}, err
	}
	if k == "oneOf" {
		if err := c.disjoint(branches, path); err != nil {
			return Elem{}, err
		}
	}
	alts, err := alternatives(len(branches), func(i int) (Elem, error) {
		return c.compile(branches[i], fmt.Sprintf("%s/%s/%d", path, k, i))
	})
	if err != nil {
		return Elem{}, err
	}
	return c.b.Alt(k, alts...), nil
}

// branchesOf reads the schemas of anyOf, oneOf or allOf (k).
func branchesOf(n node, k, path string) ([]json.RawMessage, error) {
	var branches []json.RawMessage
	if err := json.Unmarshal(n[k], &branches); err != nil || len(branches) == 0 {
		return nil, &SchemaError{Path: path, Keyword: k, Reason: "want a non-empty array of schemas"}
	}
	return branches, nil
}

// disjoint checks that no instance can match two branches of a oneOf,
// which the grammar, generating from any branch, cannot rule out
// otherwise.
func (c *schemaCompiler) disjoint(branches []json.RawMessage, path string) error {
	kinds := make([][]string, len(branches))
	for i, br := range branches {
		kinds[i] = c.kinds(br, 0)
	}
	overlap := false
	for i := range kinds {
		for k := i + 1; k < len(kinds); k++ {
			if slices.ContainsFunc(kinds[i], func(t string) bool { return slices.Contains(kinds[k], t) }) &&
				!c.excludes(branches[i], branches[k], path) && !c.excludes(branches[k], branches[i], path) {
				overlap = true
			}
		}
	}
	if !overlap || c.discriminated(branches) {
		return nil
	}
	return unsupported(path, "oneOf", "its branches may overlap, and an instance valid for two is invalid (held to anyOf when relaxed): use anyOf, or tell the branches apart by type or by a required property's const")
}

// excludes reports whether a, an enum or const, has no value b admits:
// "all" beside a pattern of digits.
func (c *schemaCompiler) excludes(a, b json.RawMessage, path string) bool {
	var n node
	if json.Unmarshal(a, &n) != nil {
		return false
	}
	key := "enum"
	if n["const"] != nil {
		key = "const"
	}
	values, err := enumValues(n, key, path)
	if err != nil {
		return false
	}
	for _, x := range values {
		if ok, err := c.admits(b, x, path, 0); err != nil || ok {
			return false
		}
	}
	return true
}

// kinds lists the JSON kinds a schema's instances may have.
func (c *schemaCompiler) kinds(raw json.RawMessage, depth int) []string {
	all := []string{"object", "array", "string", "number", "boolean", "null"}
	var n node
	if json.Unmarshal(raw, &n) != nil || n == nil || depth > 8 {
		return all
	}
	if r := n["$ref"]; r != nil {
		_, target, err := c.refTarget(r, "")
		if err != nil {
			return all
		}
		return c.kinds(target, depth+1)
	}
	key := "enum"
	if n["const"] != nil {
		key = "const"
	}
	if values, err := enumValues(n, key, ""); err == nil { // an error when absent
		var out []string
		for _, x := range values {
			out = append(out, kindOfValue(x))
		}
		return out
	}
	ts, err := c.types(n, "")
	if err != nil || slices.Contains(ts, "any") {
		return all
	}
	for i, t := range ts {
		if t == "integer" {
			ts[i] = "number"
		}
	}
	return ts
}

// discriminated reports whether object branches share a required property
// whose const or enum values differ from branch to branch.
func (c *schemaCompiler) discriminated(branches []json.RawMessage) bool {
	var first node
	if json.Unmarshal(branches[0], &first) != nil {
		return false
	}
	var props map[string]json.RawMessage
	json.Unmarshal(first["properties"], &props)
	for name := range props {
		seen := map[string]bool{}
		ok := true
		for _, br := range branches {
			var n node
			var required []string
			var ps map[string]node
			if json.Unmarshal(br, &n) != nil || json.Unmarshal(n["required"], &required) != nil ||
				!slices.Contains(required, name) || json.Unmarshal(n["properties"], &ps) != nil || ps[name] == nil {
				ok = false
				break
			}
			p := ps[name]
			var values []json.RawMessage
			if p["const"] != nil {
				values = []json.RawMessage{p["const"]}
			} else if json.Unmarshal(p["enum"], &values) != nil || len(values) == 0 {
				ok = false
				break
			}
			for _, v := range values {
				var x any
				json.Unmarshal(v, &x)
				key, _ := json.Marshal(x)
				if seen[string(key)] {
					ok = false
				}
				seen[string(key)] = true
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// enum is a choice of the values of enum (key "enum") or const: those
// the keywords beside it admit, as JSON Schema has every keyword hold.
// A value they do not admit is left out, and with none left no instance
// is valid (noInstance).
func (c *schemaCompiler) enum(n node, key, path string) (Elem, error) {
	values, err := c.admitted(n, key, path)
	if err != nil {
		return Elem{}, err
	}
	var alts [][]Elem
	for _, x := range values {
		alts = append(alts, c.b.Lit(string(appendJSON(nil, x))))
	}
	if len(alts) == 0 {
		what := "no value is"
		if key == "const" {
			what = "the value is not"
		}
		return Elem{}, empty(path, key, what+" valid under the keywords beside it: no instance is valid")
	}
	return c.b.Alt(key, alts...), nil
}

// admitted are the values of enum (key "enum") or const that the
// keywords beside it admit.
func (c *schemaCompiler) admitted(n node, key, path string) ([]any, error) {
	values, err := enumValues(n, key, path)
	if err != nil {
		return nil, err
	}
	rest := maps.Clone(n)
	delete(rest, key)
	var out []any
	for _, x := range values {
		ok, err := c.admitsNode(rest, x, path, 0)
		if _, none := err.(noInstance); none {
			ok, err = false, nil // no value of its type is valid, so neither is it
		}
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, x)
		}
	}
	return out, nil
}

// enumValues are the values of enum (key "enum") or const, as
// decodeValue gives them.
func enumValues(n node, key, path string) ([]any, error) {
	raw := []json.RawMessage{n[key]}
	if key == "enum" {
		raw = nil
		if err := json.Unmarshal(n["enum"], &raw); err != nil || len(raw) == 0 {
			return nil, &SchemaError{Path: path, Keyword: "enum", Reason: "want a non-empty array"}
		}
	}
	values := make([]any, len(raw))
	for i, v := range raw {
		x, err := decodeValue(v)
		if err != nil {
			return nil, &SchemaError{Path: path, Keyword: key, Reason: "a value is not JSON"}
		}
		values[i] = x
	}
	return values, nil
}

// bounds reads a pair of count keywords; max is -1 when absent.
func (c *schemaCompiler) bounds(n node, minKey, maxKey, path string) (lo, hi int, err error) {
	hi = -1
	for _, k := range []string{minKey, maxKey} {
		raw := n[k]
		if raw == nil {
			continue
		}
		var v float64
		if json.Unmarshal(raw, &v) != nil || v < 0 || v != math.Trunc(v) || v > 1e6 {
			return 0, 0, &SchemaError{Path: path, Keyword: k, Reason: "want a whole number from 0 to 1000000"}
		}
		if k == minKey {
			lo = int(v)
		} else {
			hi = int(v)
		}
	}
	if hi >= 0 && lo > hi {
		return 0, 0, empty(path, minKey, fmt.Sprintf("%d is more than %s %d: no instance is valid", lo, maxKey, hi))
	}
	return lo, hi, nil
}
