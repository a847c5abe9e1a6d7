package serve

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/qwenc/qwenc/qwen"
)

// chatRequest is OpenAI's chat completion request, with vLLM's
// chat_template_kwargs.
type chatRequest struct {
	Model               string            `json:"model"`
	Messages            []chatMessage     `json:"messages"`
	Stream              bool              `json:"stream"`
	StreamOptions       *streamOptions    `json:"stream_options"`
	N                   *int              `json:"n"`
	MaxTokens           *int              `json:"max_tokens"`
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
	Stop                stopList          `json:"stop"`
	Logprobs            bool              `json:"logprobs"`
	TopLogprobs         *int              `json:"top_logprobs"`
	Tools               []json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls   *bool             `json:"parallel_tool_calls"`
	ResponseFormat      json.RawMessage   `json:"response_format"`
	ChatTemplateKwargs  templateKwargs    `json:"chat_template_kwargs"`
	// AddGenerationPrompt is read by /apply-template only: an answer
	// always opens the assistant's turn, so a chat refuses false. It
	// refuses vLLM's ContinueFinalMessage too, a prefill the last
	// assistant message would begin: the templates close every message.
	AddGenerationPrompt  *bool `json:"add_generation_prompt"`
	ContinueFinalMessage *bool `json:"continue_final_message"`
	// OpenAI's reasoning effort, and a budget of thinking tokens, as
	// Qwen's own API (DashScope) takes it.
	ReasoningEffort *string     `json:"reasoning_effort"`
	ThinkingBudget  *int        `json:"thinking_budget"`
	Prediction      *prediction `json:"prediction"`
	// User names the end user for OpenAI's abuse monitoring and tells
	// the model nothing; it is read for its type, which OpenAI checks.
	User *string `json:"user"`
	// Modalities and Audio ask for a spoken answer, which a model that
	// writes text cannot give: refused unless they ask for text alone.
	Modalities []string        `json:"modalities"`
	Audio      json.RawMessage `json:"audio"`
	// Functions and FunctionCall are OpenAI's deprecated tools, whose
	// calls come back as message.function_call: refused, naming what
	// replaces them, rather than answered as if there were no tools.
	Functions    []json.RawMessage `json:"functions"`
	FunctionCall json.RawMessage   `json:"function_call"`
	// WebSearchOptions asks OpenAI to search the web before answering,
	// which is refused, as the Responses API's web_search tool is.
	WebSearchOptions json.RawMessage `json:"web_search_options"`
	// vLLM's chat template of the request's own, and its echo of the
	// last message before the answer: refused, as its other fields that
	// change the text are.
	ChatTemplate json.RawMessage `json:"chat_template"`
	Echo         json.RawMessage `json:"echo"`
	samplingFields
}

// prediction is OpenAI's Predicted Outputs: text the answer is expected to
// repeat, which is drafted and checked (the answer stays the model's).
type prediction struct {
	Type    string      `json:"type"`
	Content textContent `json:"content"`
}

// predict sets a request's prediction.
func predict(p *prediction, req *qwen.Request) *apiError {
	switch {
	case p == nil:
		return nil
	case p.Type != "content":
		return badRequest("prediction", "prediction.type %q: want content", p.Type)
	}
	if e := p.Content.check("prediction.content"); e != nil {
		return e
	}
	req.Prediction, req.Draft = p.Content.text, qwen.DefaultDraft
	return nil
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// needsStream refuses stream_options on an answer that is not streamed,
// as OpenAI and vLLM do: a client sending them has its stream switch
// wrong.
func (o *streamOptions) needsStream(stream bool) *apiError {
	if o != nil && !stream {
		return badRequest("stream_options", "stream_options needs stream: true")
	}
	return nil
}

type chatMessage struct {
	Role             string      `json:"role"`
	Content          textContent `json:"content"`
	ReasoningContent string      `json:"reasoning_content"`
	// Reasoning is the name vLLM's newer responses give it: a
	// client that gives its answers back as it got them sends it so.
	Reasoning string `json:"reasoning"`
	ToolCalls []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
}

// noVision is why an image (or audio, or a file) in a request is refused.
const noVision = "this model has no vision: it reads text only"

// textOnly refuses a chat request's modalities other than text, and its
// audio output.
func textOnly(modalities []string, audio json.RawMessage) *apiError {
	const why = "this model writes text only"
	for i, m := range modalities {
		if m != "text" {
			return badRequest(fmt.Sprintf("modalities[%d]", i), "modalities[%d] %q: %s", i, m, why)
		}
	}
	if len(audio) > 0 && string(audio) != "null" {
		return badRequest("audio", "audio: %s", why)
	}
	return nil
}

// textContent is a message's content: a string, null, or a list of
// content parts, of which text (and an assistant's refusal) is read.
// check reads the parts, when its path is known: its errors name them.
type textContent struct {
	text  string
	parts []json.RawMessage
	raw   json.RawMessage // content of neither shape
}

// contentPart is a part of a message's content, OpenAI's or the
// Responses API's.
type contentPart struct {
	Type    string  `json:"type"`
	Text    *string `json:"text"`
	Refusal *string `json:"refusal"`
}

func (c *textContent) UnmarshalJSON(b []byte) error {
	*c = textContent{}
	var s *string
	switch {
	case json.Unmarshal(b, &s) == nil:
		if s != nil {
			c.text = *s
		}
	case json.Unmarshal(b, &c.parts) != nil:
		c.raw = b
	}
	return nil
}

// check reads the parts of content at path: text, or a refusal; others
// (images, audio, files) are refused.
func (c *textContent) check(path string) *apiError {
	if c.raw != nil {
		return badRequest(path, "%s: want a string or a list of content parts", path)
	}
	var sb strings.Builder
	for j, raw := range c.parts {
		pp := fmt.Sprintf("%s[%d]", path, j)
		var p contentPart
		if e := unmarshalAt(raw, pp, &p, "a content part, an object with a type"); e != nil {
			return e
		}
		switch p.Type {
		case "text", "refusal":
			text := p.Text
			if p.Type == "refusal" {
				text = p.Refusal
			}
			if text == nil {
				return badRequest(pp+"."+p.Type, "%s.%s: missing", pp, p.Type)
			}
			sb.WriteString(*text)
		case "":
			return badRequest(pp+".type", "%s.type: missing", pp)
		default:
			return badRequest(pp, "%s: a content part of type %q: %s", pp, p.Type, noVision)
		}
	}
	if c.parts != nil {
		c.text = sb.String()
	}
	return nil
}

// response is OpenAI's answer object, or a chunk of a streamed one: a
// chat completion with C a chatChoice, a completion with completionChoice.
type response[C any] struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []C    `json:"choices"`
	Usage   *usage `json:"usage,omitempty"`
	// Timings, as llama-server gives them (beyond OpenAI's fields, which
	// its SDKs ignore), with the end of an answer.
	Timings *timings `json:"timings,omitempty"`
}

// timings is how an answer's time went: the prompt tokens computed (not
// served from the state cache) and those cached, the tokens generated,
// and the drafts checked and kept (drafted_tokens and accepted_tokens;
// llama-server's draft_n and draft_n_accepted too).
type timings struct {
	PromptN            int     `json:"prompt_n"`
	CacheN             int     `json:"cache_n"`
	PromptMS           float64 `json:"prompt_ms"`
	PromptPerSecond    float64 `json:"prompt_per_second"`
	PredictedN         int     `json:"predicted_n"`
	PredictedMS        float64 `json:"predicted_ms"`
	PredictedPerSecond float64 `json:"predicted_per_second"`
	DraftedTokens      int     `json:"drafted_tokens"`
	AcceptedTokens     int     `json:"accepted_tokens"`
	DraftN             int     `json:"draft_n"`
	DraftNAccepted     int     `json:"draft_n_accepted"`
}

func timingsOf(u qwen.Usage) *timings {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	rate := func(n int, d time.Duration) float64 {
		if d <= 0 {
			return 0
		}
		return float64(n) / d.Seconds()
	}
	computed, decode := u.PromptTokens-u.CachedTokens, u.Total-u.Prefill-u.Queued
	return &timings{PromptN: computed, CacheN: u.CachedTokens, PromptMS: ms(u.Prefill), PromptPerSecond: rate(computed, u.Prefill),
		PredictedN: u.CompletionTokens, PredictedMS: ms(decode), PredictedPerSecond: rate(u.CompletionTokens, decode),
		DraftedTokens: u.Drafted, AcceptedTokens: u.Accepted, DraftN: u.Drafted, DraftNAccepted: u.Accepted}
}

// failStream ends an OpenAI stream whose generation failed with err as
// vLLM and OpenAI's clients expect: an error object, then [DONE]; a
// client gone gets nothing.
func failStream(ls *lineStream, g *generation, err error) {
	if e := g.failure(err); e != nil && ls.send(openaiError(e)) == nil {
		ls.raw("[DONE]")
	}
}

// endStream sends a stream's last choice with the answer's timings, its
// usage if asked, and [DONE].
func endStream[C any](ls *lineStream, head response[C], last C, u *usage, t *timings) {
	head.Choices, head.Timings = []C{last}, t
	if ls.send(head) != nil {
		return
	}
	if u != nil {
		head.Choices, head.Usage, head.Timings = []C{}, u, nil
		if ls.send(head) != nil {
			return
		}
	}
	ls.raw("[DONE]")
}

type chatCompletion = response[chatChoice]

// OpenAI's chat responses.
type (
	chatChoice struct {
		Index        int           `json:"index"`
		Message      *chatAnswer   `json:"message,omitempty"`
		Delta        *chatOut      `json:"delta,omitempty"`
		Logprobs     *chatLogprobs `json:"logprobs"`
		FinishReason *string       `json:"finish_reason"`
	}
	chatOut struct {
		Role             string         `json:"role,omitempty"`
		Content          *string        `json:"content,omitempty"`
		ReasoningContent string         `json:"reasoning_content,omitempty"`
		ToolCalls        []toolCallJSON `json:"tool_calls,omitempty"`
	}
	// chatAnswer is a whole answer's message, whose content is null
	// beside tool calls, as OpenAI's, never left out as a delta's is:
	// clients test it against null.
	chatAnswer struct {
		chatOut
		Content *string `json:"content"`
	}
	// toolCallJSON is a call in an answer, or a piece of one in a chunk,
	// which has its Index.
	toolCallJSON struct {
		Index    *int   `json:"index,omitempty"`
		ID       string `json:"id,omitempty"`
		Type     string `json:"type,omitempty"`
		Function struct {
			Name      string `json:"name,omitempty"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	chatLogprobs struct {
		Content []tokenLogprob `json:"content"`
		Refusal []tokenLogprob `json:"refusal"`
	}
	tokenLogprob struct {
		topLogprob
		TopLogprobs []topLogprob `json:"top_logprobs"`
	}
	topLogprob struct {
		Token   string  `json:"token"`
		Logprob float32 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
	}
	usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		// The drafts checked: those kept and those not (OpenAI's names,
		// for Predicted Outputs; here for any drafts).
		CompletionTokensDetails struct {
			AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
			RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
		} `json:"completion_tokens_details"`
	}
)

func usageOf(u qwen.Usage) *usage {
	out := &usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
	out.PromptTokensDetails.CachedTokens = u.CachedTokens
	out.CompletionTokensDetails.AcceptedPredictionTokens = u.Accepted
	out.CompletionTokensDetails.RejectedPredictionTokens = u.Drafted - u.Accepted
	return out
}

func newID(prefix string) string {
	return fmt.Sprintf("%s-%016x%08x", prefix, rand.Uint64(), rand.Uint32())
}

// openAIRequest is what the chat and completion requests share; def is
// the default of max_tokens (0: until the end of the answer).
func (t *target) openAIRequest(f *samplingFields, n, maxTokens *int, maxName string, def int, stop stopList) (qwen.Request, *apiError) {
	if n != nil && *n != 1 {
		return qwen.Request{}, badRequest("n", "n must be 1: one answer per request")
	}
	params, e := f.params(t.info.Sampling)
	if e != nil {
		return qwen.Request{}, e
	}
	bias, e := f.logitBias(t.info.Vocab)
	if e != nil {
		return qwen.Request{}, e
	}
	req := qwen.Request{Sampling: &params, LogitBias: bias, MaxTokens: def, Stop: stop}
	if e := f.vllmFields.apply(&req); e != nil {
		return qwen.Request{}, e
	}
	if maxTokens != nil {
		if *maxTokens < 1 {
			return qwen.Request{}, badRequest(maxName, "%s %d must be at least 1", maxName, *maxTokens)
		}
		req.MaxTokens = *maxTokens
	}
	return req, nil
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request, rl *reqLog) *apiError {
	var cr chatRequest
	if e := decode(w, r, s.opts.MaxBody, &cr); e != nil {
		return e
	}
	t, e := s.model(r, rl, cr.Model)
	if e != nil {
		return e
	}
	guided := cr.takeGuided()
	req, e := t.chatRequest(&cr)
	if e != nil {
		return e
	}
	formatPath, e := guidedJSON(guided, &req, "response_format.json_schema.schema")
	if e != nil {
		return e
	}
	if e := cr.StreamOptions.needsStream(cr.Stream); e != nil {
		return e
	}
	if cr.AddGenerationPrompt != nil && !*cr.AddGenerationPrompt {
		return badRequest("add_generation_prompt", "add_generation_prompt false is not supported: an answer opens the assistant's turn (/apply-template renders without it)")
	}
	g, e := s.start(r.Context(), rl, t, req, requestFields{formatPath, toolPaths(req.Tools, "tools[%d].function.parameters"), "messages"})
	if e != nil {
		return e
	}
	return s.answerChat(w, r, t, g, cr.Stream, cr.StreamOptions != nil && cr.StreamOptions.IncludeUsage)
}

// applyTemplate answers with the prompt a chat request would be answered
// from, as llama-server's /apply-template does: anyone can check the
// rendering against the template's Jinja. As vLLM's, it takes
// add_generation_prompt (true unless set false) and chat_template_kwargs.
func (s *Server) applyTemplate(w http.ResponseWriter, r *http.Request, rl *reqLog) *apiError {
	var cr chatRequest
	if e := decode(w, r, s.opts.MaxBody, &cr); e != nil {
		return e
	}
	t, e := s.defaultTarget(r, rl, cr.Model)
	if e != nil {
		return e
	}
	req, e := t.chatRequest(&cr)
	if e != nil {
		return e
	}
	text, err := t.m.RenderTemplate(req, cr.AddGenerationPrompt == nil || *cr.AddGenerationPrompt)
	if err != nil {
		return badRequest("", "%v", err)
	}
	writeJSON(w, http.StatusOK, struct {
		Prompt string `json:"prompt"`
	}{text})
	return nil
}

// chatRequest checks an OpenAI chat request and makes it a qwen.Request.
func (t *target) chatRequest(cr *chatRequest) (qwen.Request, *apiError) {
	if e := unsupported(namedValue{"chat_template", cr.ChatTemplate, ": the model's own is used"}, namedValue{"echo", cr.Echo, ""}); e != nil {
		return qwen.Request{}, e
	}
	if cr.ContinueFinalMessage != nil && *cr.ContinueFinalMessage {
		return qwen.Request{}, badRequest("continue_final_message", "continue_final_message is not supported: an answer is a new assistant turn, after every message given")
	}
	maxTokens, maxName := cr.MaxTokens, "max_tokens"
	if cr.MaxCompletionTokens != nil {
		maxTokens, maxName = cr.MaxCompletionTokens, "max_completion_tokens"
	}
	req, e := t.openAIRequest(&cr.samplingFields, cr.N, maxTokens, maxName, 0, cr.Stop)
	if e != nil {
		return qwen.Request{}, e
	}
	switch t := cr.TopLogprobs; {
	case t != nil && (*t < 0 || *t > qwen.MaxTopLogprobs):
		return qwen.Request{}, badRequest("top_logprobs", "top_logprobs %d is outside [0, %d]", *t, qwen.MaxTopLogprobs)
	case cr.Logprobs && t != nil:
		req.Logprobs, req.TopLogprobs = true, *t
	case cr.Logprobs:
		req.Logprobs = true
	case t != nil && *t > 0:
		return qwen.Request{}, badRequest("top_logprobs", "top_logprobs needs logprobs: true")
	}
	if e := textOnly(cr.Modalities, cr.Audio); e != nil {
		return qwen.Request{}, e
	}
	if e := noFunctions(cr.Functions, cr.FunctionCall); e != nil {
		return qwen.Request{}, e
	}
	if len(cr.WebSearchOptions) > 0 && string(cr.WebSearchOptions) != "null" {
		return qwen.Request{}, badRequest("web_search_options", "web_search_options: this server does not search the web")
	}
	if req.Messages, e = chatMessages(cr.Messages); e != nil {
		return qwen.Request{}, e
	}
	if req.Tools, e = parseTools(cr.Tools); e != nil {
		return qwen.Request{}, e
	}
	if e := toolChoice(cr.ToolChoice, &req); e != nil {
		return qwen.Request{}, e
	}
	if e := responseFormat(cr.ResponseFormat, &req); e != nil {
		return qwen.Request{}, e
	}
	if e := ignoreEOSFits(&req); e != nil {
		return qwen.Request{}, e
	}
	if e := predict(cr.Prediction, &req); e != nil {
		return qwen.Request{}, e
	}
	req.OneToolCall = cr.ParallelToolCalls != nil && !*cr.ParallelToolCalls
	if len(req.Tools) == 0 {
		// Clients send these with an empty tool list; without tools,
		// "auto", "none" and one call at most say nothing.
		if req.ToolChoice == "required" || req.ToolName != "" {
			return qwen.Request{}, badRequest("tool_choice", "tool_choice forces a tool call: it needs tools")
		}
		req.ToolChoice, req.OneToolCall = "", false
	}
	if e := t.needsChat(); e != nil {
		return qwen.Request{}, e
	}
	if e := t.chatThinking(cr, &req); e != nil {
		return qwen.Request{}, e
	}
	return req, nil
}

// chatThinking reads a chat request's thinking onto req: off with
// chat_template_kwargs.enable_thinking false, whatever else is given;
// within thinking_budget tokens, or else within reasoning_effort's
// budget.
func (t *target) chatThinking(cr *chatRequest, req *qwen.Request) *apiError {
	cr.ChatTemplateKwargs.apply(req)
	if cr.ReasoningEffort != nil {
		if e := t.effort(*cr.ReasoningEffort, "reasoning_effort", req); e != nil {
			return e
		}
	}
	if on := cr.ChatTemplateKwargs.EnableThinking; on != nil && !*on {
		req.NoThinking, req.ThinkBudget = true, 0
	}
	if cr.ThinkingBudget != nil {
		return t.thinkingBudget(*cr.ThinkingBudget, "thinking_budget", req)
	}
	return nil
}

// answerChat answers with one chat.completion, or streams chunks.
func (s *Server) answerChat(w http.ResponseWriter, r *http.Request, t *target, g *generation, stream, withUsage bool) *apiError {
	head := chatCompletion{ID: newID("chatcmpl"), Created: time.Now().Unix(), Model: t.name}
	if stream {
		s.streamChat(w, r, g, head, withUsage)
		return nil
	}
	var content, reasoning strings.Builder
	var calls callAccumulator
	var lps *chatLogprobs
	if g.logprobs {
		lps = &chatLogprobs{Content: []tokenLogprob{}}
	}
	out, err := g.run(func(d qwen.Delta) error {
		content.WriteString(d.Content)
		reasoning.WriteString(d.Reasoning)
		calls.add(d.ToolCalls)
		if lps != nil {
			lps.Content = append(lps.Content, logprobsOf(d.Logprobs)...)
		}
		return nil
	})
	if err != nil {
		return g.failure(err)
	}
	msg := &chatAnswer{chatOut: chatOut{Role: "assistant", ReasoningContent: reasoning.String()}}
	if text := content.String(); text != "" || len(calls.calls) == 0 {
		msg.Content = &text
	}
	for i, c := range calls.calls {
		msg.ToolCalls = append(msg.ToolCalls, toolCallOut(c, i, false))
	}
	head.Object = "chat.completion"
	head.Choices = []chatChoice{{Message: msg, Logprobs: lps, FinishReason: &out.finish}}
	head.Usage, head.Timings = usageOf(out.usage), timingsOf(out.usage)
	writeJSON(w, http.StatusOK, head)
	return nil
}

// streamChat sends chat.completion.chunk events: the role, the text as
// it comes, the finish reason, the usage if asked, and [DONE]; SSE
// comments keep a silent stream (waiting for a slot, or a prompt being
// prefilled) alive.
func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, g *generation, head chatCompletion, withUsage bool) {
	head.Object = "chat.completion.chunk"
	ls := s.startStream(w, true)
	defer ls.keepAlive(s.opts.ping, sseComment)()
	chunk := func(c chatChoice) error {
		head.Choices = []chatChoice{c}
		return ls.send(head)
	}
	empty := ""
	if chunk(chatChoice{Delta: &chatOut{Role: "assistant", Content: &empty}}) != nil {
		g.rl.clientGone = true
		g.stop()
		return
	}
	out, err := g.run(func(d qwen.Delta) error {
		c := chatChoice{Delta: &chatOut{ReasoningContent: d.Reasoning}}
		if d.Content != "" {
			c.Delta.Content = &d.Content
		}
		for _, p := range d.ToolCalls {
			c.Delta.ToolCalls = append(c.Delta.ToolCalls, toolCallOut(qwen.ToolCall{ID: p.ID, Name: p.Name, Arguments: p.Arguments}, p.Index, true))
		}
		if g.logprobs {
			c.Logprobs = &chatLogprobs{Content: logprobsOf(d.Logprobs)}
		}
		return chunk(c)
	})
	if err != nil {
		failStream(ls, g, err)
		return
	}
	var u *usage
	if withUsage {
		u = usageOf(out.usage)
	}
	endStream(ls, head, chatChoice{Delta: &chatOut{}, FinishReason: &out.finish}, u, timingsOf(out.usage))
}

// toolCallOut is a call in OpenAI's shape; a piece of a streamed one has
// its index, and its type with its id, in the call's first piece.
func toolCallOut(c qwen.ToolCall, index int, piece bool) toolCallJSON {
	t := toolCallJSON{ID: c.ID}
	if c.ID != "" {
		t.Type = "function"
	}
	if piece {
		t.Index = &index
	}
	t.Function.Name, t.Function.Arguments = c.Name, c.Arguments
	return t
}

// logprobsOf gives log-probabilities in OpenAI's shape.
func logprobsOf(lps []qwen.Logprob) []tokenLogprob {
	out := make([]tokenLogprob, 0, len(lps))
	for _, l := range lps {
		lp := tokenLogprob{topLogprob: tokenLogprobOf(l.TokenLogprob), TopLogprobs: make([]topLogprob, 0, len(l.Top))}
		for _, t := range l.Top {
			lp.TopLogprobs = append(lp.TopLogprobs, tokenLogprobOf(t))
		}
		out = append(out, lp)
	}
	return out
}

func tokenLogprobOf(t qwen.TokenLogprob) topLogprob {
	ints := make([]int, len(t.Bytes))
	for i, c := range t.Bytes {
		ints[i] = int(c)
	}
	return topLogprob{Token: string(t.Bytes), Logprob: t.Logprob, Bytes: ints}
}

// chatMessages checks the roles and reads the tool calls; "developer" is
// OpenAI's newer name for the system role.
func chatMessages(in []chatMessage) ([]qwen.Message, *apiError) {
	if len(in) == 0 {
		return nil, badRequest("messages", "messages must be a non-empty list")
	}
	out := make([]qwen.Message, len(in))
	for i, m := range in {
		role := m.Role
		switch role {
		case "developer":
			role = "system"
		case "system", "user", "assistant", "tool":
		default:
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d]: unknown role %q: want system, user, assistant or tool", i, m.Role)
		}
		if e := m.Content.check(fmt.Sprintf("messages[%d].content", i)); e != nil {
			return nil, e
		}
		reasoning := m.ReasoningContent
		if reasoning == "" {
			reasoning = m.Reasoning
		}
		out[i] = qwen.Message{Role: role, Content: m.Content.text, Reasoning: reasoning}
		if role == "tool" {
			out[i].ToolCallID = m.ToolCallID
		}
		if len(m.ToolCalls) > 0 && role != "assistant" {
			return nil, badRequest(fmt.Sprintf("messages[%d].tool_calls", i), "messages[%d]: only an assistant message has tool_calls", i)
		}
		for j, c := range m.ToolCalls {
			path := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
			if c.Type != "" && c.Type != "function" {
				return nil, badRequest(path+".type", "%s.type: %q is not supported; want \"function\"", path, c.Type)
			}
			if c.Function.Name == "" {
				return nil, badRequest(path+".function.name", "%s.function.name: missing", path)
			}
			out[i].ToolCalls = append(out[i].ToolCalls, qwen.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: toolArguments(c.Function.Arguments)})
		}
	}
	return out, nil
}

// noFunctions refuses the deprecated functions, and a function_call that
// names one; "auto" and "none" without functions say nothing.
func noFunctions(functions []json.RawMessage, call json.RawMessage) *apiError {
	var mode string
	switch {
	case len(functions) > 0:
		return badRequest("functions", "functions is not supported: give them as tools")
	case len(call) == 0 || string(call) == "null":
	case json.Unmarshal(call, &mode) != nil || (mode != "auto" && mode != "none"):
		return badRequest("function_call", "function_call is not supported: name a tool in tool_choice")
	}
	return nil
}

// needsChat refuses a chat for a model without a chat template.
func (t *target) needsChat() *apiError {
	if t.info.ChatTemplate == "" {
		return badRequest("messages", "this model has no chat template: use raw completion (/v1/completions, or /api/generate with raw)")
	}
	return nil
}
