package qwen

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/runtime/engine"
	"github.com/qwenc/qwenc/runtime/sampling"
)

// Message is one turn of a conversation: Role "system", "user",
// "assistant" or "tool", its Content, for an earlier answer of a model
// that thinks its Reasoning, and for an answer that called tools its
// ToolCalls (a "tool" message that follows is a call's result). Message
// text is always text: a user who types "<|im_end|>" cannot close a turn
// or open one.
type Message = chat.Message

// ToolCall is a call an earlier answer made: the function's Name and its
// Arguments, the JSON text of an object. Arguments that are not (a call
// cut off when its run was interrupted, say) are rendered as they are:
// the history is what the model wrote.
type ToolCall = chat.ToolCall

// Tool is a function the model may call. Make one with NewTool, or
// ParseTool for a definition as OpenAI and Ollama clients send it.
type Tool = chat.Tool

// NewTool defines a function: its name, what it does, and the JSON Schema
// of its arguments (nil for none).
func NewTool(name, description string, parameters json.RawMessage) (Tool, error) {
	return chat.NewTool(name, description, parameters)
}

// ParseTool reads a tool definition as OpenAI and Ollama clients send it:
// {"type": "function", "function": {"name", "description", "parameters"}}.
// The prompt lists it whole, as the chat template does.
func ParseTool(def []byte) (Tool, error) { return chat.ParseTool(def) }

// MaxStops bounds a request's stop strings: each is looked for after
// every token.
const MaxStops = 16

// MaxTopLogprobs bounds Request.TopLogprobs, as OpenAI does.
const MaxTopLogprobs = 20

// MaxLogitBias bounds Request.LogitBias's values, as OpenAI does.
const MaxLogitBias = 100

// Request is one generation: a chat (Messages) or a raw completion
// (Prompt, or Tokens), and how to generate.
type Request struct {
	// Messages is a conversation, rendered with the model's chat template
	// and answered as the assistant. A system message after the first is
	// a system turn where it comes, also where the template refuses one
	// (Qwen3.5's), since agents send them mid-conversation.
	Messages []Message
	// Prompt is raw text to continue; added tokens written in it
	// (<|im_start|>, ...) are recognised, as Hugging Face's tokenizer does.
	Prompt string
	// Tokens is a raw prompt as token ids.
	Tokens []int32
	// Tools are functions the model may call, listed in the prompt as the
	// chat template lists them (ChatFormat().CallSyntax says whether it
	// has a tool format: Qwen2.5's and later do); the calls it makes
	// come out of the answer's text as Delta.ToolCalls. They need
	// Messages.
	Tools []Tool
	// ToolChoice, with Tools, is "auto" (or ""): the answer may be text,
	// but a call it opens is held to the tools' names and parameters;
	// "none": no call; "required": calls only. ToolName forces a call of
	// that tool alone, and OneToolCall allows one call at most.
	ToolChoice  string
	ToolName    string
	OneToolCall bool
	// JSONSchema holds the answer's content to a JSON Schema (what is
	// supported is in package grammar's Schema; a schema using more is
	// refused with a *SchemaError, unless RelaxSchema), and JSONObject to
	// any JSON object: one of the two, not both. The reasoning of a model that thinks stays free:
	// the content after it is held. The answer ends when the value is
	// complete. With Tools too, it is the final answer's: with ToolChoice
	// "auto" the answer is the value or tool calls, never free text.
	JSONSchema json.RawMessage
	JSONObject bool
	// RelaxSchema holds the answer to less than a keyword of JSONSchema
	// that the grammar cannot enforce (a superset of its instances), as a
	// non-strict structured output asks, instead of refusing the request:
	// Stream.Relaxed lists those keywords. Tools' parameters are always
	// relaxed so.
	RelaxSchema bool
	// ThinkBudget, when not 0, makes a model that thinks (its
	// ChatFormat's Thinking) think within that many tokens: the answer
	// opens with <think> (as the template expects with thinking on, even
	// from a model that would not start it; unless the prompt opened
	// it), and </think> is forced once the reasoning has that many
	// tokens (as llama.cpp's --reasoning-budget); the answer then
	// follows.
	ThinkBudget int
	// NoThinking makes a model that thinks answer without thinking (the
	// template's empty think block, as enable_thinking=false); other
	// models ignore it.
	NoThinking bool
	// PreserveThinking keeps the reasoning of every earlier answer in the
	// prompt, as Qwen3.6's preserve_thinking=true, where the template
	// otherwise keeps only the reasoning after the last user message;
	// templates without the switch ignore it.
	PreserveThinking bool
	// Sampling is how to pick each token; nil is the model's generation
	// config (Info.Sampling) with a random seed. Its values are held to
	// the ranges of sampling.Settings.
	Sampling *sampling.Params
	// MaxTokens bounds the tokens generated; 0 generates until the model
	// ends its answer or the context is full.
	MaxTokens int
	// PromptOnly evaluates the prompt and generates nothing: its KV cache
	// is kept, for PromptLogits or for later requests that start with it.
	PromptOnly bool
	// Context, when not 0, bounds the prompt and the answer together
	// below the model's context, as Ollama's num_ctx: an answer it cuts
	// ends with StopLength, as one MaxTokens cuts.
	Context int
	// Stop strings end the answer before the first of them; none is ever
	// part of a Delta (text that could begin one is held back until the
	// next token decides). At most MaxStops, none empty.
	Stop []string
	// LogitBias is added to the logits of its token ids before sampling,
	// each at most MaxLogitBias either way (OpenAI's logit_bias: -100
	// bans a token, 100 all but forces it). Log-probabilities are the
	// model's, without it.
	LogitBias map[int32]float32
	// Logprobs asks for the log-probability of every content token, and
	// TopLogprobs (up to MaxTopLogprobs) for that many most likely tokens
	// at each step too.
	Logprobs    bool
	TopLogprobs int
	// PromptLogits asks for the logits of the prompt's last position in
	// the first Delta.
	PromptLogits bool
	// IgnoreEOS generates past the tokens that end an answer, as vLLM's
	// ignore_eos: for benchmarks, which need their token counts.
	IgnoreEOS bool
	// KV is this conversation's KV cache type, "f16" or "q8"; "" is the
	// Model's (WithKVType).
	KV string
	// Draft is the most tokens drafted from the text (the prompt, the
	// answer so far and Prediction) and checked in one decode step; 0
	// drafts nothing. The text is the same as without: the drafted tokens
	// are kept only where the model picks them, with sampling too, so
	// the text's distribution is the model's. Under a schema's or tools'
	// constraint, a draft is cut at the first token the grammar refuses.
	Draft int
	// DraftModel is the most tokens the draft model (WithDraftModel)
	// guesses for one step where the text offers no draft; 0 asks it for
	// nothing. Its guesses are checked as the text's are.
	DraftModel int
	// DraftPMin stops the draft model's guesses at the first it gives a
	// probability below DraftPMin; 0 is DefaultDraftPMin, and a negative
	// value never stops them. It does not cut the MTP head's chains.
	DraftPMin float64
	// DraftMTP is the most tokens the model's own MTP head guesses for
	// one step where the text offers no draft, each from the one before
	// (a chain); 0 asks it for nothing. It needs WithMTP. The first guess
	// is kept most often (0.90 on the Qwen3.5 demo's Go prompts), the
	// ones after it less: DefaultDraftMTP.
	DraftMTP int
	// DraftMin is the fewest tokens worth drafting (default 1).
	DraftMin int
	// Prediction is text the answer is expected to repeat, drafted first
	// (OpenAI's Predicted Outputs: the file being edited). It needs Draft.
	Prediction string
}

// Reasoning efforts, as OpenAI's reasoning.effort, Anthropic's
// output_config.effort and Ollama's think levels name them, and the
// thinking budget each gives (ThinkEffort): a number of tokens, at most a
// share of MaxTokens so that the answer has room. The largest efforts
// leave the model its own length.
var thinkEfforts = map[string]struct {
	share  float64
	tokens int
}{"low": {0.25, 1024}, "medium": {0.5, 4096}, "high": {0.75, 16384}, "xhigh": {}, "max": {}}

// ThinkEffort sets the request's thinking from a reasoning effort, as
// OpenAI's reasoning.effort, Anthropic's output_config.effort and
// Ollama's think levels name it: "none" and "minimal" answer without
// thinking (NoThinking); "low", "medium" and "high" think within 1024,
// 4096 and 16384 tokens (ThinkBudget), at most a quarter, a half and
// three quarters of MaxTokens, leaving the rest to the answer; "xhigh"
// and "max" think with no budget but MaxTokens. Set MaxTokens first.
// ThinkBudget needs a Qwen3 model with thinking on; a server calls this
// for those.
func (r *Request) ThinkEffort(effort string) error {
	switch effort {
	case "none", "minimal":
		r.NoThinking, r.ThinkBudget = true, 0
		return nil
	}
	e, ok := thinkEfforts[effort]
	if !ok {
		return fmt.Errorf("reasoning effort %q: want none, minimal, low, medium, high, xhigh or max", effort)
	}
	r.NoThinking, r.ThinkBudget = false, e.tokens
	if r.MaxTokens > 0 && e.tokens > 0 {
		r.ThinkBudget = min(e.tokens, max(int(e.share*float64(r.MaxTokens)), 1))
	}
	return nil
}

// DefaultDraft is a good Draft for drafts from the text: the steps that
// check 16 tokens cost little more than one when they are wrong, and the
// length backs off when they keep being wrong.
const DefaultDraft = 16

// DefaultDraftModel is a good DraftModel: each guess costs a step of the
// draft model, and few runs of 8 guesses are all right.
const DefaultDraftModel = 8

// DefaultDraftMTP is a good DraftMTP: chains of two guesses. With the
// trained Qwen3.5 demo's rates (2.35 tokens a step in chains of 2, 1.82
// with one guess) and the step costs bench-draft measures at q4, they
// project 1.66x on the Qwen3.5-4B shape (one guess: 1.37x) and 1.47x on
// the 35B-A3B (1.35x); chains of 3 gain little more on the dense model
// and lose on the mixture, whose every checked token reads its own
// experts.
const DefaultDraftMTP = 2

// DefaultDraftPMin is llama.cpp's default confidence under which a draft
// model stops guessing.
const DefaultDraftPMin = 0.75

// prompt is a request made ready for the engine.
type prompt struct {
	req     engine.Request
	chat    bool // the text goes through the reasoning split
	opts    chat.Options
	relaxed []Relaxation // the schema keywords the grammar relaxed
}

// encode renders and tokenizes the request's prompt, with the generation
// prompt (the opening of the assistant's turn) after a conversation.
func (m *Model) encode(r *Request, generationPrompt bool) ([]int32, bool, error) {
	segs, isChat, err := m.render(r, generationPrompt)
	switch {
	case err != nil:
		return nil, false, err
	case isChat:
		ids, err := chat.Encode(m.m.Tokenizer, segs)
		return ids, true, err
	case r.Tokens != nil:
		// A copy: the engine reads the prompt after Start returns, and
		// the caller may reuse its buffer by then.
		return slices.Clone(r.Tokens), false, nil
	}
	return m.m.Tokenizer.Encode(r.Prompt, true), false, nil
}

// render checks the request's prompt and renders a conversation's; a
// raw prompt (Prompt or Tokens) is not a chat and has no segments.
func (m *Model) render(r *Request, generationPrompt bool) ([]chat.Segment, bool, error) {
	given := 0
	for _, set := range []bool{r.Messages != nil, r.Prompt != "", r.Tokens != nil} {
		if set {
			given++
		}
	}
	switch {
	case given == 0:
		return nil, false, errors.New("the request has no prompt: give Messages, Prompt or Tokens")
	case given > 1:
		return nil, false, errors.New("the request gives more than one of Messages, Prompt and Tokens")
	case r.Tools != nil && r.Messages == nil:
		return nil, false, errors.New("tools need a conversation: give Messages")
	case r.Tokens != nil, r.Prompt != "":
		return nil, false, nil
	case m.format == nil:
		return nil, false, ErrNoChatTemplate
	case len(r.Messages) == 0:
		return nil, false, errors.New("the conversation has no messages")
	}
	if _, ok := m.format.CallSyntax(); len(r.Tools) > 0 && !ok {
		return nil, false, fmt.Errorf("tools: the model's chat template (%s) has no tool format", m.format)
	}
	for i, t := range r.Tools {
		if t.Name == "" {
			return nil, false, fmt.Errorf("tools[%d]: make it with NewTool or ParseTool", i)
		}
	}
	for i, msg := range r.Messages {
		switch msg.Role {
		case "system", "user", "assistant", "tool":
		default:
			return nil, false, fmt.Errorf("messages[%d]: unknown role %q: want system, user, assistant or tool", i, msg.Role)
		}
		if len(msg.ToolCalls) > 0 && msg.Role != "assistant" {
			return nil, false, fmt.Errorf("messages[%d]: a %s message has tool calls; only an assistant's may", i, msg.Role)
		}
		for j, c := range msg.ToolCalls {
			if c.Name == "" {
				return nil, false, fmt.Errorf("messages[%d].tool_calls[%d].name: missing", i, j)
			}
		}
	}
	o := chatOptions(r)
	o.GenerationPrompt = generationPrompt
	segs, err := m.format.Render(chat.OrderToolResults(r.Messages), o)
	if err != nil {
		return nil, false, fmt.Errorf("chat template %s: %w", m.format, err)
	}
	return segs, true, nil
}

// chatOptions are the chat template's switches a request sets.
func chatOptions(r *Request) chat.Options {
	return chat.Options{Tools: r.Tools, NoThinking: r.NoThinking, PreserveThinking: r.PreserveThinking, LaterSystem: true}
}

// RenderPrompt is the text of a request's prompt: of a conversation, the
// chat template's output (byte for byte what its Jinja renders, with the
// opening of the assistant's turn), or the raw Prompt. A prompt given as
// Tokens is decoded.
func (m *Model) RenderPrompt(req Request) (string, error) {
	return m.RenderTemplate(req, true)
}

// RenderTemplate is RenderPrompt with the opening of the assistant's
// turn only when generationPrompt is set, as add_generation_prompt: a
// conversation rendered without it is as the template prints a finished
// one.
func (m *Model) RenderTemplate(req Request, generationPrompt bool) (string, error) {
	release, err := m.hold()
	if err != nil {
		return "", err
	}
	defer release()
	segs, isChat, err := m.render(&req, generationPrompt)
	switch {
	case err != nil:
		return "", err
	case isChat:
		return chat.Text(segs), nil
	case req.Tokens != nil:
		return m.m.Tokenizer.Decode(req.Tokens), nil
	}
	return req.Prompt, nil
}

// prepare checks a request and makes it ready for the engine.
func (m *Model) prepare(r *Request) (prompt, error) {
	if m.m.Config.Embedding {
		return prompt{}, ErrEmbeddingModel
	}
	ids, isChat, err := m.encode(r, true)
	if err != nil {
		return prompt{}, err
	}
	p := prompt{chat: isChat, opts: chatOptions(r), req: engine.Request{Prompt: ids, MaxTokens: -1, Stop: m.stopIDs, TopLogprobs: -1}}
	if isChat {
		// A hybrid model's engine keeps a copy of its states where the
		// next turn, or an edited message, parts from this one.
		p.req.Marks = m.format.MessageEnds(m.m.Tokenizer, ids)
	}
	if p.req.KV, err = m.kvType(r.KV); err != nil {
		return prompt{}, err
	}
	if p.req.Draft, err = m.draft(r); err != nil {
		return prompt{}, err
	}
	if r.Sampling == nil {
		p.req.Params = m.defaults
		p.req.Params.Seed = rand.Uint64()
	} else {
		if err := r.Sampling.Check(); err != nil {
			return prompt{}, fmt.Errorf("sampling: %w", err)
		}
		p.req.Params = *r.Sampling
	}
	switch {
	case r.MaxTokens < 0:
		return prompt{}, fmt.Errorf("MaxTokens %d: want 0 (until the end of the answer or of the context) or more", r.MaxTokens)
	case r.PromptOnly:
		p.req.MaxTokens = 0
	case r.MaxTokens > 0:
		p.req.MaxTokens = r.MaxTokens
	}
	if n := r.Context; n != 0 {
		switch {
		case n < 0 || n > m.info.Context:
			return prompt{}, fmt.Errorf("context %d: want 1 to %d tokens, the model's context", n, m.info.Context)
		case len(ids) > n:
			return prompt{}, &PromptTooLongError{Tokens: len(ids), Context: n}
		}
		// As the engine at its own context: the last token needs no room.
		if room := n - len(ids) + 1; !r.PromptOnly && (p.req.MaxTokens < 0 || p.req.MaxTokens > room) {
			p.req.MaxTokens = room
		}
	}
	// The tokens the answer may take, its end included: a constrained
	// answer is complete within them.
	limit := p.req.MaxTokens
	if limit < 0 {
		limit = max(m.info.Context-len(ids), 0)
	}
	c, relaxed, err := m.constraint(r, limit)
	if err != nil {
		return prompt{}, err
	}
	if c != nil {
		p.req.Constraint = c
	}
	p.relaxed = relaxed
	for id, b := range r.LogitBias {
		switch {
		case id < 0 || int(id) >= m.m.Tokenizer.VocabSize():
			return prompt{}, fmt.Errorf("LogitBias: token id %d is outside the vocabulary [0, %d)", id, m.m.Tokenizer.VocabSize())
		case !(b >= -MaxLogitBias && b <= MaxLogitBias):
			return prompt{}, fmt.Errorf("LogitBias: %v for token %d: want -%d to %d", b, id, MaxLogitBias, MaxLogitBias)
		}
	}
	p.req.Bias = maps.Clone(r.LogitBias) // the engine reads it while the caller goes on
	switch t := r.TopLogprobs; {
	case t < 0 || t > MaxTopLogprobs:
		return prompt{}, fmt.Errorf("TopLogprobs %d: want 0 to %d", t, MaxTopLogprobs)
	case t > 0 && !r.Logprobs:
		return prompt{}, errors.New("TopLogprobs needs Logprobs")
	case r.Logprobs:
		p.req.TopLogprobs = t
	}
	if len(r.Stop) > MaxStops {
		return prompt{}, fmt.Errorf("%d stop strings, at most %d", len(r.Stop), MaxStops)
	}
	for i, s := range r.Stop {
		if s == "" {
			return prompt{}, fmt.Errorf("stop string %d is empty: it would match before anything", i)
		}
	}
	p.req.PromptLogits = r.PromptLogits
	if r.IgnoreEOS {
		p.req.Stop = nil
	}
	return p, nil
}

// kvType resolves a request's KV cache type.
func (m *Model) kvType(name string) (format.KVType, error) {
	if name == "" {
		return m.kv, nil
	}
	return format.ParseKVType(name)
}

// textOf is the text source of a generation.
func (m *Model) textOf(p prompt) textSource {
	if p.chat {
		return m.format.NewSplitter(m.m.Tokenizer, p.opts)
	}
	return rawText{m.m.Tokenizer.NewStreamDecoder()}
}

// draft checks a request's drafts and makes them the engine's.
func (m *Model) draft(r *Request) (engine.Draft, error) {
	switch {
	case r.Draft < 0 || r.DraftMin < 0 || r.DraftModel < 0 || r.DraftMTP < 0:
		return engine.Draft{}, fmt.Errorf("Draft %d, DraftModel %d, DraftMTP %d, DraftMin %d: want 0 or more", r.Draft, r.DraftModel, r.DraftMTP, r.DraftMin)
	case r.DraftPMin >= 1 || math.IsNaN(r.DraftPMin): // NaN, below nothing, would never stop a guess
		return engine.Draft{}, fmt.Errorf("DraftPMin %g: want less than 1", r.DraftPMin)
	case r.Prediction != "" && r.Draft == 0:
		return engine.Draft{}, errors.New("Prediction is drafted: it needs Draft")
	case r.DraftModel > 0 && m.draftModel == nil:
		return engine.Draft{}, errors.New("DraftModel: this Model was opened without a draft model (WithDraftModel)")
	case r.DraftMTP > 0 && !m.info.MTPDrafts:
		return engine.Draft{}, errors.New("DraftMTP: this Model was opened without WithMTP")
	}
	d := engine.Draft{Max: r.Draft, Min: r.DraftMin, Model: r.DraftModel, MTP: r.DraftMTP, PMin: float32(r.DraftPMin)}
	switch {
	case r.DraftPMin == 0:
		d.PMin = DefaultDraftPMin
	case r.DraftPMin < 0:
		d.PMin = 0
	}
	if r.Prediction != "" {
		d.Prediction = m.m.Tokenizer.Encode(r.Prediction, false)
	}
	return d, nil
}
