package schemagen

import "math/rand/v2"

// Random makes a schema; depth bounds the nesting.
func Random(rng *rand.Rand, depth int) map[string]any {
	kinds := []string{"string", "integer", "number", "boolean", "null", "enum", "const", "format", "pattern", "enum-beside", "const-beside"}
	if depth > 0 {
		kinds = append(kinds, "object", "object", "array", "tuple", "anyOf", "nullable")
	}
	switch kinds[rng.IntN(len(kinds))] {
	case "string":
		lo := rng.IntN(3)
		return map[string]any{"type": "string", "minLength": lo, "maxLength": lo + rng.IntN(6)}
	case "integer":
		lo := rng.IntN(2000) - 1000
		return bounded(rng, "integer", lo, lo+rng.IntN(3000))
	case "number":
		if rng.IntN(2) == 0 {
			return map[string]any{"type": "number"}
		}
		lo := 2 + rng.IntN(5) // bounds on numbers are whole, from 0
		return bounded(rng, "number", lo, lo+1+rng.IntN(5))
	case "boolean":
		return map[string]any{"type": "boolean"}
	case "null":
		return map[string]any{"type": "null"}
	case "enum":
		return map[string]any{"enum": []any{"x", 1.5, nil, true, []any{1, "y"}, map[string]any{"k": "v"}}[:1+rng.IntN(6)]}
	case "const":
		return map[string]any{"const": []any{"c\"q", -3, false}[rng.IntN(3)]}
	case "enum-beside":
		return beside(rng, "enum")
	case "const-beside":
		return beside(rng, "const")
	case "format":
		return map[string]any{"type": "string", "format": []string{"date", "time", "date-time", "uuid"}[rng.IntN(4)]}
	case "pattern":
		return map[string]any{"type": "string", "pattern": []string{`^[a-f0-9]{2,4}$`, `^(ab|c)d?$`, `^\w\d\s?[^a-z]$`, `^x.y$`}[rng.IntN(4)]}
	case "object":
		return object(rng, depth)
	case "array":
		lo := rng.IntN(2)
		return map[string]any{"type": "array", "items": Random(rng, depth-1), "minItems": lo, "maxItems": lo + rng.IntN(3)}
	case "tuple":
		return map[string]any{"type": "array", "prefixItems": []any{Random(rng, depth-1), Random(rng, depth-1)}, "items": false}
	case "anyOf":
		return map[string]any{"anyOf": []any{Random(rng, depth-1), Random(rng, depth-1)}}
	default: // nullable
		return map[string]any{"type": []string{"integer", "null"}, "minimum": 0, "maximum": 5}
	}
}

// bounded is a type whose instances run from lo to hi, each end set by
// minimum or maximum, by its exclusive form, or by both, either the
// tighter.
func bounded(rng *rand.Rand, typ string, lo, hi int) map[string]any {
	s := map[string]any{"type": typ}
	for _, end := range []struct {
		inclusive, exclusive string
		at, out              int // out: the way out of the range
	}{{"minimum", "exclusiveMinimum", lo, -1}, {"maximum", "exclusiveMaximum", hi, 1}} {
		switch rng.IntN(4) {
		case 0:
			s[end.inclusive] = end.at
		case 1:
			s[end.exclusive] = end.at + end.out
		case 2: // the inclusive bound the tighter
			s[end.inclusive], s[end.exclusive] = end.at, end.at+end.out*(1+rng.IntN(2))
		default: // the exclusive
			s[end.inclusive], s[end.exclusive] = end.at+end.out*(1+rng.IntN(2)), end.at+end.out
		}
	}
	return s
}

// enumValues are values for enum and const, some of which each of
// siblings' keywords refuses.
var enumValues = []any{"x", "yyyy", "y\"é", 1.5, 3, 12, -4, nil, true, []any{1, "y"}, []any{}, map[string]any{"k": "v"}, map[string]any{"k": 1}, "2024-02-03", "2024-02-30"}

// siblings are keywords beside an enum or a const, each with a value of
// enumValues they admit.
var siblings = []struct {
	keywords map[string]any
	valid    any
}{
	{map[string]any{"type": "string", "maxLength": 2}, "x"},
	{map[string]any{"type": "integer", "minimum": 0, "maximum": 10}, 3},
	{map[string]any{"minimum": 2, "exclusiveMaximum": 12}, "yyyy"}, // bounds hold numbers only
	{map[string]any{"type": "string", "pattern": "^y"}, "y\"é"},
	{map[string]any{"type": "object", "properties": map[string]any{"k": map[string]any{"type": "string"}}, "required": []string{"k"}}, map[string]any{"k": "v"}},
	{map[string]any{"type": "string", "format": "date"}, "2024-02-03"},
	{map[string]any{"type": "array", "minItems": 1, "items": map[string]any{"type": "integer"}, "prefixItems": []any{true, map[string]any{"type": "string"}}}, []any{1, "y"}},
	{map[string]any{"type": []string{"number", "null"}, "maximum": 2}, 1.5},
}

// beside is an enum or a const with keywords beside it, which hold some
// of its values and not others: the grammar must leave those out.
func beside(rng *rand.Rand, key string) map[string]any {
	sib := siblings[rng.IntN(len(siblings))]
	s := map[string]any{}
	for k, v := range sib.keywords {
		s[k] = v
	}
	if key == "const" {
		s["const"] = sib.valid
		return s
	}
	values := []any{sib.valid}
	for _, i := range rng.Perm(len(enumValues))[:2+rng.IntN(4)] {
		values = append(values, enumValues[i])
	}
	rng.Shuffle(len(values), func(i, k int) { values[i], values[k] = values[k], values[i] })
	s["enum"] = values
	return s
}

// object is an object schema; some of its required names are not among
// its properties, and are then held to additionalProperties.
func object(rng *rand.Rand, depth int) map[string]any {
	props := map[string]any{}
	required := []string{}
	for i := range rng.IntN(4) {
		name := []string{"a", "b", "ab", "é", "k\"q"}[i]
		props[name] = Random(rng, depth-1)
		if rng.IntN(2) == 0 {
			required = append(required, name)
		}
	}
	s := map[string]any{"type": "object", "properties": props}
	switch rng.IntN(4) {
	case 0:
		s["additionalProperties"] = false
	case 1:
		s["additionalProperties"] = map[string]any{"type": "integer", "minimum": 0, "maximum": 9}
	case 2:
		s["additionalProperties"] = true
	}
	if s["additionalProperties"] != false && rng.IntN(2) == 0 {
		required = append(required, []string{"z", "é2"}[:1+rng.IntN(2)]...) // not among the properties
	}
	s["required"] = required
	return s
}
