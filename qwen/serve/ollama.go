package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/qwenc/qwenc/qwen"
)

// ollamaVersion is the version of Ollama's API these endpoints follow;
// clients gate features on it (thinking came with 0.9).
const ollamaVersion = "0.12.0"

// ollamaOptions are the options of Ollama's requests that apply here;
// the others (num_gpu, mirostat, ...) are ignored.
type ollamaOptions struct {
	Temperature      *float64 `json:"temperature"`
	TopK             *int     `json:"top_k"`
	TopP             *float64 `json:"top_p"`
	MinP             *float64 `json:"min_p"`
	Seed             *int64   `json:"seed"`
	NumPredict       *int     `json:"num_predict"`
	NumCtx           *int     `json:"num_ctx"`
	Stop             stopList `json:"stop"`
	RepeatPenalty    *float64 `json:"repeat_penalty"`
	RepeatLastN      *int     `json:"repeat_last_n"`
	PresencePenalty  *float64 `json:"presence_penalty"`
	FrequencyPenalty *float64 `json:"frequency_penalty"`
}

// thinkFlag is Ollama's think: true, false, or a level, which Qwen3
// takes as true. Unset, Qwen3 thinks.
type thinkFlag struct{ set, on bool }

func (t *thinkFlag) UnmarshalJSON(b []byte) error {
	var on *bool
	var level string
	switch {
	case json.Unmarshal(b, &on) == nil:
		*t = thinkFlag{on != nil, on != nil && *on}
	case json.Unmarshal(b, &level) == nil && (level == "low" || level == "medium" || level == "high"):
		*t = thinkFlag{true, true}
	default:
		return &fieldError{"think", `want true, false, "low", "medium" or "high"`}
	}
	return nil
}

func (t thinkFlag) enabled() bool { return !t.set || t.on }

type ollamaMessage struct {
	Role      string            `json:"role"`
	Content   string            `json:"content"`
	Thinking  string            `json:"thinking"`
	Images    []json.RawMessage `json:"images"`
	ToolCalls []ollamaToolCall  `json:"tool_calls"`
	ToolName  string            `json:"tool_name"`
}

// ollamaToolCall is a call as Ollama gives it: the arguments an object.
type ollamaToolCall struct {
	Function struct {
		Index     *int            `json:"index,omitempty"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type ollamaChatRequest struct {
	Model    string            `json:"model"`
	Messages []ollamaMessage   `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
	Format   json.RawMessage   `json:"format"`
	Stream   *bool             `json:"stream"`
	Think    thinkFlag         `json:"think"`
	Options  ollamaOptions     `json:"options"`
}

type ollamaGenerateRequest struct {
	Model   string            `json:"model"`
	Format  json.RawMessage   `json:"format"`
	Prompt  string            `json:"prompt"`
	System  string            `json:"system"`
	Raw     bool              `json:"raw"`
	Stream  *bool             `json:"stream"`
	Think   thinkFlag         `json:"think"`
	Options ollamaOptions     `json:"options"`
	Images  []json.RawMessage `json:"images"`
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

// ollamaModel accepts the served model's name, alone or with Ollama's
// default tag.
func (s *Server) ollamaModel(name string) *apiError {
	switch name {
	case "":
		return badRequest("model", "model is required")
	case s.opts.Name, s.opts.Name + ":latest":
		return nil
	}
	return &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("model %q not found: this server runs %q", name, s.opts.Name)}
}

// reply is a part of an answer, or the whole, in the endpoint's shape.
func (s *Server) reply(isChat bool, content, thinking string) ollamaResponse {
	r := ollamaResponse{Model: s.opts.Name, CreatedAt: time.Now().UTC().Format(time.RFC3339Nano)}
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
	if e := s.ollamaModel(cr.Model); e != nil {
		return e
	}
	if len(cr.Messages) == 0 {
		return s.loaded(w, true) // Ollama's way to load a model
	}
	req, e := s.ollamaChatRequest(&cr)
	if e != nil {
		return e
	}
	return s.ollamaRun(w, r, rl, &cr.Options, req, cr.Stream, true)
}

// ollamaChatRequest checks an Ollama chat request's conversation, tools
// and format and makes them a qwen.Request. A tool message's tool_name
// is read and left out, as Qwen's templates leave it: the results follow
// the calls in their order.
func (s *Server) ollamaChatRequest(cr *ollamaChatRequest) (qwen.Request, *apiError) {
	msgs := make([]qwen.Message, len(cr.Messages))
	for i, m := range cr.Messages {
		switch {
		case m.Role != "system" && m.Role != "user" && m.Role != "assistant" && m.Role != "tool":
			return qwen.Request{}, badRequest("messages", "messages[%d]: unknown role %q: want system, user, assistant or tool", i, m.Role)
		case len(m.Images) > 0:
			return qwen.Request{}, badRequest("messages", "messages[%d]: images: this model reads text only", i)
		case len(m.ToolCalls) > 0 && m.Role != "assistant":
			return qwen.Request{}, badRequest("messages", "messages[%d]: only an assistant message has tool_calls", i)
		}
		msgs[i] = qwen.Message{Role: m.Role, Content: m.Content, Reasoning: m.Thinking}
		for j, c := range m.ToolCalls {
			path := fmt.Sprintf("messages[%d].tool_calls[%d].function", i, j)
			if c.Function.Name == "" {
				return qwen.Request{}, badRequest("messages", "%s.name: missing", path)
			}
			args, e := toolArguments(c.Function.Arguments, path+".arguments")
			if e != nil {
				return qwen.Request{}, e
			}
			msgs[i].ToolCalls = append(msgs[i].ToolCalls, qwen.ToolCall{Name: c.Function.Name, Arguments: args})
		}
	}
	if e := s.needsChat(); e != nil {
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
	if e := s.ollamaModel(gr.Model); e != nil {
		return e
	}
	switch {
	case gr.Prompt == "":
		return s.loaded(w, false)
	case len(gr.Images) > 0:
		return badRequest("images", "images: this model reads text only")
	case (gr.Raw || s.info.ChatTemplate == "") && len(gr.Format) > 0 && string(gr.Format) != "null" && string(gr.Format) != `""`:
		return badRequest("format", "format needs the chat template: not with raw")
	case gr.Raw || s.info.ChatTemplate == "":
		return s.ollamaRun(w, r, rl, &gr.Options, qwen.Request{Prompt: gr.Prompt}, gr.Stream, false)
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
	return s.ollamaRun(w, r, rl, &gr.Options, req, gr.Stream, false)
}

// loaded is Ollama's answer to a request without a prompt.
func (s *Server) loaded(w http.ResponseWriter, isChat bool) *apiError {
	resp := s.reply(isChat, "", "")
	resp.Done, resp.DoneReason = true, "load"
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// ollamaRun generates and answers with JSON lines, or with one object
// when stream is false.
func (s *Server) ollamaRun(w http.ResponseWriter, r *http.Request, rl *reqLog, o *ollamaOptions, req qwen.Request,
	stream *bool, isChat bool) *apiError {
	if e := s.ollamaOptions(o, &req); e != nil {
		return e
	}
	g, e := s.start(r.Context(), rl, req)
	if e != nil {
		return e
	}
	s.ollamaAnswer(w, r, g, stream == nil || *stream, isChat)
	return nil
}

// ollamaAnswer streams JSON lines, each a part of the answer, the last
// with done and the counts; or sends the whole answer as one object.
func (s *Server) ollamaAnswer(w http.ResponseWriter, r *http.Request, g *generation, stream, isChat bool) {
	var ls *lineStream
	if stream {
		ls = startStream(w, false)
	}
	var content, thinking strings.Builder
	// Ollama gives each call whole, once it is complete: when the next
	// begins, or at the end.
	var calls callAccumulator
	sent := 0
	sendCalls := func(upTo int) error {
		if upTo <= sent {
			return nil
		}
		r := s.reply(true, "", "")
		r.Message.ToolCalls = ollamaCalls(calls.calls[sent:upTo], sent)
		sent = upTo
		return ls.send(r)
	}
	out, err := g.run(func(d qwen.Delta) error {
		calls.add(d.ToolCalls)
		if ls == nil {
			content.WriteString(d.Content)
			thinking.WriteString(d.Reasoning)
			return nil
		}
		if d.Content != "" || d.Reasoning != "" {
			if err := ls.send(s.reply(isChat, d.Content, d.Reasoning)); err != nil {
				return err
			}
		}
		return sendCalls(len(calls.calls) - 1)
	})
	if err != nil {
		return // the client has gone
	}
	final := s.reply(isChat, content.String(), thinking.String())
	if ls == nil && isChat {
		final.Message.ToolCalls = ollamaCalls(calls.calls, 0)
	} else if ls != nil && sendCalls(len(calls.calls)) != nil {
		return
	}
	final.Done, final.DoneReason = true, out.finish
	if out.finish == "tool_calls" {
		final.DoneReason = "stop" // Ollama's, with calls or without
	}
	u := out.usage
	final.ollamaStats = &ollamaStats{TotalDuration: time.Since(g.rl.start), LoadDuration: u.Queued,
		PromptEvalCount: u.PromptTokens, PromptEvalDuration: u.Total - u.Queued, EvalCount: u.CompletionTokens}
	if u.CompletionTokens > 0 {
		final.PromptEvalDuration, final.EvalDuration = u.TimeToFirstToken-u.Queued, u.Total-u.TimeToFirstToken
	}
	if ls == nil {
		writeJSON(w, http.StatusOK, final)
	} else {
		ls.send(final)
	}
}

// ollamaCalls gives calls in Ollama's shape, numbered from first. A call
// whose arguments are not a JSON object (a model writing without a
// grammar can make one) keeps its text as a string, for the client to
// see and refuse, rather than vanish.
func ollamaCalls(calls []qwen.ToolCall, first int) []ollamaToolCall {
	out := make([]ollamaToolCall, len(calls))
	for i, c := range calls {
		index := first + i
		out[i].Function.Index, out[i].Function.Name = &index, c.Name
		if json.Valid([]byte(c.Arguments)) && strings.HasPrefix(strings.TrimSpace(c.Arguments), "{") {
			out[i].Function.Arguments = json.RawMessage(c.Arguments)
		} else {
			out[i].Function.Arguments, _ = json.Marshal(c.Arguments)
		}
	}
	return out
}

// ollamaOptions maps Ollama's options onto req.
func (s *Server) ollamaOptions(o *ollamaOptions, req *qwen.Request) *apiError {
	params, e := samplingParams(s.info.Sampling, o.Seed,
		floatParam("temperature", "temperature", o.Temperature),
		floatParam("top_p", "top_p", o.TopP),
		floatParam("min_p", "min_p", o.MinP),
		floatParam("repeat_penalty", "repeat_penalty", o.RepeatPenalty),
		floatParam("presence_penalty", "presence_penalty", o.PresencePenalty),
		floatParam("frequency_penalty", "frequency_penalty", o.FrequencyPenalty),
		intParam("top_k", "top_k", o.TopK),
		intParam("repeat_last_n", "repeat_last_n", o.RepeatLastN))
	if e != nil {
		return e
	}
	req.Sampling, req.Stop = &params, o.Stop
	// Ollama's num_predict: -1 (or any value below 1) is no limit.
	if o.NumPredict != nil && *o.NumPredict > 0 {
		req.MaxTokens = *o.NumPredict
	}
	if n := o.NumCtx; n != nil && *n > 0 {
		if *n > s.info.Context {
			return badRequest("num_ctx", "num_ctx %d is larger than the server's context of %d tokens (qwenrun serve --ctx)", *n, s.info.Context)
		}
		req.Context = *n
	}
	return nil
}

func (s *Server) ollamaTags(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	info := s.info
	size := fmt.Sprintf("%.2fM", float64(info.Parameters)/1e6)
	if info.Parameters >= 1e9 {
		size = fmt.Sprintf("%.1fB", float64(info.Parameters)/1e9)
	}
	name := s.opts.Name + ":latest"
	writeJSON(w, http.StatusOK, map[string]any{"models": []map[string]any{{
		"name": name, "model": name, "modified_at": info.Modified.Format(time.RFC3339Nano), "size": info.FileSize, "digest": "",
		"details": map[string]any{"parent_model": "", "format": "qbin", "family": info.Architecture,
			"families": []string{info.Architecture}, "parameter_size": size,
			"quantization_level": strings.ToUpper(info.WeightType)},
	}}})
	return nil
}

func (s *Server) ollamaVersion(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	writeJSON(w, http.StatusOK, map[string]string{"version": ollamaVersion})
	return nil
}
