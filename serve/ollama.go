package serve

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/qwenc/qwenc/chat"
	"github.com/qwenc/qwenc/format"
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
	Role     string            `json:"role"`
	Content  string            `json:"content"`
	Thinking string            `json:"thinking"`
	Images   []json.RawMessage `json:"images"`
}

type ollamaChatRequest struct {
	Model    string          `json:"model"`
	Messages []ollamaMessage `json:"messages"`
	Stream   *bool           `json:"stream"`
	Think    thinkFlag       `json:"think"`
	Options  ollamaOptions   `json:"options"`
}

type ollamaGenerateRequest struct {
	Model   string            `json:"model"`
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
		Role     string `json:"role"`
		Content  string `json:"content"`
		Thinking string `json:"thinking,omitempty"`
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
	msgs := make([]chat.Message, len(cr.Messages))
	for i, m := range cr.Messages {
		switch {
		case m.Role != "system" && m.Role != "user" && m.Role != "assistant":
			return badRequest("messages", "messages[%d]: unknown role %q: want system, user or assistant", i, m.Role)
		case len(m.Images) > 0:
			return badRequest("messages", "messages[%d]: images: this model reads text only", i)
		}
		msgs[i] = chat.Message{Role: m.Role, Content: m.Content, Reasoning: m.Thinking}
	}
	prompt, e := s.chatPrompt(msgs, cr.Think.enabled())
	if e != nil {
		return e
	}
	return s.ollamaRun(w, r, rl, &cr.Options, prompt, chat.NewSplitter(s.m.Tokenizer, false), cr.Stream, true)
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
	case gr.Raw || !s.hasChat:
		prompt := s.m.Tokenizer.Encode(gr.Prompt, true)
		return s.ollamaRun(w, r, rl, &gr.Options, prompt, rawText{s.m.Tokenizer.NewStreamDecoder()}, gr.Stream, false)
	}
	// Like Ollama, the prompt is a user message in the chat template.
	var msgs []chat.Message
	if gr.System != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: gr.System})
	}
	prompt, e := s.chatPrompt(append(msgs, chat.Message{Role: "user", Content: gr.Prompt}), gr.Think.enabled())
	if e != nil {
		return e
	}
	return s.ollamaRun(w, r, rl, &gr.Options, prompt, chat.NewSplitter(s.m.Tokenizer, false), gr.Stream, false)
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
func (s *Server) ollamaRun(w http.ResponseWriter, r *http.Request, rl *reqLog, o *ollamaOptions, prompt []int32,
	src textSource, stream *bool, isChat bool) *apiError {
	req, e := s.ollamaRequest(o, prompt)
	if e != nil {
		return e
	}
	g, e := s.start(r.Context(), rl, req, src, o.Stop)
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
	out, err := g.run(r.Context(), func(d delta) error {
		if ls != nil {
			return ls.send(s.reply(isChat, d.Content, d.Reasoning))
		}
		content.WriteString(d.Content)
		thinking.WriteString(d.Reasoning)
		return nil
	})
	if err != nil {
		return // the client has gone
	}
	final := s.reply(isChat, content.String(), thinking.String())
	final.Done, final.DoneReason = true, out.finish
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

// ollamaRequest maps Ollama's options onto a request for prompt.
func (s *Server) ollamaRequest(o *ollamaOptions, prompt []int32) (Request, *apiError) {
	b := newParams(s.m.File.Header.Generation)
	inf := math.Inf(1)
	b.float("temperature", o.Temperature, 0, inf, &b.p.Temperature)
	b.float("top_p", o.TopP, 0, 1, &b.p.TopP)
	b.float("min_p", o.MinP, 0, 1, &b.p.MinP)
	b.float("repeat_penalty", o.RepeatPenalty, 0, inf, &b.p.RepeatPenalty)
	b.float("presence_penalty", o.PresencePenalty, -inf, inf, &b.p.PresencePenalty)
	b.float("frequency_penalty", o.FrequencyPenalty, -inf, inf, &b.p.FrequencyPenalty)
	b.int("top_k", o.TopK, 0, &b.p.TopK)
	b.int("repeat_last_n", o.RepeatLastN, -1, &b.p.RepeatLastN)
	b.seed(o.Seed)
	if b.err != nil {
		return Request{}, b.err
	}
	if o.RepeatLastN != nil && *o.RepeatLastN == 0 {
		// Ollama's 0 turns the penalties off; the sampler's 0 is its default window.
		b.p.RepeatPenalty, b.p.PresencePenalty, b.p.FrequencyPenalty = 1, 0, 0
	}
	req := Request{Prompt: prompt, Params: b.p, MaxTokens: -1, Stop: s.stopIDs, TopLogprobs: -1}
	if o.NumPredict != nil && *o.NumPredict > 0 {
		req.MaxTokens = *o.NumPredict
	}
	if n := o.NumCtx; n != nil && *n > 0 {
		ctx := s.e.Options().Ctx
		switch {
		case *n > ctx:
			return Request{}, badRequest("num_ctx", "num_ctx %d is larger than the server's context of %d tokens (qwenrun serve --ctx)", *n, ctx)
		case len(prompt) > *n:
			return Request{}, badRequest("num_ctx", "the prompt has %d tokens, more than num_ctx %d", len(prompt), *n)
		}
		// As the engine at its own context: the last token needs no room.
		if room := *n - len(prompt) + 1; req.MaxTokens < 0 || req.MaxTokens > room {
			req.MaxTokens = room
		}
	}
	return req, nil
}

func (s *Server) ollamaTags(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	h := s.m.File.Header
	var params uint64
	for _, sec := range h.Sections {
		if sec.DType != format.Bytes {
			n := uint64(1)
			for _, d := range sec.Shape {
				n *= d
			}
			params += n
		}
	}
	size := fmt.Sprintf("%.2fM", float64(params)/1e6)
	if params >= 1e9 {
		size = fmt.Sprintf("%.1fB", float64(params)/1e9)
	}
	name := s.opts.Name + ":latest"
	writeJSON(w, http.StatusOK, map[string]any{"models": []map[string]any{{
		"name": name, "model": name, "modified_at": s.created.Format(time.RFC3339Nano), "size": s.size, "digest": "",
		"details": map[string]any{"parent_model": "", "format": "qbin", "family": h.Config.ModelType,
			"families": []string{h.Config.ModelType}, "parameter_size": size,
			"quantization_level": strings.ToUpper(h.WeightType().String())},
	}}})
	return nil
}

func (s *Server) ollamaVersion(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	writeJSON(w, http.StatusOK, map[string]string{"version": ollamaVersion})
	return nil
}
