package qwen

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/runtime/engine"
	"github.com/qwenc/qwenc/runtime/grammar"
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

// constraint makes what holds a request's answer: its grammar and its
// thinking budget; nil when it asks for neither.
func (m *Model) constraint(r *Request) (engine.Constraint, error) {
	g, err := m.grammarOf(r)
	if err != nil {
		return nil, err
	}
	var c engine.Constraint
	if g != nil {
		c = g
	}
	th, thinks := m.thinking(r)
	switch {
	case r.ThinkBudget < 0:
		return nil, fmt.Errorf("ThinkBudget %d: want 0 (no bound) or more", r.ThinkBudget)
	case r.ThinkBudget == 0:
		return c, nil
	case !thinks:
		return nil, errors.New("ThinkBudget bounds the model's thinking: it needs a conversation, with thinking on, with a model whose chat template thinks")
	}
	tok := m.m.Tokenizer
	open, _ := tok.TokenID(th.Open)
	close, _ := tok.TokenID(th.Close)
	at := thought{left: r.ThinkBudget}
	if th.Opened {
		at.phase = thinkIn // the prompt opened the reasoning
	}
	return &budget{inner: c, open: open, close: close, at: at}, nil
}

// thinking is how the answer to r reasons: ok when it is a conversation
// with a model that thinks, thinking on.
func (m *Model) thinking(r *Request) (chat.Thinking, bool) {
	if r.Messages == nil || m.format == nil || r.NoThinking {
		return chat.Thinking{}, false
	}
	return m.format.Thinking()
}

// grammarOf makes the matcher of a request's grammar, or nil when it asks
// for none.
func (m *Model) grammarOf(r *Request) (*grammar.Matcher, error) {
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
	if th, ok := m.thinking(r); ok {
		a.Think, a.ThinkOpened, a.ThinkOpen, a.ThinkClose = true, th.Opened, id(th.Open), id(th.Close)
	}
	if len(r.Tools) > 0 {
		// render refused tools to a model without a tool format.
		a.Call, _ = m.format.CallSyntax()
		a.CallOpen, a.CallClose = id(a.Call.Open), id(a.Call.Close)
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

// budget makes a model think, within a number of tokens: the answer
// opens with <think> (unless the prompt did), as the template expects
// with thinking on (and as the grammar of a constrained answer has it),
// so a request for thinking gets some even from a model that would not
// start it; after the budget only </think> may come, as llama.cpp's
// --reasoning-budget does. It wraps the request's grammar, if there is
// one.
type budget struct {
	inner       engine.Constraint // nil: no grammar
	open, close int32
	at          thought
}

// thought is where the answer is in its reasoning: before <think>, in it
// with left tokens of the budget, or past </think>.
type thought struct {
	phase int // thinkBefore, thinkIn, thinkDone
	left  int
}

const (
	thinkBefore = iota
	thinkIn
	thinkDone
)

// only is the one token the budget allows at t, or -1 when it leaves the
// choice to the grammar: <think> first, </think> once the budget is spent.
func (b *budget) only(t thought) int32 {
	switch {
	case t.phase == thinkBefore:
		return b.open
	case t.phase == thinkIn && t.left <= 0:
		return b.close
	}
	return -1
}

// next is where id, allowed at t, leaves the answer.
func (b *budget) next(t thought, id int32) thought {
	switch {
	case t.phase == thinkBefore: // id is <think>
		t.phase = thinkIn
	case t.phase == thinkIn && id == b.close:
		t.phase = thinkDone
	case t.phase == thinkIn:
		t.left--
	}
	return t
}

func (b *budget) Allow(logits []float32) {
	if id := b.only(b.at); id >= 0 {
		keep := logits[id]
		for i := range logits {
			logits[i] = float32(math.Inf(-1))
		}
		logits[id] = keep
		return
	}
	if b.inner != nil {
		b.inner.Allow(logits)
	}
}

func (b *budget) Accept(id int32) error {
	if want := b.only(b.at); want >= 0 && id != want {
		return fmt.Errorf("token %d where the thinking budget allows only %d", id, want)
	}
	b.at = b.next(b.at, id)
	if b.inner != nil {
		return b.inner.Accept(id)
	}
	return nil
}

// Prefix follows the budget over ids as Accept would, without taking
// them; the grammar's own prefix bounds it too.
func (b *budget) Prefix(ids []int32) int {
	at := b.at
	n := len(ids)
	for i, id := range ids {
		if want := b.only(at); want >= 0 && id != want {
			n = i
			break
		}
		at = b.next(at, id)
	}
	if b.inner != nil {
		n = b.inner.Prefix(ids[:n])
	}
	return n
}

func (b *budget) Done() bool { return b.inner != nil && b.inner.Done() }
