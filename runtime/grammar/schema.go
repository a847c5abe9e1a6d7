package grammar

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SchemaError is a schema that cannot be enforced: the keyword at fault
// and where it is (a JSON pointer into the schema). A schema is refused
// whole rather than enforced in part.
type SchemaError struct {
	Path    string // "" for the root
	Keyword string
	Reason  string
}

func (e *SchemaError) Error() string {
	at := e.Path
	if at == "" {
		at = "#"
	}
	return fmt.Sprintf("json schema %s: %s: %s", at, e.Keyword, e.Reason)
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
	return noInstance{&SchemaError{path, keyword, reason}}
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
// constrain an instance.
var (
	annotations = []string{"title", "description", "default", "examples", "example", "$schema", "$id", "$comment",
		"deprecated", "readOnly", "writeOnly", "$defs", "definitions"}
	keywordTypes = map[string]string{
		"properties": "object", "required": "object", "additionalProperties": "object",
		"items": "array", "prefixItems": "array", "minItems": "array", "maxItems": "array",
		"minLength": "string", "maxLength": "string", "pattern": "string", "format": "string",
		// Bounds are enforced on integers only: a schema without a type
		// that bounds its numbers is held to integers, which is narrower.
		"minimum": "integer", "maximum": "integer", "exclusiveMinimum": "integer", "exclusiveMaximum": "integer",
	}
	jsonTypes = []string{"object", "array", "string", "number", "integer", "boolean", "null"}
)

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
	// check makes the grammars enum and const values are checked with
	// (see admits), and checkRules keeps them by keyword and value.
	check      *schemaCompiler
	checkRules map[string]Elem
}

// Schema compiles a JSON Schema to the grammar of the JSON texts that are
// valid instances of it, for the vocabulary. See SchemaRule for what is
// supported.
func Schema(v *Vocab, schema []byte) (*Grammar, error) {
	b := NewBuilder()
	j := newJSONRules(b)
	value, err := SchemaRule(j, schema)
	if err != nil {
		return nil, err
	}
	return b.Build(b.New("root", []Elem{value}), v)
}

// JSONObject is the grammar of any JSON object (OpenAI's json_object).
func JSONObject(v *Vocab) (*Grammar, error) {
	b := NewBuilder()
	j := newJSONRules(b)
	return b.Build(b.New("root", []Elem{j.object}), v)
}

// SchemaRule compiles a JSON Schema into j's builder and returns the rule
// of its valid instances' JSON text. Supported: type (one or a list),
// enum and const (their values held to the keywords beside them: a value
// those refuse is left out), anyOf, oneOf (when its branches cannot
// overlap: different types, or objects told apart by a required
// property's const or enum), allOf of one schema, $ref to #, #/$defs/...
// and #/definitions/... (recursion included); for objects properties
// (written in the schema's order), required (a name not in properties
// held to additionalProperties), additionalProperties (false, true or a
// schema); for arrays items, prefixItems, minItems, maxItems; for strings
// minLength, maxLength, pattern (see Regexp) and format date, time,
// date-time, uuid and uri; minimum, maximum and their exclusive forms
// for integers, and whole ones for numbers. A type of a list or a
// branch of anyOf or oneOf that no instance is valid for is left out.
// Where a schema leaves a choice the grammar may take a narrower one, as
// every instance it allows is still valid: additionalProperties left out
// allows none, integers have at most 16 digits, free values nest at most
// 6 deep.
func SchemaRule(j *jsonRules, schema []byte) (Elem, error) {
	e, err := newSchemaCompiler(j, schema).compile(schema, "")
	return e, refusal(err)
}

func newSchemaCompiler(j *jsonRules, doc json.RawMessage) *schemaCompiler {
	return &schemaCompiler{j: j, b: j.b, doc: doc, refs: map[string]int32{}, refErrs: map[string]error{}, resolved: map[string]json.RawMessage{},
		ranges: map[[2]string]Elem{}, checkRules: map[string]Elem{}}
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
		return nil, false, &SchemaError{path, "schema", "want an object or a boolean"}
	}
	return n, false, nil
}

func (c *schemaCompiler) compile(raw json.RawMessage, path string) (Elem, error) {
	n, anything, err := c.parse(raw, path)
	if err != nil {
		return Elem{}, err
	}
	if anything {
		return c.j.value, nil
	}
	if err := checkKeywords(n, path); err != nil {
		return Elem{}, err
	}
	constraints := 0
	for k := range n {
		if !slices.Contains(annotations, k) && k != "uniqueItems" {
			constraints++
		}
	}
	alone := func(k string) error {
		if constraints > 1 {
			return &SchemaError{path, k, "beside other keywords: not supported, so it could not be enforced"}
		}
		return nil
	}
	switch {
	case n["$ref"] != nil:
		if err := alone("$ref"); err != nil {
			return Elem{}, err
		}
		return c.ref(n["$ref"], path)
	case n["anyOf"] != nil, n["oneOf"] != nil, n["allOf"] != nil:
		return c.combination(n, path, alone)
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

// checkKeywords refuses a keyword that is neither supported nor an
// annotation.
func checkKeywords(n node, path string) error {
	for k := range n {
		if !slices.Contains(annotations, k) && keywordTypes[k] == "" {
			switch k {
			case "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "uniqueItems":
			default:
				return &SchemaError{path, k, "not supported, so it could not be enforced"}
			}
		}
	}
	if u, ok := n["uniqueItems"]; ok && string(bytes.TrimSpace(u)) != "false" {
		return &SchemaError{path, "uniqueItems", "not supported, so it could not be enforced"}
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
		return nil, &SchemaError{path, "type", "want a type name or a non-empty list of them"}
	}
	for _, t := range list {
		if !slices.Contains(jsonTypes, t) {
			return nil, &SchemaError{path, "type", fmt.Sprintf("%q is not a JSON Schema type", t)}
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
	return Elem{}, &SchemaError{path, "type", fmt.Sprintf("%q is not a JSON Schema type", t)}
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
		return "", nil, &SchemaError{path, "$ref", "want a string"}
	}
	if target, err = c.resolve(ref); err != nil {
		return "", nil, &SchemaError{path, "$ref", err.Error()}
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

// combination compiles anyOf, oneOf and allOf.
func (c *schemaCompiler) combination(n node, path string, alone func(string) error) (Elem, error) {
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if n[k] == nil {
			continue
		}
		if err := alone(k); err != nil {
			return Elem{}, err
		}
		branches, err := branchesOf(n, k, path)
		if err != nil {
			return Elem{}, err
		}
		if k == "allOf" {
			if len(branches) > 1 {
				return Elem{}, &SchemaError{path, k, "of more than one schema: not supported, so it could not be enforced"}
			}
			return c.compile(branches[0], path+"/allOf/0")
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
	panic("unreachable")
}

// branchesOf reads the schemas of anyOf, oneOf or allOf (k).
func branchesOf(n node, k, path string) ([]json.RawMessage, error) {
	var branches []json.RawMessage
	if err := json.Unmarshal(n[k], &branches); err != nil || len(branches) == 0 {
		return nil, &SchemaError{path, k, "want a non-empty array of schemas"}
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
			for _, t := range kinds[i] {
				if slices.Contains(kinds[k], t) {
					overlap = true
				}
			}
		}
	}
	if !overlap || c.discriminated(branches) {
		return nil
	}
	return &SchemaError{path, "oneOf", "its branches may overlap, and an instance valid for two is invalid: use anyOf, or tell the branches apart by type or by a required property's const"}
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
			return nil, &SchemaError{path, "enum", "want a non-empty array"}
		}
	}
	values := make([]any, len(raw))
	for i, v := range raw {
		x, err := decodeValue(v)
		if err != nil {
			return nil, &SchemaError{path, key, "a value is not JSON"}
		}
		values[i] = x
	}
	return values, nil
}

// str is a string with the schema's length, pattern or format.
func (c *schemaCompiler) str(n node, path string) (Elem, error) {
	b, j := c.b, c.j
	minLen, maxLen, err := c.bounds(n, "minLength", "maxLength", path)
	if err != nil {
		return Elem{}, err
	}
	lengths := n["minLength"] != nil || n["maxLength"] != nil
	if f := n["format"]; f != nil {
		if lengths || n["pattern"] != nil {
			return Elem{}, &SchemaError{path, "format", "with a length or a pattern: not supported, so it could not be enforced"}
		}
		return c.formatRule(f, path)
	}
	if p := n["pattern"]; p != nil {
		if lengths {
			return Elem{}, &SchemaError{path, "pattern", "with minLength or maxLength: not supported, so it could not be enforced"}
		}
		body, err := c.patternRule(p, path)
		if err != nil {
			return Elem{}, err
		}
		return Ref(b.New("pattern", Seq(b.Byte('"'), body, b.Byte('"')))), nil
	}
	if !lengths {
		return j.str, nil
	}
	return Ref(b.New("string", Seq(b.Byte('"'), b.Repeat("chars", []Elem{j.char}, minLen, maxLen), b.Byte('"')))), nil
}

// formatRule is a string of format f, quotes included.
func (c *schemaCompiler) formatRule(f json.RawMessage, path string) (Elem, error) {
	var name string
	json.Unmarshal(f, &name)
	e, ok := c.format(name)
	if !ok {
		return Elem{}, &SchemaError{path, "format", fmt.Sprintf("%q is not supported (date, time, date-time, uuid, uri), so it could not be enforced", name)}
	}
	return e, nil
}

// patternRule is the text between the quotes of a string pattern p
// matches.
func (c *schemaCompiler) patternRule(p json.RawMessage, path string) (Elem, error) {
	var re string
	if err := json.Unmarshal(p, &re); err != nil {
		return Elem{}, &SchemaError{path, "pattern", "want a string"}
	}
	body, err := c.regexp(re)
	if err != nil {
		return Elem{}, &SchemaError{path, "pattern", err.Error()}
	}
	return body, nil
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
			return 0, 0, &SchemaError{path, k, "want a whole number from 0 to 1000000"}
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

// object is an object with the schema's properties in its order.
func (c *schemaCompiler) object(n node, path string) (Elem, error) {
	b, j := c.b, c.j
	if n["properties"] == nil && n["required"] == nil && n["additionalProperties"] == nil {
		return j.object, nil
	}
	names, err := objectKeys(n["properties"])
	if err != nil {
		return Elem{}, &SchemaError{path, "properties", "want an object"}
	}
	var props map[string]json.RawMessage
	json.Unmarshal(n["properties"], &props)
	var required []string
	if n["required"] != nil {
		if err := json.Unmarshal(n["required"], &required); err != nil {
			return Elem{}, &SchemaError{path, "required", "want an array of strings"}
		}
	}
	ap := n["additionalProperties"]
	closed := ap != nil && string(bytes.TrimSpace(ap)) == "false"
	for _, r := range required {
		if props[r] == nil && !slices.Contains(names, r) {
			if closed {
				return Elem{}, empty(path, "required", fmt.Sprintf("%q is not in properties, and additionalProperties is false: no instance is valid", r))
			}
			names = append(names, r)
		}
	}
	type prop struct {
		member   []Elem
		required bool
	}
	// additional is the value of an additional property (any value when
	// additionalProperties is left out), compiled once.
	var apValue *Elem
	additional := func() (Elem, error) {
		switch {
		case ap == nil:
			return j.value, nil
		case apValue == nil:
			v, err := c.compile(ap, path+"/additionalProperties")
			if err != nil {
				return Elem{}, err
			}
			apValue = &v
		}
		return *apValue, nil
	}
	var ps []prop
	for _, name := range names {
		// A required name the properties do not describe is an
		// additional property, held to additionalProperties.
		var v Elem
		if schema := props[name]; schema != nil {
			v, err = c.compile(schema, path+"/properties/"+escapePointer(name))
		} else {
			v, err = additional()
		}
		if err != nil && !slices.Contains(required, name) {
			err = refusal(err) // the object is valid without it
		}
		if err != nil {
			return Elem{}, err
		}
		key, _ := json.Marshal(name)
		ps = append(ps, prop{Seq(b.LitRule(string(key)), j.ws, b.Byte(':'), j.ws, v), slices.Contains(required, name)})
	}
	// extra are the members additionalProperties allows after the listed.
	var extra []Elem
	if ap != nil && !closed {
		v, err := additional()
		if err != nil {
			return Elem{}, refusal(err) // the object is valid without extras
		}
		extra = Seq(c.keyOutside(names), j.ws, b.Byte(':'), j.ws, v)
	}
	sep := Seq(j.ws, b.Byte(','), j.ws)
	// rest[i][first]: the members from property i on; first when no
	// member came before, so none needs a comma.
	var restExtra [2]Elem
	if extra != nil {
		more := b.Repeat("extra", Seq(sep, extra), 0, -1)
		restExtra[0] = b.Alt("extras", nil, Seq(sep, extra, more))
		restExtra[1] = b.Alt("extras", nil, Seq(extra, more))
	} else {
		restExtra[0] = b.Alt("end", nil)
		restExtra[1] = restExtra[0]
	}
	next := restExtra
	for i := len(ps) - 1; i >= 0; i-- {
		var cur [2]Elem
		for first := range 2 {
			with := Seq(ps[i].member, next[0])
			if first == 0 {
				with = Seq(sep, with)
			}
			if ps[i].required {
				cur[first] = Ref(b.New("prop", with))
			} else {
				cur[first] = b.Alt("prop?", with, []Elem{next[first]})
			}
		}
		next = cur
	}
	return Ref(b.New("object", Seq(b.Byte('{'), j.ws, next[1], j.ws, b.Byte('}')))), nil
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
// (draft 7's tuples) is refused.
func itemSchemas(n node, path string) (prefix []json.RawMessage, items json.RawMessage, err error) {
	if n["prefixItems"] != nil && json.Unmarshal(n["prefixItems"], &prefix) != nil {
		return nil, nil, &SchemaError{path, "prefixItems", "want an array of schemas"}
	}
	items = n["items"]
	if bytes.HasPrefix(bytes.TrimSpace(items), []byte("[")) {
		return nil, nil, &SchemaError{path, "items", "an array of schemas (draft 7's tuples): use prefixItems"}
	}
	return prefix, items, nil
}

// integer is an integer within the schema's bounds.
func (c *schemaCompiler) integer(n node, path string) (Elem, error) {
	const limit = 1e16 - 1 // 16 digits, as the free integer
	low, high, err := numberBounds(n, path)
	if err != nil {
		return Elem{}, err
	}
	if low == nil && high == nil {
		return c.j.integer, nil
	}
	lo, hi := -limit, limit
	if low != nil {
		if low.excl {
			lo = math.Max(lo, math.Floor(low.v)+1)
		} else {
			lo = math.Max(lo, math.Ceil(low.v))
		}
	}
	if high != nil {
		if high.excl {
			hi = math.Min(hi, math.Ceil(high.v)-1)
		} else {
			hi = math.Min(hi, math.Floor(high.v))
		}
	}
	if lo > hi {
		return Elem{}, empty(path, "minimum", "no integer is within the bounds")
	}
	lo, hi = math.Max(lo, -limit), math.Min(hi, limit)
	return c.intRange(int64(lo), int64(hi)), nil
}

// number is a number within the schema's bounds. Bounds are whole
// numbers from 0 to 10^9 (a probability's 0 and 1, a positive timeout's
// exclusive 0), which keep the language simple: a whole part in a range
// with any fraction, and at the edges a whole part with a fraction that
// is not zero (above an exclusive minimum) or none (at an inclusive
// maximum). A bounded number has no exponent and at most 6 decimals, so
// that a validator reading it as a float64 compares it as written.
func (c *schemaCompiler) number(n node, path string) (Elem, error) {
	b, j := c.b, c.j
	const limit = 1e9
	type bound struct {
		v         int64
		set, excl bool
	}
	low, high, err := numberBounds(n, path)
	if err != nil {
		return Elem{}, err
	}
	whole := func(nb *numBound) (bound, error) {
		if nb == nil {
			return bound{}, nil
		}
		if v := nb.v; v != math.Trunc(v) || v < 0 || v > limit {
			return bound{}, &SchemaError{path, nb.key, fmt.Sprintf("%v on a number: only whole bounds from 0 to 10^9 are supported, so it could not be enforced", v)}
		}
		return bound{int64(nb.v), true, nb.excl}, nil
	}
	lo, err := whole(low)
	if err != nil {
		return Elem{}, err
	}
	hi, err := whole(high)
	if err != nil {
		return Elem{}, err
	}
	switch {
	case !lo.set && !hi.set:
		return j.number, nil
	case lo.set && hi.set && (lo.v > hi.v || (lo.v == hi.v && (lo.excl || hi.excl))):
		return Elem{}, empty(path, "minimum", "no number is within the bounds")
	}
	d := b.Range('0', '9')
	anyFrac := b.Optional("frac6", Seq(b.Byte('.'), b.Repeat("fdigits6", []Elem{d}, 1, 6)))
	// A fraction that is not zero: its first non-zero digit at place p.
	var nz [][]Elem
	for p := range 6 {
		nz = append(nz, Seq(b.Lit(strings.Repeat("0", p)), b.Range('1', '9'), b.Repeat(fmt.Sprintf("fdigits%d", 5-p), []Elem{d}, 0, 5-p)))
	}
	nonzeroFrac := Seq(b.Byte('.'), b.Alt("nonzero-frac6", nz...))
	var alts [][]Elem
	first, last := int64(0), int64(limit)
	if lo.set {
		first = lo.v
		if lo.excl {
			first++
			alts = append(alts, Seq(c.natRange(lo.v, lo.v), nonzeroFrac))
		}
	}
	if hi.set {
		last = hi.v - 1
		if !hi.excl && (!lo.set || hi.v > lo.v || !lo.excl) {
			alts = append(alts, []Elem{c.natRange(hi.v, hi.v)})
		}
	}
	if first <= last {
		alts = append(alts, Seq(c.natRange(first, last), anyFrac))
	}
	if !lo.set {
		// Every negative number is below a maximum from 0 up; below an
		// exclusive 0, "-0" alone is not.
		if hi.v == 0 && hi.excl {
			alts = append(alts, Seq(b.Byte('-'), c.natRange(1, limit), anyFrac), Seq(b.Lit("-0"), nonzeroFrac))
		} else {
			alts = append(alts, Seq(b.Byte('-'), c.natRange(0, limit), anyFrac))
		}
	}
	return b.Alt(fmt.Sprintf("number%v%v", lo, hi), alts...), nil
}

// numBound is a bound on numbers: the keyword that sets it, its value
// exactly and as a float64, and whether the value itself is excluded.
type numBound struct {
	key         string
	r           *big.Rat
	v           float64
	lower, excl bool
}

// admits reports whether r is within the bound.
func (b *numBound) admits(r *big.Rat) bool {
	d := r.Cmp(b.r)
	if !b.lower {
		d = -d
	}
	return d > 0 || d == 0 && !b.excl
}

// numberBounds reads minimum, maximum, exclusiveMinimum and
// exclusiveMaximum, draft 4's boolean exclusive forms included: the
// tightest bound below and the tightest above, nil where there is none.
func numberBounds(n node, path string) (lo, hi *numBound, err error) {
	for _, k := range []struct {
		key, flag string // flag: draft 4's exclusive form of the bound
		lower     bool
	}{{"minimum", "exclusiveMinimum", true}, {"exclusiveMinimum", "", true}, {"maximum", "exclusiveMaximum", false}, {"exclusiveMaximum", "", false}} {
		raw := bytes.TrimSpace(n[k.key])
		if len(raw) == 0 || string(raw) == "true" || string(raw) == "false" {
			continue // absent, or draft 4's flag, read with its bound
		}
		b := &numBound{key: k.key, r: ratOf(json.Number(raw)), lower: k.lower, excl: k.flag == ""}
		if json.Unmarshal(raw, &b.v) != nil || b.r == nil {
			return nil, nil, &SchemaError{path, k.key, "want a number"}
		}
		if k.flag != "" {
			b.excl = string(bytes.TrimSpace(n[k.flag])) == "true"
		}
		cur, sign := &hi, -1
		if k.lower {
			cur, sign = &lo, 1
		}
		if old := *cur; old == nil {
			*cur = b
		} else if d := b.r.Cmp(old.r) * sign; d > 0 || d == 0 && b.excl {
			*cur = b
		}
	}
	return lo, hi, nil
}

// intRange is the canonical decimal text of the integers lo to hi.
func (c *schemaCompiler) intRange(lo, hi int64) Elem {
	b := c.b
	var alts [][]Elem
	if lo < 0 {
		nhi := min(hi, -1)
		alts = append(alts, Seq(b.Byte('-'), c.natRange(-nhi, -lo)))
	}
	if hi >= 0 {
		alts = append(alts, []Elem{c.natRange(max(lo, 0), hi)})
	}
	return b.Alt(fmt.Sprintf("[%d,%d]", lo, hi), alts...)
}

// natRange is the numbers lo to hi, 0 <= lo <= hi, without leading zeros.
func (c *schemaCompiler) natRange(lo, hi int64) Elem {
	var alts [][]Elem
	for l := len(strconv.FormatInt(lo, 10)); l <= len(strconv.FormatInt(hi, 10)); l++ {
		first, last := int64(math.Pow10(l-1)), int64(math.Pow10(l))-1
		if l == 1 {
			first = 0
		}
		a, z := max(lo, first), min(hi, last)
		if a > z {
			continue
		}
		alts = append(alts, []Elem{c.digits(strconv.FormatInt(a, 10), strconv.FormatInt(z, 10))})
	}
	return c.b.Alt("natural", alts...)
}

// digits is the digit strings from lo to hi, of equal length.
func (c *schemaCompiler) digits(lo, hi string) Elem {
	b := c.b
	key := [2]string{lo, hi}
	if e, ok := c.ranges[key]; ok {
		return e
	}
	var e Elem
	switch {
	case lo == "":
		e = b.Alt("", nil)
	case lo[0] == hi[0]:
		e = Ref(b.New(lo+".."+hi, Seq(b.Byte(lo[0]), c.digits(lo[1:], hi[1:]))))
	case strings.Trim(lo[1:], "0") == "" && strings.Trim(hi[1:], "9") == "":
		e = Ref(b.New(lo+".."+hi, Seq(b.Range(lo[0], hi[0]), c.any(len(lo)-1))))
	default:
		n := len(lo) - 1
		alts := [][]Elem{Seq(b.Byte(lo[0]), c.digits(lo[1:], strings.Repeat("9", n)))}
		if lo[0]+1 <= hi[0]-1 {
			alts = append(alts, Seq(b.Range(lo[0]+1, hi[0]-1), c.any(n)))
		}
		alts = append(alts, Seq(b.Byte(hi[0]), c.digits(strings.Repeat("0", n), hi[1:])))
		e = b.Alt(lo+".."+hi, alts...)
	}
	c.ranges[key] = e
	return e
}

// any is n digits.
func (c *schemaCompiler) any(n int) Elem {
	return c.digits(strings.Repeat("0", n), strings.Repeat("9", n))
}
