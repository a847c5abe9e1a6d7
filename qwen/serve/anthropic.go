package serve

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"

	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/qwen"
)

// messagesRequest is Anthropic's Messages API request, as Claude Code and
// the Anthropic SDKs send it; metadata, cache_control (the prefix cache
// reuses what it can without being told), context_management,
// service_tier and the other fields not here are ignored, as unknown
// fields are, and so are the anthropic-beta headers.
type messagesRequest struct {
	Model         string             `json:"model"`
	MaxTokens     *int               `json:"max_tokens"`
	System        json.RawMessage    `json:"system"`
	Messages      []anthropicMessage `json:"messages"`
	StopSequences []string           `json:"stop_sequences"`
	Stream        bool               `json:"stream"`
	Temperature   *float64           `json:"temperature"`
	TopP          *float64           `json:"top_p"`
	TopK          *int               `json:"top_k"`
	Thinking      *struct {
		Type         string `json:"type"`
		BudgetTokens *int   `json:"budget_tokens"`
		// Display "omitted" sends thinking blocks without their text,
		// which their signature carries (Claude Code asks it).
		Display *string `json:"display"`
	} `json:"thinking"`
	OutputConfig *struct {
		Format json.RawMessage `json:"format"`
		Effort *string         `json:"effort"`
	} `json:"output_config"`
	// OutputFormat is output_config.format as the structured outputs
	// beta had it.
	OutputFormat json.RawMessage `json:"output_format"`
	Tools        []anthropicTool `json:"tools"`
	ToolChoice   *struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
	} `json:"tool_choice"`
	// MCPServers are the MCP connector beta's servers, whose tools
	// Anthropic would call itself: refused, as its server tools are,
	// rather than answered without them.
	MCPServers []json.RawMessage `json:"mcp_servers"`
	// interleaved is the interleaved thinking beta, asked in the
	// anthropic-beta header, under which budget_tokens bounds a whole
	// turn's thinking and may exceed max_tokens.
	interleaved bool
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicContent is a message's content, the system prompt or a tool
// result's: a string, which is one text block, or a list of blocks.
type anthropicContent []anthropicBlockIn

// parseContent reads content at path, each block on its own so that an
// error names the block's field: messages[2].content[1].id.
func parseContent(raw json.RawMessage, path string) (anthropicContent, *apiError) {
	if len(raw) == 0 {
		return nil, nil
	}
	var text *string
	if json.Unmarshal(raw, &text) == nil {
		if text == nil {
			return nil, nil
		}
		return anthropicContent{{Type: "text", Text: *text}}, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, badRequest(path, "%s: want a string or a list of content blocks", path)
	}
	out := make(anthropicContent, len(items))
	for j, item := range items {
		if e := unmarshalAt(item, fmt.Sprintf("%s[%d]", path, j), &out[j], "a content block, an object with a type"); e != nil {
			return nil, e
		}
	}
	return out, nil
}

// anthropicBlockIn is a content block of a request: text, thinking or
// tool_use in the assistant's turns, text or tool_result in the user's.
type anthropicBlockIn struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	ToolName  string          `json:"tool_name"` // a tool_reference's
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	// A document's.
	Source    json.RawMessage `json:"source"`
	Title     string          `json:"title"`
	Context   string          `json:"context"`
	Citations *struct {
		Enabled bool `json:"enabled"`
	} `json:"citations"`
}

// anthropicTool is a client tool; Anthropic's server tools (web search,
// code execution, ...) have a type and no input_schema, and are refused.
type anthropicTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Anthropic's answers and stream events.
type (
	anthropicMessageOut struct {
		ID           string           `json:"id"`
		Type         string           `json:"type"`
		Role         string           `json:"role"`
		Model        string           `json:"model"`
		Content      []anthropicBlock `json:"content"`
		StopReason   *string          `json:"stop_reason"`
		StopSequence *string          `json:"stop_sequence"`
		Usage        anthropicUsage   `json:"usage"`
	}
	// anthropicBlock is a content block of an answer: its text fields
	// are pointers because an empty one is still given.
	anthropicBlock struct {
		Type      string          `json:"type"`
		Text      *string         `json:"text,omitempty"`
		Thinking  *string         `json:"thinking,omitempty"`
		Signature *string         `json:"signature,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Input     json.RawMessage `json:"input,omitempty"`
	}
	// anthropicUsage counts the prompt as Anthropic does: input_tokens
	// are those evaluated, cache_read_input_tokens those whose KV cache
	// an earlier conversation left; together, the prompt.
	anthropicUsage struct {
		InputTokens              int `json:"input_tokens"`
		CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int `json:"cache_read_input_tokens"`
		OutputTokens             int `json:"output_tokens"`
	}
	// anthropicEvent is an event of a stream; its type is its name too.
	anthropicEvent struct {
		Type         string               `json:"type"`
		Message      *anthropicMessageOut `json:"message,omitempty"`
		Index        *int                 `json:"index,omitempty"`
		ContentBlock *anthropicBlock      `json:"content_block,omitempty"`
		Delta        any                  `json:"delta,omitempty"` // a blockDelta, or message_delta's stopDelta
		Usage        *anthropicUsage      `json:"usage,omitempty"`
		Error        *anthropicErrorBody  `json:"error,omitempty"`
	}
	blockDelta struct {
		Type        string `json:"type"`
		Text        string `json:"text,omitempty"`
		Thinking    string `json:"thinking,omitempty"`
		Signature   string `json:"signature,omitempty"`
		PartialJSON string `json:"partial_json,omitempty"`
	}
	stopDelta struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}
	anthropicErrorBody struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
)

// isAnthropic reports whether a request is to Anthropic's endpoints,
// whose errors have Anthropic's shape.
func isAnthropic(r *http.Request) bool {
	return r.URL.Path == "/v1/messages" || strings.HasPrefix(r.URL.Path, "/v1/messages/")
}

// anthropicErrorOf is an error in Anthropic's shape, {"type": "error",
// "error": {"type", "message"}}, and its status: a full queue or a
// server shutting down is Anthropic's 529 overloaded_error, which its
// clients retry.
func anthropicErrorOf(e *apiError) (int, any) {
	status, typ := e.status, "invalid_request_error"
	switch {
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status == http.StatusForbidden:
		typ = "permission_error"
	case status == http.StatusNotFound:
		typ = "not_found_error"
	case status == http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status == http.StatusServiceUnavailable:
		status, typ = 529, "overloaded_error"
	case status >= 500:
		typ = "api_error"
	}
	return status, anthropicEvent{Type: "error", Error: &anthropicErrorBody{Type: typ, Message: e.msg}}
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request, rl *reqLog) *apiError {
	t, req, mr, e := s.readMessages(w, r, rl, false)
	if e != nil {
		return e
	}
	g, e := s.start(r.Context(), rl, t, req, requestFields{mr.schemaField(), toolPaths(req.Tools, "tools[%d].input_schema"), "messages"})
	if e != nil {
		return e
	}
	return s.answerMessage(w, t, g, mr.Stream, mr.omitThinking())
}

// answerMessage answers with one message, or streams its events, the
// thinking blocks' text left to their signatures if omit. An error it
// returns has not been written: the answer not streamed was not begun.
func (s *Server) answerMessage(w http.ResponseWriter, t *target, g *generation, stream, omit bool) *apiError {
	head := anthropicMessageOut{ID: fmt.Sprintf("msg_%016x%08x", rand.Uint64(), rand.Uint32()), Type: "message",
		Role: "assistant", Model: t.name, Content: []anthropicBlock{}}
	if stream {
		s.streamMessage(w, g, head, omit)
		return nil
	}
	var c collector
	b := blockWriter{out: c.apply, omit: omit}
	out, err := g.run(b.add)
	if err != nil {
		return g.failure(err)
	}
	b.close()
	reason, seq, e := stopReason(out)
	if e != nil {
		return e
	}
	head.Content = append(head.Content, c.content...) // [] without blocks, not null
	head.StopReason, head.StopSequence, head.Usage = &reason, seq, anthropicUsageOf(out.usage)
	writeJSON(w, http.StatusOK, head)
	return nil
}

// streamMessage sends Anthropic's events: message_start, each content
// block's start, deltas and stop, message_delta with the stop reason and
// the usage, and message_stop; pings while nothing else comes, and an
// error event when the answer cannot end well.
func (s *Server) streamMessage(w http.ResponseWriter, g *generation, head anthropicMessageOut, omit bool) {
	ls := s.startStream(w, true)
	ping, _ := ls.eventText("ping", anthropicEvent{Type: "ping"})
	stopPings := ls.keepAlive(s.opts.ping, ping)
	defer stopPings()
	send := func(ev anthropicEvent) error { return ls.sendEvent(ev.Type, ev) }
	fail := func(e *apiError) {
		_, body := anthropicErrorOf(e)
		ls.sendEvent("error", body)
	}
	// How much of the prompt the cache holds is known at the end only;
	// message_delta gives the usage again, whole.
	head.Usage = anthropicUsage{InputTokens: g.rl.prompt}
	if send(anthropicEvent{Type: "message_start", Message: &head}) != nil {
		g.rl.clientGone = true
		g.stop()
		return
	}
	b := blockWriter{out: send, omit: omit}
	out, err := g.run(b.add)
	switch {
	case err != nil && g.rl.clientGone:
		return
	case err != nil:
		fail(&apiError{status: http.StatusInternalServerError, msg: err.Error()})
		return
	case b.close() != nil:
		return
	}
	reason, seq, e := stopReason(out)
	if e != nil {
		fail(e)
		return
	}
	u := anthropicUsageOf(out.usage)
	if send(anthropicEvent{Type: "message_delta", Delta: stopDelta{reason, seq}, Usage: &u}) == nil {
		send(anthropicEvent{Type: "message_stop"})
	}
}

// stopReason is Anthropic's stop_reason for how a generation ended, and
// the stop sequence that ended it. An answer the server's shutdown cut
// short is no answer but an error (overloaded, which clients retry).
func stopReason(o outcome) (string, *string, *apiError) {
	switch {
	case o.stop == qwen.StopShutdown:
		return "", nil, &apiError{status: http.StatusServiceUnavailable, msg: "the server is shutting down", code: "shutting_down"}
	case o.stop == qwen.StopString:
		return "stop_sequence", &o.matched, nil
	case o.finish == "tool_calls":
		return "tool_use", nil, nil
	case o.stop == qwen.StopEOS:
		return "end_turn", nil, nil
	case o.stop == qwen.StopContext:
		return "model_context_window_exceeded", nil, nil
	}
	return "max_tokens", nil, nil
}

func anthropicUsageOf(u qwen.Usage) anthropicUsage {
	return anthropicUsage{InputTokens: u.PromptTokens - u.CachedTokens, CacheReadInputTokens: u.CachedTokens, OutputTokens: u.CompletionTokens}
}

// blockWriter turns a generation's deltas into Anthropic's content blocks, as
// the events of a stream: a change of kind (thinking, text, another tool
// call) stops the open block and starts the next.
type blockWriter struct {
	out     func(anthropicEvent) error
	kind    string // the open block's: "", "thinking", "text" or "tool_use"
	n       int    // blocks started
	call    int    // the generation's index of the open tool call
	unnamed unnamedCalls
	omit    bool            // thinking's text goes in the signature alone
	think   strings.Builder // the open thinking block's text, for its signature
}

func (b *blockWriter) add(d qwen.Delta) error {
	if d.Reasoning != "" {
		delta := blockDelta{Type: "thinking_delta", Thinking: d.Reasoning}
		if b.omit {
			delta = blockDelta{}
		}
		if err := b.text("thinking", delta); err != nil {
			return err
		}
		b.think.WriteString(d.Reasoning)
	}
	if d.Content != "" {
		if err := b.text("text", blockDelta{Type: "text_delta", Text: d.Content}); err != nil {
			return err
		}
	}
	for _, c := range d.ToolCalls {
		starts := c.ID != "" || b.kind != "tool_use" || c.Index != b.call
		if b.unnamed.skip(c, starts) {
			continue
		}
		if starts {
			// Anthropic's ids are "toolu_" and 24 letters and digits, as
			// the calls' "call_" ones are.
			id := "toolu_" + strings.TrimPrefix(c.ID, "call_")
			if err := b.start(anthropicBlock{Type: "tool_use", ID: id, Name: c.Name, Input: json.RawMessage("{}")}); err != nil {
				return err
			}
			b.call = c.Index
		}
		if c.Arguments != "" {
			if err := b.delta(blockDelta{Type: "input_json_delta", PartialJSON: c.Arguments}); err != nil {
				return err
			}
		}
	}
	return nil
}

// text adds text to the open block of its kind, starting one if needed.
func (b *blockWriter) text(kind string, d blockDelta) error {
	if b.kind != kind {
		empty, block := "", anthropicBlock{Type: kind}
		if kind == "thinking" {
			// The signature comes at the block's end (close), as
			// Anthropic's does.
			block.Thinking, block.Signature = &empty, new(string)
			b.think.Reset()
		} else {
			block.Text = &empty
		}
		if err := b.start(block); err != nil {
			return err
		}
	}
	if d.Type == "" {
		return nil
	}
	return b.delta(d)
}

func (b *blockWriter) start(block anthropicBlock) error {
	if err := b.close(); err != nil {
		return err
	}
	b.kind = block.Type
	b.n++
	i := b.n - 1
	return b.out(anthropicEvent{Type: "content_block_start", Index: &i, ContentBlock: &block})
}

func (b *blockWriter) delta(d blockDelta) error {
	i := b.n - 1
	return b.out(anthropicEvent{Type: "content_block_delta", Index: &i, Delta: d})
}

// close stops the open block, if one is. A thinking block is signed
// first, in a signature_delta, as Anthropic signs it: clients keep the
// signature and send the block back with it, and some (the SDKs' stream
// helpers, Claude Code) expect one.
func (b *blockWriter) close() error {
	if b.kind == "" {
		return nil
	}
	if b.kind == "thinking" {
		sig := signThinking(b.think.String())
		if err := b.delta(blockDelta{Type: "signature_delta", Signature: sig}); err != nil {
			return err
		}
	}
	b.kind = ""
	i := b.n - 1
	return b.out(anthropicEvent{Type: "content_block_stop", Index: &i})
}

// A thinking block's signature carries its text: Anthropic's is the
// thinking encrypted, which lets it send a block without its text
// (thinking.display "omitted") and restore the text when the block comes
// back, as a tool-call loop needs it (Qwen's templates keep the
// thinking after the last user message). This one is the text
// compressed, behind a mark, in base64: stable for the same thinking,
// so a client comparing blocks sees the same one again, and proving
// nothing (a client can send any thinking anyway).
const (
	signatureMark = "qwt1"
	// maxSignedThinking bounds the text the signatures of one request
	// restore, all together, so small signatures cannot inflate into
	// huge ones (a body holds hundreds of them).
	maxSignedThinking = 16 << 20
)

func signThinking(text string) string {
	var buf bytes.Buffer
	buf.WriteString(signatureMark)
	fw, _ := flate.NewWriter(&buf, flate.BestSpeed) // the level is valid
	fw.Write([]byte(text))                          // a bytes.Buffer takes every write
	fw.Close()
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// signedThinking is the thinking a signature carries, of at most limit
// bytes: none for a signature not this server's (Claude's, from a
// conversation begun there); err says why one with its mark is broken or
// too big.
func signedThinking(sig string, limit int) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || !strings.HasPrefix(string(raw), signatureMark) {
		return "", nil
	}
	fr := flate.NewReader(bytes.NewReader(raw[len(signatureMark):]))
	out, err := io.ReadAll(io.LimitReader(fr, int64(limit)+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("its thinking does not decompress: %w", err)
	case len(out) > limit:
		return "", errors.New("the signatures of this request hold more than 16 MiB of thinking")
	}
	return string(out), nil
}

// collector gathers the events of a blockWriter into the content of an answer
// not streamed, as a client accumulates a stream: both come from the
// same events.
type collector struct {
	content []anthropicBlock
	args    strings.Builder // the open tool call's input
}

func (c *collector) apply(ev anthropicEvent) error {
	switch ev.Type {
	case "content_block_start":
		c.content = append(c.content, *ev.ContentBlock)
		c.args.Reset()
	case "content_block_delta":
		b, d := &c.content[*ev.Index], ev.Delta.(blockDelta)
		switch {
		case b.Text != nil:
			*b.Text += d.Text
		case d.Type == "signature_delta":
			*b.Signature += d.Signature
		case b.Thinking != nil:
			*b.Thinking += d.Thinking
		default:
			c.args.WriteString(d.PartialJSON)
		}
	case "content_block_stop":
		// A call cut short (max_tokens) has no whole object: its input
		// stays the empty one it started with.
		if b := &c.content[*ev.Index]; b.Type == "tool_use" && chat.CheckArguments(c.args.String()) == nil {
			b.Input = json.RawMessage(c.args.String())
		}
	}
	return nil
}

// countTokens answers Anthropic's /v1/messages/count_tokens: the tokens
// of the prompt the same request would be answered from.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request, rl *reqLog) *apiError {
	t, req, _, e := s.readMessages(w, r, rl, true)
	if e != nil {
		return e
	}
	n, err := t.m.Count(req)
	if err != nil {
		return badRequest("", "%v", err)
	}
	rl.prompt = n
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": n})
	return nil
}

// readMessages reads a Messages request, or count_tokens' (count), and
// makes it a qwen.Request.
func (s *Server) readMessages(w http.ResponseWriter, r *http.Request, rl *reqLog, count bool) (t *target, req qwen.Request, mr *messagesRequest, e *apiError) {
	mr = &messagesRequest{}
	if e := decode(w, r, s.opts.MaxBody, mr); e != nil {
		return nil, req, nil, e
	}
	if t, e = s.model(r, rl, mr.Model); e != nil {
		return nil, req, nil, e
	}
	for _, h := range r.Header.Values("anthropic-beta") {
		for b := range strings.SplitSeq(h, ",") {
			mr.interleaved = mr.interleaved || strings.HasPrefix(strings.TrimSpace(b), "interleaved-thinking-")
		}
	}
	req, e = t.messagesRequest(mr, count)
	return t, req, mr, e
}

// messagesRequest checks a Messages request and makes it a qwen.Request;
// a count (count_tokens) has no max_tokens, and its sampling does not
// matter.
func (t *target) messagesRequest(mr *messagesRequest, count bool) (qwen.Request, *apiError) {
	var req qwen.Request
	if !count {
		switch {
		case mr.MaxTokens == nil:
			return req, badRequest("max_tokens", "max_tokens: Field required")
		case *mr.MaxTokens < 1:
			return req, badRequest("max_tokens", "max_tokens %d must be at least 1", *mr.MaxTokens)
		case mr.Temperature != nil && (*mr.Temperature < 0 || *mr.Temperature > 1):
			// Anthropic's range, narrower than the sampler's: a client
			// sending 1.5 here is refused by Anthropic.
			return req, badRequest("temperature", "temperature %v is outside [0, 1], Anthropic's range", *mr.Temperature)
		}
		params, e := samplingParams(t.info.Sampling, nil,
			floatParam("temperature", "temperature", mr.Temperature),
			floatParam("top_p", "top_p", mr.TopP),
			intParam("top_k", "top_k", mr.TopK))
		if e != nil {
			return req, e
		}
		stops, err := stopStrings("stop_sequences", mr.StopSequences)
		if err != nil {
			return req, badRequest("stop_sequences", "%v", err)
		}
		req.Sampling, req.MaxTokens, req.Stop = &params, *mr.MaxTokens, stops
	}
	var e *apiError
	if req.Messages, e = anthropicMessages(mr.System, mr.Messages); e != nil {
		return req, e
	}
	if len(mr.MCPServers) > 0 {
		return req, badRequest("mcp_servers", "mcp_servers: Anthropic's MCP connector is not supported: connect the servers in the client, and give their tools in tools")
	}
	named := map[string]int{} // a tool's name to its index
	for i, def := range mr.Tools {
		path := fmt.Sprintf("tools[%d]", i)
		first, taken := named[def.Name]
		switch {
		case def.Type != "" && def.Type != "custom":
			return req, badRequest(path, "%s: a tool of type %q: Anthropic's server tools are not supported; give name, description and input_schema", path, def.Type)
		case def.Name == "":
			return req, badRequest(path+".name", "%s.name: missing", path)
		case !wireName(def.Name, 128):
			return req, badRequest(path+".name", "%s.name %q: want at most 128 letters, digits, _ and -, as Anthropic has it", path, def.Name)
		case taken:
			return req, badRequest(path+".name", "%s.name %q: tools[%d] has it too: tool names must be unique", path, def.Name, first)
		}
		named[def.Name] = i
		if e := toolSchema(def.InputSchema, path+".input_schema", true); e != nil {
			return req, e
		}
		tool, err := qwen.NewTool(def.Name, def.Description, def.InputSchema)
		if err != nil {
			return req, badRequest(path, "%s: %v", path, err)
		}
		req.Tools = append(req.Tools, tool)
	}
	if e := anthropicToolChoice(mr, &req); e != nil {
		return req, e
	}
	if e := t.anthropicFormat(mr, &req); e != nil {
		return req, e
	}
	if e := t.anthropicThinking(mr, &req); e != nil {
		return req, e
	}
	return req, t.needsChat()
}

// wireName reports whether name is of at most most letters, digits, _
// and -, as Anthropic's tool names (^[a-zA-Z0-9_-]{1,128}$: the model
// writes them in its calls, which a quote or a space would break) and
// OpenAI's format names (at most 64) are.
func wireName(name string, most int) bool {
	if len(name) > most {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// anthropicThinking reads thinking and output_config.effort onto req:
// enabled thinks within budget_tokens; adaptive as the model does by
// itself, within budget_tokens if given, or within output_config.effort's
// budget; disabled not at all.
func (t *target) anthropicThinking(mr *messagesRequest, req *qwen.Request) *apiError {
	var effort *string
	if mr.OutputConfig != nil {
		effort = mr.OutputConfig.Effort
	}
	th := mr.Thinking
	if th != nil && th.Display != nil && *th.Display != "summarized" && *th.Display != "omitted" {
		return badRequest("thinking.display", "thinking.display %q: want summarized or omitted", *th.Display)
	}
	if th == nil {
		if effort != nil {
			return t.effort(*effort, "output_config.effort", req)
		}
		return nil
	}
	switch th.Type {
	case "enabled", "adaptive":
		switch {
		case th.BudgetTokens == nil && th.Type == "enabled":
			return badRequest("thinking.budget_tokens", "thinking.budget_tokens: want a positive number of tokens")
		case th.BudgetTokens == nil && effort != nil:
			return t.effort(*effort, "output_config.effort", req)
		case th.BudgetTokens == nil:
			return nil
		case th.Type == "enabled" && *th.BudgetTokens < 1024:
			// Anthropic's rules for enabled, so that a request passing
			// here passes there. Adaptive takes no budget on Anthropic;
			// its budget_tokens here is this server's, of any size,
			// which small models want.
			return badRequest("thinking.budget_tokens", "thinking.budget_tokens: %d is below 1024, Anthropic's least (adaptive thinking here takes a smaller one)", *th.BudgetTokens)
		case th.Type == "enabled" && mr.MaxTokens != nil && *th.BudgetTokens >= *mr.MaxTokens && !mr.interleaved:
			return badRequest("thinking.budget_tokens", "thinking.budget_tokens: %d must be less than max_tokens (%d), or the answer has no room (the interleaved-thinking beta lifts this)",
				*th.BudgetTokens, *mr.MaxTokens)
		}
		return t.thinkingBudget(*th.BudgetTokens, "thinking.budget_tokens", req)
	case "disabled":
		req.NoThinking = true
	default:
		return badRequest("thinking.type", "thinking.type %q: want enabled, disabled or adaptive", th.Type)
	}
	return nil
}

// omitThinking reports whether thinking blocks go without their text
// (thinking.display "omitted"); "summarized", Anthropic's default, sends
// the whole thinking here, which is the model's own and short enough.
func (mr *messagesRequest) omitThinking() bool {
	return mr.Thinking != nil && mr.Thinking.Display != nil && *mr.Thinking.Display == "omitted"
}

// schemaField is where the request gives the answer's schema.
func (mr *messagesRequest) schemaField() string {
	if len(mr.OutputFormat) > 0 && string(mr.OutputFormat) != "null" {
		return "output_format.schema"
	}
	return "output_config.format.schema"
}

// anthropicFormat reads output_config.format (or the beta's
// output_format) onto req: a JSON Schema the answer's text is held to,
// by the same grammar as OpenAI's response_format. A format that cannot
// be enforced is refused, never ignored.
func (t *target) anthropicFormat(mr *messagesRequest, req *qwen.Request) *apiError {
	raw, field := mr.OutputFormat, "output_format"
	if mr.OutputConfig != nil && len(mr.OutputConfig.Format) > 0 && string(mr.OutputConfig.Format) != "null" {
		if len(raw) > 0 && string(raw) != "null" {
			return badRequest("output_format", "output_format and output_config.format both give the format: give one")
		}
		raw, field = mr.OutputConfig.Format, "output_config.format"
	}
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var f struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	if e := unmarshalAt(raw, field, &f, `an object {"type": "json_schema", "schema": {...}}`); e != nil {
		return e
	}
	switch {
	case f.Type != "json_schema":
		return badRequest(field+".type", "%s.type %q: want json_schema", field, f.Type)
	case len(f.Schema) == 0 || string(f.Schema) == "null":
		return badRequest(field+".schema", "%s.schema: missing", field)
	}
	req.JSONSchema = f.Schema
	return nil
}

// anthropicToolChoice reads tool_choice onto req: auto, any (OpenAI's
// required), tool with its name, or none; disable_parallel_tool_use
// allows one call at most.
func anthropicToolChoice(mr *messagesRequest, req *qwen.Request) *apiError {
	tc := mr.ToolChoice
	if tc == nil {
		return nil
	}
	switch tc.Type {
	case "auto", "none":
		req.ToolChoice = tc.Type
	case "any":
		req.ToolChoice = "required"
	case "tool":
		if tc.Name == "" {
			return badRequest("tool_choice.name", "tool_choice.name: missing, with type tool")
		}
		// Checked here, not only when the grammar is made, so that
		// count_tokens, which makes none, refuses it as messages does.
		if len(req.Tools) > 0 && toolIndex(req.Tools, tc.Name) < 0 {
			return badRequest("tool_choice.name", "tool_choice.name %q: not among the tools", tc.Name)
		}
		req.ToolName = tc.Name
	default:
		return badRequest("tool_choice.type", "tool_choice.type %q: want auto, any, tool or none", tc.Type)
	}
	req.OneToolCall = tc.DisableParallelToolUse
	if len(req.Tools) == 0 {
		if req.ToolChoice == "required" || req.ToolName != "" {
			return badRequest("tool_choice", "tool_choice %s forces a tool call: it needs tools", tc.Type)
		}
		req.ToolChoice, req.OneToolCall = "", false
	}
	return nil
}

// billingHeader begins the first system block Claude Code sends: a hash
// in it changes with every request, so, kept, no request would reuse the
// cache of the prompt past it; it means nothing to the model.
const billingHeader = "x-anthropic-billing-header:"

// anthropicMessages makes the system prompt and the messages qwen's:
// text blocks are joined by blank lines, thinking blocks are the turn's
// reasoning, tool_use blocks its calls, and each tool_result a tool
// message of its own. System entries among the messages (Claude Code
// sends them) are folded into the system prompt, after the top-level
// system, in their order: Qwen's templates have one system prompt, first.
// Consecutive user or assistant messages are one turn, as the Messages
// API combines them.
func anthropicMessages(system json.RawMessage, in []anthropicMessage) ([]qwen.Message, *apiError) {
	var sys []string
	add := func(raw json.RawMessage, path string) *apiError {
		content, e := parseContent(raw, path)
		if e != nil {
			return e
		}
		for j, b := range content {
			if b.Type != "text" {
				return badRequest(path, "%s[%d]: a %q block: the system prompt is text", path, j, b.Type)
			}
			// An empty system prompt is none, as Anthropic has it: kept,
			// it would render an empty system turn (and, on Qwen2.5, take
			// the place of the template's default one).
			if b.Text != "" && !strings.HasPrefix(b.Text, billingHeader) {
				sys = append(sys, b.Text)
			}
		}
		return nil
	}
	if e := add(system, "system"); e != nil {
		return nil, e
	}
	last := -1 // the last message that is not a system entry
	for i, m := range in {
		if m.Role == "system" {
			if e := add(m.Content, fmt.Sprintf("messages[%d].content", i)); e != nil {
				return nil, e
			}
		} else {
			last = i
		}
	}
	var out []qwen.Message
	if len(sys) > 0 {
		out = append(out, qwen.Message{Role: "system", Content: strings.Join(sys, "\n\n")})
	}
	if last < 0 {
		return nil, badRequest("messages", "messages: at least one message is required, besides system entries")
	}
	prev := ""
	signed := maxSignedThinking // what signatures may still restore
	for i, m := range in {
		path := fmt.Sprintf("messages[%d]", i)
		if m.Role == "system" {
			continue
		}
		content, e := parseContent(m.Content, path+".content")
		if e != nil {
			return nil, e
		}
		if len(content) == 0 {
			return nil, badRequest(path+".content", "%s.content: empty", path)
		}
		var turn []qwen.Message
		switch m.Role {
		case "user":
			turn, e = userTurn(nil, content, path)
		case "assistant":
			if i == last {
				return nil, badRequest(path, "%s: the last message is the assistant's: continuing a prefilled answer is not supported", path)
			}
			turn, e = assistantTurn(nil, content, path, &signed)
		default:
			return nil, badRequest(path+".role", "%s.role %q: want user, assistant or system", path, m.Role)
		}
		if e != nil {
			return nil, e
		}
		// The same role again continues the turn: its first message joins
		// the turn's last when both are text of that role (a tool result
		// stays a message of its own).
		if n := len(out); m.Role == prev && n > 0 && len(turn) > 0 && out[n-1].Role == m.Role && turn[0].Role == m.Role {
			out[n-1] = joinTurn(out[n-1], turn[0])
			turn = turn[1:]
		}
		out, prev = append(out, turn...), m.Role
	}
	return out, nil
}

// joinTurn is one message of a and b's text, reasoning and calls.
func joinTurn(a, b qwen.Message) qwen.Message {
	join := func(x, y string) string {
		if x == "" || y == "" {
			return x + y
		}
		return x + "\n\n" + y
	}
	a.Content, a.Reasoning = join(a.Content, b.Content), join(a.Reasoning, b.Reasoning)
	a.ToolCalls = append(a.ToolCalls, b.ToolCalls...)
	return a
}

// userTurn appends a user message's text, and its tool results as tool
// messages, in their order.
func userTurn(out []qwen.Message, content anthropicContent, path string) ([]qwen.Message, *apiError) {
	var text []string
	flush := func() {
		if len(text) > 0 {
			out = append(out, qwen.Message{Role: "user", Content: strings.Join(text, "\n\n")})
			text = nil
		}
	}
	for j, b := range content {
		bp := fmt.Sprintf("%s.content[%d]", path, j)
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "document":
			doc, e := documentText(b, bp)
			if e != nil {
				return nil, e
			}
			text = append(text, doc)
		case "tool_result":
			result, e := textOf(b.Content, bp+".content")
			if e != nil {
				return nil, e
			}
			if b.IsError {
				// The template has no place for it; the model must still
				// know the call failed.
				result = "Error: " + result
			}
			flush()
			out = append(out, qwen.Message{Role: "tool", Content: result, ToolCallID: b.ToolUseID})
		default:
			return nil, refuseBlock(bp, b.Type, "a user message has text, document and tool_result blocks")
		}
	}
	flush()
	return out, nil
}

// assistantTurn appends an answer given back: its text, its thinking
// (from its signature when the block has no text, at most *signed bytes
// of it, taken from *signed) and its tool calls. Anthropic's redacted
// thinking is Claude's, and is left out.
func assistantTurn(out []qwen.Message, content anthropicContent, path string, signed *int) ([]qwen.Message, *apiError) {
	var text, thinking []string
	msg := qwen.Message{Role: "assistant"}
	for j, b := range content {
		bp := fmt.Sprintf("%s.content[%d]", path, j)
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "thinking":
			text := b.Thinking
			if text == "" && b.Signature != "" {
				// Sent without its text (display "omitted"): the
				// signature has it.
				restored, err := signedThinking(b.Signature, *signed)
				if err != nil {
					return nil, badRequest(bp+".signature", "%s.signature: %v", bp, err)
				}
				text, *signed = restored, *signed-len(restored)
			}
			thinking = append(thinking, text)
		case "redacted_thinking":
		case "tool_use":
			if b.Name == "" {
				return nil, badRequest(bp+".name", "%s.name: missing", bp)
			}
			msg.ToolCalls = append(msg.ToolCalls, qwen.ToolCall{ID: b.ID, Name: b.Name, Arguments: toolArguments(b.Input)})
		default:
			return nil, refuseBlock(bp, b.Type, "an assistant message has text, thinking and tool_use blocks")
		}
	}
	msg.Content, msg.Reasoning = strings.Join(text, "\n\n"), strings.Join(thinking, "\n\n")
	return append(out, msg), nil
}

// textOf is a tool result's text: a string, or text blocks and
// tool_reference blocks, each of which is the name of the tool it
// loads. Claude Code's ToolSearch answers with these; the tools they
// load are in the prompt already, as defer_loading is not honoured.
func textOf(raw json.RawMessage, path string) (string, *apiError) {
	content, e := parseContent(raw, path)
	if e != nil {
		return "", e
	}
	var text []string
	for j, b := range content {
		bp := fmt.Sprintf("%s[%d]", path, j)
		switch {
		case b.Type == "text":
			text = append(text, b.Text)
		case b.Type == "tool_reference" && b.ToolName == "":
			return "", badRequest(bp+".tool_name", "%s.tool_name: missing", bp)
		case b.Type == "tool_reference":
			text = append(text, b.ToolName)
		case b.Type == "document":
			doc, e := documentText(b, bp)
			if e != nil {
				return "", e
			}
			text = append(text, doc)
		default:
			return "", refuseBlock(bp, b.Type, "a tool result has text, document and tool_reference blocks")
		}
	}
	return strings.Join(text, "\n\n"), nil
}

// documentText is a document block's title, context and text, joined as
// text blocks are: a plain text source, or a content source of text
// blocks. A PDF, an image or a file is refused, as the model reads text
// only; so are citations, which it cannot give.
func documentText(b anthropicBlockIn, path string) (string, *apiError) {
	var src struct {
		Type    string          `json:"type"`
		Data    string          `json:"data"`
		Content json.RawMessage `json:"content"`
	}
	if e := unmarshalAt(b.Source, path+".source", &src, "a document source, an object with a type"); e != nil {
		return "", e
	}
	var body string
	switch src.Type {
	case "text":
		body = src.Data
	case "content":
		var e *apiError
		if body, e = textOf(src.Content, path+".source.content"); e != nil {
			return "", e
		}
	default:
		return "", badRequest(path+".source.type", "%s.source.type %q: a document is read as text, from a text or content source: %s", path, src.Type, noVision)
	}
	if b.Citations != nil && b.Citations.Enabled {
		return "", badRequest(path+".citations", "%s.citations: citations are not supported", path)
	}
	var parts []string
	for _, p := range []string{b.Title, b.Context, body} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "\n\n"), nil
}

// refuseBlock refuses a block of a type that has no place there; images
// and documents are refused for what they are.
func refuseBlock(path, typ, want string) *apiError {
	switch typ {
	case "image", "document":
		return badRequest(path, "%s: %s blocks are not supported: %s", path, typ, noVision)
	case "":
		return badRequest(path+".type", "%s.type: missing", path)
	}
	return badRequest(path+".type", "%s: a %q block is not supported here: %s", path, typ, want)
}
