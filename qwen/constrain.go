package qwen

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/qwenc/qwenc/chat"
	"github.com/qwenc/qwenc/grammar"
)

// SchemaError is a JSON Schema that uses what cannot be enforced: the
// keyword and where it is. Such a request is refused, never answered
// unconstrained.
type SchemaError = grammar.SchemaError

// grammars compiles the grammars of constrained requests and keeps the
// last ones: an agent sends the same tools and schemas turn after turn.
type grammars struct {
	mu    sync.Mutex
	vocab *grammar.Vocab
	byKey map[string]*grammar.Grammar
	order []string
}

// maxGrammars bounds the compiled grammars a Model keeps.
const maxGrammars = 32

// constraint makes the matcher that holds a request's answer, or nil
// when the request asks for none.
func (m *Model) constraint(r *Request) (*grammar.Matcher, error) {
	if r.JSONSchema == nil && !r.JSONObject && len(r.Tools) == 0 {
		if r.ToolChoice != "" || r.ToolName != "" || r.OneToolCall {
			return nil, errors.New("ToolChoice, ToolName and OneToolCall need Tools")
		}
		return nil, nil
	}
	if r.IgnoreEOS {
		return nil, errors.New("IgnoreEOS would generate past the end a schema or a tool call sets")
	}
	a := grammar.Answer{Schema: r.JSONSchema, Object: r.JSONObject, Choice: r.ToolChoice, Function: r.ToolName, OneCall: r.OneToolCall}
	switch a.Choice {
	case "", "auto", "none", "required":
	default:
		return nil, fmt.Errorf("ToolChoice %q: want auto, none or required", a.Choice)
	}
	if a.Function != "" {
		if a.Choice == "none" {
			return nil, errors.New("ToolName forces a call, which ToolChoice none forbids")
		}
		a.Choice = "function"
	}
	tok := m.m.Tokenizer
	id := func(s string) int32 {
		v, _ := tok.TokenID(s)
		return v
	}
	if r.Messages != nil && m.family == chat.Qwen3 && !r.NoThinking {
		a.Think, a.ThinkOpen, a.ThinkClose = true, id(chat.ThinkOpen), id(chat.ThinkClose)
	}
	if len(r.Tools) > 0 {
		a.CallOpen, a.CallClose = id(chat.ToolCallOpen), id(chat.ToolCallClose)
		for _, t := range r.Tools {
			a.Tools = append(a.Tools, grammar.Tool{Name: t.Name, Parameters: t.Parameters})
		}
	}
	g, err := m.grammars.get(m, a)
	if err != nil {
		return nil, err
	}
	return g.NewMatcher(), nil
}

func (gs *grammars) get(m *Model, a grammar.Answer) (*grammar.Grammar, error) {
	key, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g, ok := gs.byKey[string(key)]; ok {
		return g, nil
	}
	if gs.vocab == nil {
		gs.vocab = grammar.VocabOf(m.m.Tokenizer, m.m.Config.Vocab, m.stopIDs)
		gs.byKey = map[string]*grammar.Grammar{}
	}
	g, err := grammar.Compile(gs.vocab, a)
	if err != nil {
		return nil, err
	}
	if len(gs.order) >= maxGrammars {
		delete(gs.byKey, gs.order[0])
		gs.order = gs.order[1:]
	}
	gs.byKey[string(key)] = g
	gs.order = append(gs.order, string(key))
	return g, nil
}
