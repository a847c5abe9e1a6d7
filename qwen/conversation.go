package qwen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"

	"github.com/qwenc/qwenc/internal/fsutil"
)

// ErrConversationFull: an answer of the Conversation reached the end of
// the context, so it was cut and nothing more can be said until Clear.
var ErrConversationFull = errors.New("the conversation is full: an answer reached the end of the context")

// NoRoomError is a conversation to load whose messages leave no room in
// the context for another message and its answer.
type NoRoomError struct{ Tokens, Context int }

func (e *NoRoomError) Error() string {
	return fmt.Sprintf("the conversation has %d tokens, which leave no room for another message in the context of %d", e.Tokens, e.Context)
}

// Conversation is a chat that keeps its messages between turns, and how
// it answers them (SetSettings). Each turn sends the whole conversation,
// of which the Model prefills only what its prefix cache does not hold
// (WithStateCache decides how much it keeps). A Conversation is for one
// goroutine at a time; many of them may share a Model.
type Conversation struct {
	m    *Model
	msgs []Message
	// req is the request each turn starts from; seeds, with its Sampling,
	// gives each turn its seed.
	req   Request
	seeds *rand.Rand
	// used is the tokens of the conversation in its KV cache after the
	// last turn.
	used int
	full bool
	// total is the turns and loads so far, merged.
	total Result
}

// NewConversation starts a conversation, with a system message unless
// system is empty. A model that cannot answer one, an embedding model or
// one without a chat template, refuses here rather than at every Send.
func (m *Model) NewConversation(system string) (*Conversation, error) {
	if m.closed.Load() {
		// As every call after Close that can say so: the first Send
		// would, far from the mistake.
		return nil, ErrClosed
	}
	if m.info.Embedding {
		return nil, ErrEmbeddingModel
	}
	if m.format == nil {
		return nil, ErrNoChatTemplate
	}
	c := &Conversation{m: m}
	c.SetSystem(system)
	return c, nil
}

// Messages are the conversation's, the answers included.
func (c *Conversation) Messages() []Message { return slices.Clip(c.msgs) }

// System is the system message, or "".
func (c *Conversation) System() string {
	if len(c.msgs) > 0 && c.msgs[0].Role == "system" {
		return c.msgs[0].Content
	}
	return ""
}

// Used is the tokens of the conversation the last turn left in the KV
// cache.
func (c *Conversation) Used() int { return c.used }

// Full reports whether an answer reached the end of the context: Send
// refuses more until Clear.
func (c *Conversation) Full() bool { return c.full }

// Settings are the request each turn starts from (SetSettings).
func (c *Conversation) Settings() Request {
	req := c.req
	if req.Sampling != nil {
		p := *req.Sampling
		req.Sampling = &p
	}
	return req
}

// SetSettings sets how the turns are answered: req is the request each
// Send starts from (its sampling, thinking, MaxTokens, JSON schema,
// drafts, ...), without a prompt of its own; Load takes its thinking,
// tools and KV cache type. With Sampling, each turn samples with a seed
// of its own, the next of a sequence that Sampling.Seed starts (again at
// each SetSettings): a conversation is reproducible from its seed
// whatever it says, and no two turns share their draws. Without, each
// turn has the model's sampling with a random seed, as a Request does.
// What Start would refuse in every turn is refused here, and a refused
// call changes nothing.
func (c *Conversation) SetSettings(req Request) error {
	if req.Messages != nil || req.Prompt != "" || req.Tokens != nil {
		return errors.New("a conversation's request gives no prompt: Send gives it the messages")
	}
	if req.NoThinking {
		if err := c.thinkingSwitch(); err != nil {
			return fmt.Errorf("NoThinking: %w", err)
		}
	}
	// Nothing changes until every check passed: a refused call leaves the
	// turns on the sequence of seeds they were drawing from.
	var seeds *rand.Rand
	if req.Sampling != nil {
		if err := req.Sampling.Check(); err != nil {
			return fmt.Errorf("sampling: %w", err)
		}
		p := *req.Sampling // the caller's may change
		req.Sampling = &p
		seeds = rand.New(rand.NewPCG(p.Seed, 0))
	}
	// What Start would refuse in every turn is refused now, with a
	// message standing for the turn's.
	turn := req
	turn.Messages = []Message{{Role: "user"}}
	release, err := c.m.hold()
	if err != nil {
		return err
	}
	_, err = c.m.prepare(&turn)
	release()
	if err != nil {
		return err
	}
	// The caller's slices may change too.
	req.Tools, req.JSONSchema, req.Stop, req.LogitBias = slices.Clone(req.Tools), bytes.Clone(req.JSONSchema), slices.Clone(req.Stop), maps.Clone(req.LogitBias)
	c.req, c.seeds = req, seeds
	return nil
}

// SetThinking turns thinking on or off for the turns that follow (the
// settings' NoThinking), the sequence of seeds going on. A model whose
// chat format has no switch for thinking refuses.
func (c *Conversation) SetThinking(on bool) error {
	if err := c.thinkingSwitch(); err != nil {
		return err
	}
	c.req.NoThinking = !on
	return nil
}

// thinkingSwitch refuses a model that cannot switch its thinking: one
// that does not think, and one that always does.
func (c *Conversation) thinkingSwitch() error {
	if th, thinks := c.m.format.Thinking(); !thinks || th.Always {
		return fmt.Errorf("this model's chat template (%s) has no switch for thinking", c.m.format)
	}
	return nil
}

// Total is the conversation's turns and loads so far merged
// (Result.Merge), for a chat's statistics: Clear and SetSystem do not
// reset it.
func (c *Conversation) Total() Result { return c.total }

// Clear starts a new conversation with the same system message.
func (c *Conversation) Clear() { c.SetSystem(c.System()) }

// SetSystem starts a new conversation with this system message; "" has
// none.
func (c *Conversation) SetSystem(system string) {
	c.msgs, c.used, c.full = nil, 0, false
	if system != "" {
		c.msgs = []Message{{Role: "system", Content: system}}
	}
}

// Send adds a user message and generates the answer with the settings
// (SetSettings), calling each with every Delta as it comes. A message
// that would take the conversation past the context is refused with a
// *PromptTooLongError and not added; after an answer cut at the context,
// Send refuses with ErrConversationFull. When ctx ends, the answer so far
// joins the conversation and the Result says StopInterrupt, without an
// error. When the engine fails to run the turn, Send returns its error
// (an ErrGeneration) and the conversation stays as it was, the message
// not added.
func (c *Conversation) Send(ctx context.Context, text string, each func(Delta)) (Result, error) {
	if c.full {
		return Result{}, ErrConversationFull
	}
	req := c.req
	if c.seeds != nil {
		p := *req.Sampling
		p.Seed = c.seeds.Uint64()
		req.Sampling = &p
	}
	// The message joins the conversation only if it fits: a refused one
	// must not come back in the next turn's prompt.
	req.Messages = append(slices.Clip(c.msgs), Message{Role: "user", Content: text})
	st, err := c.m.Start(ctx, req)
	if err != nil {
		return Result{}, err
	}
	return c.answer(req, st, each)
}

// answer reads the answer to req, a turn Send started, from st.
func (c *Conversation) answer(req Request, st *Stream, each func(Delta)) (Result, error) {
	res := Result{Prompt: st.Prompt()}
	var reasoning, content strings.Builder
	var calls []ToolCall
	var failed error
	for d, err := range st.Deltas() {
		if err != nil && d.Stop != StopInterrupt { // ctx's error: res.Stop says it
			failed = err
		}
		res.Add(d)
		reasoning.WriteString(d.Reasoning)
		content.WriteString(d.Content)
		for _, p := range d.ToolCalls {
			if p.Index >= len(calls) {
				calls = append(calls, make([]ToolCall, p.Index+1-len(calls))...)
			}
			calls[p.Index].ID += p.ID
			calls[p.Index].Name += p.Name
			calls[p.Index].Arguments += p.Arguments
		}
		if each != nil {
			each(d)
		}
	}
	if failed != nil {
		// The engine keeps no state of a failed turn, and its text is
		// not an answer: the same message may be sent again.
		return res, fmt.Errorf("conversation turn: %w", failed)
	}
	release, err := c.m.hold()
	if err != nil {
		return res, fmt.Errorf("conversation turn: %w", err)
	}
	text := c.m.m.Tokenizer.Decode(res.Generated)
	release()
	c.msgs = req.Messages
	c.used, c.full = res.Usage.KVTokens, res.Stop == StopContext
	// The answer as the model wrote it, for the next prompt to hold the
	// same tokens; the template splits a think block off it. An answer
	// that begins in reasoning, opened by the prompt (Qwen3.5's) or by
	// the model (Qwen3's), and was cut before it closed it, is reasoning
	// alone: the template would split nothing off it.
	answer := Message{Role: "assistant", Content: text}
	if th, ok := c.m.thinking(&req); ok && !strings.Contains(answer.Content, th.Close) {
		if th.Opened {
			answer.Reasoning, answer.Content = answer.Content, ""
		} else if r, opened := strings.CutPrefix(answer.Content, th.Open); opened {
			answer.Reasoning, answer.Content = r, ""
		}
	}
	if res.Stop == StopString || len(calls) > 0 {
		// The tokens go on past a stop string, which the caller never
		// saw, and the markers of a call would be plain text in the next
		// prompt (message text is text): the history keeps the answer as
		// it was given, its calls as calls, which the template prints.
		answer.Reasoning, answer.Content = reasoning.String(), content.String()
		for _, call := range calls {
			if call.Name != "" { // a call the model wrote wrong is not one the template can print
				answer.ToolCalls = append(answer.ToolCalls, call)
			}
		}
	}
	c.msgs = append(c.msgs, answer)
	c.total.Merge(res)
	return res, nil
}

// Load replaces the conversation by msgs and prefills them, so that the
// next message continues it, rendered as the turns will be (the
// settings' thinking and tools) into their KV cache type; no messages
// start an empty conversation. Messages that leave no room for another
// message and its answer are refused with a *NoRoomError; on any error
// the conversation stays as it was. When ctx ends first, the Result says
// StopInterrupt and the next turn prefills the rest.
func (c *Conversation) Load(ctx context.Context, msgs []Message) (Result, error) {
	if len(msgs) == 0 {
		c.SetSystem("")
		res := Result{Stop: StopLength}
		c.total.Merge(res)
		return res, nil
	}
	req := c.req
	req.Messages = append(slices.Clip(msgs), Message{Role: "user"})
	next, err := c.m.Count(req)
	if err != nil {
		return Result{}, err
	}
	if ctxLen := c.m.info.Context; next >= ctxLen {
		req.Messages = msgs
		n, _ := c.m.Count(req)
		return Result{}, &NoRoomError{Tokens: n, Context: ctxLen}
	}
	req.Messages = msgs
	u, err := c.m.Prefill(ctx, req)
	res := Result{Stop: StopLength, Usage: u}
	if ctx.Err() != nil {
		res.Stop, err = StopInterrupt, nil
	}
	if err != nil {
		return res, err
	}
	c.msgs, c.full, c.used = slices.Clip(msgs), false, u.KVTokens
	c.total.Merge(res)
	return res, nil
}

// savedMessage is a message of a saved conversation, in the role and
// content form of chat APIs, so that other tools can read and write it.
type savedMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// SaveMessages writes msgs to path as a JSON array of {"role", "content"},
// through a temporary file renamed over path. Its errors do not repeat
// the path.
func SaveMessages(path string, msgs []Message) error {
	saved := make([]savedMessage, len(msgs))
	for i, m := range msgs {
		saved[i] = savedMessage{Role: m.Role, Content: m.Content}
	}
	b, err := json.MarshalIndent(saved, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteAtomic(path, append(b, '\n'), 0o644)
}

// LoadMessages reads a conversation SaveMessages wrote, and refuses what
// a Conversation could not continue. Its errors do not repeat the path.
func LoadMessages(path string) ([]Message, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fsutil.Pathless(err)
	}
	var saved []savedMessage
	if err := json.Unmarshal(b, &saved); err != nil {
		return nil, fmt.Errorf(`not a saved conversation (a JSON array of {"role": ..., "content": ...}): %v`, err)
	}
	msgs := make([]Message, len(saved))
	for i, m := range saved {
		switch {
		case m.Role != "system" && m.Role != "user" && m.Role != "assistant":
			return nil, fmt.Errorf("message %d has the role %q; want system, user or assistant", i+1, m.Role)
		case m.Role == "system" && i > 0:
			return nil, fmt.Errorf("message %d is a system message; only the first may be", i+1)
		}
		msgs[i] = Message{Role: m.Role, Content: m.Content}
	}
	return msgs, nil
}
