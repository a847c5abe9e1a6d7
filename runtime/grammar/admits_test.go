package grammar

import (
	"slices"
	"strings"
	"testing"
)

// TestSchemaLanguage: texts each schema's grammar takes and refuses, where
// keywords meet: enum and const values the keywords beside them refuse
// are left out, a required name outside properties is held to
// additionalProperties, draft 4's exclusive bounds on fractions, years
// from 0001.
func TestSchemaLanguage(t *testing.T) {
	for _, c := range []struct {
		schema  string
		in, out []string
	}{
		{`{"type": "string", "enum": ["a", "bbbb"], "maxLength": 2}`, []string{`"a"`}, []string{`"bbbb"`}},
		{`{"enum": [1, 2.5, "x", 7, 4.0, -0, 1e0], "type": "integer", "maximum": 5}`, []string{"1", "4.0", "-0", "1e0"}, []string{"2.5", `"x"`, "7"}},
		{`{"enum": [{"a": 1}, {"a": "s"}, {"b": 1}], "properties": {"a": {"type": "integer"}}, "required": ["a"]}`, []string{`{"a":1}`}, []string{`{"a":"s"}`, `{"b":1}`}},
		{`{"enum": ["2024-02-28", "2024-02-30", "0000-01-01", "x", 3], "format": "date"}`, []string{`"2024-02-28"`, "3"}, []string{`"2024-02-30"`, `"0000-01-01"`, `"x"`}},
		{`{"enum": ["ab", "xab", "ba", "a\"b", "aé"], "pattern": "^a.$"}`, []string{`"ab"`, `"aé"`}, []string{`"xab"`, `"ba"`, `"a\"b"`}},
		{`{"enum": ["abc", "ab\u0001", "é"], "minLength": 1, "maxLength": 2}`, []string{`"é"`}, []string{`"abc"`, `"ab\u0001"`}},
		{`{"const": "x", "enum": ["x", "y"]}`, []string{`"x"`}, []string{`"y"`}},
		{`{"enum": [[1, "a"], [1, 2], [1], [1, "a", 3]], "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false, "minItems": 2}`, []string{`[1,"a"]`}, []string{`[1,2]`, `[1]`, `[1,"a",3]`}},
		{`{"$defs": {"small": {"type": "integer", "maximum": 3}}, "enum": [{"n": 2}, {"n": 5}], "properties": {"n": {"$ref": "#/$defs/small"}}}`, []string{`{"n":2}`}, []string{`{"n":5}`}},
		{`{"enum": [1, 2, "a"], "properties": {"x": {"anyOf": [{"type": "string"}, {"maximum": 1}]}}, "type": "integer"}`, []string{"1", "2"}, []string{`"a"`}},
		{`{"enum": [{"x": 1}, {"x": "s"}, {"x": 2, "y": true}], "additionalProperties": {"type": "integer"}}`, []string{`{"x":1}`}, []string{`{"x":"s"}`, `{"x":2,"y":true}`}},
		{`{"enum": [12345678901234567890, 12345678901234567891], "maximum": 12345678901234567890}`, []string{"12345678901234567890"}, []string{"12345678901234567891"}},
		{`{"type": "object", "required": ["x"], "additionalProperties": {"type": "integer"}}`, []string{`{"x":1}`, `{"x":1,"y":2}`}, []string{`{"x":"s"}`, `{}`, `{"x":1,"y":"s"}`}},
		{`{"type": "object", "required": ["x"], "properties": {"y": {"type": "string"}}}`, []string{`{"x":[1]}`, `{"y":"s","x":{}}`}, []string{`{"y":"s"}`, `{"x":1,"z":1}`}},
		{`{"type": "object", "required": ["x"], "additionalProperties": true}`, []string{`{"x":[1]}`, `{"x":1,"z":null}`}, []string{`{}`}},
		{`{"type": "integer", "minimum": 2.5, "exclusiveMinimum": true, "maximum": 5.5, "exclusiveMaximum": true}`, []string{"3", "5"}, []string{"2", "6"}},
		{`{"type": "integer", "minimum": 3, "exclusiveMinimum": true, "maximum": 6, "exclusiveMaximum": true}`, []string{"4", "5"}, []string{"3", "6"}},
		{`{"type": "integer", "minimum": -4, "maximum": -2.5, "exclusiveMaximum": true}`, []string{"-3", "-4"}, []string{"-2", "-5"}},
		{`{"type": "integer", "minimum": -2.5, "exclusiveMinimum": true, "maximum": 0}`, []string{"-2", "0"}, []string{"-3", "1"}},
		{`{"type": "number", "minimum": 5, "exclusiveMinimum": 0}`, []string{"5", "6.5"}, []string{"1", "4.5"}},
		{`{"type": "number", "maximum": 5, "exclusiveMaximum": 9}`, []string{"5", "4.5"}, []string{"7", "5.5"}},
		{`{"type": "number", "exclusiveMinimum": 5, "minimum": 0, "exclusiveMaximum": 7, "maximum": 9}`, []string{"5.5", "6"}, []string{"5", "1", "7", "8"}},
		{`{"type": "integer", "minimum": 5, "exclusiveMinimum": 0}`, []string{"5", "6"}, []string{"1", "4"}},
		{`{"type": "integer", "maximum": 5, "exclusiveMaximum": 9}`, []string{"5", "4"}, []string{"7", "6"}},
		{`{"enum": [1, 5, 7, 4.5, 5.5], "minimum": 5, "exclusiveMinimum": 0, "maximum": 5, "exclusiveMaximum": 9}`, []string{"5"}, []string{"1", "7", "4.5", "5.5"}},
		{`{"type": ["object", "null"], "required": ["x"], "additionalProperties": false}`, []string{"null"}, []string{`{}`, `{"x":1}`}},
		{`{"anyOf": [{"type": "object", "required": ["x"], "additionalProperties": false}, {"type": "string", "maxLength": 1}]}`, []string{`"a"`}, []string{`{"x":1}`, `{}`}},
		{`{"type": ["integer", "string"], "minimum": 5, "maximum": 4}`, []string{`"s"`}, []string{"5", "4"}},
		{`{"type": ["number", "null"], "exclusiveMinimum": 3, "maximum": 3}`, []string{"null"}, []string{"3"}},
		{`{"oneOf": [{"enum": ["abc"], "maxLength": 2}, {"type": "integer"}]}`, []string{"3"}, []string{`"abc"`}},
		{`{"anyOf": [{"type": "object", "properties": {"a": {"enum": [1], "type": "string"}}, "required": ["a"]}, {"type": "null"}]}`, []string{"null"}, []string{`{"a":1}`, `{}`}},
		{`{"$defs": {"e": {"allOf": [{"type": "array", "minItems": 3, "maxItems": 2}]}}, "anyOf": [false, {"$ref": "#/$defs/e"}, {"type": "boolean"}]}`, []string{"true"}, []string{"[]"}},
		{`{"enum": [1, "abc", [2]], "minLength": 3, "maxLength": 2}`, []string{"1", "[2]"}, []string{`"abc"`}},
		{`{"type": "string", "format": "date"}`, []string{`"0001-01-01"`, `"9999-12-31"`}, []string{`"0000-01-01"`}},
		{`{"type": "string", "format": "date-time"}`, []string{`"0001-01-01T00:00:00Z"`}, []string{`"0000-12-31T23:59:59Z"`}},
	} {
		b := NewBuilder()
		e, _, err := schemaRule(newJSONRules(b), []byte(c.schema), true)
		if err != nil {
			t.Errorf("%s: %v", c.schema, err)
			continue
		}
		for _, text := range c.in {
			if !b.accepts(e, []byte(text)) {
				t.Errorf("%s: %s refused", c.schema, text)
			}
		}
		for _, text := range c.out {
			if b.accepts(e, []byte(text)) {
				t.Errorf("%s: %s taken", c.schema, text)
			}
		}
	}
}

// TestAdmitsRefusals: checking an enum value against what cannot be
// checked refuses the schema.
func TestAdmitsRefusals(t *testing.T) {
	deep := strings.Repeat(`{"items": `, 70) + "{}" + strings.Repeat("}", 70)
	deep = `{"enum": [` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `], ` + deep[1:]
	for schema, want := range map[string]string{
		`{"enum": [1e500], "minimum": 1}`: "json schema #: minimum: 1e500 against 1: a number too large to compare",
		`{"$defs": {"a": {"$ref": "#/$defs/a"}}, "enum": [{"p": 1}], "properties": {"p": {"$ref": "#/$defs/a"}}}`: "json schema /$defs/a: schema: more than 64 schemas deep from an enum or const (a $ref that leads back to itself?)",
		deep: "/items/items: schema: more than 64 schemas deep from an enum or const",
		`{"enum": [[1]], "items": [{"type": "integer"}], "prefixItems": []}`: "json schema #: items: an array of schemas beside prefixItems",
		`{"enum": ["a"], "pattern": "(?=a)"}`:                                "json schema #: pattern: at 1",
	} {
		b := NewBuilder()
		_, _, err := schemaRule(newJSONRules(b), []byte(schema), true)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", schema, err, want)
		}
	}
}

// TestResolveOnce: what a $ref points to is found in the document once,
// however many enum values are checked through it.
func TestResolveOnce(t *testing.T) {
	schema := `{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"type": "integer", "maximum": 3}}, "enum": [{"p": 1}, {"p": 5}, {"p": 2}], "properties": {"p": {"$ref": "#/$defs/a"}}}`
	c := newSchemaCompiler(newJSONRules(NewBuilder()), []byte(schema))
	if _, err := c.compile(c.doc, ""); err != nil {
		t.Fatal(err)
	}
	c.doc = []byte(`{}`) // where a $ref found again would not resolve
	for _, ref := range []string{"#/$defs/a", "#/$defs/b"} {
		if _, err := c.resolve(ref); err != nil {
			t.Errorf("%s looked up again: %v", ref, err)
		}
	}
}

// TestAdditionalPropertiesOnce: additionalProperties is compiled once for
// an object, however many required names outside properties it holds.
func TestAdditionalPropertiesOnce(t *testing.T) {
	rules := func(required, ap string) int {
		b := NewBuilder()
		schema := `{"type": "object", "properties": {"p": {"type": "boolean"}}, "required": ` + required + `, "additionalProperties": ` + ap + `}`
		if _, _, err := schemaRule(newJSONRules(b), []byte(schema), true); err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		return len(b.rules)
	}
	ap := `{"type": "array", "items": {"type": "integer", "minimum": 10, "maximum": 12345}, "maxItems": 3}`
	once := rules(`["p"]`, ap) - rules(`["p"]`, "true")
	for _, required := range []string{`["x"]`, `["x", "p", "y", "z"]`} {
		if got := rules(required, ap) - rules(required, "true"); got != once {
			t.Errorf("required %s: additionalProperties made %d rules, want %d", required, got, once)
		}
	}
}

// accepts reports whether text is in the language of e, an element of
// b's rules: a check made while a grammar is built (of an enum value
// against a pattern), not a Matcher's work.
func (b *Builder) accepts(e Elem, text []byte) bool {
	rules := append(b.rules[:len(b.rules):len(b.rules)], rule{name: "accepts", alts: [][]Elem{{e}}})
	s := newStacks(&Grammar{rules: rules, sets: b.sets, root: int32(len(rules) - 1)})
	st := normalize(slices.Clone(s.expand(s.intern(int32(len(rules)-1), 0, 0, 0, nil, s.accept))))
	for _, c := range text {
		if st = s.advanceByte(nil, st, c); len(st) == 0 {
			return false
		}
	}
	return st.has(s.accept)
}
