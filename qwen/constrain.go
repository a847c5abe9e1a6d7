package qwen

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/runtime/engine"
	"github.com/qwenc/qwenc/runtime/grammar"
)

// SchemaError is a JSON Schema that uses what cannot be enforced: the
// keyword and where it is. Such a request is refused, never answered
// unconstrained.
type SchemaError = grammar.SchemaError

// Relaxation is a keyword of a request's schemas that the grammar could
// not enforce and held to less (a tool's parameters', or JSONSchema's
// with RelaxSchema): the answer may not be valid for it. See
// Stream.Relaxed.
type Relaxation = grammar.Relaxation

// grammars compiles the grammars of constrained requests and keeps the
// last ones used, by a hash of what they were compiled from: an agent
// sends the same tools and schemas turn after turn, and a grammar met
// again costs a hash.
type grammars struct {
	mu    sync.Mutex
	vocab *grammar.Vocab
	byKey map[[sha256.Size]byte]*grammar.Grammar
	order [][sha256.Size]byte // least recently used first
}

// maxGrammars bounds the compiled grammars a Model keeps.
const maxGrammars = 32

// constraint makes what holds a request's answer: its grammar, complete
// within limit tokens (its end included; limit < 0: no bound), and its
// thinking budget; nil when it asks for neither. It returns the
// grammar's relaxations too.
func (m *Model) constraint(r *Request, limit int) (engine.Constraint, []Relaxation, error) {
	g, err := m.grammarOf(r)
	if err != nil {
		return nil, nil, err
	}
	var c engine.Constraint
	var relaxed []Relaxation
	if g != nil {
		// Near the end of the tokens allowed, the grammar closes the
		// thinking and takes the shortest way to a complete answer: a
		// structured answer never ends cut off.
		mt := g.NewMatcher()
		if limit >= 0 {
			mt.Limit(limit)
		}
		c, relaxed = mt, g.Relaxed()
	}
	th, thinks := m.thinking(r)
	switch {
	case r.ThinkBudget < 0:
		return nil, nil, fmt.Errorf("ThinkBudget %d: want 0 (no bound) or more", r.ThinkBudget)
	case r.ThinkBudget > 0 && !thinks:
		return nil, nil, errors.New("ThinkBudget bounds the model's thinking: it needs a conversation, with thinking on, with a model whose chat template thinks")
	case r.ThinkBudget == 0 && (g == nil || !thinks || limit < 0):
		return c, relaxed, nil
	}
	tok := m.m.Tokenizer
	open, _ := tok.TokenID(th.Open)
	close, _ := tok.TokenID(th.Close)
	b := &budget{inner: c, open: open, close: close, forceOpen: r.ThinkBudget > 0, at: thought{left: r.ThinkBudget, limit: limit}}
	if th.Opened {
		b.at.phase = thinkIn // the prompt opened the reasoning
	}
	if r.ThinkBudget == 0 {
		b.at.left = math.MaxInt
	}
	if mt, ok := c.(*grammar.Matcher); ok {
		b.grammar = mt
	}
	return b, relaxed, nil
}

// thinking is how the answer to r reasons: ok when it is a conversation
// with a model that thinks, thinking on.
func (m *Model) thinking(r *Request) (chat.Thinking, bool) {
	if r.Messages == nil || m.format == nil || r.NoThinking {
		return chat.Thinking{}, false
	}
	return m.format.Thinking()
}

// grammarOf makes a request's grammar, or nil when it asks for none.
func (m *Model) grammarOf(r *Request) (*grammar.Grammar, error) {
	if r.JSONSchema == nil && !r.JSONObject && len(r.Tools) == 0 {
		if r.ToolChoice != "" || r.ToolName != "" || r.OneToolCall {
			return nil, errors.New("ToolChoice, ToolName and OneToolCall need Tools")
		}
		return nil, nil
	}
	if r.IgnoreEOS {
		return nil, errors.New("IgnoreEOS would generate past the end a schema or a tool call sets")
	}
	if r.JSONSchema != nil && r.JSONObject {
		// The schema would win, and the object the caller asked for be
		// dropped without a word.
		return nil, errors.New("JSONSchema and JSONObject: give one")
	}
	if len(r.JSONSchema) > 0 {
		// Checked here, or it fails later as the grammar's cache key,
		// with an error of encoding/json's that names no field.
		var v any
		if err := json.Unmarshal(r.JSONSchema, &v); err != nil {
			return nil, fmt.Errorf("JSONSchema is not JSON: %w", err)
		}
	}
	a := grammar.Answer{Schema: r.JSONSchema, Object: r.JSONObject, Strict: !r.RelaxSchema, Choice: r.ToolChoice, Function: r.ToolName, OneCall: r.OneToolCall}
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
	return m.grammars.get(m, a)
}

func (gs *grammars) get(m *Model, a grammar.Answer) (*grammar.Grammar, error) {
	// Every field of the answer is in its JSON, whatever fields it gets.
	text, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	key := sha256.Sum256(text)
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g, ok := gs.byKey[key]; ok {
		i := slices.Index(gs.order, key)
		gs.order = append(slices.Delete(gs.order, i, i+1), key)
		return g, nil
	}
	if gs.vocab == nil {
		gs.vocab = grammar.VocabOf(m.m.Tokenizer, m.m.Config.Vocab, m.stopIDs)
		gs.byKey = map[[sha256.Size]byte]*grammar.Grammar{}
	}
	g, err := grammar.Compile(gs.vocab, a)
	if err != nil {
		return nil, err
	}
	if len(gs.order) >= maxGrammars {
		delete(gs.byKey, gs.order[0])
		gs.order = slices.Delete(gs.order, 0, 1)
	}
	gs.byKey[key] = g
	gs.order = append(gs.order, key)
	return g, nil
}

// budget makes a model think, within a number of tokens: with a
// ThinkBudget the answer opens with <think>, as the template expects
// with thinking on (and as the grammar of a constrained answer has it),
// so a request for thinking gets some even from a model that would not
// start it; after the budget only </think> may come, as llama.cpp's
// --reasoning-budget does. Under a grammar, the thinking is closed too
// when what is left of the answer's tokens comes down to twice what the
// shortest answer needs (and a few): room for an answer, not only for
// the grammar's shortest way to one. It wraps the request's grammar, if
// there is one.
type budget struct {
	inner       engine.Constraint // nil: no grammar
	grammar     *grammar.Matcher  // the grammar's matcher, whose rest sets when to close
	open, close int32
	forceOpen   bool // <think> is forced first, not left to the grammar
	at          thought
}

// thought is where the answer is in its reasoning: before <think>, in it
// with left tokens of the budget, or past </think>; and the tokens the
// answer may still take (limit; < 0: no bound).
type thought struct {
	phase       int // thinkBefore, thinkIn, thinkDone
	left, limit int
}

const (
	thinkBefore = iota
	thinkIn
	thinkDone
)

// closeReserve is the tokens the thinking leaves the answer beyond twice
// the shortest one's.
const closeReserve = 8

// only is the one token the budget allows at t, or -1 when it leaves the
// choice to the grammar: <think> first, </think> once the budget is spent
// or what is left would leave the answer too little.
func (b *budget) only(t thought) int32 {
	switch {
	case t.phase == thinkBefore && b.forceOpen:
		return b.open
	case t.phase == thinkIn && t.left <= 0:
		return b.close
	case t.phase == thinkIn && t.limit >= 0 && b.grammar != nil && t.limit <= 2*b.grammar.Remaining()+closeReserve:
		return b.close
	}
	return -1
}

// next is where id, allowed at t, leaves the answer.
func (b *budget) next(t thought, id int32) thought {
	switch {
	case t.phase == thinkBefore && id == b.open:
		t.phase = thinkIn
	case t.phase == thinkIn && id == b.close:
		t.phase = thinkDone
	case t.phase == thinkIn:
		t.left--
	}
	if t.limit > 0 {
		t.limit--
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
