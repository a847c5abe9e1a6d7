package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/qwenc/qwenc/internal/schemagen"
)

// validator compiles a schema with format assertions on.
func validator(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("%s: %v", schema, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("%s: %v", schema, err)
	}
	return sch
}

// generate walks a grammar with random allowed tokens, leaning towards
// short ones so that values end, as a sampler over random logits would
// if it were lucky: the text, and whether the grammar completed it.
func generate(t testing.TB, g *Grammar, rng *rand.Rand, maxSteps int) (string, bool) {
	t.Helper()
	return walk(t, g, rng, maxSteps, nil)
}

// walk is generate, appending the time each mask took to fills when it
// is not nil.
func walk(t testing.TB, g *Grammar, rng *rand.Rand, maxSteps int, fills *[]time.Duration) (string, bool) {
	t.Helper()
	v := g.vocab
	m := g.NewMatcher()
	mask := v.NewMask()
	var text []byte
	var allowed, short []int32
	for range maxSteps {
		if m.Done() {
			return string(text), true
		}
		start := time.Now()
		m.Fill(mask)
		if fills != nil {
			*fills = append(*fills, time.Since(start))
		}
		allowed, short = allowed[:0], short[:0]
		for w, word := range mask {
			for ; word != 0; word &= word - 1 {
				id := int32(w*64) + int32(trailingZeros(word))
				allowed = append(allowed, id)
				if m.isEOS(id) || v.special[id] || len(v.text[id]) == 1 {
					short = append(short, id)
				}
			}
		}
		if len(allowed) == 0 {
			t.Fatalf("after %q: no token allowed", text)
		}
		pick := allowed
		if len(short) > 0 && rng.IntN(3) > 0 {
			pick = short
		}
		id := pick[rng.IntN(len(pick))]
		if err := m.Accept(id); err != nil {
			t.Fatalf("after %q: %v", text, err)
		}
		if !m.isEOS(id) {
			text = append(text, v.text[id]...)
		}
	}
	return string(text), m.Done()
}

func trailingZeros(w uint64) int { return bits.TrailingZeros64(w) }

var schemaCases = []string{
	`{"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 150}, "email": {"type": "string", "format": "uuid"}}, "required": ["name", "age"], "additionalProperties": false}`,
	`{"type": "array", "items": {"enum": ["red", "green", 3, null, 1.50, {"a": [true]}]}, "minItems": 2, "maxItems": 5}`,
	`{"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}, "day": {"type": "string", "format": "date"}, "at": {"type": "string", "format": "time"}}, "required": ["when", "day", "at"]}`,
	`{"anyOf": [{"type": "integer", "exclusiveMinimum": -5, "exclusiveMaximum": 1234}, {"type": "boolean"}, {"const": "x\"y\\z"}]}`,
	`{"oneOf": [{"type": "object", "properties": {"kind": {"const": "a"}, "n": {"type": "integer"}}, "required": ["kind"]}, {"type": "object", "properties": {"kind": {"const": "b"}, "s": {"type": "string", "maxLength": 3}}, "required": ["kind", "s"]}]}`,
	`{"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer", "minimum": -99, "maximum": 99}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["v"]}}, "$ref": "#/$defs/node"}`,
	`{"type": "array", "prefixItems": [{"type": "string", "pattern": "^[A-Z][a-z]{1,4}-\\d{2}$"}, {"type": "number"}, {"type": "null"}], "items": false, "minItems": 1}`,
	`{"type": "object", "properties": {"id": {"type": "string", "pattern": "^(ab|cd)+x?$"}}, "required": ["id"], "additionalProperties": {"type": "integer", "minimum": 10, "maximum": 12}}`,
	`{"type": ["string", "null"], "minLength": 2, "maxLength": 4}`,
	`{"type": "object", "required": ["a", "b"], "properties": {"a": {"type": "string", "pattern": "^é.\\.\\w+"}, "b": {"enum": [1, 2]}}}`,
	`{"definitions": {"x": {"type": "integer", "minimum": 1000000, "maximum": 1000100}}, "type": "object", "properties": {"x": {"$ref": "#/definitions/x"}, "y": {"type": "array", "items": {"type": "string", "maxLength": 2}, "maxItems": 3}}, "required": ["x"]}`,
	`{"type": "object", "additionalProperties": true, "properties": {"k": {"type": "boolean"}}}`,
	`true`,
	`{}`,
	// Claude Code's WebFetch, and numbers with whole bounds.
	`{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {"url": {"description": "The URL to fetch content from", "type": "string", "format": "uri"}, "prompt": {"type": "string", "maxLength": 8}}, "required": ["url", "prompt"], "additionalProperties": false}`,
	// enum and const held to the keywords beside them; required names
	// outside properties held to additionalProperties.
	`{"type": "object", "properties": {"s": {"type": "string", "enum": ["a", "bbbb", "cc", 3], "maxLength": 2}, "n": {"enum": [1, 2.5, "x", 7, 4.0], "type": "integer", "maximum": 5}, "c": {"const": "2024-01-31", "enum": ["2024-01-31", "x"], "format": "date"}, "o": {"enum": [{"a": 1}, {"a": "s"}, {"b": 1}], "properties": {"a": {"type": "integer"}}, "required": ["a"]}}, "required": ["s", "n", "c", "o"], "additionalProperties": false}`,
	`{"type": "object", "required": ["x", "y"], "properties": {"y": {"type": "boolean"}}, "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 3}}`,
	// Alternatives no instance is valid for, left out.
	`{"anyOf": [{"type": "object", "required": ["x"], "additionalProperties": false}, {"type": ["integer", "null"], "minimum": 5, "maximum": 4}, {"type": "boolean"}]}`,
	`{"type": "object", "properties": {"p": {"type": "number", "minimum": 0, "maximum": 1}, "t": {"type": "number", "exclusiveMinimum": 0}, "n": {"type": "number", "exclusiveMaximum": 0}, "m": {"type": "number", "minimum": 2, "exclusiveMaximum": 3}, "e": {"type": "number", "exclusiveMinimum": 5, "maximum": 6}, "z": {"type": "number", "maximum": 0}}, "required": ["p", "t", "n", "m", "e", "z"], "additionalProperties": false}`,
	// Formats, and base64.
	`{"type": "object", "properties": {"email": {"type": "string", "format": "email"}, "host": {"type": "string", "format": "hostname"}, "ip4": {"type": "string", "format": "ipv4"}, "ip6": {"type": "string", "format": "ipv6"}, "dur": {"type": "string", "format": "duration"}, "ptr": {"type": "string", "format": "json-pointer"}, "b64": {"type": "string", "contentEncoding": "base64", "maxLength": 12}}, "required": ["email", "host", "ip4", "ip6", "dur", "ptr", "b64"], "additionalProperties": false}`,
	// Fractional, negative and exclusive bounds; multipleOf.
	`{"type": "object", "properties": {"p": {"type": "number", "exclusiveMinimum": 0.5, "maximum": 99.9}, "n": {"type": "number", "minimum": -2.25, "maximum": -0.5}, "q": {"type": "number", "multipleOf": 0.25, "minimum": 0, "maximum": 3}, "i": {"type": "integer", "multipleOf": 7}, "h": {"type": "number", "multipleOf": 0.5, "exclusiveMinimum": 0}, "c": {"type": "number", "multipleOf": 0.01}, "k": {"type": "integer", "minimum": -3.5, "exclusiveMaximum": 2.5}}, "required": ["p", "n", "q", "i", "h", "c", "k"], "additionalProperties": false}`,
	// propertyNames, patternProperties, dependentRequired, minProperties.
	`{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 3}}, "patternProperties": {"^x-": {"type": "boolean"}}, "propertyNames": {"maxLength": 6}, "additionalProperties": {"type": "null"}, "dependentRequired": {"a": ["b"]}, "minProperties": 2}`,
	`{"type": "object", "propertyNames": {"type": "string"}, "additionalProperties": {"type": "number"}}`,
	`{"type": "object", "propertyNames": {"enum": ["a", "b", "c"]}, "additionalProperties": {"type": "string", "maxLength": 2}, "required": ["a"]}`,
	`{"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "properties": {"ok": {"const": 1}, "Bad": {"const": 2}}, "additionalProperties": {"type": "boolean"}}`,
	// if, then and else on a discriminator; allOf and keywords beside
	// $ref and anyOf; OpenAPI's nullable, an annotation to JSON Schema.
	`{"type": "object", "properties": {"kind": {"enum": ["circle", "square"]}, "r": {"type": "number", "minimum": 0, "maximum": 10}, "side": {"type": "integer", "minimum": 1, "maximum": 5}}, "required": ["kind"], "if": {"properties": {"kind": {"const": "circle"}}}, "then": {"required": ["r"]}, "else": {"required": ["side"]}, "additionalProperties": false}`,
	`{"type": "object", "properties": {"to": {"type": "string", "allOf": [{"pattern": "^[^\\n\\r]*$"}, {"pattern": "^[\\s\\S]{0,30}$"}]}, "both": {"allOf": [{"type": "object", "properties": {"a": {"type": "string", "maxLength": 4}}, "required": ["a"]}, {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}]}}, "required": ["to", "both"]}`,
	`{"$defs": {"a": {"type": "object", "properties": {"x": {"type": "string", "maxLength": 3}, "y": {"type": "boolean"}}}}, "$ref": "#/$defs/a", "required": ["x"]}`,
	`{"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}], "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 2}}, "additionalProperties": false}`,
	`{"type": "string", "nullable": true, "maxLength": 2}`,
	// Bounds as large as agents' schemas have them: loops, not rules.
	`{"type": "object", "properties": {"script": {"type": "string", "maxLength": 524288}, "items": {"type": "array", "items": {"type": "integer"}, "maxItems": 10000, "minItems": 1}, "big": {"type": "string", "minLength": 40}}, "required": ["script", "items"], "additionalProperties": false}`,
	`{"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$", "minLength": 3, "maxLength": 40}, "minItems": 2, "maxItems": 7}`,
	// zod's email and uuid, a format with its pattern.
	`{"type": "object", "properties": {"e": {"type": "string", "format": "email", "pattern": "^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$"}, "u": {"type": "string", "format": "uuid", "pattern": "^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$"}}, "required": ["e", "u"], "additionalProperties": false}`,
}

// TestSchemaInstancesValidate generates texts under each schema with many
// seeds; every complete one validates.
func TestSchemaInstancesValidate(t *testing.T) {
	v, _ := qwenVocab(t)
	const seeds = 3
	for _, schema := range schemaCases {
		g, err := Schema(v, []byte(schema))
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		sch := validator(t, schema)
		complete := 0
		for seed := range uint64(seeds) {
			text, done := generate(t, g, rand.New(rand.NewPCG(seed, 7)), 400)
			if !done {
				continue
			}
			complete++
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(text)))
			if err != nil {
				t.Fatalf("%s\nseed %d: %q is not JSON: %v", schema, seed, text, err)
			}
			if err := sch.Validate(inst); err != nil {
				t.Fatalf("%s\nseed %d: %q is invalid: %v", schema, seed, text, err)
			}
		}
		if complete == 0 {
			t.Errorf("%s: no text completed", schema)
		}
		t.Logf("%d/%d complete, %+v: %s", complete, seeds, g.Stats(), schema)
	}
}

// TestSchemaRefusals: what cannot be enforced is refused, naming the
// keyword and where it is.
func TestSchemaRefusals(t *testing.T) {
	v, _ := qwenVocab(t)
	for schema, want := range map[string]string{
		`{"type": "string", "format": "regex"}`:                               `json schema #: format: "regex" is not supported`,
		`{"type": "number", "exclusiveMinimum": 3, "maximum": 3}`:             "json schema #: minimum: no number is within the bounds",
		`{"type": "object", "minProperties": 5}`:                              "json schema #: minProperties: above 3",
		`{"type": "array", "uniqueItems": true}`:                              "uniqueItems: not supported",
		`{"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]}`: "oneOf: its branches may overlap",
		`{"$ref": "https://example.com/s.json"}`:                              "$ref: \"https://example.com/s.json\": only #",
		`{"$ref": "#/$defs/missing"}`:                                         "does not resolve",
		`{"type": "string", "pattern": "(?=a)b"}`:                             "pattern: at 1 of \"(?=a)b\": lookaround is not supported",
		`{"type": "string", "pattern": "a\\1"}`:                               "\\1 is not supported",
		`{"type": "strin"}`:                                                   `type: "strin" is not a JSON Schema type`,
		`false`:                                                               "no instance is valid",
		`{"allOf": [{"type": "string"}, {"not": {"maxLength": 3}}]}`:          "json schema /allOf/1: not: not supported",
		`{"type": "integer", "minimum": 5, "maximum": 4}`:                     "no integer is within the bounds",
		`{"type": "string", "minLength": 5, "maxLength": 4}`:                  "minLength: 5 is more than maxLength 4",
		`{"type": "object", "properties": {"a": {"if": {"type": "string"}, "then": {"maxLength": 2}}}}`:                                    "/properties/a: if: its condition is not a property's const",
		`{"type": "string", "enum": ["abc", 5], "maxLength": 2}`:                                                                           "json schema #: enum: no value is valid under the keywords beside it",
		`{"type": "object", "properties": {"a": {"const": 5, "minimum": 6}}, "required": ["a"]}`:                                           "json schema /properties/a: const: the value is not valid under the keywords beside it",
		`{"const": "z", "enum": ["x", "y"]}`:                                                                                               "const: the value is not valid",
		`{"enum": [{"a": "x"}], "properties": {"a": {"not": {}}}}`:                                                                         "json schema /properties/a: not: not supported",
		`{"enum": ["2024-01-01"], "format": "regex"}`:                                                                                      `json schema #: format: "regex" is not supported`,
		`{"type": "object", "properties": {"o": {"type": "object", "required": ["x"], "additionalProperties": false}}, "required": ["o"]}`: `json schema /properties/o: required: "x" is required, and no value is valid for it (json schema /properties/o/additionalProperties: false: no instance is valid)`,
		`{"type": "object", "required": ["x"], "additionalProperties": {"type": "string", "format": "regex"}}`:                             `json schema /additionalProperties: format: "regex"`,
		// An alternative no instance is valid for is left out; with none
		// left, or where it is not an alternative, the schema is refused.
		`{"anyOf": [{"type": "integer", "minimum": 5, "maximum": 4}, {"enum": ["x"], "type": "null"}]}`:                                                                                                                 "json schema /anyOf/0: minimum: no integer is within the bounds",
		`{"type": ["integer", "string"], "minimum": 5, "maximum": 4, "minLength": 3, "maxLength": 2}`:                                                                                                                   "json schema #: minimum: no integer is within the bounds",
		`{"type": ["object", "array"], "properties": {"a": {"enum": [1], "type": "string"}}, "required": ["a"], "items": false, "minItems": 1}`:                                                                         "json schema /properties/a: enum: no value is valid",
		`{"$defs": {"e": {"type": "integer", "minimum": 5, "maximum": 4}}, "type": "object", "properties": {"a": {"anyOf": [{"$ref": "#/$defs/e"}, {"type": "null"}]}, "b": {"$ref": "#/$defs/e"}}, "required": ["b"]}`: "json schema /$defs/e: minimum: no integer is within the bounds",
	} {
		_, err := Schema(v, []byte(schema))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", schema, err, want)
		}
		var se *SchemaError
		if err != nil && !asSchemaError(err, &se) {
			t.Errorf("%s: %T is not a *SchemaError", schema, err)
		}
	}
}

func asSchemaError(err error, target **SchemaError) bool {
	se, ok := err.(*SchemaError)
	*target = se
	return ok
}

// TestSchemaPropertyOrder: properties come in the schema's order, and a
// literal key in a schema is written as JSON.
func TestSchemaPropertyOrder(t *testing.T) {
	v, _ := qwenVocab(t)
	schema := `{"type": "object", "properties": {"zeta": {"const": 1}, "alpha": {"const": 2}}, "required": ["zeta", "alpha"]}`
	g, err := Schema(v, []byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	text, done := generate(t, g, rand.New(rand.NewPCG(1, 1)), 100)
	var compact bytes.Buffer
	if !done || json.Compact(&compact, []byte(text)) != nil || compact.String() != `{"zeta":1,"alpha":2}` {
		t.Fatalf("%q (complete %v)", text, done)
	}
}

// TestGeneratedSchemasValidate fuzzes: random schemas, random walks
// through their grammars; every complete text validates.
func TestGeneratedSchemasValidate(t *testing.T) {
	v, _ := qwenVocab(t)
	rng := rand.New(rand.NewPCG(42, 42))
	complete := 0
	const schemas = 40
	for i := range schemas {
		raw, err := json.Marshal(schemagen.Random(rng, 2))
		if err != nil {
			t.Fatal(err)
		}
		schema := string(raw)
		g, err := Schema(v, raw)
		if err != nil {
			t.Fatalf("schema %d %s: %v", i, schema, err)
		}
		sch := validator(t, schema)
		for seed := range uint64(2) {
			text, done := generate(t, g, rand.New(rand.NewPCG(uint64(i), seed)), 300)
			if !done {
				continue
			}
			complete++
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
			if err != nil {
				t.Fatalf("%s\n%q is not JSON: %v", schema, text, err)
			}
			if err := sch.Validate(inst); err != nil {
				t.Fatalf("%s\n%q is invalid: %v", schema, text, err)
			}
		}
	}
	if complete < schemas*2*3/4 {
		t.Fatalf("only %d of %d walks completed", complete, schemas*2)
	}
	t.Logf("%d of %d walks completed and validated", complete, schemas*2)
}

// BenchmarkMask reports the time of a mask at the median, the 99th
// percentile and the worst, over random walks through each test schema
// on Qwen's vocabulary, each walk a new Matcher as each request is (the
// grammar and its tables made once, as the cache keeps them).
func BenchmarkMask(b *testing.B) {
	v, _ := qwenVocab(b)
	for i, schema := range schemaCases {
		b.Run(fmt.Sprint(i), func(b *testing.B) {
			g, err := Schema(v, []byte(schema))
			if err != nil {
				b.Fatal(err)
			}
			g.BuildTables() // masks, not tables
			var fills []time.Duration
			for n := 0; b.Loop(); n++ {
				walk(b, g, rand.New(rand.NewPCG(uint64(n), 11)), 200, &fills)
			}
			slices.Sort(fills)
			at := func(q float64) float64 { return float64(fills[int(q*float64(len(fills)-1))].Microseconds()) }
			b.ReportMetric(at(0.5), "p50-µs")
			b.ReportMetric(at(0.99), "p99-µs")
			b.ReportMetric(at(1), "max-µs")
		})
	}
}

// TestMatchersConcurrently: matchers of one grammar share its states and
// masks; walked from several goroutines at once, each seed gives the text
// it gives alone. Under the race detector in make test-race.
func TestMatchersConcurrently(t *testing.T) {
	v, _ := qwenVocab(t)
	g, err := Schema(v, []byte(schemaCases[0]))
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	var alone [n]string
	for i := range n {
		alone[i], _ = generate(t, g, rand.New(rand.NewPCG(uint64(i), 5)), 300)
	}
	g, _ = Schema(v, []byte(schemaCases[0])) // its states met afresh
	var together [n]string
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { together[i], _ = generate(t, g, rand.New(rand.NewPCG(uint64(i), 5)), 300) })
	}
	wg.Wait()
	if together != alone {
		t.Errorf("together %q, alone %q", together, alone)
	}
}

// TestLimitEndsInTime: under Limit, random walks through each test
// schema's grammar (thinking first, as a Qwen3 answer does), taking any
// token allowed, long ones first, end complete within the tokens
// allowed, and valid; each step's mask is the reference's: the tokens
// after which the text's distance still fits.
func TestLimitEndsInTime(t *testing.T) {
	v, tok := qwenVocab(t)
	open, _ := tok.TokenID("<think>")
	close, _ := tok.TokenID("</think>")
	for i, schema := range schemaCases {
		g, err := Compile(v, Answer{Schema: []byte(schema), Think: true, ThinkOpen: open, ThinkClose: close})
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		sch := validator(t, schema)
		for seed := range uint64(2) {
			rng := rand.New(rand.NewPCG(uint64(i), seed))
			m := g.NewMatcher()
			least := m.Remaining()
			limit := least + rng.IntN(40)
			m.Limit(limit)
			mask := v.NewMask()
			var text []byte
			steps := 0
			for ; !m.Done(); steps++ {
				if steps == limit {
					t.Fatalf("%s: %d tokens taken (at least %d needed), the text %q not complete", schema, limit, least, text)
				}
				m.Fill(mask)
				if steps%7 == 0 {
					checkWithin(t, m, mask)
				}
				id := pickLong(rng, v, mask)
				if id < 0 {
					t.Fatalf("%s: after %q nothing allowed", schema, text)
				}
				if err := m.Accept(id); err != nil {
					t.Fatal(err)
				}
				if m.isEOS(id) {
					break
				}
				if id == close {
					text = text[:0] // the reasoning is free; the answer follows
				}
				text = append(text, v.text[id]...)
			}
			answer := bytes.TrimLeft(text, "\n")
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(answer))
			if err != nil {
				t.Fatalf("%s: %q is not JSON: %v", schema, answer, err)
			}
			if err := sch.Validate(inst); err != nil {
				t.Fatalf("%s: %q is invalid: %v", schema, answer, err)
			}
		}
	}
}

// pickLong picks an allowed token, a long one two times in three (the
// worst for a budget); -1 when none is.
func pickLong(rng *rand.Rand, v *Vocab, mask Mask) int32 {
	var all, long []int32
	for w, word := range mask {
		for ; word != 0; word &= word - 1 {
			id := int32(w*64 + bits.TrailingZeros64(word))
			all = append(all, id)
			if len(v.text[id]) >= 4 {
				long = append(long, id)
			}
		}
	}
	switch {
	case len(all) == 0:
		return -1
	case len(long) > 0 && rng.IntN(3) > 0:
		return long[rng.IntN(len(long))]
	}
	return all[rng.IntN(len(all))]
}

// checkWithin checks a mask under Limit against its definition: the
// grammar's tokens after which the distance fits the tokens left.
func checkWithin(t *testing.T, m *Matcher, mask Mask) {
	t.Helper()
	if len(m.forced) > 0 {
		if mask.Count() != 1 || !mask.Has(m.forced[0]) {
			t.Fatalf("following %v: %d tokens allowed", m.forced, mask.Count())
		}
		return
	}
	v := m.g.vocab
	full := referenceMask(m)
	want := v.NewMask()
	m.g.mu.Lock()
	for id := range int32(v.size) {
		if !full.Has(id) {
			continue
		}
		if m.isEOS(id) {
			want.set(id)
			continue
		}
		if d := m.stateAfter(id); d.accept || int(m.s.distOf(d)) <= m.limit-2 {
			want.set(id)
		}
	}
	m.g.mu.Unlock()
	if want.Count() == 0 {
		t.Fatalf("limit %d: nothing fits, and no completion followed", m.limit)
	}
	for i := range want {
		if mask[i] != want[i] {
			t.Fatalf("limit %d: mask word %d is %x, want %x", m.limit, i, mask[i], want[i])
		}
	}
}

// TestNoDeadEndInCharacter: under a pattern with lengths the automaton
// does not keep by itself, a token that ends inside a multi-byte
// character leaves a way on: walks that take such a token whenever one
// is allowed never meet a mask with nothing in it, and what they
// complete validates.
func TestNoDeadEndInCharacter(t *testing.T) {
	v, _ := qwenVocab(t)
	for _, schema := range []string{
		`{"type": "string", "pattern": "[a-z]+-[0-9]+", "maxLength": 12}`,
		`{"type": "string", "pattern": "^[^x]{2,}y$", "minLength": 3, "maxLength": 6}`,
		`{"type": "string", "pattern": "^(é|a|[^b-z])+b", "minLength": 4, "maxLength": 9}`,
		`{"type": "object", "properties": {"k": {"type": "string", "pattern": "^\\S+!$", "minLength": 2, "maxLength": 3}}, "required": ["k"]}`,
	} {
		g, err := Schema(v, []byte(schema))
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		sch := validator(t, schema)
		cuts, texts := cuttingWalks(t, g, 30, 60)
		for _, text := range texts {
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
			if err != nil {
				t.Fatalf("%s: %q is not JSON: %v", schema, text, err)
			}
			if err := sch.Validate(inst); err != nil {
				t.Fatalf("%s: %q is invalid: %v", schema, text, err)
			}
		}
		if cuts == 0 || len(texts) == 0 {
			t.Fatalf("%s: %d tokens ending inside a character taken, %d walks complete", schema, cuts, len(texts))
		}
		t.Logf("%s: %d tokens ending inside a character taken, %d walks complete", schema, cuts, len(texts))
	}
}

// cuttingWalks walks g from seeds seeds, taking a token that ends inside
// a multi-byte character whenever one is allowed, and fails at a mask
// with nothing in it: the count of such tokens taken, and the texts the
// walks completed.
func cuttingWalks(t *testing.T, g *Grammar, seeds uint64, maxSteps int) (cuts int, texts []string) {
	t.Helper()
	v := g.vocab
	mask := v.NewMask()
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 7))
		m := g.NewMatcher()
		var text []byte
		for step := 0; step < maxSteps && !m.Done(); step++ {
			m.Fill(mask)
			var all, cut []int32
			for w, word := range mask {
				for ; word != 0; word &= word - 1 {
					id := int32(w*64 + bits.TrailingZeros64(word))
					all = append(all, id)
					if endsInCharacter(v.text[id]) {
						cut = append(cut, id)
					}
				}
			}
			if len(all) == 0 {
				t.Fatalf("seed %d: after %q nothing allowed", seed, text)
			}
			id := all[rng.IntN(len(all))]
			if len(cut) > 0 {
				id, cuts = cut[rng.IntN(len(cut))], cuts+1
			}
			if err := m.Accept(id); err != nil {
				t.Fatal(err)
			}
			if !m.isEOS(id) {
				text = append(text, v.text[id]...)
			}
		}
		if m.Done() {
			texts = append(texts, string(text))
		}
	}
	return cuts, texts
}

// endsInCharacter reports whether text ends with the first bytes of a
// multi-byte UTF-8 character.
func endsInCharacter(text []byte) bool {
	for i := len(text) - 1; i >= 0 && i >= len(text)-4; i-- {
		if text[i]&0xc0 != 0x80 {
			return text[i] >= 0xc0 && !utf8.FullRune(text[i:])
		}
	}
	return false
}
