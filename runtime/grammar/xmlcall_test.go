package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/format/tokenizer"
)

// xmlTools cover the ways the qwen3_coder parser reads a value: raw
// strings (free, with lengths, a format, an enum, through a $ref, anyOf
// with null), integers, numbers, booleans, JSON objects and arrays
// (whose strings may hold '<' only as \u003c), lists of types read as
// Python literals, and a tool without parameters.
var xmlTools = []toolDef{
	{"write_file", `{"type": "object", "properties": {"path": {"type": "string", "description": "where"}, "content": {"type": "string"}, "mode": {"type": "integer", "minimum": 0, "maximum": 511}, "append": {"type": "boolean"}}, "required": ["path", "content"]}`},
	{"search", `{"type": "object", "properties": {"query": {"type": "string", "minLength": 2, "maxLength": 6}, "limit": {"type": "number", "minimum": 0, "maximum": 10}, "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}, "opts": {"type": "object", "properties": {"x": {"type": "integer"}, "s": {"type": "string"}}, "required": ["s"], "additionalProperties": false}}, "required": ["query", "tags", "opts"]}`},
	{"pick", `{"$defs": {"Kind": {"type": "string", "enum": ["a", "b<c", "</parameter>", "NULL"]}}, "type": "object", "properties": {"color": {"enum": ["red", "green", "null", null, 3]}, "kind": {"$ref": "#/$defs/Kind"}, "when": {"type": "string", "format": "date"}, "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]}, "count": {"type": ["integer", "null"], "minimum": -3, "maximum": 3}, "ratio": {"type": ["number", "null"]}, "label": {"type": ["string", "null"]}, "flag": {"type": ["boolean", "null"]}, "exact": {"type": "string", "minLength": 4, "maxLength": 4}, "any": {}}, "required": ["color", "kind", "exact", "label", "flag"]}`},
	// As pydantic v2 writes a model's schema (the OpenAI Agents SDK's
	// tools): Optional[T] as anyOf T or null, a nested model as a $ref.
	{"settings", `{"$defs": {"Loc": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}}, "type": "object", "properties": {"days": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}], "default": null}, "scale": {"oneOf": [{"type": "null"}, {"type": "number"}]}, "loc": {"$ref": "#/$defs/Loc"}, "near": {"anyOf": [{"$ref": "#/$defs/Loc"}, {"type": "null"}]}, "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]}, "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}}, "required": ["days", "loc", "near", "tags"], "additionalProperties": false}`},
	// Patterns, as Claude Code's and qwen-code's tools have them.
	{"resume", `{"type": "object", "properties": {"run": {"type": "string", "pattern": "^run_[a-z0-9]{4,8}$"}, "slug": {"type": "string", "pattern": "[a-z]+-[0-9]+", "maxLength": 12}, "word": {"type": "string", "pattern": "^[a-zA-Z]{4}$"}, "maybe": {"type": ["string", "null"], "pattern": "^[a-z]{4}$"}, "path": {"type": "string", "pattern": "^/"}}, "required": ["run", "slug", "word", "maybe"]}`},
	{"noargs", ``},
}

// toolDef is a tool's name and parameters schema ("" for none).
type toolDef struct{ name, params string }

// callTools are tools for the chat parser and the grammar, and their
// schemas' validators.
func callTools(t *testing.T, tools []toolDef) ([]chat.Tool, []Tool, map[string]*jsonschema.Schema) {
	t.Helper()
	var ct []chat.Tool
	var gt []Tool
	schemas := map[string]*jsonschema.Schema{}
	for _, x := range tools {
		var params json.RawMessage
		if x.params != "" {
			params = json.RawMessage(x.params)
			schemas[x.name] = validator(t, x.params)
		}
		c, err := chat.NewTool(x.name, "", params)
		if err != nil {
			t.Fatal(err)
		}
		ct = append(ct, c)
		gt = append(gt, Tool{Name: x.name, Parameters: params})
	}
	return ct, gt, schemas
}

// tokenKinds sorts a vocabulary's tokens for walkIDs: the short ones
// (one byte, or special), those with a '<' (which end markers begin
// with), and each token's id by its text.
type tokenKinds struct {
	short, angle []int32
	byText       map[string]int32
}

func kindsOf(v *Vocab) *tokenKinds {
	k := &tokenKinds{byText: map[string]int32{}}
	for id, text := range v.text {
		s := string(text)
		switch {
		case v.special[id] || slices.Contains(v.eos, int32(id)) || len(s) == 1:
			k.short = append(k.short, int32(id))
		case strings.Contains(s, "<"):
			k.angle = append(k.angle, int32(id))
		}
		if s != "" {
			k.byText[s] = int32(id)
		}
	}
	return k
}

// walkIDs walks a grammar with random allowed tokens, as generate does
// but faster: it tries tokens of a few kinds at random against the mask
// before it scans it: short ones, those with a '<', those that go on
// with the text that closes a value or a call where the text has begun
// it (so that walks end), and any. It returns the tokens, and whether
// the grammar completed them.
func walkIDs(t *testing.T, g *Grammar, k *tokenKinds, rng *rand.Rand, maxSteps int) ([]int32, bool) {
	t.Helper()
	v := g.vocab
	m := g.NewMatcher()
	mask := v.NewMask()
	closers := []string{"\n" + chat.CoderParameterEnd + "\n", chat.CoderFunctionEnd + "\n", "\"", "]", "}"}
	// closing are the tokens that go on with the closer the text has
	// gone furthest into (or begin one), and the ends of the answer.
	closing := func(text []byte) (out []int32, begun bool) {
		best := 0
		for _, c := range closers {
			for n := min(len(c)-1, len(text)); n > best; n-- {
				if strings.HasSuffix(string(text), c[:n]) {
					best, out = n, out[:0]
					for l := 1; l <= len(c)-n; l++ {
						if id, ok := k.byText[c[n:n+l]]; ok {
							out = append(out, id)
						}
					}
					break
				}
			}
		}
		if best == 0 {
			for _, c := range closers {
				for l := 1; l <= len(c); l++ {
					if id, ok := k.byText[c[:l]]; ok {
						out = append(out, id)
					}
				}
			}
		}
		return append(out, v.eos...), best > 0
	}
	var ids []int32
	var text []byte
	for step := range maxSteps {
		if m.Done() {
			return ids, true
		}
		m.Fill(mask)
		pick := int32(-1)
		close, begun := closing(text)

		for try := 0; try < 200 && pick < 0; try++ {
			var from []int32
			r := rng.IntN(5)
			if begun && rng.IntN(4) > 0 || step > maxSteps/2 {
				r = 0 // see a closer through, and end in time
			}
			switch r {
			case 0, 1:
				from = close
			case 2:
				from = k.short
			case 3:
				from = k.angle
			}
			id := int32(rng.IntN(len(v.text)))
			if len(from) > 0 {
				id = from[rng.IntN(len(from))]
			}
			if mask.Has(id) {
				pick = id
			}
		}
		if pick < 0 {
			var allowed []int32
			for w, word := range mask {
				for ; word != 0; word &= word - 1 {
					allowed = append(allowed, int32(w*64)+int32(trailingZeros(word)))
				}
			}
			if len(allowed) == 0 {
				t.Fatalf("after %v: no token allowed", ids)
			}
			pick = allowed[rng.IntN(len(allowed))]
		}
		if err := m.Accept(pick); err != nil {
			t.Fatalf("after %v: %v", ids, err)
		}
		if !m.isEOS(pick) {
			ids = append(ids, pick)
			text = append(text, v.text[pick]...)
		}
	}
	return ids, m.Done()
}

// xmlAnswer is an answer that may call tools in Qwen3.5's call format.
func xmlAnswer(t *testing.T, tok *tokenizer.Tokenizer, tools []Tool) Answer {
	open, _ := tok.TokenID(chat.ToolCallOpen)
	close, _ := tok.TokenID(chat.ToolCallClose)
	return Answer{Tools: tools, Call: callSyntax(t, "qwen3.5"), CallOpen: open, CallClose: close}
}

// parsedCalls runs an answer's text through the format's parser: the
// content, and each call's name and arguments.
func parsedCalls(f *chat.Format, tools []chat.Tool, text string) (string, [][2]string) {
	p := f.NewCallParser(tools, func() string { return "call" })
	content := p.Add(text) + p.Flush()
	var calls [][2]string
	for _, d := range p.Take() {
		for len(calls) <= d.Index {
			calls = append(calls, [2]string{})
		}
		if d.Name != "" {
			calls[d.Index][0] = d.Name
		}
		calls[d.Index][1] += d.Arguments
	}
	return content, calls
}

// TestXMLCallsReadBack: the answers the grammar allows, in the
// qwen3_coder form, are read by the format's parser into calls of the
// tools whose arguments are valid instances of their schemas, with
// every tool choice; the text before a call spells no call's start, and
// no value spells an end marker.
func TestXMLCallsReadBack(t *testing.T) {
	choices := []xmlChoice{{"required", "", false}, {"auto", "", false}, {"function", "pick", true}, {"function", "search", false}, {"none", "", false}}
	seen, covered := readBack(t, xmlTools, choices, 40)
	if len(seen) < len(xmlTools) || len(covered) < 6 {
		t.Fatalf("calls of %v, values %v: too few to tell", slices.Sorted(maps.Keys(seen)), covered)
	}
}

// claudeCodeTools are tools as Claude Code declares them.
var claudeCodeTools = []toolDef{
	{"Bash", `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {"command": {"type": "string", "description": "The command to execute"}, "timeout": {"type": "number", "description": "Optional timeout in milliseconds (max 600000)"}, "description": {"type": "string"}, "run_in_background": {"type": "boolean"}}, "required": ["command"], "additionalProperties": false}`},
	{"Edit", `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {"file_path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"}, "replace_all": {"type": "boolean", "default": false}}, "required": ["file_path", "old_string", "new_string"], "additionalProperties": false}`},
	{"Grep", `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}, "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"]}, "-B": {"type": "number"}, "-n": {"type": "boolean"}, "type": {"type": "string"}, "head_limit": {"type": "number"}}, "required": ["pattern"], "additionalProperties": false}`},
	{"TodoWrite", `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {"todos": {"type": "array", "items": {"type": "object", "properties": {"content": {"type": "string", "minLength": 1}, "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}, "activeForm": {"type": "string", "minLength": 1}}, "required": ["content", "status", "activeForm"], "additionalProperties": false}}}, "required": ["todos"], "additionalProperties": false}`},
	{"WebFetch", `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {"url": {"type": "string", "format": "uri"}, "prompt": {"type": "string"}}, "required": ["url", "prompt"], "additionalProperties": false}`},
	{"WebSearch", `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {"query": {"type": "string", "minLength": 2}, "allowed_domains": {"type": "array", "items": {"type": "string"}}}, "required": ["query"], "additionalProperties": false}`},
	{"Sleep", `{"type": "object", "properties": {"seconds": {"type": "number", "exclusiveMinimum": 0}, "count": {"type": "integer", "minimum": 0, "maximum": 9007199254740991}}, "required": ["seconds", "count"], "additionalProperties": false}`},
}

// TestXMLClaudeCodeTools: Claude Code's tools, none refused, and calls of
// them read back valid.
func TestXMLClaudeCodeTools(t *testing.T) {
	seen, _ := readBack(t, claudeCodeTools, []xmlChoice{{"required", "", false}, {"function", "TodoWrite", true}}, 12)
	if len(seen) < 3 {
		t.Fatalf("calls of %v: too few to tell", slices.Sorted(maps.Keys(seen)))
	}
}

// xmlChoice is a tool choice: "auto", "none", "required", or "function"
// with its name; one allows one call at most.
type xmlChoice struct {
	choice, function string
	one              bool
}

// readBack walks the grammar of answers that may call the tools, for each
// choice with seeds seeds, and reads each answer completed with the
// parser of Qwen3.6's format: the choice is kept, and every call's
// arguments validate against its tool's schema. It returns the tools
// called and the kinds of values read.
func readBack(t *testing.T, tools []toolDef, choices []xmlChoice, seeds uint64) (seen, covered map[string]bool) {
	t.Helper()
	v, tok := qwenVocab(t)
	f, err := chat.Lookup("qwen3.6")
	if err != nil {
		t.Fatal(err)
	}
	ct, gt, schemas := callTools(t, tools)
	base := xmlAnswer(t, tok, gt)
	complete, calls := 0, 0
	seen, covered = map[string]bool{}, map[string]bool{}
	kinds := kindsOf(v)
	for _, c := range choices {
		a := base
		a.Choice, a.Function, a.OneCall = c.choice, c.function, c.one
		g, err := Compile(v, a)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		for seed := range seeds {
			ids, done := walkIDs(t, g, kinds, rand.New(rand.NewPCG(seed, 7)), 400)
			if !done {
				continue
			}
			complete++
			text := tok.Decode(ids)
			content, got := parsedCalls(f, ct, text)
			if spells(content, chat.ToolCallOpen, chat.CoderFunction) {
				t.Fatalf("%+v: content %q spells a call's start", c, content)
			}
			switch {
			case c.choice == "none" && len(got) > 0:
				t.Fatalf("tool_choice none: calls in %q", text)
			case (c.choice == "required" || c.choice == "function") && len(got) == 0:
				t.Fatalf("tool_choice %s: no call in %q", c.choice, text)
			case c.one && len(got) > 1:
				t.Fatalf("one call at most: %d in %q", len(got), text)
			}
			for _, call := range got {
				calls++
				name, args := call[0], call[1]
				if c.function != "" && name != c.function {
					t.Fatalf("a call of %q, not %q: %q", name, c.function, text)
				}
				seen[name] = true
				var obj map[string]any
				if err := json.Unmarshal([]byte(args), &obj); err != nil {
					t.Fatalf("%s: arguments %q are not an object (%v), from %q", name, args, err, text)
				}
				sch := schemas[name]
				if sch == nil {
					if len(obj) != 0 {
						t.Fatalf("%s takes no parameters: %s", name, args)
					}
					continue
				}
				inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(args))
				if err := sch.Validate(inst); err != nil {
					t.Fatalf("%s: arguments %s are invalid: %v\nfrom %q", name, args, err, text)
				}
				for k, val := range obj {
					switch val := val.(type) {
					case string:
						if strings.Contains(val, "<") {
							covered["a string with '<'"] = true
						}
						if k == "label" {
							covered["a quoted string"] = true
						}
					case bool:
						if k == "flag" {
							covered["a boolean literal"] = true
						}
					case nil:
						covered["null"] = true
					case map[string]any:
						covered["an object"] = true
					case float64:
						if k == "count" {
							covered["an integer literal"] = true
						}
					}
				}
			}
		}
	}
	if complete < int(seeds)*len(choices)*3/4 {
		t.Fatalf("%d of %d walks completed", complete, int(seeds)*len(choices))
	}
	t.Logf("%d walks completed, %d calls read back and validated", complete, calls)
	return seen, covered
}

// TestXMLValuesExact: the raw values the grammar allows are exactly the
// strings without an end marker, and, for a string schema, other than
// "null" in any case (which the parser reads as null); the texts are
// checked against the definition byte by byte.
func TestXMLValuesExact(t *testing.T) {
	v, tok := qwenVocab(t)
	for _, null := range []bool{false, true} {
		b := NewBuilder()
		x := newXMLCompiler(b, newJSONRules(b))
		g, err := b.Build(b.New("root", []Elem{x.anyRaw(null)}), v)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"", "a < b", "<div>x</div>", "</parameter", "<parameter", "nul", "nulls", "NuLl", "null", "é<\n\t",
			"x</parameter>", "<parameter=y", "</function>", "a</tool_call>", "\x01", "\xff"} {
			want := !spells(s, coderEnds...) && (null || !strings.EqualFold(s, "null")) && !strings.ContainsAny(s, "\x01\xff")
			if got := accepts(g, tok, s); got != want {
				t.Errorf("null %v: %q accepted %v, want %v", null, s, got, want)
			}
		}
		// With a length, a '<' never comes; four characters are not
		// "null" unless null is allowed.
		for _, r := range [][2]int{{4, 4}, {0, 5}, {3, -1}, {0, 2}} {
			b := NewBuilder()
			x := newXMLCompiler(b, newJSONRules(b))
			g, err := b.Build(b.New("root", []Elem{x.counted(r[0], r[1], null)}), v)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"", "ab", "abc", "abcd", "nulx", "xull", "NULL", "null", "nUlL", "abcde", "a<cd", "éééé", "abcdefgh",
				"abcde<f", "abcde</parameter>", "abcdefgh<div>"} {
				n := len([]rune(s))
				// Past a maximum, or within the first five characters
				// without one, no '<'; past those, no end marker.
				lt := strings.Contains(s, "<")
				if r[1] < 0 && n > max(5, r[0]) {
					lt = strings.Contains(string([]rune(s)[:max(5, r[0])]), "<") || spells(s, coderEnds...)
				}
				want := n >= r[0] && (r[1] < 0 || n <= r[1]) && !lt && (null || !strings.EqualFold(s, "null"))
				if got := accepts(g, tok, s); got != want {
					t.Errorf("null %v, lengths %v: %q accepted %v, want %v", null, r, s, got, want)
				}
			}
		}
	}
}

// rawStringGrammar is the grammar of the raw text of a string schema's
// values, null among them if null is set.
func rawStringGrammar(t *testing.T, v *Vocab, schema string, null bool) *Grammar {
	t.Helper()
	b := NewBuilder()
	x := newXMLCompiler(b, newJSONRules(b))
	c := newSchemaCompiler(x.j, json.RawMessage(schema))
	n, _, err := c.parse(json.RawMessage(schema), "")
	if err != nil {
		t.Fatal(err)
	}
	e, err := x.typedString(c, n, "", null)
	if err != nil {
		t.Fatal(err)
	}
	g, err := b.Build(b.New("root", []Elem{e}), v)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestXMLPatternExact: a raw string held to a pattern takes exactly the
// strings the pattern matches, but those with a '<' and, unless null is
// allowed beside, "null" in any case.
func TestXMLPatternExact(t *testing.T) {
	v, tok := qwenVocab(t)
	for _, null := range []bool{false, true} {
		g := rawStringGrammar(t, v, `{"type": "string", "pattern": "^[a-zA-Z<]{3,4}$|^é+$"}`, null)
		for _, s := range []string{"abc", "abcd", "ab", "abcde", "null", "NuLl", "nul", "a<c", "ééé", "é", "", "abc\n"} {
			want := (regexp.MustCompile(`^[a-zA-Z<]{3,4}$|^é+$`).MatchString(s)) && !strings.Contains(s, "<") && (null || !strings.EqualFold(s, "null"))
			if got := accepts(g, tok, s); got != want {
				t.Errorf("null %v: %q accepted %v, want %v", null, s, got, want)
			}
		}
	}
}

// TestXMLPatternNonASCII: a raw string held to a pattern and to lengths
// the automaton does not keep by itself takes non-ASCII characters, and
// a token that ends inside one leaves a way on.
func TestXMLPatternNonASCII(t *testing.T) {
	v, tok := qwenVocab(t)
	const pattern = `^[^x]+y$`
	g := rawStringGrammar(t, v, `{"type": "string", "pattern": "`+pattern+`", "minLength": 3, "maxLength": 5}`, false)
	for _, s := range []string{"éày", "aé€by", "ay", "abcdey", "a<y", "énully"} {
		want := regexp.MustCompile(pattern).MatchString(s) && !strings.Contains(s, "<") && utf8.RuneCountInString(s) >= 3 && utf8.RuneCountInString(s) <= 5
		if got := accepts(g, tok, s); got != want {
			t.Errorf("%q accepted %v, want %v", s, got, want)
		}
	}
	cuts, texts := cuttingWalks(t, g, 30, 20)
	for _, s := range texts {
		if n := utf8.RuneCountInString(s); !regexp.MustCompile(pattern).MatchString(s) || strings.Contains(s, "<") || n < 3 || n > 5 {
			t.Fatalf("%q is not allowed", s)
		}
	}
	if cuts == 0 || len(texts) == 0 {
		t.Fatalf("%d tokens ending inside a character taken, %d walks complete", cuts, len(texts))
	}
}

// accepts reports whether g takes exactly the text s, fed token by token
// as the tokenizer cuts it (or byte by byte where it cannot).
func accepts(g *Grammar, tok *tokenizer.Tokenizer, s string) bool {
	m := g.NewMatcher()
	mask := g.vocab.NewMask()
	for _, id := range tok.Encode(s, false) {
		m.Fill(mask)
		if !mask.Has(id) || m.Accept(id) != nil {
			return false
		}
	}
	m.Fill(mask)
	for _, e := range g.vocab.eos {
		if mask.Has(e) {
			return true
		}
	}
	return false
}

// TestXMLRefusals: what the qwen3_coder format cannot hold a value to is
// refused, naming the keyword and where it is.
func TestXMLRefusals(t *testing.T) {
	v, tok := qwenVocab(t)
	for _, c := range []struct{ params, want string }{
		{`{"type": "object", "properties": {"p": {"type": "string", "pattern": "^<+$"}}}`, `json schema /properties/p: pattern: no string it allows can be written raw`},
		{`{"type": "object", "properties": {"p": {"type": ["object", "string"]}}}`, `/properties/p: type: object in a list of types`},
		{`{"type": "object", "properties": {"p": {"type": "String"}}}`, `/properties/p: type: "String" is not a JSON Schema type`},
		{`{"type": "object", "properties": {"p": {"minimum": 3}}}`, `/properties/p: type: missing: the parser reads such a value as a string`},
		{`{"type": "object", "properties": {"p": {"anyOf": [{"type": "object"}, {"type": "integer"}]}}}`, `/properties/p/anyOf/0: type: the parser reads a value whose schema names no type as a string or null`},
		{`{"type": "object", "properties": {"p": {"enum": [1, 2]}}, "required": ["p"]}`, `/properties/p: enum: no value is a string or null`},
		{`{"type": "object", "properties": {"a>b": {"type": "string"}}, "required": ["a>b"]}`, `"a>b": a name with '<', '>' or a line break`},
		{`{"type": "object", "minProperties": 1}`, `#: minProperties: not supported on the parameters of a call`},
		{`{"type": "array"}`, `#: type: the parameters of a call are an object`},
		{`{"type": "object", "required": ["q"], "additionalProperties": false}`, `"q" is not in properties`},
		{`{"type": "object", "properties": {"p": {"type": "array", "items": {"const": "<"}, "minItems": 1}}}`, `/properties/p: type: its values need a '<'`},
	} {
		_, err := Compile(v, xmlAnswer(t, tok, []Tool{{Name: "f", Parameters: json.RawMessage(c.params)}}))
		var se *SchemaError
		if err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), `tool "f": parameters: `) {
			t.Errorf("%s: error %v, want a SchemaError containing %q", c.params, err, c.want)
		}
	}
	// A tool whose name the parser would cut is left out, and refused
	// when it is the one asked for.
	a := xmlAnswer(t, tok, []Tool{{Name: "a>b"}})
	a.Choice, a.Function = "function", "a>b"
	if _, err := Compile(v, a); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("tool %q: a name with", "a>b")) {
		t.Errorf("tool a>b: %v", err)
	}
}
