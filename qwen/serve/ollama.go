package serve

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/qwen"
)

// ollamaVersion is the version of Ollama's API these endpoints follow;
// clients gate features on it: thinking came with 0.9, /v1/responses with
// 0.13.4 (Codex's --oss asks for it from then on).
const ollamaVersion = "0.13.5"

// ollamaOptions are the options of Ollama's requests that apply here,
// and the samplers read to be refused unless off (typical_p, mirostat,
// tfs_z). The others change no answer here and are ignored: the hardware
// ones (num_gpu, main_gpu, use_mmap, ...), penalize_newline (which
// Ollama's own engine ignores), and num_keep (the tokens kept when a
// full context is shifted; this server never shifts one, with or
// without it: an answer ends at the context's end, done_reason
// "length").
type ollamaOptions struct {
	Temperature      *float64     `json:"temperature"`
	TopK             *wholeNumber `json:"top_k"`
	TopP             *float64     `json:"top_p"`
	MinP             *float64     `json:"min_p"`
	Seed             *wholeNumber `json:"seed"`
	NumPredict       *wholeNumber `json:"num_predict"`
	NumCtx           *wholeNumber `json:"num_ctx"`
	Stop             stopList     `json:"stop"`
	RepeatPenalty    *float64     `json:"repeat_penalty"`
	RepeatLastN      *wholeNumber `json:"repeat_last_n"`
	PresencePenalty  *float64     `json:"presence_penalty"`
	FrequencyPenalty *float64     `json:"frequency_penalty"`
	TypicalP         *float64     `json:"typical_p"`
	Mirostat         *wholeNumber `json:"mirostat"`
	TfsZ             *float64     `json:"tfs_z"`
}

// unsupported names the options that would change the answer, or what
// the client believes of it, and that this server does not do.
func (o *ollamaOptions) unsupported() *apiError {
	switch {
	case o.TypicalP != nil && *o.TypicalP != 1:
		return badRequest("options.typical_p", "options.typical_p: locally typical sampling is not supported (only 1, which is off)")
	case o.Mirostat != nil && *o.Mirostat != 0:
		return badRequest("options.mirostat", "options.mirostat: Mirostat sampling is not supported (only 0, which is off)")
	case o.TfsZ != nil && *o.TfsZ != 1:
		return badRequest("options.tfs_z", "options.tfs_z: tail-free sampling is not supported (only 1, which is off)")
	}
	return nil
}

// wholeNumber is an integer option as Ollama takes one: a number without
// a fraction, also when written as a float (42.0, 4.2e1), as clients in
// languages with one number type send it. A fraction is refused, where
// Ollama would cut it off.
type wholeNumber int64

func (*wholeNumber) want() string { return "an integer" }

func (n *wholeNumber) UnmarshalJSON(b []byte) error {
	if i, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		*n = wholeNumber(i)
		return nil
	}
	var f float64
	// Beyond 2^53 a float no longer tells whole numbers apart.
	if json.Unmarshal(b, &f) != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return shapeError(b, reflect.TypeFor[wholeNumber]())
	}
	*n = wholeNumber(f)
	return nil
}

// int is n as an int, nil when it is not given.
func (n *wholeNumber) int() *int {
	if n == nil {
		return nil
	}
	v := int(*n)
	return &v
}

// thinkFlag is Ollama's think: true, false, or a level, "low", "medium"
// or "high", the reasoning effort of that name. Unset, Qwen3 thinks.
type thinkFlag struct {
	set, on bool
	level   string
}

func (*thinkFlag) want() string { return `true, false, "low", "medium" or "high"` }

func (t *thinkFlag) UnmarshalJSON(b []byte) error {
	var on *bool
	var level string
	switch {
	case json.Unmarshal(b, &on) == nil:
		*t = thinkFlag{set: on != nil, on: on != nil && *on}
	case json.Unmarshal(b, &level) == nil && (level == "low" || level == "medium" || level == "high"):
		*t = thinkFlag{set: true, on: true, level: level}
	default:
		return shapeError(b, reflect.TypeFor[thinkFlag]())
	}
	return nil
}

func (t thinkFlag) enabled() bool { return !t.set || t.on }

// keepAlive is Ollama's keep_alive, how long the model stays loaded
// after the request: seconds as a number, or a Go duration as a string
// ("5m", "0s"), as Ollama reads it; a negative one is for ever.
type keepAlive struct {
	set bool
	d   time.Duration // negative: for ever
}

func (*keepAlive) want() string {
	return `seconds as a number, or a duration as a string ("5m", "0s"); negative for ever`
}

func (k *keepAlive) UnmarshalJSON(b []byte) error {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return shapeError(b, reflect.TypeFor[keepAlive]())
	}
	switch v := v.(type) {
	case nil:
		*k = keepAlive{}
	case float64:
		// Beyond what a Duration holds is as good as for ever.
		d := time.Duration(-1)
		if v >= 0 && v*float64(time.Second) < math.MaxInt64 {
			d = time.Duration(v * float64(time.Second))
		}
		*k = keepAlive{set: true, d: d}
	case string:
		d, err := time.ParseDuration(v)
		if err != nil {
			return shapeError(b, reflect.TypeFor[keepAlive]())
		}
		*k = keepAlive{set: true, d: max(d, -1)}
	default:
		return shapeError(b, reflect.TypeFor[keepAlive]())
	}
	return nil
}

// unload is keep_alive 0, which without a prompt is Ollama's unload.
func (k keepAlive) unload() bool { return k.set && k.d == 0 }

// keepAliveHeader gives the keep_alive a request asked for that the
// server did not honour, as a Go duration.
const keepAliveHeader = "X-Qwen-Keep-Alive-Ignored"

// keepAlive reports a keep_alive the server does not honour: a model
// stays loaded until a request names another, so only for ever (a
// negative one) is what happens; a client asking for less, to free the
// memory, is told in the header and the log line rather than left to
// believe it was freed.
func (rl *reqLog) keepAlive(k keepAlive) {
	if !k.set || k.d < 0 {
		return
	}
	rl.keepAliveIgnored = k.d.String()
	if rl.header != nil {
		rl.header.Set(keepAliveHeader, rl.keepAliveIgnored)
	}
}

type ollamaMessage struct {
	Role       string            `json:"role"`
	Content    string            `json:"content"`
	Thinking   string            `json:"thinking"`
	Images     []json.RawMessage `json:"images"`
	ToolCalls  []ollamaToolCall  `json:"tool_calls"`
	ToolName   string            `json:"tool_name"`
	ToolCallID string            `json:"tool_call_id"`
}

// ollamaToolCall is a call as Ollama gives it: the arguments an object,
// and since Ollama 0.12.10 an id, by which clients pair a call with its
// result (the tool message's tool_call_id).
type ollamaToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     *int            `json:"index,omitempty"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type ollamaChatRequest struct {
	Model     string            `json:"model"`
	Messages  []ollamaMessage   `json:"messages"`
	Tools     []json.RawMessage `json:"tools"`
	Format    json.RawMessage   `json:"format"`
	Stream    *bool             `json:"stream"`
	Think     thinkFlag         `json:"think"`
	Options   ollamaOptions     `json:"options"`
	KeepAlive keepAlive         `json:"keep_alive"`
	ollamaLogprobFields
}

type ollamaGenerateRequest struct {
	Model     string            `json:"model"`
	Format    json.RawMessage   `json:"format"`
	Prompt    string            `json:"prompt"`
	System    string            `json:"system"`
	Raw       bool              `json:"raw"`
	Stream    *bool             `json:"stream"`
	Think     thinkFlag         `json:"think"`
	Options   ollamaOptions     `json:"options"`
	Images    []json.RawMessage `json:"images"`
	KeepAlive keepAlive         `json:"keep_alive"`
	// Read to be refused, never ignored: each would change the prompt.
	Suffix   string `json:"suffix"`
	Template string `json:"template"`
	Context  []int  `json:"context"`
	ollamaLogprobFields
}

// unsupported refuses the fields of a generate request this server does
// not do, which Ollama would have put into the prompt: answering without
// them would be answering another prompt. raw says the prompt is the
// client's as it is, as it is for a model without a chat template.
func (gr *ollamaGenerateRequest) unsupported(raw bool) *apiError {
	switch {
	case gr.Suffix != "":
		return badRequest("suffix", "suffix: this server does not fill in the middle (Ollama's insert); a raw prompt may hold the model's own FIM tokens")
	case gr.Template != "":
		return badRequest("template", "template: the prompt is rendered with the model's chat format, not a request's template; use raw for a prompt of your own")
	case len(gr.Context) > 0:
		return badRequest("context", "context: this server gives no context to send back (Ollama deprecated it); send the conversation to /api/chat")
	case raw && gr.System != "":
		return badRequest("system", "system needs the chat template: not with raw, nor on a model without one")
	case raw && gr.Think.set && gr.Think.on:
		return badRequest("think", "think needs the chat template: not with raw, nor on a model without one (a raw prompt opens the thinking itself)")
	}
	return nil
}

// ollamaLogprobFields are Ollama's logprobs (since its 0.12.11), beside
// the options as Ollama has them.
type ollamaLogprobFields struct {
	Logprobs    bool `json:"logprobs"`
	TopLogprobs *int `json:"top_logprobs"`
}

// apply asks req for them; top_logprobs alone asks for them too.
func (f *ollamaLogprobFields) apply(req *qwen.Request) *apiError {
	if n := f.TopLogprobs; n != nil {
		if *n < 0 || *n > qwen.MaxTopLogprobs {
			return badRequest("top_logprobs", "top_logprobs %d is outside [0, %d]", *n, qwen.MaxTopLogprobs)
		}
		req.TopLogprobs = *n
	}
	req.Logprobs = f.Logprobs || req.TopLogprobs > 0
	return nil
}

type (
	ollamaResponse struct {
		Model      string     `json:"model"`
		CreatedAt  string     `json:"created_at"`
		Message    *ollamaOut `json:"message,omitempty"`  // /api/chat
		Response   *string    `json:"response,omitempty"` // /api/generate
		Thinking   string     `json:"thinking,omitempty"` // /api/generate
		Done       bool       `json:"done"`
		DoneReason string     `json:"done_reason,omitempty"`
		// Logprobs, when asked for, are those of this object's tokens.
		Logprobs []tokenLogprob `json:"logprobs,omitempty"`
		*ollamaStats
	}
	ollamaOut struct {
		Role      string           `json:"role"`
		Content   string           `json:"content"`
		Thinking  string           `json:"thinking,omitempty"`
		ToolCalls []ollamaToolCall `json:"tool_calls,omitempty"`
	}
	// ollamaStats are durations in nanoseconds, as Ollama gives them.
	ollamaStats struct {
		TotalDuration      time.Duration `json:"total_duration"`
		LoadDuration       time.Duration `json:"load_duration"`
		PromptEvalCount    int           `json:"prompt_eval_count"`
		PromptEvalDuration time.Duration `json:"prompt_eval_duration"`
		EvalCount          int           `json:"eval_count"`
		EvalDuration       time.Duration `json:"eval_duration"`
	}
)

// reply is a part of an answer, or the whole, in the endpoint's shape.
func (t *target) reply(isChat bool, content, thinking string) ollamaResponse {
	r := ollamaResponse{Model: t.name, CreatedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	if isChat {
		r.Message = &ollamaOut{Role: "assistant", Content: content, Thinking: thinking}
	} else {
		r.Response, r.Thinking = &content, thinking
	}
	return r
}

func (s *Server) ollamaChat(w http.ResponseWriter, r *http.Request, rl *reqLog) *apiError {
	var cr ollamaChatRequest
	if e := decode(w, r, s.opts.MaxBody, &cr); e != nil {
		return e
	}
	rl.keepAlive(cr.KeepAlive)
	if len(cr.Messages) == 0 {
		return s.ollamaLoad(w, r, rl, cr.Model, cr.KeepAlive, true)
	}
	t, e := s.model(r, rl, cr.Model)
	if e != nil {
		return e
	}
	req, e := t.ollamaChatRequest(&cr)
	if e != nil {
		return e
	}
	if e := cr.apply(&req); e != nil {
		return e
	}
	return s.ollamaRun(w, r, rl, t, &cr.Options, cr.Think, req, cr.Stream, true)
}

// ollamaChatRequest checks an Ollama chat request's conversation, tools
// and format and makes them a qwen.Request. A tool message's tool_name
// is read and left out, as Qwen's templates leave it: the results follow
// the calls in their order, or, when each names its call by
// tool_call_id, are put in it.
func (t *target) ollamaChatRequest(cr *ollamaChatRequest) (qwen.Request, *apiError) {
	msgs := make([]qwen.Message, len(cr.Messages))
	for i, m := range cr.Messages {
		// Ollama takes "User" or "ASSISTANT" as it does the lower case.
		m.Role = strings.ToLower(m.Role)
		switch {
		case m.Role != "system" && m.Role != "user" && m.Role != "assistant" && m.Role != "tool":
			return qwen.Request{}, badRequest("messages", "messages[%d]: unknown role %q: want system, user, assistant or tool", i, m.Role)
		case len(m.Images) > 0:
			return qwen.Request{}, badRequest("messages", "messages[%d].images: %s", i, noVision)
		case len(m.ToolCalls) > 0 && m.Role != "assistant":
			return qwen.Request{}, badRequest("messages", "messages[%d]: only an assistant message has tool_calls", i)
		case m.Role == "assistant" && i == len(cr.Messages)-1:
			// Ollama continues a last assistant message (a prefill); the
			// template here would close it and answer anew.
			return qwen.Request{}, badRequest("messages", "messages[%d]: the last message is the assistant's: continuing a prefilled answer is not supported", i)
		}
		msgs[i] = qwen.Message{Role: m.Role, Content: m.Content, Reasoning: m.Thinking}
		if m.Role == "tool" {
			msgs[i].ToolCallID = m.ToolCallID
		}
		for j, c := range m.ToolCalls {
			path := fmt.Sprintf("messages[%d].tool_calls[%d].function", i, j)
			if c.Function.Name == "" {
				return qwen.Request{}, badRequest("messages", "%s.name: missing", path)
			}
			msgs[i].ToolCalls = append(msgs[i].ToolCalls, qwen.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: toolArguments(c.Function.Arguments)})
		}
	}
	if e := t.needsChat(); e != nil {
		return qwen.Request{}, e
	}
	tools, e := parseTools(cr.Tools)
	if e != nil {
		return qwen.Request{}, e
	}
	req := qwen.Request{Messages: msgs, Tools: tools, NoThinking: !cr.Think.enabled()}
	if e := ollamaFormat(cr.Format, &req); e != nil {
		return qwen.Request{}, e
	}
	return req, nil
}

func (s *Server) ollamaGenerate(w http.ResponseWriter, r *http.Request, rl *reqLog) *apiError {
	var gr ollamaGenerateRequest
	if e := decode(w, r, s.opts.MaxBody, &gr); e != nil {
		return e
	}
	rl.keepAlive(gr.KeepAlive)
	if gr.Prompt == "" {
		return s.ollamaLoad(w, r, rl, gr.Model, gr.KeepAlive, false)
	}
	t, e := s.model(r, rl, gr.Model)
	if e != nil {
		return e
	}
	raw := gr.Raw || t.info.ChatTemplate == ""
	if e := gr.unsupported(raw); e != nil {
		return e
	}
	switch {
	case len(gr.Images) > 0:
		return badRequest("images", "images: %s", noVision)
	case raw && len(gr.Format) > 0 && string(gr.Format) != "null" && string(gr.Format) != `""`:
		return badRequest("format", "format needs the chat template: not with raw")
	case raw:
		req := qwen.Request{Prompt: gr.Prompt}
		if e := gr.apply(&req); e != nil {
			return e
		}
		return s.ollamaRun(w, r, rl, t, &gr.Options, thinkFlag{}, req, gr.Stream, false)
	}
	// Like Ollama, the prompt is a user message in the chat template.
	var msgs []qwen.Message
	if gr.System != "" {
		msgs = append(msgs, qwen.Message{Role: "system", Content: gr.System})
	}
	req := qwen.Request{Messages: append(msgs, qwen.Message{Role: "user", Content: gr.Prompt}), NoThinking: !gr.Think.enabled()}
	if e := ollamaFormat(gr.Format, &req); e != nil {
		return e
	}
	if e := gr.apply(&req); e != nil {
		return e
	}
	return s.ollamaRun(w, r, rl, t, &gr.Options, gr.Think, req, gr.Stream, false)
}

// ollamaLoad answers a request without a prompt, Ollama's way to load a
// model, or with keep_alive 0 to unload it. The weights stay where they
// are (the served model is its caller's, and the server keeps one model
// at a time anyway; the header says so): an unload drops what the model
// holds beyond them, the KV caches of finished requests, and does not
// load a model that is not resident only to drop nothing.
func (s *Server) ollamaLoad(w http.ResponseWriter, r *http.Request, rl *reqLog, name string, k keepAlive, isChat bool) *apiError {
	reason := "load"
	if k.unload() {
		reason = "unload"
		n, file, ok := s.models.lookup(name)
		switch {
		case name == "":
			return badRequest("model", "model is required")
		case !ok:
			return s.unknownModel(r, name)
		}
		if cur := s.models.resident(); cur == nil || cur.path != file {
			return (&target{name: n}).done(w, isChat, reason)
		}
	}
	// Any model unloads (ollama stop sends this for an embedding model
	// too), as Ollama's; only one that generates loads.
	get := s.model
	if k.unload() {
		get = s.anyModel
	}
	t, e := get(r, rl, name)
	if e != nil {
		return e
	}
	if k.unload() {
		t.m.ClearCache()
	}
	return t.done(w, isChat, reason)
}

// done is Ollama's answer without a generation: load or unload.
func (t *target) done(w http.ResponseWriter, isChat bool, reason string) *apiError {
	resp := t.reply(isChat, "", "")
	resp.Done, resp.DoneReason = true, reason
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// ollamaRun generates and answers with JSON lines, or with one object
// when stream is false. A think level bounds the thinking as the
// reasoning effort of its name, within num_predict.
func (s *Server) ollamaRun(w http.ResponseWriter, r *http.Request, rl *reqLog, t *target, o *ollamaOptions, think thinkFlag, req qwen.Request,
	stream *bool, isChat bool) *apiError {
	if e := t.ollamaOptions(o, &req); e != nil {
		return e
	}
	// Ollama refuses to think with a model that does not, rather than
	// answer without the thinking the client asked for.
	if think.set && think.on && !thinks(t.info) {
		return badRequest("think", "think: %q does not support thinking (its chat format, %s, has none); leave think out or set it false", t.name, cmp.Or(t.info.ChatTemplate, "none"))
	}
	if think.level != "" {
		if e := t.effort(think.level, "think", &req); e != nil {
			return e
		}
	}
	prompt := "prompt"
	if isChat {
		prompt = "messages"
	}
	g, e := s.start(r.Context(), rl, t, req, requestFields{"format", toolPaths(req.Tools, "tools[%d].function.parameters"), prompt})
	if e != nil {
		return e
	}
	return s.ollamaAnswer(w, r, t, g, stream == nil || *stream, isChat)
}

// ollamaAnswer streams JSON lines, each a part of the answer, the last
// with done and the counts (or, if the generation fails, an error line,
// as Ollama ends such a stream); or sends the whole answer as one object.
func (s *Server) ollamaAnswer(w http.ResponseWriter, r *http.Request, t *target, g *generation, stream, isChat bool) *apiError {
	var ls *lineStream
	if stream {
		ls = s.startStream(w, false)
	}
	var content, thinking strings.Builder
	var lps []tokenLogprob
	// Ollama gives each call whole, once it is complete: when the next
	// begins, or at the end.
	var calls callAccumulator
	sent := 0
	sendCalls := func(upTo int) error {
		if upTo <= sent {
			return nil
		}
		r := t.reply(true, "", "")
		r.Message.ToolCalls = ollamaCalls(calls.calls[sent:upTo], sent)
		sent = upTo
		return ls.send(r)
	}
	out, err := g.run(func(d qwen.Delta) error {
		calls.add(d.ToolCalls)
		if ls == nil {
			content.WriteString(d.Content)
			thinking.WriteString(d.Reasoning)
			lps = append(lps, logprobsOf(d.Logprobs)...)
			return nil
		}
		if d.Content != "" || d.Reasoning != "" || len(d.Logprobs) > 0 {
			part := t.reply(isChat, d.Content, d.Reasoning)
			part.Logprobs = logprobsOf(d.Logprobs)
			if err := ls.send(part); err != nil {
				return err
			}
		}
		return sendCalls(len(calls.calls) - 1)
	})
	if err != nil {
		e := g.failure(err)
		if e != nil && ls != nil {
			ls.send(map[string]string{"error": e.msg})
			return nil
		}
		return e
	}
	final := t.reply(isChat, content.String(), thinking.String())
	final.Logprobs = lps
	if ls == nil && isChat {
		final.Message.ToolCalls = ollamaCalls(calls.calls, 0)
	} else if ls != nil && sendCalls(len(calls.calls)) != nil {
		return nil
	}
	final.Done, final.DoneReason = true, out.finish
	if out.finish == "tool_calls" {
		final.DoneReason = "stop" // Ollama's, with calls or without
	}
	u := out.usage
	final.ollamaStats = &ollamaStats{TotalDuration: time.Since(g.rl.start), LoadDuration: u.Queued,
		PromptEvalCount: u.PromptTokens - u.CachedTokens, PromptEvalDuration: u.Total - u.Queued, EvalCount: u.CompletionTokens}
	if u.CompletionTokens > 0 {
		final.PromptEvalDuration, final.EvalDuration = u.TimeToFirstToken-u.Queued, u.Total-u.TimeToFirstToken
	}
	if ls == nil {
		writeJSON(w, http.StatusOK, final)
	} else {
		ls.send(final)
	}
	return nil
}

// ollamaCalls gives calls in Ollama's shape, numbered from first. A call
// whose arguments are not a JSON object (a model writing without a
// grammar can make one) keeps its text as a string, for the client to
// see and refuse, rather than vanish.
func ollamaCalls(calls []qwen.ToolCall, first int) []ollamaToolCall {
	out := make([]ollamaToolCall, len(calls))
	for i, c := range calls {
		index := first + i
		out[i].ID, out[i].Function.Index, out[i].Function.Name = c.ID, &index, c.Name
		if json.Valid([]byte(c.Arguments)) && strings.HasPrefix(strings.TrimSpace(c.Arguments), "{") {
			out[i].Function.Arguments = json.RawMessage(c.Arguments)
		} else {
			out[i].Function.Arguments, _ = json.Marshal(c.Arguments)
		}
	}
	return out
}

// ollamaOptions maps Ollama's options onto req.
func (t *target) ollamaOptions(o *ollamaOptions, req *qwen.Request) *apiError {
	if e := o.unsupported(); e != nil {
		return e
	}
	var seed *int64
	if o.Seed != nil {
		seed = (*int64)(o.Seed)
	}
	params, e := samplingParams(t.info.Sampling, seed,
		floatParam("temperature", "temperature", o.Temperature),
		floatParam("top_p", "top_p", o.TopP),
		floatParam("min_p", "min_p", o.MinP),
		floatParam("repeat_penalty", "repeat_penalty", o.RepeatPenalty),
		floatParam("presence_penalty", "presence_penalty", o.PresencePenalty),
		floatParam("frequency_penalty", "frequency_penalty", o.FrequencyPenalty),
		intParam("top_k", "top_k", o.TopK.int()),
		intParam("repeat_last_n", "repeat_last_n", o.RepeatLastN.int()))
	if e != nil {
		return e
	}
	req.Sampling, req.Stop = &params, o.Stop
	// Ollama's num_predict: -1 (or any value below 1) is no limit.
	if o.NumPredict != nil && *o.NumPredict > 0 {
		req.MaxTokens = int(*o.NumPredict)
	}
	var e2 *apiError
	req.Context, e2 = t.numCtx(o.NumCtx.int())
	return e2
}

// numCtx is Ollama's num_ctx, which bounds a request below the server's
// context; 0 when not set.
func (t *target) numCtx(n *int) (int, *apiError) {
	if n == nil || *n <= 0 {
		return 0, nil
	}
	if *n > t.info.Context {
		return 0, badRequest("num_ctx", "num_ctx %d is larger than the server's context of %d tokens (qwenrun serve --ctx)", *n, t.info.Context)
	}
	return *n, nil
}

// ollamaDetails are the details Ollama gives of a model.
type ollamaDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

func detailsOf(info qwen.Info) ollamaDetails {
	size := fmt.Sprintf("%.2fM", float64(info.Parameters)/1e6)
	if info.Parameters >= 1e9 {
		size = fmt.Sprintf("%.1fB", float64(info.Parameters)/1e9)
	}
	return ollamaDetails{Format: "qbin", Family: info.Architecture, Families: []string{info.Architecture},
		ParameterSize: size, QuantizationLevel: strings.ToUpper(info.WeightType)}
}

// ollamaModelEntry is a model of /api/tags, or of /api/ps with the
// fields of a loaded one.
type ollamaModelEntry struct {
	Name          string        `json:"name"`
	Model         string        `json:"model"`
	ModifiedAt    string        `json:"modified_at,omitempty"`
	Size          int64         `json:"size"`
	Digest        string        `json:"digest"`
	Details       ollamaDetails `json:"details"`
	ExpiresAt     string        `json:"expires_at,omitempty"`
	SizeVRAM      *int64        `json:"size_vram,omitempty"`
	ContextLength int           `json:"context_length,omitempty"`
}

// ollamaDigest stands for the digest of Ollama's manifest, of which
// `ollama list` and `ollama ps` print the first 12 hex digits: an empty
// one crashes them. Hashing a file of gigabytes at each listing would be
// too slow, so it hashes what tells the file apart (its path, size and
// modification time), and changes when the file does, as clients that
// cache by digest expect.
func ollamaDigest(info qwen.Info) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%d", info.Path, info.FileSize, info.Modified.UnixNano())
	return hex.EncodeToString(h.Sum(nil))
}

// ollamaTags lists every model a request may name; one whose file
// cannot be read is left out (the request naming it says why).
func (s *Server) ollamaTags(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	models := []ollamaModelEntry{}
	for _, n := range s.models.names() {
		info, err := s.models.info(n)
		if err != nil {
			continue
		}
		models = append(models, ollamaModelEntry{Name: n + ":latest", Model: n + ":latest", ModifiedAt: info.Modified.Format(time.RFC3339Nano),
			Size: info.FileSize, Digest: ollamaDigest(info), Details: detailsOf(info)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"models": models})
	return nil
}

// ollamaPull answers Ollama's pull of a model the server has as Ollama
// does for one it holds: done at once. Clients pull the model they are
// given before they use it (Codex's --oss does, unless /api/tags lists
// the name as given). A model the server does not have is not fetched:
// 404, naming the ones it has.
func (s *Server) ollamaPull(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	var pr struct {
		Model  string `json:"model"`
		Name   string `json:"name"` // Ollama's older field
		Stream *bool  `json:"stream"`
	}
	if e := decode(w, r, s.opts.MaxBody, &pr); e != nil {
		return e
	}
	name := cmp.Or(pr.Model, pr.Name)
	if name == "" {
		return badRequest("model", "model is required")
	}
	if _, _, ok := s.models.lookup(name); !ok {
		e := s.unknownModel(r, name)
		e.msg += "; qwenrun serve does not pull models"
		return e
	}
	done := struct {
		Status string `json:"status"`
	}{"success"}
	if pr.Stream != nil && !*pr.Stream {
		writeJSON(w, http.StatusOK, done)
		return nil
	}
	s.startStream(w, false).send(done)
	return nil
}

// ollamaPS lists the loaded model under each of its names: it stays
// loaded until a request names another, so it never expires (as
// Ollama's keep_alive -1 gives it), and it runs on the CPU, in no VRAM.
func (s *Server) ollamaPS(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	models := []ollamaModelEntry{}
	if cur := s.models.resident(); cur != nil {
		st := cur.m.Stats()
		zero := int64(0)
		for _, n := range s.models.names() {
			if s.models.files[n] != cur.path {
				continue
			}
			models = append(models, ollamaModelEntry{Name: n + ":latest", Model: n + ":latest", Size: cur.info.FileSize + st.KVBytes + st.CachedBytes,
				Digest: ollamaDigest(cur.info), Details: detailsOf(cur.info), ExpiresAt: time.Now().Add(math.MaxInt64).Format(time.RFC3339Nano),
				SizeVRAM: &zero, ContextLength: cur.info.Context})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"models": models})
	return nil
}

// ollamaShow is /api/show: how the model is run, as Ollama describes a
// model (its Modelfile, parameters, template, details, model_info and
// capabilities), without loading it.
func (s *Server) ollamaShow(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	var sr struct {
		Model   string `json:"model"`
		Name    string `json:"name"` // Ollama's older field
		Verbose bool   `json:"verbose"`
	}
	if e := decode(w, r, s.opts.MaxBody, &sr); e != nil {
		return e
	}
	name := cmp.Or(sr.Model, sr.Name)
	if name == "" {
		return badRequest("model", "model is required")
	}
	n, _, ok := s.models.lookup(name)
	if !ok {
		return s.unknownModel(r, name)
	}
	info, err := s.models.info(n)
	if err != nil {
		return &apiError{status: http.StatusInternalServerError, msg: fmt.Sprintf("model %q: %v", n, err)}
	}
	ctx := info.Context
	if ctx == 0 { // not loaded: its own maximum
		ctx = info.MaxContext
	}
	arch := info.Architecture
	tmpl, params := ollamaTemplate(info), ollamaParameters(info)
	var mf strings.Builder
	fmt.Fprintf(&mf, "# Modelfile generated by qwenrun serve\nFROM %s\n", info.Path)
	if tmpl != "" {
		fmt.Fprintf(&mf, "TEMPLATE \"\"\"%s\"\"\"\n", tmpl)
	}
	for line := range strings.Lines(params) {
		mf.WriteString("PARAMETER " + line)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"modelfile": mf.String(), "parameters": params, "template": tmpl, "details": detailsOf(info),
		"model_info": map[string]any{
			"general.architecture": arch, "general.basename": info.Name, "general.parameter_count": info.Parameters,
			"general.file_type":      ggmlFileType[info.WeightType],
			arch + ".context_length": ctx, arch + ".embedding_length": info.Hidden, arch + ".block_count": info.Layers,
			arch + ".vocab_size": info.Vocab,
		},
		"capabilities": capabilities(info),
		"modified_at":  info.Modified.Format(time.RFC3339Nano),
	})
	return nil
}

// ggmlFileType is the number of ggml's file type (llama_ftype) nearest to
// each weight type, which Ollama's model_info gives as general.file_type
// and clients read as a number: q8 is Q8_0's layout; a q4 file keeps its
// LM head and some projections at q6, as Q4_K_M does.
var ggmlFileType = map[string]int{"f16": 1, "q8": 7, "q4": 15}

// capabilities are Ollama's names for what a model does.
func capabilities(info qwen.Info) []string {
	if info.Embedding {
		return []string{"embedding"}
	}
	caps := []string{"completion"}
	if f, err := chat.Lookup(info.ChatTemplate); info.ChatTemplate != "" && err == nil {
		if _, tools := f.CallSyntax(); tools {
			caps = append(caps, "tools")
		}
		if thinks(info) {
			caps = append(caps, "thinking")
		}
	}
	return caps
}

// ollamaParameters are the model's sampling defaults (its generation
// config) and stop strings, as a Modelfile's PARAMETER lines.
func ollamaParameters(info qwen.Info) string {
	p := info.Sampling
	var b strings.Builder
	fmt.Fprintf(&b, "temperature %g\n", p.Temperature)
	if p.TopK > 0 {
		fmt.Fprintf(&b, "top_k %d\n", p.TopK)
	}
	if p.TopP > 0 && p.TopP < 1 {
		fmt.Fprintf(&b, "top_p %g\n", p.TopP)
	}
	if p.MinP > 0 {
		fmt.Fprintf(&b, "min_p %g\n", p.MinP)
	}
	if p.RepeatPenalty > 0 && p.RepeatPenalty != 1 {
		fmt.Fprintf(&b, "repeat_penalty %g\n", p.RepeatPenalty)
	}
	if info.ChatTemplate != "" {
		fmt.Fprintf(&b, "stop %q\nstop %q\n", chat.ImEnd, "<|endoftext|>")
	}
	return b.String()
}

// ollamaTemplate is the model's chat format written as an Ollama
// template: ChatML, with Qwen's tool format for the families that have
// it; a model without a chat template takes the prompt as it is. The
// server renders prompts with Qwen's own templates; this says what
// they do to a client that reads it (Continue looks for .Tools).
func ollamaTemplate(info qwen.Info) string {
	f, err := chat.Lookup(info.ChatTemplate)
	switch {
	case info.Embedding:
		return ""
	case info.ChatTemplate == "" || err != nil:
		return "{{ .Prompt }}"
	}
	if _, tools := f.CallSyntax(); !tools {
		return chatMLTemplate
	}
	return qwenToolsTemplate
}

const chatMLTemplate = `{{- range .Messages }}<|im_start|>{{ .Role }}
{{ .Content }}<|im_end|>
{{ end }}<|im_start|>assistant
`

const qwenToolsTemplate = `{{- if or .System .Tools }}<|im_start|>system
{{- if .System }}
{{ .System }}
{{- end }}
{{- if .Tools }}

# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{{- range .Tools }}
{{ . }}
{{- end }}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call>
{{- end }}<|im_end|>
{{ end }}
{{- range $i, $_ := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 -}}
{{- if eq .Role "user" }}<|im_start|>user
{{ .Content }}<|im_end|>
{{ else if eq .Role "assistant" }}<|im_start|>assistant
{{ if .Thinking }}<think>
{{ .Thinking }}
</think>

{{ end }}{{ .Content }}
{{- range .ToolCalls }}
<tool_call>
{"name": "{{ .Function.Name }}", "arguments": {{ .Function.Arguments }}}
</tool_call>
{{- end }}{{ if not $last }}<|im_end|>
{{ end }}
{{- else if eq .Role "tool" }}<|im_start|>user
<tool_response>
{{ .Content }}
</tool_response><|im_end|>
{{ end }}
{{- if and (ne .Role "assistant") $last }}<|im_start|>assistant
{{ end }}
{{- end }}`

func (s *Server) ollamaVersion(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	writeJSON(w, http.StatusOK, map[string]string{"version": ollamaVersion})
	return nil
}
