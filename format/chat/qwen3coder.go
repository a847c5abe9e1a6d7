package chat

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"strings"
)

// coderCalls is the qwen3_coder tool format of Qwen3.5's template: each
// call an XML-like block between <tool_call> and </tool_call>,
//
//	<function=NAME>
//	<parameter=ARG>
//	VALUE
//	</parameter>
//	</function>
//
// its values untyped text that the parser types by the tool's schema.
var coderCalls = &callFormat{
	syntax: CallSyntax{
		Open: ToolCallOpen, Close: ToolCallClose,
		Head: "\n" + CoderFunction, Mid: ">\n", Tail: CoderFunctionEnd + "\n",
		Sep:       "\n",
		Arguments: XMLParameters,
		Starts:    []string{ToolCallOpen, CoderFunction},
	},
	newParser: newCoderParser,
}

// coderMarkerMax is the length of the longest text that opens or closes
// a part of a call, the call markers among them.
const coderMarkerMax = len(CoderParameterEnd)

// coderParser reads the calls of an answer as vLLM's qwen3_coder parser
// (Qwen3CoderToolParser.extract_tool_calls) reads the whole text:
//
//   - The text before the first <tool_call>, or the first <function=
//     when it comes first, is content, kept as it is; nothing after it is.
//     (White space alone before it is not content here: vLLM gives it as
//     such, where a client wants none beside the calls, as the Hermes
//     parser gives.)
//   - The calls are the <function=NAME>...</function> blocks in the
//     <tool_call>...</tool_call> blocks, or anywhere before the first
//     <tool_call>. A block left open ends with the text.
//   - NAME runs to the first '>'. The parameters are read and typed by
//     the tool's schema as coderArguments says, and the arguments are
//     their JSON object as json.dumps prints it.
//   - An answer without a function block is content, all of it.
//
// It streams what it can: a call's ID and name as soon as its name is
// complete, its arguments when its block ends (they are typed by the
// whole of each value, and a repeated parameter takes the first one's
// place). Where vLLM's parser fails as a whole on a malformed call (a
// function or parameter name without its '>'), the call is given with
// its text as its arguments, and no name when it has none, for the
// caller to refuse; and function blocks before a first <tool_call> that
// follows them are calls here, where vLLM takes the text up to the
// <tool_call> as content.
type coderParser struct {
	schemas map[string]map[string]json.RawMessage // each tool's parameters' schemas, by their names
	newID   func() string

	state   coderState
	wrapped bool   // a <tool_call> came: function blocks outside one are not calls
	buf     string // text not yet read: a marker may begin in it
	fn      string // the open function block's text after "<function="
	named   bool   // the open block's name was given
	scanned int    // how much of fn was searched for its end
	pending string // the text from the first marker while no call has begun
	// spoke is set once content other than white space has been given;
	// before, white space is held, and lead is what a marker found then
	// took from the content.
	spoke bool
	lead  string
	calls int
	out   []CallDelta
}

type coderState int

const (
	coderText       coderState = iota // content
	coderBetween                      // past the first marker, outside a block
	coderBlock                        // in a <tool_call> block
	coderInFunction                   // in a function block
)

func newCoderParser(tools []Tool, newID func() string) CallParser {
	p := &coderParser{schemas: map[string]map[string]json.RawMessage{}, newID: newID}
	for _, t := range tools {
		if _, dup := p.schemas[t.Name]; !dup {
			p.schemas[t.Name] = parameterSchemas(t.Parameters)
		}
	}
	return p
}

// parameterSchemas is what vLLM reads a tool's arguments by: its schema's
// properties, or, in a schema without them, the schema's own members.
func parameterSchemas(schema json.RawMessage) map[string]json.RawMessage {
	var members map[string]json.RawMessage
	if json.Unmarshal(schema, &members) != nil {
		return nil
	}
	if props, ok := members["properties"]; ok {
		var p map[string]json.RawMessage
		if json.Unmarshal(props, &p) != nil {
			return nil
		}
		return p
	}
	return members
}

func (p *coderParser) InCall() bool { return p.state != coderText }

func (p *coderParser) Take() []CallDelta {
	out := p.out
	p.out = nil
	return out
}

func (p *coderParser) Add(text string) string {
	p.buf += text
	if p.calls == 0 && p.state != coderText {
		p.pending += text
	}
	var content strings.Builder
	for p.step(&content) {
	}
	return content.String()
}

// step moves the parser on through buf; it returns false when it needs
// more text.
func (p *coderParser) step(content *strings.Builder) bool {
	switch p.state {
	case coderText:
		i, m := firstOf(p.buf, ToolCallOpen, CoderFunction)
		if i < 0 {
			keep := heldPrefix(p.buf, ToolCallOpen, CoderFunction)
			if !p.spoke && strings.TrimSpace(p.buf[:len(p.buf)-keep]) == "" {
				return false // white space alone: a call may follow
			}
			content.WriteString(p.buf[:len(p.buf)-keep])
			p.buf, p.spoke = p.buf[len(p.buf)-keep:], true
			return false
		}
		if p.spoke || strings.TrimSpace(p.buf[:i]) != "" {
			content.WriteString(p.buf[:i])
		} else {
			p.lead = p.buf[:i]
		}
		p.pending = p.buf[i:]
		p.open(m, i)
	case coderBetween:
		markers := []string{ToolCallOpen}
		if !p.wrapped {
			markers = append(markers, CoderFunction)
		}
		i, m := firstOf(p.buf, markers...)
		if i < 0 {
			p.buf = p.buf[len(p.buf)-heldPrefix(p.buf, markers...):]
			return false
		}
		p.open(m, i)
	case coderBlock:
		i, m := firstOf(p.buf, CoderFunction, ToolCallClose)
		switch {
		case i < 0:
			p.buf = p.buf[len(p.buf)-heldPrefix(p.buf, CoderFunction, ToolCallClose):]
			return false
		case m == ToolCallClose:
			p.buf, p.state = p.buf[i+len(m):], coderBetween
		default:
			p.open(m, i)
		}
	case coderInFunction:
		p.fn += p.buf
		p.buf = ""
		ends := []string{CoderFunctionEnd}
		if p.wrapped {
			ends = append(ends, ToolCallClose)
		}
		i, m := firstOf(p.fn[p.scanned:], ends...)
		if i < 0 {
			// No '>' in fn can be the end of a marker yet: the name is
			// complete once one comes.
			p.name(p.fn)
			p.scanned = max(p.scanned, len(p.fn)-coderMarkerMax)
			return false
		}
		i += p.scanned
		p.buf = p.fn[i+len(m):]
		p.endFunction(p.fn[:i])
		p.state = coderBetween
		if m == CoderFunctionEnd && p.wrapped {
			p.state = coderBlock
		}
	}
	return true
}

// open enters what marker m, at buf[i], opens.
func (p *coderParser) open(m string, i int) {
	p.buf = p.buf[i+len(m):]
	if m == ToolCallOpen {
		p.state, p.wrapped = coderBlock, true
		return
	}
	p.state, p.fn, p.named, p.scanned = coderInFunction, "", false, 0
	p.calls++
	p.pending = ""
}

// name gives the open call's ID and name once its text fn has the '>'
// that ends the name.
func (p *coderParser) name(fn string) {
	if i := strings.IndexByte(fn, '>'); i >= 0 && !p.named {
		p.out = append(p.out, CallDelta{Index: p.calls - 1, ID: p.newID(), Name: fn[:i]})
		p.named = true
	}
}

// endFunction ends the open call, whose whole text (after "<function=")
// is fn: it gives its arguments, or its text when they cannot be read.
func (p *coderParser) endFunction(fn string) {
	p.name(fn)
	d := CallDelta{Index: p.calls - 1}
	name, params, ok := strings.Cut(fn, ">")
	switch {
	case !ok:
		d.ID, d.Arguments = p.newID(), strings.TrimSpace(fn)
	default:
		args, ok := coderArguments(params, p.schemas[name])
		if !ok {
			args = strings.TrimSpace(params)
		}
		d.Arguments = args
	}
	p.out = append(p.out, d)
}

func (p *coderParser) Flush() string {
	switch p.state {
	case coderText:
		s := p.buf
		p.buf = ""
		return s
	case coderInFunction:
		fn := p.fn + p.buf
		if p.wrapped {
			// The open <tool_call> block runs to the end of the text, where
			// vLLM's "$" stops before a last newline.
			fn = strings.TrimSuffix(fn, "\n")
		}
		p.endFunction(fn)
	}
	p.state, p.buf, p.fn = coderBetween, "", ""
	if p.calls == 0 {
		s := p.lead + p.pending // no function block: the whole answer is content
		p.lead, p.pending = "", ""
		return s
	}
	return ""
}

// coderArguments reads the parameters of a function block (the text after
// its name's '>') as vLLM does, with its regular expression
//
//	<parameter=(.*?)(?:</parameter>|(?=<parameter=)|(?=</function>)|$)
//
// each match's name running to its first '>', its value the rest with
// one newline taken off each end; and types each value by its schema in
// schemas. The result is the arguments' JSON object as json.dumps prints
// it. ok is false when a parameter has no '>'.
func coderArguments(text string, schemas map[string]json.RawMessage) (string, bool) {
	var keys []string
	vals := map[string]string{}
	for pos := 0; ; {
		i := strings.Index(text[pos:], CoderParameter)
		if i < 0 {
			break
		}
		start := pos + i + len(CoderParameter)
		end, next := paramEnd(text, start)
		name, value, ok := strings.Cut(text[start:end], ">")
		if !ok {
			return "", false
		}
		value = strings.TrimPrefix(value, "\n")
		value = strings.TrimSuffix(value, "\n")
		if _, seen := vals[name]; !seen {
			keys = append(keys, name)
		}
		vals[name] = typedValue(value, name, schemas)
		pos = next
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		pyString(&b, k)
		b.WriteString(": ")
		b.WriteString(vals[k])
	}
	b.WriteByte('}')
	return b.String(), true
}

// paramEnd is where the lazy match of a parameter begun at start ends,
// and where the next search begins: at </parameter> (after it), before
// the next <parameter= or </function>, or at the end of the text, which
// Python's "$" also finds before a last newline.
func paramEnd(text string, start int) (end, next int) {
	end = len(text)
	if strings.HasSuffix(text, "\n") && len(text)-1 >= start {
		end = len(text) - 1
	}
	next = end
	if i, m := firstOf(text[start:], CoderParameterEnd, CoderParameter, CoderFunctionEnd); i >= 0 && start+i < end {
		end, next = start+i, start+i
		if m == CoderParameterEnd {
			next += len(m)
		}
	}
	return end, next
}

// CoderType is how the qwen3_coder parser reads a parameter's value, by
// the type its schema names (vLLM's _convert_param_value).
type CoderType int

const (
	// CoderString keeps the value's text as it is: a parameter the tool's
	// schema does not have; a schema without a type (unless it allows one
	// type beside null, see CoderTypeOf); the types string, str, text,
	// varchar, char and enum.
	CoderString CoderType = iota
	// CoderInteger is Python's int() of the value (int..., uint...,
	// long..., short..., unsigned...).
	CoderInteger
	// CoderNumber is its float(), an integral one an integer (num...,
	// float...).
	CoderNumber
	// CoderBoolean is true when the value is "true" in any case, false
	// otherwise (boolean, bool, binary).
	CoderBoolean
	// CoderJSON is the value's JSON, else its Python literal (object,
	// array, arr, dict..., list...).
	CoderJSON
	// CoderLiteral is the value's Python literal: any other type,
	// a list of types among them.
	CoderLiteral
)

// CoderTypeOf is how the parser reads a value whose schema is schema (nil
// for a parameter the tool's schema does not have). Whatever the type,
// "null" in any case is null, and a value that does not read as its type
// stays a string. A schema that allows one type beside null (["integer",
// "null"], or anyOf/oneOf branches of one type and null, as pydantic
// writes Optional[int]) reads as that type, and a $ref as JSON.
func CoderTypeOf(schema json.RawMessage) CoderType {
	if schema == nil {
		return CoderString
	}
	typ := "string"
	var members map[string]json.RawMessage
	if json.Unmarshal(schema, &members) == nil {
		if t, ok := members["type"]; ok {
			// Python's str() of a type that is no string (a list of
			// types) names none of the types below.
			typ = "other"
			var s string
			if json.Unmarshal(t, &s) == nil {
				typ = strings.ToLower(pyStrip(s))
			}
		}
		if one, ok := nullableOf(members); ok {
			typ = one
		}
	}
	hasPrefix := func(prefixes ...string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(typ, p) {
				return true
			}
		}
		return false
	}
	switch {
	case typ == "string" || typ == "str" || typ == "text" || typ == "varchar" || typ == "char" || typ == "enum":
		return CoderString
	case hasPrefix("int", "uint", "long", "short", "unsigned"):
		return CoderInteger
	case hasPrefix("num", "float"):
		return CoderNumber
	case typ == "boolean" || typ == "bool" || typ == "binary":
		return CoderBoolean
	case typ == "object" || typ == "array" || typ == "arr" || hasPrefix("dict", "list"):
		return CoderJSON
	}
	return CoderLiteral
}

// nullableOf is the one type a schema allows beside null, as the
// parsers since vLLM's fix for nullable parameters (pull request 37831)
// read it: a list of types ["T", "null"], or, without a type, anyOf or
// oneOf branches of type T or null (pydantic's Optional[T]); a $ref (a
// nested model) reads as JSON ("object"). ok is false for any other
// schema, whose type the caller reads as before.
func nullableOf(members map[string]json.RawMessage) (typ string, ok bool) {
	kinds := map[string]bool{}
	add := func(t json.RawMessage) bool {
		var one string
		var list []string
		switch {
		case json.Unmarshal(t, &one) == nil:
			list = []string{one}
		case json.Unmarshal(t, &list) != nil:
			return false
		}
		for _, k := range list {
			kinds[strings.ToLower(pyStrip(k))] = true
		}
		return true
	}
	switch {
	case members["type"] != nil:
		// One type named is the caller's to read; a list is read here.
		if !bytes.HasPrefix(bytes.TrimSpace(members["type"]), []byte("[")) || !add(members["type"]) {
			return "", false
		}
	case members["$ref"] != nil:
		return "object", true
	default:
		var branches []map[string]json.RawMessage
		for _, k := range []string{"anyOf", "oneOf"} {
			if members[k] != nil {
				if json.Unmarshal(members[k], &branches) != nil {
					return "", false
				}
				break
			}
		}
		if len(branches) == 0 {
			return "", false
		}
		for _, b := range branches {
			switch {
			case b["type"] != nil:
				if !add(b["type"]) {
					return "", false
				}
			case b["$ref"] != nil:
				kinds["object"] = true
			default:
				return "", false
			}
		}
	}
	delete(kinds, "null")
	if len(kinds) != 1 {
		return "", false
	}
	for k := range kinds {
		typ = k
	}
	return typ, true
}

// typedValue is json.dumps of a parameter's value as vLLM types it by
// the type its schema names (see CoderType). A value that does not read
// as its type stays a string.
func typedValue(value, name string, schemas map[string]json.RawMessage) string {
	asString := func() string {
		var b strings.Builder
		pyString(&b, value)
		return b.String()
	}
	if strings.ToLower(value) == "null" {
		return "null"
	}
	switch CoderTypeOf(schemas[name]) {
	case CoderString:
		return asString()
	case CoderInteger:
		if n, ok := pyInt(value); ok {
			return n.String()
		}
		return asString()
	case CoderNumber:
		f, ok := pyFloat(value)
		if !ok || math.IsInf(f, 0) || math.IsNaN(f) {
			return asString() // int() of them raises: the value stays a string
		}
		if f == math.Trunc(f) {
			n, _ := big.NewFloat(f).Int(nil)
			return n.String()
		}
		return PyFloat(f)
	case CoderBoolean:
		if strings.ToLower(value) == "true" {
			return "true"
		}
		return "false"
	case CoderJSON:
		// json.loads reads any JSON value, white space around it.
		if s, err := ToJSON([]byte(value)); err == nil {
			return s
		}
	}
	if s, ok := literalEval(value); ok {
		return s
	}
	return asString()
}
