package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"slices"
)

// A schema whose keywords combine schemas (allOf; $ref, anyOf or oneOf
// beside other keywords; if, then and else) is rewritten as one schema
// without them, or as an anyOf of such schemas: the conjunction JSON
// Schema means, keyword by keyword. anyOf and oneOf distribute over the
// conjunction (an instance valid for K and for one of A and B is valid
// for one of K∧A and K∧B), and a oneOf whose branches cannot overlap
// stays one whose products cannot either. Schemas below a keyword
// (properties, items, ...) are not merged here but put in an allOf of
// their own, merged when they are compiled.

// Keys a merge writes that no schema has: what a string may not be
// (if's else of a const), and the patterns beyond the first.
const (
	notStringsKey = "\x00not"
	patternsKey   = "\x00patterns"
)

// maxAlternatives bounds the alternatives a combination distributes to.
const maxAlternatives = 64

// maxFlatten bounds the $refs followed in a row while merging.
const maxFlatten = 16

// combining reports whether a schema's keywords combine schemas.
func combining(n node) bool {
	if n["allOf"] != nil || n["if"] != nil || n["then"] != nil || n["else"] != nil {
		return true
	}
	combinators, others := 0, 0
	for k := range n {
		switch {
		case k == "$ref" || k == "anyOf" || k == "oneOf":
			combinators++
		case annotation(k):
		default:
			others++
		}
	}
	return combinators > 1 || combinators == 1 && others > 0
}

// combine is n without the keywords that combine schemas: the merged
// schema, or an anyOf of merged schemas.
func (c *schemaCompiler) combine(n node, path string) (node, error) {
	alts, err := c.flatten(n, path, 0)
	if err != nil {
		return nil, err
	}
	switch len(alts) {
	case 0:
		return nil, empty(path, "allOf", "no instance is valid for all of the schemas")
	case 1:
		return alts[0], nil
	}
	branches := make([]json.RawMessage, len(alts))
	for i, a := range alts {
		branches[i], _ = json.Marshal(a)
	}
	raw, _ := json.Marshal(branches)
	return node{"anyOf": raw}, nil
}

// flattenRaw is the schema raw as the alternatives of an anyOf, each
// without combining keywords (none: no instance is valid).
func (c *schemaCompiler) flattenRaw(raw json.RawMessage, path string, depth int) ([]node, error) {
	n, anything, err := c.parse(raw, path)
	if _, none := err.(noInstance); none {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if anything {
		return []node{{}}, nil
	}
	return c.flatten(n, path, depth)
}

// flatten is flattenRaw of a schema object.
func (c *schemaCompiler) flatten(n node, path string, depth int) ([]node, error) {
	if depth > maxFlatten {
		return nil, unsupported(path, "$ref", fmt.Sprintf("more than %d schemas met in a row while merging (a $ref that leads back to itself?)", maxFlatten))
	}
	if err := c.checkKeywords(n, path); err != nil {
		return nil, err
	}
	rest := maps.Clone(n)
	for _, k := range []string{"allOf", "$ref", "anyOf", "oneOf", "if", "then", "else"} {
		delete(rest, k)
	}
	// Each part is a list of alternatives; the schema is their product.
	parts := [][]node{{rest}}
	if r := n["$ref"]; r != nil {
		ref, target, err := c.refTarget(r, path)
		if err != nil {
			return nil, err
		}
		alts, err := c.flattenRaw(target, refPath(ref), depth+1)
		if err != nil {
			return nil, err
		}
		parts = append(parts, alts)
	}
	if n["allOf"] != nil {
		branches, err := branchesOf(n, "allOf", path)
		if err != nil {
			return nil, err
		}
		for i, br := range branches {
			alts, err := c.flattenRaw(br, fmt.Sprintf("%s/allOf/%d", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			parts = append(parts, alts)
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if n[k] == nil {
			continue
		}
		branches, err := branchesOf(n, k, path)
		if err != nil {
			return nil, err
		}
		if k == "oneOf" {
			// Products of branches that cannot overlap cannot either, so
			// the oneOf is an anyOf of them.
			if err := c.disjoint(branches, path); err != nil {
				return nil, err
			}
		}
		var alts []node
		for i, br := range branches {
			a, err := c.flattenRaw(br, fmt.Sprintf("%s/%s/%d", path, k, i), depth+1)
			if err != nil {
				return nil, err
			}
			alts = append(alts, a...)
		}
		parts = append(parts, alts)
	}
	if n["if"] != nil || n["then"] != nil || n["else"] != nil {
		alts, err := c.conditional(n, path)
		if err != nil {
			return nil, err
		}
		var flat []node
		for _, a := range alts {
			f, err := c.flatten(a, path, depth+1)
			if err != nil {
				return nil, err
			}
			flat = append(flat, f...)
		}
		parts = append(parts, flat)
	}
	out := []node{{}}
	for _, part := range parts {
		var next []node
		for _, a := range out {
			for _, b := range part {
				m, err := c.merge(a, b, path)
				if _, none := err.(noInstance); none {
					continue // no instance for this product: left out
				}
				if err != nil {
					return nil, err
				}
				next = append(next, m)
			}
		}
		if len(next) > maxAlternatives {
			return nil, unsupported(path, "anyOf", fmt.Sprintf("more than %d alternatives once merged with the keywords beside it", maxAlternatives))
		}
		out = next
	}
	return out, nil
}

// refPath is where a $ref's target is, as a path for errors.
func refPath(ref string) string {
	if ref == "#" {
		return ""
	}
	return ref[1:]
}

func without(n node, keys ...string) node {
	out := maps.Clone(n)
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// conditional is if, then and else as alternatives: if and then, or
// else with if failing. Held exactly when if asks a property for a
// const or enum of strings or booleans (a discriminator); otherwise, as
// then or else, a superset, which is a relaxation.
func (c *schemaCompiler) conditional(n node, path string) ([]node, error) {
	if n["if"] == nil {
		return []node{{}}, nil // then and else without if are ignored, as JSON Schema has it
	}
	then, els := n["then"], n["else"]
	if then == nil {
		then = json.RawMessage("true")
	}
	if els == nil {
		els = json.RawMessage("true")
	}
	branch := func(then bool, cond node) node {
		s := els
		if then {
			s = n["then"]
		}
		if s == nil {
			s = json.RawMessage("true")
		}
		return node{"allOf": mustJSON([]json.RawMessage{s, mustJSON(cond)})}
	}
	switch t := string(bytes.TrimSpace(n["if"])); {
	case t == "true" || t == "{}":
		return []node{branch(true, node{})}, nil
	case t == "false":
		return []node{branch(false, node{})}, nil
	}
	if cases, ok := c.discriminator(n["if"]); ok {
		out := make([]node, len(cases))
		for i, k := range cases {
			out[i] = branch(k.then, k.cond)
		}
		return out, nil
	}
	if err := c.relax(path, unsupported(path, "if", "its condition is not a property's const or enum of strings or booleans: held to then or else")); err != nil {
		return nil, err
	}
	return []node{branch(true, node{}), branch(false, node{})}, nil
}

// ifCase is a case of an if: what the instance is (cond), and whether
// the if holds for it.
type ifCase struct {
	then bool
	cond node
}

// nonObject is the schema of the instances that are not objects.
var nonObject = json.RawMessage(`["number", "string", "boolean", "null", "array"]`)

// discriminator reads an if of the form {"properties": {P: {"const":
// V}}} (or an enum of strings or booleans; with or without "required":
// [P] and "type": "object"), whose cases the grammar can tell apart: P
// absent, P one of the values, P another value, and not an object.
func (c *schemaCompiler) discriminator(raw json.RawMessage) ([]ifCase, bool) {
	var n node
	if json.Unmarshal(raw, &n) != nil {
		return nil, false
	}
	var props map[string]node
	if json.Unmarshal(n["properties"], &props) != nil || len(props) != 1 {
		return nil, false
	}
	var required []string
	if n["required"] != nil && json.Unmarshal(n["required"], &required) != nil {
		return nil, false
	}
	typed := false
	for k, v := range n {
		switch {
		case k == "type" && string(bytes.TrimSpace(v)) == `"object"`:
			typed = true
		case k != "properties" && k != "required" && !annotation(k):
			return nil, false
		}
	}
	for name, p := range props {
		if len(required) > 1 || len(required) == 1 && required[0] != name {
			return nil, false
		}
		key := "enum"
		if p["const"] != nil {
			key = "const"
		}
		for k := range p {
			if k != key && !annotation(k) {
				return nil, false
			}
		}
		values, err := enumValues(p, key, "")
		if err != nil {
			return nil, false
		}
		var strs []string
		var bools []bool
		for _, v := range values {
			switch v := v.(type) {
			case string:
				strs = append(strs, v)
			case bool:
				bools = append(bools, v)
			default:
				return nil, false
			}
		}
		// other is a value of the property the if fails for.
		var other json.RawMessage
		switch {
		case len(strs) > 0 && len(bools) > 0:
			return nil, false
		case len(strs) > 0:
			other = mustJSON(node{"anyOf": mustJSON([]json.RawMessage{
				json.RawMessage(`{"type": ["number", "boolean", "null", "object", "array"]}`),
				mustJSON(node{"type": json.RawMessage(`"string"`), notStringsKey: mustJSON(strs)}),
			})})
		default:
			types := []json.RawMessage{json.RawMessage(`{"type": ["number", "string", "null", "object", "array"]}`)}
			for _, b := range []bool{true, false} {
				if !slices.Contains(bools, b) {
					types = append(types, mustJSON(node{"const": mustJSON(b)}))
				}
			}
			other = mustJSON(node{"anyOf": mustJSON(types)})
		}
		member := func(schema json.RawMessage) node {
			return node{"type": json.RawMessage(`"object"`), "properties": mustJSON(map[string]json.RawMessage{name: schema}), "required": mustJSON([]string{name})}
		}
		absent := node{"type": json.RawMessage(`"object"`), "properties": mustJSON(map[string]json.RawMessage{name: json.RawMessage("false")})}
		return []ifCase{
			{true, member(mustJSON(p))},
			{false, member(other)},
			{len(required) == 0, absent},
			{!typed, node{"type": nonObject}},
		}, true
	}
	return nil, false
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// merge is the schema of the instances valid for both a and b, neither
// with combining keywords.
func (c *schemaCompiler) merge(a, b node, path string) (node, error) {
	if len(a) == 0 {
		return b, nil
	}
	if len(b) == 0 {
		return a, nil
	}
	out := maps.Clone(a)
	// additionalProperties and patternProperties hold the properties the
	// other schema names, which its own properties do not: done first,
	// with both schemas' properties at hand.
	if err := c.mergeProperties(out, a, b, path); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		bv := b[k]
		av, both := a[k]
		if annotation(k) || k == "properties" || k == "additionalProperties" || k == "patternProperties" {
			continue
		}
		if !both {
			out[k] = bv
			continue
		}
		if bytes.Equal(bytes.TrimSpace(av), bytes.TrimSpace(bv)) {
			continue
		}
		switch k {
		case "type":
			ta, err := c.types(node{"type": av}, path)
			if err != nil {
				return nil, err
			}
			tb, err := c.types(node{"type": bv}, path)
			if err != nil {
				return nil, err
			}
			var common []string
			for _, t := range ta {
				switch {
				case slices.Contains(tb, t):
					common = append(common, t)
				case t == "number" && slices.Contains(tb, "integer"), t == "integer" && slices.Contains(tb, "number"):
					common = append(common, "integer")
				}
			}
			if len(common) == 0 {
				return nil, empty(path, "type", "no type is allowed by all of the schemas")
			}
			out[k] = mustJSON(common)
		case "enum":
			va, err := enumValues(node{"enum": av}, "enum", path)
			if err != nil {
				return nil, err
			}
			vb, err := enumValues(node{"enum": bv}, "enum", path)
			if err != nil {
				return nil, err
			}
			var common []json.RawMessage
			for _, x := range va {
				if slices.ContainsFunc(vb, func(y any) bool { return jsonEqual(x, y) }) {
					common = append(common, appendJSON(nil, x))
				}
			}
			if len(common) == 0 {
				return nil, empty(path, "enum", "no value is in every enum")
			}
			out[k] = mustJSON(common)
		case "const":
			xa, erra := decodeValue(av)
			xb, errb := decodeValue(bv)
			if erra != nil || errb != nil {
				return nil, &SchemaError{Path: path, Keyword: "const", Reason: "a value is not JSON"}
			}
			if !jsonEqual(xa, xb) {
				return nil, empty(path, "const", "two different values")
			}
		case "required":
			var ra, rb []string
			if json.Unmarshal(av, &ra) != nil || json.Unmarshal(bv, &rb) != nil {
				return nil, &SchemaError{Path: path, Keyword: "required", Reason: "want an array of strings"}
			}
			for _, r := range rb {
				if !slices.Contains(ra, r) {
					ra = append(ra, r)
				}
			}
			out[k] = mustJSON(ra)
		case "dependentRequired":
			var da, db map[string][]string
			if json.Unmarshal(av, &da) != nil || json.Unmarshal(bv, &db) != nil {
				return nil, &SchemaError{Path: path, Keyword: k, Reason: "want an object of arrays of strings"}
			}
			for name, names := range db {
				for _, r := range names {
					if !slices.Contains(da[name], r) {
						da[name] = append(da[name], r)
					}
				}
			}
			out[k] = mustJSON(da)
		case "minLength", "minItems", "minProperties", "maxLength", "maxItems", "maxProperties":
			var x, y float64
			if json.Unmarshal(av, &x) != nil || json.Unmarshal(bv, &y) != nil {
				return nil, &SchemaError{Path: path, Keyword: k, Reason: "want a number"}
			}
			if (k[:3] == "min") == (y > x) {
				out[k] = bv
			}
		case "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum":
			ra, rb := ratOf(json.Number(bytes.TrimSpace(av))), ratOf(json.Number(bytes.TrimSpace(bv)))
			if ra == nil || rb == nil {
				// draft 4's boolean exclusive forms, or no number: kept
				// only when they agree.
				return nil, c.relaxMerge(out, k, path)
			}
			if (k == "minimum" || k == "exclusiveMinimum") == (rb.Cmp(ra) > 0) {
				out[k] = bv
			}
		case "multipleOf":
			m, ok := lcm(av, bv)
			if !ok {
				return nil, c.relaxMerge(out, k, path)
			}
			out[k] = m
		case "pattern":
			var p string
			if json.Unmarshal(bv, &p) != nil {
				return nil, &SchemaError{Path: path, Keyword: k, Reason: "want a string"}
			}
			out[patternsKey] = appendStrings(out[patternsKey], p)
		case patternsKey, notStringsKey:
			var list []string
			json.Unmarshal(bv, &list)
			out[k] = appendStrings(out[k], list...)
		case "format":
			var name string
			json.Unmarshal(bv, &name)
			f, ok := formatOf(name)
			if !ok {
				if slices.Contains(annotationFormats, name) {
					continue
				}
				return nil, c.relaxMerge(out, k, path)
			}
			out[patternsKey] = appendStrings(out[patternsKey], f.pattern)
			if f.maxLen >= 0 {
				var x float64
				if out["maxLength"] == nil || json.Unmarshal(out["maxLength"], &x) == nil && x > float64(f.maxLen) {
					out["maxLength"] = mustJSON(f.maxLen)
				}
			}
		case "uniqueItems":
			out[k] = json.RawMessage("true")
		case "items", "propertyNames", "contains", "not":
			out[k] = allOf(av, bv)
		case "prefixItems":
			var pa, pb []json.RawMessage
			if json.Unmarshal(av, &pa) != nil || json.Unmarshal(bv, &pb) != nil {
				return nil, &SchemaError{Path: path, Keyword: k, Reason: "want an array of schemas"}
			}
			for len(pa) < len(pb) {
				pa = append(pa, json.RawMessage("true"))
			}
			for i := range pb {
				pa[i] = allOf(pa[i], pb[i])
			}
			out[k] = mustJSON(pa)
		default:
			return nil, c.relaxMerge(out, k, path)
		}
	}
	// A tuple's items beyond one schema's prefix are held to its items.
	if pa, pb := a["prefixItems"], b["prefixItems"]; (pa != nil) != (pb != nil) {
		prefix, other := pa, b["items"]
		if pb != nil {
			prefix, other = pb, a["items"]
		}
		if other != nil {
			var p []json.RawMessage
			json.Unmarshal(prefix, &p)
			for i := range p {
				p[i] = allOf(p[i], other)
			}
			out["prefixItems"] = mustJSON(p)
		}
	}
	return out, nil
}

// relaxMerge is the error, or the relaxation, of a keyword two schemas
// both have and that cannot be merged: the first one's is kept.
func (c *schemaCompiler) relaxMerge(out node, k, path string) error {
	return c.relax(path, unsupported(path, k, "in more than one schema of a conjunction, with values that cannot be merged: the first kept"))
}

// mergeProperties merges the members' keywords of a and b into out.
func (c *schemaCompiler) mergeProperties(out, a, b node, path string) error {
	if b["properties"] == nil && b["additionalProperties"] == nil && b["patternProperties"] == nil {
		return nil
	}
	if a["properties"] == nil && a["additionalProperties"] == nil && a["patternProperties"] == nil {
		for _, k := range []string{"properties", "additionalProperties", "patternProperties"} {
			if b[k] != nil {
				out[k] = b[k]
			}
		}
		return nil
	}
	if a["patternProperties"] != nil && b["patternProperties"] != nil ||
		a["patternProperties"] != nil && b["additionalProperties"] != nil || b["patternProperties"] != nil && a["additionalProperties"] != nil {
		return c.relaxMerge(out, "patternProperties", path)
	}
	names := func(n node) ([]string, map[string]json.RawMessage, error) {
		keys, err := objectKeys(n["properties"])
		if err != nil {
			return nil, nil, &SchemaError{Path: path, Keyword: "properties", Reason: "want an object"}
		}
		var props map[string]json.RawMessage
		json.Unmarshal(n["properties"], &props)
		return keys, props, nil
	}
	ka, pa, err := names(a)
	if err != nil {
		return err
	}
	kb, pb, err := names(b)
	if err != nil {
		return err
	}
	// A name one schema lists and the other does not is that other's
	// additional property.
	merged := map[string]json.RawMessage{}
	order := slices.Clone(ka)
	for _, k := range kb {
		if !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	for _, k := range order {
		var parts []json.RawMessage
		for _, side := range []struct {
			props map[string]json.RawMessage
			ap    json.RawMessage
		}{{pa, a["additionalProperties"]}, {pb, b["additionalProperties"]}} {
			switch {
			case side.props[k] != nil:
				parts = append(parts, side.props[k])
			case side.ap != nil:
				parts = append(parts, side.ap)
			}
		}
		merged[k] = allOf(parts...)
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range order {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(mustJSON(k))
		buf.WriteByte(':')
		buf.Write(merged[k])
	}
	buf.WriteByte('}')
	if len(order) > 0 {
		out["properties"] = buf.Bytes()
	}
	switch ap := []json.RawMessage{a["additionalProperties"], b["additionalProperties"]}; {
	case ap[0] != nil && ap[1] != nil:
		out["additionalProperties"] = allOf(ap...)
	case ap[1] != nil:
		out["additionalProperties"] = ap[1]
	}
	if b["patternProperties"] != nil {
		out["patternProperties"] = b["patternProperties"]
	}
	return nil
}

// allOf is the schema of what all of schemas allow, merged when it is
// compiled; one schema alone is itself.
func allOf(schemas ...json.RawMessage) json.RawMessage {
	var keep []json.RawMessage
	for _, s := range schemas {
		if t := bytes.TrimSpace(s); string(t) != "true" && string(t) != "{}" {
			keep = append(keep, s)
		}
	}
	switch len(keep) {
	case 0:
		return json.RawMessage("true")
	case 1:
		return keep[0]
	}
	return mustJSON(node{"allOf": mustJSON(keep)})
}

func appendStrings(raw json.RawMessage, more ...string) json.RawMessage {
	var list []string
	if raw != nil {
		json.Unmarshal(raw, &list)
	}
	for _, s := range more {
		if !slices.Contains(list, s) {
			list = append(list, s)
		}
	}
	return mustJSON(list)
}

// lcm is the least common multiple of two multipleOf values, when both
// are positive numbers.
func lcm(a, b json.RawMessage) (json.RawMessage, bool) {
	ra, rb := ratOf(json.Number(bytes.TrimSpace(a))), ratOf(json.Number(bytes.TrimSpace(b)))
	if ra == nil || rb == nil || ra.Sign() <= 0 || rb.Sign() <= 0 {
		return nil, false
	}
	// lcm(p/q, r/s) = lcm(p, r) / gcd(q, s), in lowest terms.
	num := new(big.Int).Mul(ra.Num(), rb.Num())
	num.Quo(num, new(big.Int).GCD(nil, nil, ra.Num(), rb.Num()))
	den := new(big.Int).GCD(nil, nil, ra.Denom(), rb.Denom())
	r := new(big.Rat).SetFrac(num, den)
	return json.RawMessage(r.FloatString(decimals(r))), true
}

// decimals is the digits after the point r needs to be written exactly
// (r's denominator divides a power of 10), at most 20.
func decimals(r *big.Rat) int {
	for d := 0; d <= 20; d++ {
		x := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d)), nil)))
		if x.IsInt() {
			return d
		}
	}
	return 20
}
