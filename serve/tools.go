package serve

import (
	"encoding/json"
	"fmt"

	"github.com/qwenc/qwenc/chat"
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

// toolChoice reads OpenAI's tool_choice. Only "auto", the default, is
// served for now: "none", "required" and a named function need the
// grammar that holds the answer to them, and are refused rather than
// ignored.
func toolChoice(raw json.RawMessage) *apiError {
	if raw == nil || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && s == "auto" {
		return nil
	}
	return badRequest("tool_choice", "tool_choice %s is not supported yet: only \"auto\"", raw)
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
