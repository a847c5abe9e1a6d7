package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/qwenc/qwenc/qwen"
)

// responsesCall is how the Responses API is asked for an answer: what the
// request gave that the answer depends on, besides the qwen.Request.
type responsesCall struct {
	req       qwen.Request
	history   []qwen.Message // the conversation without the instructions: what previous_response_id continues
	encrypted bool           // include reasoning.encrypted_content
	store     bool
	input     []inputItem // the input's items, as they are listed once stored
	// tools are the request's function tools, all of them (allowed_tools
	// keeps some): each name's path and namespace, if it is in one.
	tools map[string]responsesTool
}

type responsesTool struct{ path, namespace string }

func (c *responsesCall) requestFields() requestFields {
	paths := map[string]string{}
	for name, t := range c.tools {
		paths[name] = t.path + ".parameters"
	}
	return requestFields{"text.format.schema", paths, "input"}
}

// responsesRequest checks a Responses request and makes it a
// qwen.Request; prev is the conversation previous_response_id continues.
func (t *target) responsesRequest(rr *responsesRequest, prev []qwen.Message) (responsesCall, *apiError) {
	var c responsesCall
	switch {
	case len(rr.Conversation) > 0 && string(rr.Conversation) != "null":
		return c, badRequest("conversation", "conversation: the Conversations API is not supported here; give the conversation in input, or previous_response_id")
	case len(rr.Prompt) > 0 && string(rr.Prompt) != "null":
		return c, badRequest("prompt", "prompt: stored prompt templates are not supported here; give instructions and input")
	case rr.Truncation != nil && *rr.Truncation != "disabled" && *rr.Truncation != "auto":
		return c, badRequest("truncation", "truncation %q: want disabled or auto", *rr.Truncation)
	case rr.Reasoning.Summary != nil && !slices.Contains([]string{"auto", "concise", "detailed"}, *rr.Reasoning.Summary):
		// OpenAI refuses another value; taken here, a client would learn
		// of its mistake only there.
		return c, badRequest("reasoning.summary", "reasoning.summary %q: want auto, concise or detailed", *rr.Reasoning.Summary)
	}
	if e := rr.chatOnlyFields.check(); e != nil {
		return c, e
	}
	if e := checkMetadata(rr.Metadata); e != nil {
		return c, e
	}
	req, e := t.openAIRequest(&rr.samplingFields, nil, rr.MaxOutputTokens, "max_output_tokens", 0, nil)
	if e != nil {
		return c, e
	}
	input, e := responsesInput(rr.Input)
	if e != nil {
		return c, e
	}
	c.history = append(append([]qwen.Message{}, prev...), input...)
	if len(c.history) == 0 {
		return c, badRequest("input", "input: missing; give a string or a list of items")
	}
	req.Messages = withInstructions(rr.Instructions, c.history)
	if req.Tools, c.tools, e = responsesTools(rr.Tools); e != nil {
		return c, e
	}
	if e := responsesToolChoice(rr.ToolChoice, &req); e != nil {
		return c, e
	}
	req.OneToolCall = rr.ParallelToolCalls != nil && !*rr.ParallelToolCalls
	if len(req.Tools) == 0 {
		if req.ToolChoice == "required" || req.ToolName != "" {
			return c, badRequest("tool_choice", "tool_choice forces a tool call: it needs tools")
		}
		req.ToolChoice, req.OneToolCall = "", false
	}
	if e := textFormat(rr.Text.Format, &req); e != nil {
		return c, e
	}
	if e := ignoreEOSFits(&req); e != nil {
		return c, e
	}
	for i, inc := range rr.Include {
		if !includes[inc] {
			return c, badRequest(fmt.Sprintf("include[%d]", i), "include[%d] %q is not one this API knows", i, inc)
		}
		switch inc {
		case "message.output_text.logprobs":
			req.Logprobs = true
		case "reasoning.encrypted_content":
			c.encrypted = true
		}
	}
	if n := rr.TopLogprobs; n != nil {
		if *n < 0 || *n > qwen.MaxTopLogprobs {
			return c, badRequest("top_logprobs", "top_logprobs %d is outside [0, %d]", *n, qwen.MaxTopLogprobs)
		}
		req.Logprobs, req.TopLogprobs = req.Logprobs || *n > 0, *n
	}
	if e := t.needsChat(); e != nil {
		return c, e
	}
	rr.ChatTemplateKwargs.apply(&req)
	if rr.Reasoning.Effort != nil {
		if e := t.effort(*rr.Reasoning.Effort, "reasoning.effort", &req); e != nil {
			return c, e
		}
		// The effort and enable_thinking each say whether to think: two
		// that disagree are refused, neither of them ignored.
		off := *rr.Reasoning.Effort == "none" || *rr.Reasoning.Effort == "minimal"
		if on := rr.ChatTemplateKwargs.EnableThinking; on != nil && *on && off {
			return c, badRequest("reasoning.effort", "reasoning.effort %q answers without thinking, which chat_template_kwargs.enable_thinking true contradicts", *rr.Reasoning.Effort)
		} else if on != nil && !*on && !off {
			return c, badRequest("reasoning.effort", "reasoning.effort %q thinks, which chat_template_kwargs.enable_thinking false contradicts", *rr.Reasoning.Effort)
		}
	}
	if rr.Truncation != nil && *rr.Truncation == "auto" {
		t.truncate(&req)
	}
	c.req, c.store = req, rr.Store == nil || *rr.Store
	if c.store {
		c.input = inputItems(rr.Input)
	}
	return c, nil
}

// truncate is truncation "auto": when the prompt does not fit the
// context, with the answer's max_output_tokens (up to half the context)
// beside it, the oldest turns are dropped, each from a user message up to
// the next, until it does; the system message stays, and so does the
// last turn, whose answer is asked (without room for it, the request is
// refused as without truncation). Whole turns keep every tool call with
// its result, and the conversation starting with a user message, as the
// templates need.
func (t *target) truncate(req *qwen.Request) {
	limit := t.info.Context - min(max(req.MaxTokens, 0), t.info.Context/2)
	n, err := t.m.Count(*req)
	if err != nil || n <= limit {
		return // an error is the start's to report
	}
	msgs := req.Messages
	var cuts []int // where a turn after the first begins
	first := true
	for i, m := range msgs {
		if m.Role == "user" {
			if !first {
				cuts = append(cuts, i)
			}
			first = false
		}
	}
	head := msgs[:0:0]
	if len(msgs) > 0 && msgs[0].Role == "system" {
		head = msgs[:1]
	}
	fits := func(k int) bool {
		r := *req
		r.Messages = append(append([]qwen.Message{}, head...), msgs[cuts[k]:]...)
		n, err := t.m.Count(r)
		return err == nil && n <= limit
	}
	// The fewest turns dropped: the counts fall as more go.
	k := sort.Search(len(cuts), fits)
	if k < len(cuts) { // else even the last turn alone does not fit: refused at the start
		req.Messages = append(append([]qwen.Message{}, head...), msgs[cuts[k]:]...)
	}
}

// withInstructions is the conversation as the template takes it: the
// instructions and the system and developer messages before any other
// joined into one system message, then the rest. OpenAI takes any number
// of them (Codex sends two developer messages with its instructions);
// Qwen3.5's template takes one system message, first, and refuses more.
// The stored history keeps its own (instructions do not carry over).
func withInstructions(instructions *string, history []qwen.Message) []qwen.Message {
	var parts []string
	if instructions != nil && *instructions != "" {
		parts = append(parts, *instructions)
	}
	n := 0
	for ; n < len(history) && history[n].Role == "system"; n++ {
		parts = append(parts, history[n].Content)
	}
	if len(parts) == 0 {
		return history
	}
	return append([]qwen.Message{{Role: "system", Content: strings.Join(parts, "\n\n")}}, history[n:]...)
}

// responsesTools reads the function tools, {"type": "function", "name",
// "description", "parameters", "strict"} (held to their parameters,
// strict or not), and the namespaces that group them, {"type":
// "namespace", "name", "description", "tools"}: their functions are
// listed as the others are, and their calls name their namespace. The
// built-in tools (web_search, file_search, ...) are OpenAI's, and
// refused, and so are custom tools (free text, or a grammar's).
func responsesTools(defs []json.RawMessage) ([]qwen.Tool, map[string]responsesTool, *apiError) {
	var tools []qwen.Tool
	byName := map[string]responsesTool{}
	var add func(defs []json.RawMessage, at, namespace string) *apiError
	add = func(defs []json.RawMessage, at, namespace string) *apiError {
		for i, def := range defs {
			path := fmt.Sprintf("%s[%d]", at, i)
			var f struct {
				Type        string            `json:"type"`
				Name        string            `json:"name"`
				Description string            `json:"description"`
				Parameters  json.RawMessage   `json:"parameters"`
				Strict      *bool             `json:"strict"` // held to the parameters either way, but read: a bad one is refused
				Tools       []json.RawMessage `json:"tools"`
			}
			if e := unmarshalAt(def, path, &f, `a function tool {"type": "function", "name", "description", "parameters"}`); e != nil {
				return e
			}
			switch {
			case f.Type == "namespace" && namespace == "":
				if f.Name == "" {
					return badRequest(path+".name", "%s.name: missing", path)
				}
				if e := add(f.Tools, path+".tools", f.Name); e != nil {
					return e
				}
				continue
			case f.Type == "namespace":
				return badRequest(path+".type", "%s.type \"namespace\": a namespace in a namespace: give its functions in the outer one", path)
			case f.Type == "":
				return badRequest(path+".type", "%s.type: missing; want \"function\"", path)
			case f.Type == "custom":
				return badRequest(path+".type", "%s.type \"custom\": custom tools (free text or a grammar) are not supported here; give function tools", path)
			case f.Type != "function":
				return badRequest(path+".type", "%s.type %q: a built-in tool of OpenAI's, not supported here; give function tools", path, f.Type)
			case f.Name == "":
				return badRequest(path+".name", "%s.name: missing", path)
			}
			if _, dup := byName[f.Name]; dup {
				return badRequest(path+".name", "%s.name %q: another tool has that name", path, f.Name)
			}
			if e := toolSchema(f.Parameters, path+".parameters", false); e != nil {
				return e
			}
			tool, err := qwen.NewTool(f.Name, f.Description, f.Parameters)
			if err != nil {
				// Its errors name the member of a chat completions tool
				// at fault (function.name): here the tool's own.
				if inner := errors.Unwrap(err); inner != nil {
					err = inner
				}
				msg := strings.TrimPrefix(err.Error(), "function.")
				at := path
				if member, _, ok := strings.Cut(msg, ":"); ok && !strings.ContainsAny(member, " \"") {
					at += "." + member
					msg = strings.TrimPrefix(msg, member+":")
				} else {
					msg = " " + msg
				}
				return badRequest(at, "%s:%s", at, msg)
			}
			tools = append(tools, tool)
			byName[f.Name] = responsesTool{path, namespace}
		}
		return nil
	}
	if e := add(defs, "tools", ""); e != nil {
		return nil, nil, e
	}
	return tools, byName, nil
}

// responsesToolChoice reads tool_choice onto req: "auto", "none",
// "required", {"type": "function", "name"}, or {"type": "allowed_tools",
// "mode", "tools"}, which keeps the tools named (the prompt lists those
// alone: a call of another could not be refused otherwise).
func responsesToolChoice(raw json.RawMessage, req *qwen.Request) *apiError {
	if done, e := toolChoiceMode(raw, req, "an object"); done {
		return e
	}
	var o struct {
		Type  string `json:"type"`
		Name  string `json:"name"`
		Mode  string `json:"mode"`
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if e := unmarshalAt(raw, "tool_choice", &o, `"auto", "none", "required" or an object`); e != nil {
		return e
	}
	switch o.Type {
	case "function":
		switch {
		case o.Name == "":
			return badRequest("tool_choice.name", "tool_choice.name: missing")
		case len(req.Tools) > 0 && toolIndex(req.Tools, o.Name) < 0: // no tools at all is refused with the other forced choices
			return badRequest("tool_choice.name", "tool_choice.name %q: not among the tools", o.Name)
		}
		req.ToolName = o.Name
	case "allowed_tools":
		if o.Mode != "auto" && o.Mode != "required" {
			return badRequest("tool_choice.mode", "tool_choice.mode %q: want auto or required", o.Mode)
		}
		var kept []qwen.Tool
		for i, a := range o.Tools {
			at := fmt.Sprintf("tool_choice.tools[%d]", i)
			if a.Type != "function" {
				return badRequest(at+".type", "%s.type %q: want function", at, a.Type)
			}
			j := toolIndex(req.Tools, a.Name)
			if j < 0 {
				return badRequest(at+".name", "%s.name %q: not among the tools", at, a.Name)
			}
			kept = append(kept, req.Tools[j])
		}
		req.Tools, req.ToolChoice = kept, o.Mode
	case "":
		return badRequest("tool_choice.type", "tool_choice.type: missing")
	case "custom":
		return badRequest("tool_choice.type", "tool_choice.type \"custom\": custom tools (free text or a grammar) are not supported here; name a function tool")
	default:
		return badRequest("tool_choice.type", "tool_choice.type %q: a built-in tool of OpenAI's, not supported here", o.Type)
	}
	return nil
}

func toolIndex(tools []qwen.Tool, name string) int {
	for i, t := range tools {
		if t.Name == name {
			return i
		}
	}
	return -1
}

// checkMetadata holds metadata to OpenAI's limits, in characters: at
// most 16 keys, each of at most 64, each value of at most 512. It is
// stored and given back, so what OpenAI would refuse is refused here
// rather than kept.
func checkMetadata(md map[string]string) *apiError {
	if len(md) > 16 {
		return badRequest("metadata", "metadata: %d keys: at most 16", len(md))
	}
	for _, k := range slices.Sorted(maps.Keys(md)) {
		if n := utf8.RuneCountInString(k); n > 64 {
			return badRequest("metadata", "metadata: key %q has %d characters: at most 64", k, n)
		}
		if n := utf8.RuneCountInString(md[k]); n > 512 {
			return badRequest("metadata."+k, "metadata.%s: %d characters: at most 512", k, n)
		}
	}
	return nil
}

// textFormat reads text.format onto req: {"type": "text"}, {"type":
// "json_object"}, or {"type": "json_schema", "name", "schema", "strict"},
// the schema enforced, what cannot be relaxed unless strict. The name is
// required, as OpenAI requires it: a request that passes here passes
// there.
func textFormat(raw json.RawMessage, req *qwen.Request) *apiError {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var f struct {
		Type   string          `json:"type"`
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	}
	if e := unmarshalAt(raw, "text.format", &f, "an object with a type"); e != nil {
		return e
	}
	if f.Type == "json_schema" {
		switch {
		case f.Name == "":
			return badRequest("text.format.name", "text.format.name: missing")
		case !wireName(f.Name, 64):
			return badRequest("text.format.name", "text.format.name %q: want at most 64 letters, digits, _ and -, as OpenAI has it", f.Name)
		}
	}
	return answerFormat(req, "text.format", f.Type, f.Schema, f.Strict, "text.format.schema")
}

// responseInputItem is an item of input: a message (a type "message", or
// a role alone), a function_call an earlier answer made, a
// function_call_output, or a reasoning item an earlier answer gave.
type responseInputItem struct {
	Type             string          `json:"type"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	CallID           string          `json:"call_id"`
	Name             string          `json:"name"`
	Arguments        json.RawMessage `json:"arguments"`
	Output           json.RawMessage `json:"output"`
	Summary          json.RawMessage `json:"summary"`
	EncryptedContent *string         `json:"encrypted_content"`
}

// responsesInput makes input qwen's messages. The items an answer gave
// (its reasoning, its message, its function calls) are one assistant turn,
// up to the next item of another role; a turn of reasoning alone is left
// out, as Qwen3's template leaves out the thinking of earlier turns.
func responsesInput(raw json.RawMessage) ([]qwen.Message, *apiError) {
	var s string
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, nil
	case json.Unmarshal(raw, &s) == nil:
		return []qwen.Message{{Role: "user", Content: s}}, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, badRequest("input", "input: want a string or a list of items")
	}
	var out []qwen.Message
	turn := -1 // the index in out of the open assistant turn
	var reasoning []string
	open := func() *qwen.Message {
		if turn < 0 {
			out = append(out, qwen.Message{Role: "assistant"})
			turn = len(out) - 1
		}
		return &out[turn]
	}
	closeTurn := func() {
		if turn >= 0 {
			m := &out[turn]
			m.Reasoning = strings.Join(reasoning, "\n\n")
			if m.Content == "" && len(m.ToolCalls) == 0 {
				out = out[:turn]
			}
		}
		turn, reasoning = -1, nil
	}
	for i, b := range items {
		path := fmt.Sprintf("input[%d]", i)
		var it responseInputItem
		if e := unmarshalAt(b, path, &it, "an item, an object"); e != nil {
			return nil, e
		}
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			text, e := itemText(it.Content, path+".content")
			if e != nil {
				return nil, e
			}
			switch it.Role {
			case "assistant":
				m := open()
				m.Content += text
				continue
			case "user", "system":
			case "developer":
				it.Role = "system"
			case "":
				return nil, badRequest(path+".role", "%s.role: missing", path)
			default:
				return nil, badRequest(path+".role", "%s.role %q: want user, system, developer or assistant", path, it.Role)
			}
			closeTurn()
			out = append(out, qwen.Message{Role: it.Role, Content: text})
		case "reasoning":
			text, e := reasoningText(it, path)
			if e != nil {
				return nil, e
			}
			open()
			if text != "" {
				reasoning = append(reasoning, text)
			}
		case "function_call":
			switch {
			case it.Name == "":
				return nil, badRequest(path+".name", "%s.name: missing", path)
			case it.CallID == "":
				return nil, badRequest(path+".call_id", "%s.call_id: missing", path)
			}
			m := open()
			m.ToolCalls = append(m.ToolCalls, qwen.ToolCall{ID: it.CallID, Name: it.Name, Arguments: toolArguments(it.Arguments)})
		case "function_call_output":
			// Both required, as OpenAI has them: a result is paired with
			// its call by call_id, and an output left out is no result.
			switch {
			case it.CallID == "":
				return nil, badRequest(path+".call_id", "%s.call_id: missing", path)
			case len(it.Output) == 0 || string(it.Output) == "null":
				return nil, badRequest(path+".output", "%s.output: missing", path)
			}
			text, e := itemText(it.Output, path+".output")
			if e != nil {
				return nil, e
			}
			closeTurn()
			out = append(out, qwen.Message{Role: "tool", Content: text, ToolCallID: it.CallID})
		case "item_reference":
			// The handler resolves them first (responseStore.resolve).
			return nil, badRequest(path+".type", "%s: an item_reference must name a stored item, not another reference", path)
		case "":
			return nil, badRequest(path+".type", "%s.type: missing", path)
		default:
			return nil, badRequest(path+".type", "%s.type %q: not supported here: want message, function_call, function_call_output or reasoning", path, typ)
		}
	}
	closeTurn()
	return out, nil
}

// itemText is the text of a message's content or a call's output: a
// string, or a list of text parts (input_text, output_text, refusal).
// Images, files and audio are refused: the model reads text only.
func itemText(raw json.RawMessage, path string) (string, *apiError) {
	var s string
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", nil
	case json.Unmarshal(raw, &s) == nil:
		return s, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return "", badRequest(path, "%s: want a string or a list of content parts", path)
	}
	var sb strings.Builder
	for j, item := range items {
		pp := fmt.Sprintf("%s[%d]", path, j)
		var p contentPart
		if e := unmarshalAt(item, pp, &p, "a content part, an object with a type"); e != nil {
			return "", e
		}
		switch p.Type {
		case "input_text", "output_text", "text":
			if p.Text == nil {
				return "", badRequest(pp+".text", "%s.text: missing", pp)
			}
			sb.WriteString(*p.Text)
		case "refusal":
			if p.Refusal != nil {
				sb.WriteString(*p.Refusal)
			}
		case "input_image", "input_file", "input_audio":
			return "", badRequest(pp, "%s: a content part of type %q: %s", pp, p.Type, noVision)
		case "":
			return "", badRequest(pp+".type", "%s.type: missing", pp)
		default:
			return "", badRequest(pp+".type", "%s.type %q: want input_text or output_text", pp, p.Type)
		}
	}
	return sb.String(), nil
}

// reasoningText is a reasoning item's text: its reasoning_text content,
// as this server gives it, or else its encrypted_content (which here is
// that text), or else its summary.
func reasoningText(it responseInputItem, path string) (string, *apiError) {
	for _, f := range []struct {
		raw  json.RawMessage
		path string
	}{{it.Content, path + ".content"}, {it.Summary, path + ".summary"}} {
		if len(f.raw) == 0 || string(f.raw) == "null" {
			continue
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if e := unmarshalAt(f.raw, f.path, &parts, "a list of parts"); e != nil {
			return "", e
		}
		if len(parts) == 0 {
			continue
		}
		var text []string
		for _, p := range parts {
			text = append(text, p.Text)
		}
		if f.path == path+".summary" && it.EncryptedContent != nil {
			break // the whole text, rather than its summary
		}
		return strings.Join(text, "\n\n"), nil
	}
	if it.EncryptedContent != nil {
		return *it.EncryptedContent, nil
	}
	return "", nil
}

// inputItem is an item of a stored response's input, as
// GET /v1/responses/{id}/input_items lists it.
type inputItem struct {
	id, typ string
	json    json.RawMessage
}

// inputItems are the items of input, which responsesInput has checked,
// as OpenAI lists them: each with an id (the client's, or one given here
// once, when the response is stored, so that every page names it alike)
// and a status (completed unless the client gave one); a string is one
// user message, and a message's content a list of text parts. The other
// fields are kept as the client gave them.
func inputItems(raw json.RawMessage) []inputItem {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw, _ = json.Marshal([]map[string]string{{"role": "user", "content": s}})
	}
	var items []json.RawMessage
	json.Unmarshal(raw, &items) // null, or checked already: a list of objects
	out := make([]inputItem, 0, len(items))
	for _, b := range items {
		var fields map[string]json.RawMessage
		var it responseInputItem
		json.Unmarshal(b, &fields)
		json.Unmarshal(b, &it)
		if it.Type == "" {
			it.Type = "message" // a message given by its role alone
		}
		prefix := map[string]string{"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs"}[it.Type]
		switch it.Type {
		case "message":
			fields["content"] = messageParts(it.Role, it.Content)
		case "reasoning":
			if len(it.Summary) == 0 || string(it.Summary) == "null" {
				fields["summary"] = json.RawMessage(`[]`) // the SDKs want a list
			}
		}
		var id string
		json.Unmarshal(fields["id"], &id)
		if id == "" {
			id = itemID(prefix)
		}
		fields["type"], fields["id"] = jsonText(it.Type), jsonText(id)
		if st, ok := fields["status"]; !ok || string(st) == "null" {
			fields["status"] = jsonText("completed")
		}
		enc, _ := json.Marshal(fields)
		out = append(out, inputItem{id: id, typ: it.Type, json: enc})
	}
	return out
}

// messageParts is a message's content as a list of parts: a string is one
// text part, input_text, or output_text in an assistant's message, which
// has the annotations the SDKs want of output_text; a "text" part is named
// the same way.
func messageParts(role string, content json.RawMessage) json.RawMessage {
	text := "input_text"
	if role == "assistant" {
		text = "output_text"
	}
	var s string
	if json.Unmarshal(content, &s) == nil {
		content, _ = json.Marshal([]map[string]string{{"type": text, "text": s}})
	}
	var parts []map[string]json.RawMessage
	json.Unmarshal(content, &parts)
	for _, p := range parts {
		var typ string
		json.Unmarshal(p["type"], &typ)
		if typ == "text" {
			typ, p["type"] = text, jsonText(text)
		}
		if _, ok := p["annotations"]; typ == "output_text" && !ok {
			p["annotations"] = json.RawMessage(`[]`)
		}
	}
	if parts == nil {
		return json.RawMessage(`[]`)
	}
	b, _ := json.Marshal(parts)
	return b
}

// listed is the item as a page gives it: a reasoning's encrypted_content
// only when include asks for it, as in an answer's output.
func (it inputItem) listed(encrypted bool) json.RawMessage {
	if it.typ != "reasoning" || encrypted {
		return it.json
	}
	var fields map[string]json.RawMessage
	json.Unmarshal(it.json, &fields)
	if _, ok := fields["encrypted_content"]; !ok {
		return it.json
	}
	delete(fields, "encrypted_content")
	b, _ := json.Marshal(fields)
	return b
}

func jsonText(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
