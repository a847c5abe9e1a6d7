package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/qwenc/qwenc/format/chat"
)

// Answer describes what an assistant's answer may be, for Compile.
type Answer struct {
	// Think is a model that thinks: the answer opens with the ThinkOpen
	// token, reasons freely and closes with ThinkClose; what follows is
	// held. This is the lazy start structured output needs with
	// reasoning on: the grammar does not bind the reasoning. With
	// ThinkOpened the prompt opened the reasoning already, and the answer
	// begins in it.
	Think                 bool
	ThinkOpened           bool
	ThinkOpen, ThinkClose int32

	// Schema, when not nil, is the JSON Schema the content is an instance
	// of; Object asks for any JSON object instead.
	Schema json.RawMessage
	Object bool
	// Strict refuses a keyword of Schema that the grammar cannot enforce
	// (a *SchemaError); otherwise it is relaxed, as a tool's parameters'
	// always are (see Grammar.Relaxed).
	Strict bool

	// Tools are the functions the answer may call, each call written as
	// Call says (its chat format's syntax), between the CallOpen and
	// CallClose tokens, its markers.
	Tools               []Tool
	Call                chat.CallSyntax
	CallOpen, CallClose int32
	// Choice is "auto" (text, then calls if any), "none" (text only),
	// "required" (calls only) or "function" (a call of Function only).
	// With Schema or Object too, the text is the JSON value: "auto" is
	// the value or calls, "none" the value, and a call forced is the
	// answer, the value being a later answer's, as agents ask for a
	// structured final answer after their tools' calls.
	Choice   string
	Function string
	// OneCall allows one call at most.
	OneCall bool
}

// Tool is a function an answer may call.
type Tool struct {
	Name       string
	Parameters json.RawMessage // its arguments' JSON Schema; nil for any object
}

// Compile makes the grammar of the answers a describes.
func Compile(v *Vocab, a Answer) (*Grammar, error) {
	b := NewBuilder()
	j := newJSONRules(b)
	var content Elem
	var relaxed []Relaxation
	nl := b.Repeat("newlines", b.Lit("\n"), 0, 2) // the template's blank line after </think>
	var value Elem
	hasValue := a.Schema != nil || a.Object
	if hasValue {
		value = j.object
		if a.Schema != nil {
			var err error
			if value, relaxed, err = schemaRule(j, a.Schema, a.Strict); err != nil {
				return nil, err
			}
		}
		value = Ref(b.New("content", Seq(nl, value)))
	}
	switch {
	case len(a.Tools) == 0 && !hasValue:
		return nil, errors.New("nothing to hold the answer to: give a schema, an object or tools")
	case len(a.Tools) == 0 || hasValue && a.Choice == "none":
		content = value
	default:
		calls := a
		if hasValue && (a.Choice == "" || a.Choice == "auto") {
			calls.Choice = "required" // the value, or calls without text
		}
		var rs []Relaxation
		var err error
		if content, rs, err = toolAnswer(b, j, calls, nl); err != nil {
			return nil, err
		}
		relaxed = append(relaxed, rs...)
		if calls.Choice != a.Choice {
			content = b.Alt("value-or-calls", []Elem{value}, []Elem{content})
		}
	}
	root := []Elem{content}
	if a.Think {
		// A model that thinks opens its answer with a think block (or its
		// prompt did), and its template expects one; the reasoning in it
		// is free.
		var all ByteSet
		all.Add(0, 0xff)
		reasoning := b.Repeat("reasoning", []Elem{b.Set(all)}, 0, -1)
		root = Seq(reasoning, Token(a.ThinkClose), content)
		if !a.ThinkOpened {
			root = append([]Elem{Token(a.ThinkOpen)}, root...)
		}
	}
	g, err := b.Build(b.New("root", root), v)
	if err != nil {
		return nil, err
	}
	g.relaxed = relaxed
	return g, nil
}

// toolAnswer is text and calls as the tool choice allows.
func toolAnswer(b *Builder, j *jsonRules, a Answer, nl Elem) (Elem, []Relaxation, error) {
	s := a.Call
	switch {
	case s.Open == "" || s.Close == "":
		return Elem{}, nil, errors.New("tools without the syntax of their calls (Answer.Call, from the chat format)")
	case s.Arguments != chat.JSONArguments && s.Arguments != chat.XMLParameters:
		return Elem{}, nil, fmt.Errorf("tool calls whose arguments are %v (%s...%s): a grammar cannot hold them", s.Arguments, s.Open, s.Close)
	}
	var xml *xmlCompiler
	if s.Arguments == chat.XMLParameters {
		xml = newXMLCompiler(b, j)
	}
	var alts [][]Elem
	var relaxed []Relaxation
	for _, t := range a.Tools {
		if a.Choice == "function" && t.Name != a.Function {
			continue
		}
		var args Elem
		var err error
		var rs []Relaxation
		switch {
		case xml != nil:
			if strings.ContainsAny(t.Name, "<>\n") {
				// The parser takes the name to the first '>'.
				if a.Choice == "function" {
					return Elem{}, nil, fmt.Errorf("tool %q: a name with '<', '>' or a line break cannot be written in the %v call format", t.Name, s.Arguments)
				}
				continue
			}
			args, err = xml.arguments(t.Parameters)
		case t.Parameters == nil:
			args = j.object
		default:
			args, rs, err = schemaRule(j, t.Parameters, false)
		}
		if err != nil {
			var se *SchemaError
			if errors.As(err, &se) {
				return Elem{}, nil, fmt.Errorf("tool %q: parameters: %w", t.Name, err)
			}
			return Elem{}, nil, err
		}
		for _, r := range rs {
			r.Tool = t.Name
			relaxed = append(relaxed, r)
		}
		alts = append(alts, Seq(b.Lit(t.Name), b.Lit(s.Mid), args))
	}
	if len(alts) == 0 {
		return Elem{}, nil, fmt.Errorf("tool_choice names %q, which is not among the tools", a.Function)
	}
	call := Seq(Token(a.CallOpen), b.Lit(s.Head), b.Alt("function", alts...), b.Lit(s.Tail), Token(a.CallClose))
	calls := Ref(b.New("call", call))
	if !a.OneCall {
		calls = Ref(b.New("calls", Seq(call, b.Repeat("more-calls", Seq(b.Lit(s.Sep), call), 0, -1))))
	}
	starts := s.Starts
	if len(starts) == 0 {
		starts = []string{s.Open}
	}
	text := textWithout(b, starts...)
	switch a.Choice {
	case "", "auto":
		return Ref(b.New("text-then-calls", Seq(text, b.Optional("calls", []Elem{calls})))), relaxed, nil
	case "none":
		return text, relaxed, nil
	case "required", "function":
		return Ref(b.New("calls-only", Seq(nl, calls))), relaxed, nil
	}
	return Elem{}, nil, fmt.Errorf("tool choice %q: want auto, none, required or function", a.Choice)
}
