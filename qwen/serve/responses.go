package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/qwenc/qwenc/qwen"
)

// responsesRequest is OpenAI's Responses API request, as Codex, the
// OpenAI Agents SDK and the AI SDK send it. Fields not here (user,
// safety_identifier, prompt_cache_key, service_tier, stream_options, ...)
// are ignored, as unknown fields are; chat completions' fields that would
// change the answer are refused (chatOnlyFields).
type responsesRequest struct {
	Model             string            `json:"model"`
	Input             json.RawMessage   `json:"input"`
	Instructions      *string           `json:"instructions"`
	Tools             []json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls"`
	Text              struct {
		Format json.RawMessage `json:"format"`
	} `json:"text"`
	Reasoning struct {
		Effort  *string `json:"effort"`
		Summary *string `json:"summary"`
	} `json:"reasoning"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Store              *bool             `json:"store"`
	Stream             bool              `json:"stream"`
	Background         bool              `json:"background"`
	Include            []string          `json:"include"`
	TopLogprobs        *int              `json:"top_logprobs"`
	Metadata           map[string]string `json:"metadata"`
	Truncation         *string           `json:"truncation"`
	Conversation       json.RawMessage   `json:"conversation"`
	Prompt             json.RawMessage   `json:"prompt"`
	User               *string           `json:"user"`
	ChatTemplateKwargs templateKwargs    `json:"chat_template_kwargs"`
	samplingFields
	chatOnlyFields
}

// chatOnlyFields are chat completions' fields that the Responses API
// names otherwise or has not: a client that sends them here means them,
// and would get another answer than it asked were they ignored, so each
// is refused naming it (and the field to give instead).
type chatOnlyFields struct {
	ResponseFormat      json.RawMessage `json:"response_format"`
	Messages            json.RawMessage `json:"messages"`
	MaxTokens           json.RawMessage `json:"max_tokens"`
	MaxCompletionTokens json.RawMessage `json:"max_completion_tokens"`
	ReasoningEffort     json.RawMessage `json:"reasoning_effort"`
	Logprobs            json.RawMessage `json:"logprobs"`
	Stop                json.RawMessage `json:"stop"`
	N                   json.RawMessage `json:"n"`
}

func (f *chatOnlyFields) check() *apiError {
	if n := strings.TrimSpace(string(f.N)); n == "1" {
		f.N = nil
	}
	const instead = " on the Responses API: give "
	return unsupported(namedValue{"response_format", f.ResponseFormat, instead + "text.format"},
		namedValue{"messages", f.Messages, instead + "input"},
		namedValue{"max_tokens", f.MaxTokens, instead + "max_output_tokens"},
		namedValue{"max_completion_tokens", f.MaxCompletionTokens, instead + "max_output_tokens"},
		namedValue{"reasoning_effort", f.ReasoningEffort, instead + "reasoning.effort"},
		namedValue{"logprobs", f.Logprobs, instead + `include ["message.output_text.logprobs"]`},
		namedValue{"stop", f.Stop, " on the Responses API"},
		namedValue{"n", f.N, " on the Responses API: one answer per request"})
}

// The include values: what may be asked of items this server makes
// (logprobs, reasoning's text as its encrypted_content) or of items it
// never makes (built-in tools', images'), for which there is nothing to
// include.
var includes = map[string]bool{
	"message.output_text.logprobs": true, "reasoning.encrypted_content": true,
	"file_search_call.results": true, "web_search_call.results": true, "web_search_call.action.sources": true,
	"message.input_image.image_url": true, "computer_call_output.output.image_url": true, "code_interpreter_call.outputs": true,
}

// createResponse is POST /v1/responses.
func (s *Server) createResponse(w http.ResponseWriter, r *http.Request, rl *reqLog) *apiError {
	var rr responsesRequest
	if e := decode(w, r, s.opts.MaxBody, &rr); e != nil {
		return e
	}
	t, e := s.model(r, rl, rr.Model)
	if e != nil {
		return e
	}
	var prev []qwen.Message
	if id := rr.PreviousResponseID; id != nil && *id != "" {
		h, status, ok := s.responses.history(*id)
		switch {
		case !ok:
			return &apiError{status: http.StatusBadRequest, param: "previous_response_id", code: "previous_response_not_found",
				msg: fmt.Sprintf("previous_response_id: no response %q is stored: it was not stored (store: false), was deleted, or was let go to bound the memory the stored responses take", *id)}
		case h == nil:
			return badRequest("previous_response_id", "previous_response_id: response %q is %s: it has no answer to continue", *id, status)
		}
		prev = h
	}
	// The AI SDK, storing its responses, gives earlier items back by
	// their ids.
	if rr.Input, e = s.responses.resolve(rr.Input); e != nil {
		return e
	}
	c, e := t.responsesRequest(&rr, prev)
	if e != nil {
		return e
	}
	switch {
	case rr.Background && !c.store:
		return badRequest("background", "background needs store: a background response is read back by its id")
	case rr.Background && rr.Stream:
		return badRequest("background", "background with stream is not supported: poll GET /v1/responses/{id}")
	}
	head := s.responseHead(t, &rr, c)
	if rr.Background {
		return s.backgroundResponse(w, r, rl, t, c, head)
	}
	g, e := s.start(r.Context(), rl, t, c.req, c.requestFields())
	if e != nil {
		return e
	}
	items := &responseItems{encrypted: c.encrypted, tools: c.tools}
	if rr.Stream {
		s.streamResponse(w, g, c, head, items)
		return nil
	}
	out, err := g.run(items.add)
	switch {
	case err != nil:
		return g.failure(err)
	case out.stop == qwen.StopShutdown:
		return &apiError{status: http.StatusServiceUnavailable, msg: "the server is shutting down", code: "shutting_down"}
	}
	head.finish(items, out)
	if c.store {
		s.responses.put(head, append(c.history, items.turn()), c.input)
	}
	writeJSON(w, http.StatusOK, head)
	return nil
}

// responseHead is the response object as it begins: what the request
// set, in progress, with no output.
func (s *Server) responseHead(t *target, rr *responsesRequest, c responsesCall) *responseObject {
	head := &responseObject{ID: itemID("resp"), Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress",
		Background: rr.Background, Instructions: rr.Instructions, MaxOutputTokens: rr.MaxOutputTokens, Model: t.name,
		Output: []outputItem{}, ParallelToolCalls: rr.ParallelToolCalls == nil || *rr.ParallelToolCalls, ServiceTier: "default", Store: c.store,
		Temperature: float32To64(c.req.Sampling.Temperature), TopP: float32To64(c.req.Sampling.TopP), Truncation: "disabled",
		ToolChoice: rr.ToolChoice, Tools: rr.Tools, User: rr.User, Metadata: rr.Metadata}
	if id := rr.PreviousResponseID; id != nil && *id != "" {
		head.PreviousResponseID = id
	}
	head.Reasoning.Effort, head.Reasoning.Summary = rr.Reasoning.Effort, rr.Reasoning.Summary
	head.Text.Format = rr.Text.Format
	if len(head.Text.Format) == 0 || string(head.Text.Format) == "null" {
		head.Text.Format = json.RawMessage(`{"type":"text"}`)
	}
	if len(head.ToolChoice) == 0 || string(head.ToolChoice) == "null" {
		head.ToolChoice = json.RawMessage(`"auto"`)
	}
	if head.Tools == nil {
		head.Tools = []json.RawMessage{}
	}
	if head.Metadata == nil {
		head.Metadata = map[string]string{}
	}
	if rr.Truncation != nil {
		head.Truncation = *rr.Truncation
	}
	if rr.TopLogprobs != nil {
		head.TopLogprobs = *rr.TopLogprobs
	}
	return head
}

// float32To64 is f as its shortest decimal says it: 0.95, not
// 0.949999988079071.
func float32To64(f float32) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	return v
}

// finish ends the response with how the generation ended: completed;
// incomplete when max_output_tokens or the context cut it; failed when
// the server's shutdown did. The error is the stream's, closing the last
// item.
func (head *responseObject) finish(items *responseItems, out outcome) error {
	status, last := "completed", "completed"
	switch {
	case out.stop == qwen.StopShutdown:
		status, last = "failed", "incomplete"
		head.Error = &responseError{Code: "server_error", Message: "the server is shutting down: the answer was cut short"}
	case out.finish == "length":
		status, last = "incomplete", "incomplete"
		head.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	}
	err := items.close(last)
	head.Status, head.Output = status, append([]outputItem{}, items.items...)
	now := time.Now().Unix()
	head.CompletedAt = &now
	u := out.usage
	head.Usage = &responseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
	head.Usage.InputTokensDetails.CachedTokens = u.CachedTokens
	head.Usage.OutputTokensDetails.ReasoningTokens = out.reasoning
	return err
}

// cut ends the item being written (incomplete, its done events sent
// when streaming) and keeps what was written as the response's output:
// a response stopped before its end, failed or cancelled.
func (head *responseObject) cut(items *responseItems) error {
	err := items.close("incomplete")
	head.Output = append([]outputItem{}, items.items...)
	return err
}

// fail ends the response with the server's failure.
func (head *responseObject) fail(err error) {
	head.Status, head.Error = "failed", &responseError{Code: "server_error", Message: err.Error()}
}

// streamResponse sends the Responses API's events: response.created and
// response.in_progress, each item's added, content part, deltas and done
// events, then response.completed, response.incomplete or
// response.failed; each with its sequence_number. SSE comments keep a
// silent stream (a prompt being prefilled) alive.
func (s *Server) streamResponse(w http.ResponseWriter, g *generation, c responsesCall, head *responseObject, items *responseItems) {
	ls := s.startStream(w, true)
	stopPings := ls.keepAlive(s.opts.ping, sseComment)
	defer stopPings()
	seq := 0
	send := func(ev responseEvent) error {
		ev.SequenceNumber = seq
		seq++
		return ls.sendEvent(ev.Type, ev)
	}
	snapshot := *head
	for _, typ := range []string{"response.created", "response.in_progress"} {
		if send(responseEvent{Type: typ, Response: &snapshot}) != nil {
			g.rl.clientGone = true
			g.stop()
			return
		}
	}
	items.out = send
	out, err := g.run(items.add)
	if err != nil {
		if !g.rl.clientGone {
			if head.cut(items) != nil {
				return
			}
			head.fail(err)
			send(responseEvent{Type: "response.failed", Response: head})
		}
		return
	}
	if head.finish(items, out) != nil {
		return
	}
	if c.store && head.Status != "failed" {
		s.responses.put(head, append(c.history, items.turn()), c.input)
	}
	typ := map[string]string{"completed": "response.completed", "incomplete": "response.incomplete", "failed": "response.failed"}[head.Status]
	send(responseEvent{Type: typ, Response: head})
}

// backgroundResponse runs a response with background: true: the answer
// is the response in progress, which GET /v1/responses/{id} reads until
// it is done and POST /v1/responses/{id}/cancel stops. The generation
// holds its model, and ends with the server's shutdown.
func (s *Server) backgroundResponse(w http.ResponseWriter, r *http.Request, rl *reqLog, t *target, c responsesCall, head *responseObject) *apiError {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	brl := &reqLog{start: rl.start, header: rl.header}
	g, e := s.start(ctx, brl, t, c.req, c.requestFields())
	if e != nil {
		cancel()
		return e
	}
	rl.hasGeneration, rl.prompt, rl.relaxed = true, brl.prompt, brl.relaxed
	release := rl.release
	rl.release = nil // the generation's, not the handler's
	answer := *head
	done := make(chan struct{})
	s.responses.begin(head, c.input, cancel, done)
	go func() {
		defer close(done)
		defer release()
		defer cancel()
		s.runBackground(g, c, head)
	}()
	writeJSON(w, http.StatusOK, &answer)
	return nil
}

// runBackground runs a background response's generation to its end and
// stores how it ended: cancelled when its context was, failed with the
// error when the engine failed, else as an answer not streamed ends.
func (s *Server) runBackground(g *generation, c responsesCall, head *responseObject) {
	items := &responseItems{encrypted: c.encrypted, tools: c.tools}
	out, err := g.run(items.add)
	if err != nil {
		head.cut(items)
		head.Status = "cancelled"
		if !g.rl.clientGone { // the engine's failure, not the cancel
			head.fail(err)
		}
		s.responses.end(head, nil)
		return
	}
	head.finish(items, out)
	var history []qwen.Message
	if head.Status != "failed" {
		history = append(c.history, items.turn())
	}
	s.responses.end(head, history)
}

// getResponse is GET /v1/responses/{id}.
func (s *Server) getResponse(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	if r.URL.Query().Get("stream") == "true" {
		return badRequest("stream", "stream: a stored response is read whole here; its events are not kept")
	}
	encrypted, e := queryIncludes(r.URL.Query())
	if e != nil {
		return e
	}
	resp, ok := s.responses.get(r.PathValue("id"))
	if !ok {
		return responseNotFound(r.PathValue("id"))
	}
	writeJSON(w, http.StatusOK, resp.including(encrypted))
	return nil
}

// queryIncludes reads a GET's include values, include[]=... as the SDKs
// send a list, or include=... repeated: each one POST /v1/responses
// takes, and whether reasoning.encrypted_content is among them.
func queryIncludes(q url.Values) (encrypted bool, e *apiError) {
	for _, inc := range append(q["include"], q["include[]"]...) {
		if !includes[inc] {
			return false, badRequest("include", "include %q is not one this API knows", inc)
		}
		encrypted = encrypted || inc == "reasoning.encrypted_content"
	}
	return encrypted, nil
}

// including is a stored response as GET gives it: its reasoning items'
// encrypted_content (their text) when include asks for it, and not
// otherwise, whatever the request that made it asked.
func (resp *responseObject) including(encrypted bool) *responseObject {
	cp := *resp
	cp.Output = slices.Clone(resp.Output)
	for i := range cp.Output {
		it := &cp.Output[i]
		if it.Type != "reasoning" {
			continue
		}
		it.EncryptedContent = nil
		if encrypted && len(it.Content) > 0 {
			it.EncryptedContent = &it.Content[0].Text
		}
	}
	return &cp
}

// deleteResponse is DELETE /v1/responses/{id}; a background response
// still running is cancelled.
func (s *Server) deleteResponse(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	id := r.PathValue("id")
	if !s.responses.remove(id) {
		return responseNotFound(id)
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response.deleted", "deleted": true})
	return nil
}

// cancelResponse is POST /v1/responses/{id}/cancel: as OpenAI's, for a
// background response only. Cancelling one that has ended answers it as
// it is.
func (s *Server) cancelResponse(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	id := r.PathValue("id")
	resp, found, background := s.responses.cancel(r.Context(), id)
	switch {
	case !found:
		return responseNotFound(id)
	case !background:
		return badRequest("", "response %q was not created with background: true: only a background response can be cancelled", id)
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// listInputItems is GET /v1/responses/{id}/input_items: the items of the
// response's own input, not those of the responses previous_response_id
// continues (each lists its own), a page at a time as OpenAI's cursor
// pages are read (limit, after, order; has_more). Every include value
// the API knows is taken: reasoning.encrypted_content gives a reasoning
// item's encrypted_content back, and the others ask for what no input
// here can have (images, built-in tools' items) or what the client gave.
func (s *Server) listInputItems(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	q := r.URL.Query()
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return badRequest("limit", "limit %q: want 1 to 100", v)
		}
		limit = n
	}
	order := q.Get("order")
	if order != "" && order != "asc" && order != "desc" {
		return badRequest("order", "order %q: want asc or desc", order)
	}
	encrypted, bad := queryIncludes(q)
	if bad != nil {
		return bad
	}
	id := r.PathValue("id")
	e, ok := s.responses.find(id)
	if !ok {
		return responseNotFound(id)
	}
	items := e.input
	if order != "asc" { // desc, the default: the last item first
		items = slices.Clone(items)
		slices.Reverse(items)
	}
	if after := q.Get("after"); after != "" {
		i := slices.IndexFunc(items, func(it inputItem) bool { return it.id == after })
		if i < 0 {
			return badRequest("after", "after %q: no item of response %q's input has that id", after, id)
		}
		items = items[i+1:]
	}
	more := len(items) > limit
	if more {
		items = items[:limit]
	}
	data := make([]json.RawMessage, 0, len(items))
	for _, it := range items {
		data = append(data, it.listed(encrypted))
	}
	var first, last *string
	if len(items) > 0 {
		first, last = &items[0].id, &items[len(items)-1].id
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "first_id": first, "last_id": last, "has_more": more})
	return nil
}

func responseNotFound(id string) *apiError {
	return &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("no response %q is stored", id)}
}
