package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// An enum or const value is held to the keywords beside it (its type,
// bounds, lengths, properties, ...) by checking it as a validator would:
// admits. A string's pattern, format and lengths are checked with its
// language (stringLang), so a value passes where the grammar would
// generate it, which is where a validator passes it too (the grammar may
// be narrower).

// maxAdmitDepth bounds the schemas admits enters for one value: a $ref
// that leads back to itself, no value in between, would go on forever.
const maxAdmitDepth = 64

// admits reports whether x, a value as decodeValue gives it, is an
// instance of the schema raw at path.
func (c *schemaCompiler) admits(raw json.RawMessage, x any, path string, depth int) (bool, error) {
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	n, _, err := c.parse(raw, path)
	if err != nil {
		return false, err
	}
	return c.admitsNode(n, x, path, depth)
}

// admitsNode is admits of a schema object.
func (c *schemaCompiler) admitsNode(n node, x any, path string, depth int) (bool, error) {
	if depth > maxAdmitDepth {
		return false, &SchemaError{Path: path, Keyword: "schema", Reason: fmt.Sprintf("more than %d schemas deep from an enum or const (a $ref that leads back to itself?): its value cannot be checked", maxAdmitDepth)}
	}
	for {
		err := c.checkKeywords(n, path)
		se, ok := err.(*SchemaError)
		if !ok {
			break
		}
		if err := c.relax(path, se); err != nil {
			return false, err
		}
		n = without(n, se.Keyword) // a value is then checked against less
	}
	for _, check := range []func(node, any, string, int) (bool, error){
		c.admitsType, c.admitsValues, c.admitsCombination, c.admitsString, c.admitsNumber, c.admitsObject, c.admitsArray,
	} {
		if ok, err := check(n, x, path, depth); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func (c *schemaCompiler) admitsType(n node, x any, path string, _ int) (bool, error) {
	if n["type"] == nil {
		return true, nil
	}
	types, err := c.types(n, path)
	if err != nil {
		return false, err
	}
	kind := kindOfValue(x)
	if slices.Contains(types, kind) {
		return true, nil
	}
	if num, ok := x.(json.Number); ok && slices.Contains(types, "integer") {
		r := ratOf(num)
		return r != nil && r.IsInt(), nil // 1.0 is an integer, as JSON Schema has it
	}
	return false, nil
}

func kindOfValue(x any) string {
	switch x.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		return "number"
	case []any:
		return "array"
	}
	return "object"
}

func (c *schemaCompiler) admitsValues(n node, x any, path string, _ int) (bool, error) {
	for _, key := range []string{"enum", "const"} {
		if n[key] == nil {
			continue
		}
		values, err := enumValues(n, key, path)
		if err != nil {
			return false, err
		}
		if !slices.ContainsFunc(values, func(y any) bool { return jsonEqual(x, y) }) {
			return false, nil
		}
	}
	return true, nil
}

// jsonEqual is JSON Schema's equality: numbers by their value, objects
// whatever the order of their members.
func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		ra, rb := ratOf(a), ratOf(b)
		if ra == nil || rb == nil {
			return a == b
		}
		return ra.Cmp(rb) == 0
	case []any:
		b, ok := b.([]any)
		return ok && slices.EqualFunc(a, b, jsonEqual)
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			w, ok := b[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	}
	return a == b
}

func (c *schemaCompiler) admitsCombination(n node, x any, path string, depth int) (bool, error) {
	if r := n["$ref"]; r != nil {
		ref, target, err := c.refTarget(r, path)
		if err != nil {
			return false, err
		}
		if ok, err := c.admits(target, x, strings.TrimPrefix(ref, "#"), depth+1); err != nil || !ok {
			return false, err
		}
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if n[k] == nil {
			continue
		}
		branches, err := branchesOf(n, k, path)
		if err != nil {
			return false, err
		}
		matched := 0
		for i, br := range branches {
			ok, err := c.admits(br, x, fmt.Sprintf("%s/%s/%d", path, k, i), depth+1)
			if err != nil {
				return false, err
			}
			if ok {
				matched++
			}
		}
		switch {
		case k == "anyOf" && matched == 0, k == "oneOf" && matched != 1, k == "allOf" && matched < len(branches):
			return false, nil
		}
	}
	if cond := n["if"]; cond != nil {
		ok, err := c.admits(cond, x, path+"/if", depth+1)
		if err != nil {
			return false, err
		}
		k := "else"
		if ok {
			k = "then"
		}
		if n[k] != nil {
			return c.admits(n[k], x, path+"/"+k, depth+1)
		}
	}
	return true, nil
}

func (c *schemaCompiler) admitsString(n node, x any, path string, _ int) (bool, error) {
	s, ok := x.(string)
	if !ok {
		return true, nil
	}
	l, err := c.stringLang(n, path)
	if err != nil {
		return false, err
	}
	return l.matches(s), nil
}

func (c *schemaCompiler) admitsNumber(n node, x any, path string, _ int) (bool, error) {
	num, ok := x.(json.Number)
	if !ok {
		return true, nil
	}
	lo, hi, err := numberBounds(n, path)
	if err != nil {
		return false, err
	}
	v := ratOf(num)
	for _, b := range []*numBound{lo, hi} {
		if b == nil {
			continue
		}
		if v == nil {
			return false, &SchemaError{Path: path, Keyword: b.key, Reason: fmt.Sprintf("%s against %s: a number too large to compare", num, bytes.TrimSpace(n[b.key]))}
		}
		if !b.admits(v) {
			return false, nil
		}
	}
	return true, nil
}

// maxExponent bounds the exponent of a number compared exactly: 1e400 is
// a short text but a long integer.
const maxExponent = 400

// ratOf is a JSON number exactly; nil past maxExponent.
func ratOf(n json.Number) *big.Rat {
	s := string(n)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > maxExponent || e < -maxExponent {
			return nil
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil
	}
	return r
}

func (c *schemaCompiler) admitsObject(n node, x any, path string, depth int) (bool, error) {
	obj, ok := x.(map[string]any)
	if !ok {
		return true, nil
	}
	var props map[string]json.RawMessage
	if n["properties"] != nil && json.Unmarshal(n["properties"], &props) != nil {
		return false, &SchemaError{Path: path, Keyword: "properties", Reason: "want an object"}
	}
	var required []string
	if n["required"] != nil && json.Unmarshal(n["required"], &required) != nil {
		return false, &SchemaError{Path: path, Keyword: "required", Reason: "want an array of strings"}
	}
	for _, r := range required {
		if _, ok := obj[r]; !ok {
			return false, nil
		}
	}
	var patternProps map[string]json.RawMessage
	if n["patternProperties"] != nil && json.Unmarshal(n["patternProperties"], &patternProps) != nil {
		return false, &SchemaError{Path: path, Keyword: "patternProperties", Reason: "want an object of schemas"}
	}
	var deps map[string][]string
	if n["dependentRequired"] != nil && json.Unmarshal(n["dependentRequired"], &deps) != nil {
		return false, &SchemaError{Path: path, Keyword: "dependentRequired", Reason: "want an object of arrays of strings"}
	}
	for t, ds := range deps {
		if _, ok := obj[t]; ok {
			for _, d := range ds {
				if _, ok := obj[d]; !ok {
					return false, nil
				}
			}
		}
	}
	lo, hi, err := c.bounds(n, "minProperties", "maxProperties", path)
	if err != nil {
		return false, err
	}
	if len(obj) < lo || hi >= 0 && len(obj) > hi {
		return false, nil
	}
	pn, err := c.propertyNames(n, path)
	if err != nil {
		return false, err
	}
	keys := slices.Sorted(maps.Keys(obj))
	for _, k := range keys {
		if ok, err := pn.admits(k); err != nil || !ok {
			return false, err
		}
		var schemas []json.RawMessage
		var at []string
		if props[k] != nil {
			schemas, at = append(schemas, props[k]), append(at, path+"/properties/"+escapePointer(k))
		}
		for _, p := range slices.Sorted(maps.Keys(patternProps)) {
			ok, err := c.patternMatches(p, k, path)
			if err != nil {
				return false, err
			}
			if ok {
				schemas, at = append(schemas, patternProps[p]), append(at, path+"/patternProperties/"+escapePointer(p))
			}
		}
		if len(schemas) == 0 && n["additionalProperties"] != nil {
			schemas, at = append(schemas, n["additionalProperties"]), append(at, path+"/additionalProperties")
		}
		for i, schema := range schemas {
			if ok, err := c.admits(schema, obj[k], at[i], depth+1); err != nil || !ok {
				return false, err
			}
		}
	}
	return true, nil
}

func (c *schemaCompiler) admitsArray(n node, x any, path string, depth int) (bool, error) {
	arr, ok := x.([]any)
	if !ok {
		return true, nil
	}
	lo, hi, err := c.bounds(n, "minItems", "maxItems", path)
	if err != nil {
		return false, err
	}
	if len(arr) < lo || hi >= 0 && len(arr) > hi {
		return false, nil
	}
	prefix, items, err := itemSchemas(n, path)
	if err != nil {
		return false, err
	}
	for i, v := range arr {
		schema, at := items, path+"/items"
		if i < len(prefix) {
			schema, at = prefix[i], fmt.Sprintf("%s/prefixItems/%d", path, i)
		}
		if schema == nil {
			continue
		}
		if ok, err := c.admits(schema, v, at, depth+1); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// decodeValue reads a JSON value with its numbers as written.
func decodeValue(raw json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return nil, err
	}
	return x, nil
}

// appendJSON writes a value as the grammars spell JSON: no whitespace,
// members by key, numbers as written and strings as appendQuoted.
func appendJSON(buf []byte, x any) []byte {
	switch x := x.(type) {
	case nil:
		return append(buf, "null"...)
	case bool:
		return strconv.AppendBool(buf, x)
	case json.Number:
		return append(buf, x...)
	case string:
		return appendQuoted(buf, x)
	case []any:
		buf = append(buf, '[')
		for i, v := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSON(buf, v)
		}
		return append(buf, ']')
	}
	obj := x.(map[string]any)
	buf = append(buf, '{')
	for i, k := range slices.Sorted(maps.Keys(obj)) {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(appendQuoted(buf, k), ':')
		buf = appendJSON(buf, obj[k])
	}
	return append(buf, '}')
}

// appendQuoted writes s as JSON string text, quotes included, spelled as
// the grammar of a string and of a pattern spell it: each byte as
// escapeByte has it.
func appendQuoted(buf []byte, s string) []byte {
	buf = append(buf, '"')
	for i := 0; i < len(s); i++ {
		if esc := escapeByte(s[i]); esc != "" {
			buf = append(buf, esc...)
		} else {
			buf = append(buf, s[i])
		}
	}
	return append(buf, '"')
}

// escapeByte is the escape a byte is written as in a JSON string, as
// the grammars spell it, or "" for none: the quote and the backslash
// escaped, control characters and DEL as their short escape or \u00xx,
// the rest (UTF-8) as it is.
func escapeByte(ch byte) string {
	switch ch {
	case '"':
		return `\"`
	case '\\':
		return `\\`
	case '\n':
		return `\n`
	case '\t':
		return `\t`
	case '\r':
		return `\r`
	case '\f':
		return `\f`
	case '\b':
		return `\b`
	}
	if ch < 0x20 || ch == 0x7f {
		return fmt.Sprintf(`\u%04x`, ch)
	}
	return ""
}
