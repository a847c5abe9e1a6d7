package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/qwen"
)

// parseTools reads a request's tool definitions, as OpenAI and Ollama
// send them alike: {"type": "function", "function": {"name",
// "description", "parameters"}}, each member checked for its type first,
// so that an error names it.
func parseTools(defs []json.RawMessage) ([]qwen.Tool, *apiError) {
	var tools []qwen.Tool
	for i, def := range defs {
		path := fmt.Sprintf("tools[%d]", i)
		var shape struct {
			Type     *string `json:"type"`
			Function *struct {
				Name        *string         `json:"name"`
				Description *string         `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if e := unmarshalAt(def, path, &shape, `a tool {"type": "function", "function": {...}}`); e != nil {
			return nil, e
		}
		if shape.Function != nil {
			if e := toolSchema(shape.Function.Parameters, path+".function.parameters", false); e != nil {
				return nil, e
			}
		}
		t, err := qwen.ParseTool(def)
		if err != nil {
			// Its errors begin with the member at fault.
			member, _, _ := strings.Cut(err.Error(), ":")
			return nil, badRequest(path+"."+member, "%s.%v", path, err)
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// toolSchema refuses a tool's arguments schema at path that is not a
// JSON Schema object, or whose type is not "object", as OpenAI and
// Anthropic do: the templates take a call's arguments as an object, and
// the grammar, held to a schema of another type, would make a call whose
// arguments are a string or an array, which no client can take. With
// required (Anthropic's input_schema) the schema and its type must be
// given; OpenAI, the Responses API and Ollama take a tool without
// parameters, and parameters without a type.
func toolSchema(raw json.RawMessage, path string, required bool) *apiError {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		if required {
			return badRequest(path, "%s: missing", path)
		}
		return nil
	case raw[0] != '{':
		return badRequest(path, "%s: want a JSON Schema object", path)
	}
	var s struct {
		Type json.RawMessage `json:"type"`
	}
	json.Unmarshal(raw, &s) // an object: what is wrong in it, the schema's compiler says
	var typ string
	switch {
	case len(s.Type) == 0 || string(s.Type) == "null":
		if required {
			return badRequest(path+".type", `%s.type: missing; want "object"`, path)
		}
	case json.Unmarshal(s.Type, &typ) != nil || typ != "object":
		return badRequest(path+".type", `%s.type %s: want "object": a tool's arguments are an object`, path, s.Type)
	}
	return nil
}

// toolChoiceMode reads a tool_choice that is not an object onto req:
// null, "auto", "none" or "required"; done is false for an object, which
// the caller reads (object says what the protocol's is).
func toolChoiceMode(raw json.RawMessage, req *qwen.Request, object string) (done bool, e *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return true, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return false, nil
	}
	switch s {
	case "auto", "none", "required":
		req.ToolChoice = s
		return true, nil
	}
	return true, badRequest("tool_choice", "tool_choice %q: want \"auto\", \"none\", \"required\" or %s", s, object)
}

// toolChoice reads OpenAI's tool_choice onto req: "auto", "none",
// "required", or {"type": "function", "function": {"name": ...}}, which
// must name one of req.Tools, read first.
func toolChoice(raw json.RawMessage, req *qwen.Request) *apiError {
	if done, e := toolChoiceMode(raw, req, "a function"); done {
		return e
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	const want = `"auto", "none", "required" or {"type": "function", "function": {"name": ...}}`
	if e := unmarshalAt(raw, "tool_choice", &named, want); e != nil {
		return e
	}
	switch {
	case named.Type != "function" || named.Function.Name == "":
		return badRequest("tool_choice", "tool_choice: want %s", want)
	case len(req.Tools) > 0 && toolIndex(req.Tools, named.Function.Name) < 0: // no tools at all is refused with the other forced choices
		return badRequest("tool_choice.function.name", "tool_choice.function.name %q: not among the tools", named.Function.Name)
	}
	req.ToolName = named.Function.Name
	return nil
}

// responseFormat reads OpenAI's response_format onto req.
func responseFormat(raw json.RawMessage, req *qwen.Request) *apiError {
	if raw == nil || string(raw) == "null" {
		return nil
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if e := unmarshalAt(raw, "response_format", &f, "an object with a type"); e != nil {
		return e
	}
	var schema json.RawMessage
	var strict *bool
	if f.Type == "json_schema" {
		if f.JSONSchema == nil {
			return badRequest("response_format.json_schema", "response_format.json_schema: missing")
		}
		schema, strict = f.JSONSchema.Schema, f.JSONSchema.Strict
	}
	// The schema is optional in chat completions: any object then.
	return answerFormat(req, "response_format", f.Type, schema, strict, "")
}

// answerFormat sets the answer's format at path onto req: text,
// json_object, or json_schema with schema. A schema missing is an error
// at schemaPath, or any object when schemaPath is "". Strict, a keyword
// the grammar cannot enforce is refused; otherwise (strict false or
// left out, as OpenAI's default) it is relaxed, and reported.
func answerFormat(req *qwen.Request, path, typ string, schema json.RawMessage, strict *bool, schemaPath string) *apiError {
	switch typ {
	case "text":
	case "json_object":
		req.JSONObject = true
	case "json_schema":
		switch {
		case len(schema) > 0 && string(schema) != "null":
			req.JSONSchema, req.RelaxSchema = schema, strict == nil || !*strict
		case schemaPath == "":
			req.JSONObject = true
		default:
			return badRequest(schemaPath, "%s: missing", schemaPath)
		}
	default:
		return badRequest(path+".type", "%s.type %q: want text, json_object or json_schema", path, typ)
	}
	return nil
}

// ollamaFormat reads Ollama's format: "json", or a JSON Schema, whose
// keywords the grammar cannot enforce are relaxed and reported (Ollama
// has no strict mode, and llama.cpp's grammars drop what they cannot
// hold).
func ollamaFormat(f json.RawMessage, req *qwen.Request) *apiError {
	var s string
	switch {
	case len(f) == 0 || string(f) == "null" || string(f) == `""`:
	case json.Unmarshal(f, &s) == nil:
		if s != "json" {
			return badRequest("format", "format %q: want \"json\" or a JSON Schema", s)
		}
		req.JSONObject = true
	default:
		req.JSONSchema, req.RelaxSchema = f, true
	}
	return nil
}

// toolArguments reads a call's arguments from a client's history: OpenAI
// sends the JSON text as a string, Ollama (and some OpenAI clients) the
// object itself, which the template prints as tojson does. Arguments
// that are not a whole JSON object (a call cut off when its run was
// interrupted, or a model's malformed call given back) are the text that
// is there, rendered as the model wrote it; none, null or "" are a call
// without arguments, {}.
func toolArguments(raw json.RawMessage) string {
	var s string
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "{}"
	case json.Unmarshal(raw, &s) == nil:
		if strings.TrimSpace(s) == "" {
			return "{}"
		}
		return s
	}
	if text, err := chat.ToJSON(raw); err == nil {
		return text
	}
	return string(raw)
}

// callAccumulator joins a generation's tool-call pieces into whole calls.
type callAccumulator struct{ calls []qwen.ToolCall }

func (a *callAccumulator) add(ds []qwen.ToolCallDelta) {
	for _, d := range ds {
		for len(a.calls) <= d.Index {
			a.calls = append(a.calls, qwen.ToolCall{})
		}
		c := &a.calls[d.Index]
		if d.ID != "" {
			c.ID, c.Name = d.ID, d.Name
		}
		c.Arguments += d.Arguments
	}
}

// unnamedCalls are the calls of an answer that began without a name: the
// length cut them before their name was complete. A Responses
// function_call item and an Anthropic tool_use block must have one, and
// a client that gave such a call back would be refused, so these
// protocols leave the call out (the answer's status says it was cut).
type unnamedCalls map[int]bool

// skip reports whether c, which begins a call when starts, is part of
// one without a name.
func (u *unnamedCalls) skip(c qwen.ToolCallDelta, starts bool) bool {
	if starts && c.Name == "" {
		if *u == nil {
			*u = unnamedCalls{}
		}
		(*u)[c.Index] = true
	}
	return (*u)[c.Index]
}
