package serve

import (
	"encoding/json"
	"strings"

	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/qwen"
)

// The Responses API's answer objects.
type (
	responseObject struct {
		ID                 string             `json:"id"`
		Object             string             `json:"object"`
		CreatedAt          int64              `json:"created_at"`
		Status             string             `json:"status"`
		Background         bool               `json:"background"`
		CompletedAt        *int64             `json:"completed_at"`
		Error              *responseError     `json:"error"`
		IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
		Instructions       *string            `json:"instructions"`
		MaxOutputTokens    *int               `json:"max_output_tokens"`
		Model              string             `json:"model"`
		Output             []outputItem       `json:"output"`
		ParallelToolCalls  bool               `json:"parallel_tool_calls"`
		PreviousResponseID *string            `json:"previous_response_id"`
		Reasoning          struct {
			Effort  *string `json:"effort"`
			Summary *string `json:"summary"`
		} `json:"reasoning"`
		ServiceTier string  `json:"service_tier"`
		Store       bool    `json:"store"`
		Temperature float64 `json:"temperature"`
		Text        struct {
			Format json.RawMessage `json:"format"`
		} `json:"text"`
		ToolChoice  json.RawMessage   `json:"tool_choice"`
		Tools       []json.RawMessage `json:"tools"`
		TopLogprobs int               `json:"top_logprobs"`
		TopP        float64           `json:"top_p"`
		Truncation  string            `json:"truncation"`
		Usage       *responseUsage    `json:"usage"`
		User        *string           `json:"user"`
		Metadata    map[string]string `json:"metadata"`
	}
	responseError struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	incompleteDetails struct {
		Reason string `json:"reason"`
	}
	responseUsage struct {
		InputTokens        int `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int `json:"total_tokens"`
	}
	// outputItem is an item of an answer's output: its reasoning (Qwen3's
	// thinking, as the text of a reasoning_text part), a message with its
	// text, or a function call.
	outputItem struct {
		Type, ID, Status        string
		Content                 []outputPart // a message's or a reasoning's one part
		CallID, Name, Arguments string
		Namespace               string // a function's namespace, if it is in one
		// EncryptedContent is a reasoning's text, when include asks for
		// it: stateless clients (Codex, store: false) give it back.
		EncryptedContent *string
	}
	outputPart struct {
		Type     string // output_text or reasoning_text
		Text     string
		Logprobs []tokenLogprob
	}
	// responseEvent is an event of a stream; its type is its name too.
	responseEvent struct {
		Type           string          `json:"type"`
		SequenceNumber int             `json:"sequence_number"`
		Response       *responseObject `json:"response,omitempty"`
		OutputIndex    *int            `json:"output_index,omitempty"`
		ItemID         string          `json:"item_id,omitempty"`
		ContentIndex   *int            `json:"content_index,omitempty"`
		Item           *outputItem     `json:"item,omitempty"`
		Part           *outputPart     `json:"part,omitempty"`
		Delta          string          `json:"delta,omitempty"`
		Text           *string         `json:"text,omitempty"`
		Arguments      *string         `json:"arguments,omitempty"`
		Name           string          `json:"name,omitempty"`
		Logprobs       *[]tokenLogprob `json:"logprobs,omitempty"`
	}
)

// MarshalJSON gives each type of item its fields, the empty ones too:
// the SDKs want a message's content and a reasoning's summary as lists.
func (o outputItem) MarshalJSON() ([]byte, error) {
	content := o.Content
	if content == nil {
		content = []outputPart{}
	}
	switch o.Type {
	case "message":
		return json.Marshal(struct {
			Type    string       `json:"type"`
			ID      string       `json:"id"`
			Status  string       `json:"status"`
			Role    string       `json:"role"`
			Content []outputPart `json:"content"`
		}{o.Type, o.ID, o.Status, "assistant", content})
	case "reasoning":
		return json.Marshal(struct {
			Type             string       `json:"type"`
			ID               string       `json:"id"`
			Status           string       `json:"status"`
			Summary          []outputPart `json:"summary"`
			Content          []outputPart `json:"content"`
			EncryptedContent *string      `json:"encrypted_content,omitempty"`
		}{o.Type, o.ID, o.Status, []outputPart{}, content, o.EncryptedContent})
	}
	return json.Marshal(struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		Status    string `json:"status"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Namespace string `json:"namespace,omitempty"`
		Arguments string `json:"arguments"`
	}{o.Type, o.ID, o.Status, o.CallID, o.Name, o.Namespace, o.Arguments})
}

func (p outputPart) MarshalJSON() ([]byte, error) {
	if p.Type != "output_text" {
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{p.Type, p.Text})
	}
	lps := p.Logprobs
	if lps == nil {
		lps = []tokenLogprob{}
	}
	return json.Marshal(struct {
		Type        string         `json:"type"`
		Text        string         `json:"text"`
		Annotations []any          `json:"annotations"`
		Logprobs    []tokenLogprob `json:"logprobs"`
	}{p.Type, p.Text, []any{}, lps})
}

// responseItems turns a generation's deltas into the Responses API's
// output items, as the events of a stream: its reasoning, its message,
// each function call, in turn, each opened, filled and closed; a change
// of kind closes the open item and opens the next. Its items are the
// answer's output.
type responseItems struct {
	out       func(responseEvent) error // nil: no events (an answer not streamed)
	items     []outputItem
	open      bool
	call      int                      // the generation's index of the open call
	encrypted bool                     // a reasoning item gives its text as encrypted_content
	tools     map[string]responsesTool // the functions' namespaces
	unnamed   unnamedCalls
}

func (w *responseItems) emit(ev responseEvent) error {
	if w.out == nil {
		return nil
	}
	return w.out(ev)
}

func (w *responseItems) add(d qwen.Delta) error {
	if d.Reasoning != "" {
		if err := w.text("reasoning", d.Reasoning, nil); err != nil {
			return err
		}
	}
	if d.Content != "" || (len(d.Logprobs) > 0 && w.isOpen("message")) {
		if err := w.text("message", d.Content, logprobsOf(d.Logprobs)); err != nil {
			return err
		}
	}
	for _, c := range d.ToolCalls {
		starts := c.ID != "" || !w.isOpen("function_call") || c.Index != w.call
		if w.unnamed.skip(c, starts) {
			continue
		}
		if starts {
			it := outputItem{Type: "function_call", ID: itemID("fc"), CallID: c.ID, Name: c.Name, Namespace: w.tools[c.Name].namespace}
			if err := w.start(it); err != nil {
				return err
			}
			w.call = c.Index
		}
		if c.Arguments != "" {
			n := len(w.items) - 1
			w.items[n].Arguments += c.Arguments
			if err := w.emit(responseEvent{Type: "response.function_call_arguments.delta", OutputIndex: &n, ItemID: w.items[n].ID, Delta: c.Arguments}); err != nil {
				return err
			}
		}
	}
	return nil
}

func itemID(prefix string) string {
	return strings.Replace(newID(prefix), "-", "_", 1)
}

func (w *responseItems) isOpen(typ string) bool {
	return w.open && w.items[len(w.items)-1].Type == typ
}

// text adds text to the open item of its kind, a message or a
// reasoning, opening one if needed.
func (w *responseItems) text(kind, delta string, lps []tokenLogprob) error {
	part, event, prefix := "output_text", "response.output_text.delta", "msg"
	if kind == "reasoning" {
		part, event, prefix = "reasoning_text", "response.reasoning_text.delta", "rs"
	}
	n, zero := len(w.items), 0
	if !w.isOpen(kind) {
		if err := w.start(outputItem{Type: kind, ID: itemID(prefix)}); err != nil {
			return err
		}
		w.items[n].Content = []outputPart{{Type: part}}
		p := w.items[n].Content[0]
		if err := w.emit(responseEvent{Type: "response.content_part.added", OutputIndex: &n, ItemID: w.items[n].ID, ContentIndex: &zero, Part: &p}); err != nil {
			return err
		}
	} else {
		n--
	}
	p := &w.items[n].Content[0]
	p.Text += delta
	ev := responseEvent{Type: event, OutputIndex: &n, ItemID: w.items[n].ID, ContentIndex: &zero, Delta: delta}
	if kind == "message" {
		p.Logprobs = append(p.Logprobs, lps...)
		if lps == nil {
			lps = []tokenLogprob{}
		}
		ev.Logprobs = &lps
	}
	if delta == "" {
		return nil // log-probabilities of text held back: the done event gives them
	}
	return w.emit(ev)
}

// start closes the open item and opens item.
func (w *responseItems) start(item outputItem) error {
	if err := w.close("completed"); err != nil {
		return err
	}
	item.Status = "in_progress"
	w.items = append(w.items, item)
	w.open = true
	n := len(w.items) - 1
	return w.emit(responseEvent{Type: "response.output_item.added", OutputIndex: &n, Item: &item})
}

// close ends the open item, if one is, with status: completed, or
// incomplete when the answer was cut short.
func (w *responseItems) close(status string) error {
	if !w.open {
		return nil
	}
	w.open = false
	n, zero := len(w.items)-1, 0
	it := &w.items[n]
	it.Status = status
	var evs []responseEvent
	switch it.Type {
	case "function_call":
		evs = append(evs, responseEvent{Type: "response.function_call_arguments.done", OutputIndex: &n, ItemID: it.ID, Arguments: &it.Arguments, Name: it.Name})
	default:
		p := it.Content[0]
		done := responseEvent{Type: "response.output_text.done", OutputIndex: &n, ItemID: it.ID, ContentIndex: &zero, Text: &p.Text}
		if it.Type == "reasoning" {
			done.Type = "response.reasoning_text.done"
			if w.encrypted {
				it.EncryptedContent = &p.Text
			}
		} else {
			lps := p.Logprobs
			if lps == nil {
				lps = []tokenLogprob{}
			}
			done.Logprobs = &lps
		}
		evs = append(evs, done, responseEvent{Type: "response.content_part.done", OutputIndex: &n, ItemID: it.ID, ContentIndex: &zero, Part: &p})
	}
	item := *it
	evs = append(evs, responseEvent{Type: "response.output_item.done", OutputIndex: &n, Item: &item})
	for _, ev := range evs {
		if err := w.emit(ev); err != nil {
			return err
		}
	}
	return nil
}

// turn is the answer as a turn of the conversation, for the next request
// that continues it (previous_response_id).
func (w *responseItems) turn() qwen.Message {
	m := qwen.Message{Role: "assistant"}
	for _, it := range w.items {
		switch it.Type {
		case "reasoning":
			m.Reasoning += it.Content[0].Text
		case "message":
			m.Content += it.Content[0].Text
		case "function_call":
			// The arguments as they were generated, so that the next
			// request renders the turn as the model wrote it and reuses
			// its KV cache; arguments the length cut, which no template
			// renders, as none.
			args := it.Arguments
			if chat.CheckArguments(args) != nil {
				args = "{}"
			}
			m.ToolCalls = append(m.ToolCalls, qwen.ToolCall{ID: it.CallID, Name: it.Name, Arguments: args})
		}
	}
	return m
}
