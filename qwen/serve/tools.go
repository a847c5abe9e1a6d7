package serve

import (
	"encoding/json"
	"fmt"

	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/qwen"
)

// parseTools reads a request's tool definitions, as OpenAI and Ollama
// send them alike.
func parseTools(defs []json.RawMessage) ([]qwen.Tool, *apiError) {
	var tools []qwen.Tool
	for i, def := range defs {
		t, err := qwen.ParseTool(def)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("tools[%d]", i), "tools[%d]: %v", i, err)
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// toolChoice reads OpenAI's tool_choice onto req: "auto", "none",
// "required", or {"type": "function", "function": {"name": ...}}.
func toolChoice(raw json.RawMessage, req *qwen.Request) *apiError {
	if raw == nil || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none", "required":
			req.ToolChoice = s
			return nil
		}
		return badRequest("tool_choice", "tool_choice %q: want \"auto\", \"none\", \"required\" or a function", s)
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" || named.Function.Name == "" {
		return badRequest("tool_choice", "tool_choice: want \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}")
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
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return badRequest("response_format", "response_format: want an object with a type")
	}
	switch f.Type {
	case "text":
	case "json_object":
		req.JSONObject = true
	case "json_schema":
		switch {
		case f.JSONSchema == nil:
			return badRequest("response_format.json_schema", "response_format.json_schema: missing")
		case f.JSONSchema.Schema == nil || string(f.JSONSchema.Schema) == "null":
			req.JSONObject = true // OpenAI's schema is optional: any object then
		default:
			req.JSONSchema = f.JSONSchema.Schema
		}
	default:
		return badRequest("response_format.type", "response_format.type %q: want text, json_object or json_schema", f.Type)
	}
	return nil
}

// ollamaFormat reads Ollama's format: "json", or a JSON Schema.
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
		req.JSONSchema = f
	}
	return nil
}

// toolArguments reads a call's arguments from a client: OpenAI sends the
// JSON text as a string, Ollama (and some OpenAI clients) the object
// itself, which the template prints as tojson does.
func toolArguments(raw json.RawMessage, path string) (string, *apiError) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if err := chat.CheckArguments(s); err != nil {
			return "", badRequest(path, "%s: %v", path, err)
		}
		return s, nil
	}
	text, err := chat.ToJSON(raw)
	if err == nil {
		err = chat.CheckArguments(text)
	}
	if err != nil {
		return "", badRequest(path, "%s: want a JSON object, or its text as a string", path)
	}
	return text, nil
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
