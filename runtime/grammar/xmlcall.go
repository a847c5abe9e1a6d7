package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/qwenc/qwenc/format/chat"
)

// xmlCompiler holds the parameters of a call in the qwen3_coder form,
//
//	<parameter=NAME>
//	VALUE
//	</parameter>
//
// to a tool's JSON Schema, each VALUE written so that the format's parser
// reads back a valid instance of the parameter's schema: it reads a value
// by the type the schema names (chat.CoderTypeOf), strings as their raw
// text, integers, numbers, booleans, objects and arrays as JSON, and a
// list of types as a Python literal; "null" in any case is null whatever
// the type. VALUE never spells out the texts that end a value or a call
// (</parameter>, <parameter=, </function>, </tool_call>), which the
// parser would cut it at.
type xmlCompiler struct {
	b *Builder
	j *jsonRules
	// clones are the rules copied without '<' (withoutLT), by original,
	// and isClone the copies.
	clones  map[int32]int32
	isClone map[int32]bool
	// raw is any raw string, by whether "null" may be written too.
	raw map[bool]Elem
}

// coderEnds are the texts the parser ends a value at.
var coderEnds = []string{chat.CoderParameterEnd, chat.CoderParameter, chat.CoderFunctionEnd, chat.ToolCallClose}

func newXMLCompiler(b *Builder, j *jsonRules) *xmlCompiler {
	return &xmlCompiler{b: b, j: j, clones: map[int32]int32{}, isClone: map[int32]bool{}, raw: map[bool]Elem{}}
}

// arguments is a call's parameters for the tool's parameters schema
// (nil: none is written, which any object allows): each property in the
// schema's order, the required ones always, then each required name the
// properties do not describe (its value a raw string, as the parser
// reads a parameter its schema does not have). The parser lets a
// parameter's name run to the first '>', so a property whose name has
// one (or a '<' or a line break) is left out, and refused when required.
func (x *xmlCompiler) arguments(params json.RawMessage) (Elem, error) {
	b := x.b
	if params == nil {
		return b.Alt("no-parameters", nil), nil
	}
	c := newSchemaCompiler(x.j, params)
	n, anything, err := c.parse(params, "")
	if err != nil {
		return Elem{}, refusal(err)
	}
	if anything {
		return b.Alt("no-parameters", nil), nil
	}
	for k := range n {
		switch {
		case slices.Contains(annotations, k):
		case k == "type":
			var t string
			if json.Unmarshal(n[k], &t) != nil || t != "object" {
				return Elem{}, &SchemaError{Path: "", Keyword: "type", Reason: "the parameters of a call are an object: want \"object\""}
			}
		case k == "properties" || k == "required" || k == "additionalProperties":
		default:
			return Elem{}, &SchemaError{Path: "", Keyword: k, Reason: "not supported on the parameters of a call in the qwen3_coder format, so it could not be enforced"}
		}
	}
	names, err := objectKeys(n["properties"])
	if err != nil {
		return Elem{}, &SchemaError{Path: "", Keyword: "properties", Reason: "want an object"}
	}
	var props map[string]json.RawMessage
	json.Unmarshal(n["properties"], &props)
	var required []string
	if n["required"] != nil && json.Unmarshal(n["required"], &required) != nil {
		return Elem{}, &SchemaError{Path: "", Keyword: "required", Reason: "want an array of strings"}
	}
	ap := bytes.TrimSpace(n["additionalProperties"])
	extraOK := len(ap) == 0 || string(ap) == "true"
	for _, r := range required {
		switch {
		case props[r] != nil:
		case !extraOK:
			return Elem{}, &SchemaError{Path: "", Keyword: "required", Reason: fmt.Sprintf("%q is not in properties: the parser reads it as a string, which additionalProperties must then allow; only an absent or true additionalProperties is supported", r)}
		case !slices.Contains(names, r):
			names = append(names, r)
		}
	}
	type param struct {
		block    []Elem
		required bool
	}
	var ps []param
	for _, name := range names {
		path := "/properties/" + escapePointer(name)
		req := slices.Contains(required, name)
		if strings.ContainsAny(name, "<>\n") {
			if req {
				return Elem{}, &SchemaError{Path: path, Keyword: "required", Reason: fmt.Sprintf("%q: a name with '<', '>' or a line break cannot be written in the qwen3_coder format", name)}
			}
			continue
		}
		var v Elem
		if schema := props[name]; schema != nil {
			v, err = x.value(c, schema, path)
		} else {
			v = x.anyRaw(true)
		}
		if err != nil {
			return Elem{}, refusal(err)
		}
		ps = append(ps, param{Seq(b.LitRule(chat.CoderParameter+name+">\n"), v, b.LitRule("\n"+chat.CoderParameterEnd+"\n")), req})
	}
	next := b.Alt("end", nil)
	for i := len(ps) - 1; i >= 0; i-- {
		with := Seq(ps[i].block, next)
		if ps[i].required {
			next = Ref(b.New("parameter", with))
		} else {
			next = b.Alt("parameter?", with, []Elem{next})
		}
	}
	return next, nil
}

// value is the text of a parameter's value for its schema, as the
// parser reads it by the type the schema names.
func (x *xmlCompiler) value(c *schemaCompiler, schema json.RawMessage, path string) (Elem, error) {
	n, anything, err := c.parse(schema, path)
	if err != nil {
		return Elem{}, err
	}
	if anything {
		return x.anyRaw(true), nil // read as a string, or null
	}
	switch chat.CoderTypeOf(schema) {
	case chat.CoderString:
		var one string
		if n["type"] == nil || json.Unmarshal(n["type"], &one) != nil {
			// No type, or a list of them (["string", "null"]).
			return x.asString(c, schema, path, 0)
		}
		if err := jsonType(n, path, "string"); err != nil {
			return Elem{}, err
		}
		return x.typedString(c, n, path, false)
	case chat.CoderInteger, chat.CoderNumber, chat.CoderBoolean:
		return c.compile(schema, path) // JSON text, which has no '<'
	case chat.CoderJSON:
		v, err := c.compile(schema, path)
		if err != nil {
			return Elem{}, err
		}
		// In a JSON string a '<' is written \u003c, so the value never
		// spells an end marker.
		v, ok := x.withoutLT(v)
		if !ok {
			return Elem{}, &SchemaError{Path: path, Keyword: "type", Reason: "its values need a '<', which the qwen3_coder format cannot hold"}
		}
		return v, nil
	}
	return x.literal(c, n, path)
}

// jsonType refuses a type keyword that is not the JSON Schema type want
// (the parser reads "String" or "str" as a string too, a validator not).
func jsonType(n node, path, want string) error {
	var t string
	json.Unmarshal(n["type"], &t)
	if t != want {
		return &SchemaError{Path: path, Keyword: "type", Reason: fmt.Sprintf("%q is not a JSON Schema type", t)}
	}
	return nil
}

// maxAsStringDepth bounds the $refs and branches asString follows.
const maxAsStringDepth = 16

// asString is the text of the values of a schema without a type, which
// the parser reads as a string (its raw text), or as null ("null" in any
// case): the strings the schema allows, and "null" when it allows null.
// Supported: no keyword, a $ref, anyOf and oneOf, allOf of one schema,
// enum and const, and the type keyword in the schemas these lead to.
func (x *xmlCompiler) asString(c *schemaCompiler, schema json.RawMessage, path string, depth int) (Elem, error) {
	b := x.b
	if depth > maxAsStringDepth {
		return Elem{}, &SchemaError{Path: path, Keyword: "$ref", Reason: "schemas nested too deep (a $ref that leads back to itself?)"}
	}
	n, anything, err := c.parse(schema, path)
	if err != nil {
		return Elem{}, err
	}
	if anything {
		return x.anyRaw(true), nil
	}
	if err := xmlKeywords(n, path); err != nil {
		return Elem{}, err
	}
	switch {
	case n["$ref"] != nil:
		_, target, err := c.refTarget(n["$ref"], path)
		if err != nil {
			return Elem{}, err
		}
		return x.asString(c, target, path, depth+1)
	case n["anyOf"] != nil, n["oneOf"] != nil, n["allOf"] != nil:
		for _, k := range []string{"anyOf", "oneOf", "allOf"} {
			if n[k] == nil {
				continue
			}
			branches, err := branchesOf(n, k, path)
			if err != nil {
				return Elem{}, err
			}
			if k == "allOf" && len(branches) > 1 {
				return Elem{}, &SchemaError{Path: path, Keyword: k, Reason: "of more than one schema: not supported, so it could not be enforced"}
			}
			if len(n) > 1+countAnnotations(n) {
				return Elem{}, &SchemaError{Path: path, Keyword: k, Reason: "beside other keywords: not supported, so it could not be enforced"}
			}
			if k == "oneOf" {
				// A string or null two branches allow is invalid: the
				// grammar cannot tell, so the branches must not overlap.
				if err := c.disjoint(branches, path); err != nil {
					return Elem{}, err
				}
			}
			alts, err := alternatives(len(branches), func(i int) (Elem, error) {
				return x.asString(c, branches[i], fmt.Sprintf("%s/%s/%d", path, k, i), depth+1)
			})
			if err != nil {
				return Elem{}, err
			}
			return b.Alt(k, alts...), nil
		}
	case n["const"] != nil, n["enum"] != nil:
		return x.literals(c, n, path, nil)
	case n["type"] != nil:
		var one string
		var list []string
		if json.Unmarshal(n["type"], &one) == nil {
			list = []string{one}
		} else if json.Unmarshal(n["type"], &list) != nil {
			return Elem{}, &SchemaError{Path: path, Keyword: "type", Reason: "want a type name or a list of them"}
		}
		var alts [][]Elem
		for _, t := range list {
			switch t {
			case "string":
				e, err := x.typedString(c, n, path, slices.Contains(list, "null"))
				if err != nil {
					return Elem{}, err
				}
				alts = append(alts, []Elem{e})
			case "null":
				alts = append(alts, []Elem{b.LitRule("null")})
			case "integer", "number", "boolean", "object", "array":
				// Text of these is read back as a string.
			default:
				return Elem{}, &SchemaError{Path: path, Keyword: "type", Reason: fmt.Sprintf("%q is not a JSON Schema type", t)}
			}
		}
		if len(alts) == 0 {
			return Elem{}, empty(path, "type", "the parser reads a value whose schema names no type as a string or null, which this schema does not allow")
		}
		return b.Alt("types", alts...), nil
	}
	if len(n) == countAnnotations(n) {
		return x.anyRaw(true), nil
	}
	return Elem{}, &SchemaError{Path: path, Keyword: "type", Reason: "missing: the parser reads such a value as a string, and only a schema without keywords, a $ref, anyOf, oneOf, enum, const or a type can hold it"}
}

func countAnnotations(n node) int {
	k := 0
	for key := range n {
		if slices.Contains(annotations, key) {
			k++
		}
	}
	return k
}

// typedString is the raw text of the strings a schema of type string
// allows (its lengths, format, enum or const), with "null" among them
// when null is set (a null the schema allows beside); without it, no
// string that reads as null.
func (x *xmlCompiler) typedString(c *schemaCompiler, n node, path string, null bool) (Elem, error) {
	b := x.b
	if err := xmlKeywords(n, path); err != nil {
		return Elem{}, err
	}
	if n["const"] != nil || n["enum"] != nil {
		return x.literals(c, n, path, func(v any) bool { _, ok := v.(string); return ok || null && v == nil })
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf", "$ref"} {
		if n[k] != nil {
			return Elem{}, &SchemaError{Path: path, Keyword: k, Reason: "beside type: not supported in the qwen3_coder format, so it could not be enforced"}
		}
	}
	if n["pattern"] != nil {
		return x.patterned(c, n, path, null)
	}
	minLen, maxLen, err := c.bounds(n, "minLength", "maxLength", path)
	if err != nil {
		return Elem{}, err
	}
	lengths := n["minLength"] != nil || n["maxLength"] != nil
	if f := n["format"]; f != nil {
		if lengths {
			return Elem{}, &SchemaError{Path: path, Keyword: "format", Reason: "with a length: not supported, so it could not be enforced"}
		}
		var name string
		json.Unmarshal(f, &name)
		body, ok := c.formatText(name)
		if !ok {
			return Elem{}, &SchemaError{Path: path, Keyword: "format", Reason: fmt.Sprintf("%q is not supported on a string the qwen3_coder format writes raw, so it could not be enforced", name)}
		}
		// No text of a format is "null", or has a '<'.
		return Ref(b.New(name, body)), nil
	}
	if !lengths {
		return x.anyRaw(null), nil
	}
	return x.counted(minLen, maxLen, null), nil
}

// patterned is the raw text of the strings a string schema with a
// pattern allows (its lengths and format held with it): an automaton
// over characters, as for a JSON string, spelled raw. Its strings have no
// '<', so none spells an end marker (a pattern that allows '<' is held to
// fewer strings, each still valid), none of the control characters a raw
// value leaves out, and none is "null" in any case unless null is set.
func (x *xmlCompiler) patterned(c *schemaCompiler, n node, path string, null bool) (Elem, error) {
	sp, err := c.stringSpec(n, path)
	if err != nil {
		return Elem{}, err
	}
	raw := &charSet{nonASCII: true}
	chars := rawChars()
	for ch := range 128 {
		if chars.Has(byte(ch)) && ch != '<' {
			raw.addASCII(byte(ch), byte(ch))
		}
	}
	sp.must = append(sp.must, classNFA(raw))
	if !null {
		var nulls []string
		for k := range 16 {
			w := []byte("null")
			for i := range w {
				if k&(1<<i) != 0 {
					w[i] -= 'a' - 'A'
				}
			}
			nulls = append(nulls, string(w))
		}
		sp.mustNot = append(sp.mustNot, literalsNFA(nulls))
	}
	lang, err := sp.compile()
	if err != nil {
		return Elem{}, unsupported(path, "pattern", err.Error())
	}
	if lang.empty() {
		return Elem{}, empty(path, "pattern", "no string it allows can be written raw in the qwen3_coder format (without '<', and not null)")
	}
	e, err := c.automatonSpelled(lang.d, lang.at, lang.lo, lang.hi, func(at *atoms, in []bool) Elem { return x.spellRaw(c, at, in) })
	if err != nil {
		return Elem{}, unsupported(path, "pattern", err.Error())
	}
	return e, nil
}

// spellRaw is a character of the atoms in, as a raw value writes it: as
// it is.
func (x *xmlCompiler) spellRaw(c *schemaCompiler, at *atoms, in []bool) Elem {
	b := x.b
	var plain ByteSet
	for ch := range 128 {
		if in[at.class[ch]] {
			plain.Add(byte(ch), byte(ch))
		}
	}
	var alts [][]Elem
	if !plain.Empty() {
		alts = append(alts, []Elem{b.Set(plain)})
	}
	return b.Alt("raw-char", c.nonASCII(alts, at, in)...)
}

// literals is a choice of enum's or const's values that the keywords
// beside it admit and that keep reads back (all when keep is nil): a
// string as its raw text, unless it spells an end marker or reads as
// null; null as "null". Other values are left out.
func (x *xmlCompiler) literals(c *schemaCompiler, n node, path string, keep func(any) bool) (Elem, error) {
	key := "enum"
	if n["const"] != nil {
		key = "const"
	}
	values, err := c.admitted(n, key, path)
	if err != nil {
		return Elem{}, err
	}
	var alts [][]Elem
	for _, v := range values {
		s, isString := v.(string)
		switch {
		case keep != nil && !keep(v):
		case v == nil:
			alts = append(alts, x.b.Lit("null"))
		case isString && !spells(s, coderEnds...) && !strings.EqualFold(s, "null"):
			alts = append(alts, x.b.Lit(s))
		}
	}
	if len(alts) == 0 {
		return Elem{}, empty(path, key, "no value is a string or null the qwen3_coder format can write and read back: no instance is valid")
	}
	return x.b.Alt(key, alts...), nil
}

// rawChars are the ASCII bytes a raw string may hold: printable ones,
// tabs and line breaks (the rest would need a JSON escape, which raw
// text has not).
func rawChars() ByteSet {
	var s ByteSet
	s.Add(0x20, 0x7e)
	s.Add('\t', '\n')
	s.Add('\r', '\r')
	return s
}

// nullStates are how much of "null" (in any case) a raw string's text
// has spelled from its start: 0 to 4 letters, or nullNot once it cannot
// be "null".
const nullNot = 5

func nullNext(k int, c byte) int {
	if k < 4 && c|0x20 == "null"[k] {
		return k + 1
	}
	return nullNot
}

// anyRaw is any raw string that spells no end marker, and that does not
// read as null unless null is set.
func (x *xmlCompiler) anyRaw(null bool) Elem {
	if e, ok := x.raw[null]; ok {
		return e
	}
	a := newAvoider(coderEnds...)
	// A state is the avoider's times six, plus the null state.
	e := automatonRules(x.b, "raw", automaton{
		next: func(s int, c byte) int {
			t := a.next[s/6][c]
			if t < 0 {
				return -1
			}
			return int(t)*6 + nullNext(s%6, c)
		},
		final: func(s int) bool { return null || s%6 != 4 },
	}, rawChars(), &x.j.utf8)
	x.raw[null] = e
	return e
}

// counted is a raw string of minLen to maxLen (< 0: any number of)
// characters that does not read as null unless null is set: the lengths
// other than 4 apart, and four characters that are not "null". The
// characters counted are no '<' (so no end marker begins among them);
// without a maximum, those past them are any raw string's.
func (x *xmlCompiler) counted(minLen, maxLen int, null bool) Elem {
	b := x.b
	chars := rawChars()
	chars[0] &^= 1 << '<'
	char := b.Alt("raw-char", []Elem{b.Set(chars)}, []Elem{x.j.utf8})
	// at least is n characters or more: n of them, then any raw text,
	// which an end marker cannot begin before (it begins with '<').
	atLeast := func(n int) []Elem {
		return Seq(b.Repeat("raw", []Elem{char}, n, n), x.anyRaw(true))
	}
	if null {
		if maxLen < 0 {
			return Ref(b.New("raw-counted", atLeast(minLen)))
		}
		return b.Repeat("raw", []Elem{char}, minLen, maxLen)
	}
	var alts [][]Elem
	if minLen <= 3 {
		hi := 3
		if maxLen >= 0 {
			hi = min(hi, maxLen)
		}
		alts = append(alts, []Elem{b.Repeat("raw", []Elem{char}, minLen, hi)})
	}
	switch {
	case maxLen < 0:
		alts = append(alts, atLeast(max(5, minLen)))
	case maxLen >= 5:
		alts = append(alts, []Elem{b.Repeat("raw", []Elem{char}, max(5, minLen), maxLen)})
	}
	if minLen <= 4 && (maxLen < 0 || maxLen >= 4) {
		// Four characters: the first that leaves "null" after k of its
		// letters, then any.
		for k := range 4 {
			var seq []Elem
			for i := range k {
				var letter ByteSet
				letter.Add("null"[i], "null"[i])
				letter.Add("NULL"[i], "NULL"[i])
				seq = append(seq, b.Set(letter))
			}
			other := chars
			other[1] &^= 1<<("null"[k]-64) | 1<<("NULL"[k]-64)
			seq = append(seq, b.Alt("raw-char", []Elem{b.Set(other)}, []Elem{x.j.utf8}))
			for range 3 - k {
				seq = append(seq, char)
			}
			alts = append(alts, seq)
		}
	}
	return b.Alt("raw-counted", alts...)
}

// literal is the text of a value the parser reads as a Python literal
// (ast.literal_eval): a schema whose type is a list of types, or null.
// Each type is written as a literal of it: integers and numbers as JSON
// (which are Python literals too), booleans True and False, strings in
// double quotes with JSON's escapes that Python reads alike, null as
// "null" (which is null whatever the type).
func (x *xmlCompiler) literal(c *schemaCompiler, n node, path string) (Elem, error) {
	b := x.b
	if err := xmlKeywords(n, path); err != nil {
		return Elem{}, err
	}
	var one string
	var list []string
	if json.Unmarshal(n["type"], &one) == nil {
		list = []string{one}
	} else if json.Unmarshal(n["type"], &list) != nil || len(list) == 0 {
		return Elem{}, &SchemaError{Path: path, Keyword: "type", Reason: "want a type name or a non-empty list of them"}
	}
	for _, k := range []string{"enum", "const", "anyOf", "oneOf", "allOf", "$ref"} {
		if n[k] != nil {
			return Elem{}, &SchemaError{Path: path, Keyword: k, Reason: "beside a list of types: not supported in the qwen3_coder format, so it could not be enforced"}
		}
	}
	var alts [][]Elem
	for _, t := range list {
		switch t {
		case "null":
			alts = append(alts, []Elem{b.LitRule("null")})
		case "integer", "number":
			e, err := c.typed(n, t, path)
			if err != nil {
				return Elem{}, err
			}
			alts = append(alts, []Elem{e})
		case "boolean":
			alts = append(alts, b.Lit("True"), b.Lit("False"))
		case "string":
			e, err := x.quoted(c, n, path)
			if err != nil {
				return Elem{}, err
			}
			alts = append(alts, []Elem{e})
		case "object", "array":
			return Elem{}, &SchemaError{Path: path, Keyword: "type", Reason: fmt.Sprintf("%s in a list of types: the parser reads the value as a Python literal, which JSON's is not; not supported, so it could not be enforced", t)}
		default:
			return Elem{}, &SchemaError{Path: path, Keyword: "type", Reason: fmt.Sprintf("%q is not a JSON Schema type", t)}
		}
	}
	return b.Alt("literal", alts...), nil
}

// quoted is a string as a Python literal in double quotes: characters
// that need no escape but '<', and the escapes \" \\ \n \r \t, which
// JSON and Python read alike; or a format's text in quotes.
func (x *xmlCompiler) quoted(c *schemaCompiler, n node, path string) (Elem, error) {
	b := x.b
	for _, k := range []string{"minLength", "maxLength", "pattern"} {
		if n[k] != nil {
			return Elem{}, &SchemaError{Path: path, Keyword: k, Reason: "on a string in a list of types: not supported in the qwen3_coder format, so it could not be enforced"}
		}
	}
	if f := n["format"]; f != nil {
		var name string
		json.Unmarshal(f, &name)
		body, ok := c.formatText(name)
		if !ok {
			return Elem{}, &SchemaError{Path: path, Keyword: "format", Reason: fmt.Sprintf("%q is not supported on a string the qwen3_coder format writes raw, so it could not be enforced", name)}
		}
		return Ref(b.New("quoted-"+name, Seq(b.Byte('"'), body, b.Byte('"')))), nil
	}
	var plain, esc ByteSet
	for ch := byte(0x20); ch <= 0x7e; ch++ {
		if ch != '"' && ch != '\\' && ch != '<' {
			plain.Add(ch, ch)
		}
	}
	for _, ch := range `"\nrt` {
		esc.Add(byte(ch), byte(ch))
	}
	char := b.Alt("quoted-char", []Elem{b.Set(plain)}, []Elem{x.j.utf8}, Seq(b.Byte('\\'), b.Set(esc)))
	return Ref(b.New("quoted", Seq(b.Byte('"'), b.Repeat("quoted-chars", []Elem{char}, 0, -1), b.Byte('"')))), nil
}

// withoutLT is e with the byte '<' taken out of every set of the rules it
// reaches, which are copied (once per compiler), and then the
// alternatives that can no longer match anything dropped, so that no
// text the copy allows leads nowhere. ok is false when nothing is left.
func (x *xmlCompiler) withoutLT(e Elem) (Elem, bool) {
	b := x.b
	var cp func(e Elem) Elem
	cp = func(e Elem) Elem {
		switch e.kind {
		case kBytes:
			s := b.sets[e.set]
			s[0] &^= 1 << '<'
			return b.Set(s)
		case kRule:
			if r, ok := x.clones[e.ref]; ok {
				return Ref(r)
			}
			r := b.Rule(b.rules[e.ref].name + "-no<")
			x.clones[e.ref] = r
			x.isClone[r] = true
			var alts [][]Elem
			for _, alt := range b.rules[e.ref].alts {
				out := make([]Elem, len(alt))
				for i, el := range alt {
					out[i] = cp(el)
				}
				alts = append(alts, out)
			}
			b.Define(r, alts...)
			return Ref(r)
		}
		return e
	}
	out := cp(e)
	// Which copies still match something, decided over all of them (a
	// new one may refer to one made for another parameter).
	live := map[int32]bool{}
	dead := func(el Elem) bool {
		switch {
		case el.kind == kBytes:
			return b.sets[el.set].Empty()
		case el.kind == kRule && x.isClone[el.ref]:
			return !live[el.ref]
		}
		return false
	}
	copies := slices.Sorted(maps.Keys(x.isClone))
	for changed := true; changed; {
		changed = false
		for _, r := range copies {
			if !live[r] && slices.ContainsFunc(b.rules[r].alts, func(alt []Elem) bool { return !slices.ContainsFunc(alt, dead) }) {
				live[r], changed = true, true
			}
		}
	}
	for _, r := range copies {
		b.rules[r].alts = slices.DeleteFunc(b.rules[r].alts, func(alt []Elem) bool { return slices.ContainsFunc(alt, dead) })
	}
	return out, !dead(out)
}

// formatText is the text of a string of a supported format written raw
// (an XML parameter's value, or between a Python literal's quotes), or
// false when a text of the format could hold a character whose raw
// spelling is not its JSON one or that ends a raw value: '"', '\\', a
// control character or '<'. The formats whose texts hold none of them
// are spelled alike either way, so the JSON string's automaton is the
// raw text's.
func (c *schemaCompiler) formatText(name string) ([]Elem, bool) {
	if _, ok := formatOf(name); !ok {
		return nil, false
	}
	l, err := c.stringLang(node{"format": mustJSON(name)}, "")
	if err != nil || l.d == nil {
		return nil, false
	}
	for ch := range byte(0x80) {
		if ch >= 0x20 && ch != '"' && ch != '\\' && ch != '<' {
			continue
		}
		a := l.at.class[ch]
		for _, row := range l.d.next {
			if row[a] >= 0 {
				return nil, false
			}
		}
	}
	body, err := c.automaton(l.d, l.at, l.lo, l.hi)
	if err != nil {
		return nil, false
	}
	return []Elem{body}, true
}

// xmlKeywords refuses a keyword the qwen3_coder form cannot hold, which
// the JSON Schema compiler's own check would let through or relax: what
// is neither an annotation, a combinator the form takes, nor a type's
// keyword; and contentEncoding and the keywords merged from an allOf,
// which a string written raw does not keep.
func xmlKeywords(n node, path string) error {
	for _, k := range slices.Sorted(maps.Keys(n)) {
		switch {
		case annotation(k), slices.Contains([]string{"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "uniqueItems"}, k):
		case keywordTypes[k] != "" && k != "contentEncoding" && k != patternsKey && k != notStringsKey:
		default:
			return &SchemaError{Path: path, Keyword: k, Reason: "not supported in the qwen3_coder format, so it could not be enforced"}
		}
	}
	if u, ok := n["uniqueItems"]; ok && string(bytes.TrimSpace(u)) != "false" {
		return &SchemaError{Path: path, Keyword: "uniqueItems", Reason: "not supported, so it could not be enforced"}
	}
	return nil
}
