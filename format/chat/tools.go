package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Markers of Qwen's tool format. They are added tokens, emitted Special
// where the template writes them.
const (
	ToolCallOpen  = "<tool_call>"
	ToolCallClose = "</tool_call>"
)

// ToolCall is a call an assistant turn made: the function's name and its
// arguments as the JSON text of an object.
type ToolCall struct {
	// ID is the protocol's id for the call (OpenAI's tool_call_id); the
	// templates do not print it.
	ID        string
	Name      string
	Arguments string
}

// Tool is a function the model may call.
type Tool struct {
	// Name is the function's name, and Parameters the JSON Schema of its
	// arguments (nil when the definition gives none).
	Name       string
	Parameters json.RawMessage
	// def is the whole definition as the template's tojson prints it.
	def string
}

// ParseTool reads a tool definition as OpenAI and Ollama send it,
// {"type": "function", "function": {"name": ..., "description": ...,
// "parameters": {...}}}. The template prints the definition whole, so
// every member is kept, in its order; errors name the member at fault.
func ParseTool(def []byte) (Tool, error) {
	var t struct {
		Type     *string
		Function *struct {
			Name       *string
			Parameters json.RawMessage
		}
	}
	if err := json.Unmarshal(def, &t); err != nil {
		return Tool{}, fmt.Errorf("want an object {\"type\": \"function\", \"function\": {...}}: %w", err)
	}
	switch {
	case t.Type == nil:
		return Tool{}, errors.New("type: missing; want \"function\"")
	case *t.Type != "function":
		return Tool{}, fmt.Errorf("type: %q is not supported; want \"function\"", *t.Type)
	case t.Function == nil:
		return Tool{}, errors.New("function: missing")
	case t.Function.Name == nil || *t.Function.Name == "":
		return Tool{}, errors.New("function.name: missing")
	case strings.ContainsFunc(*t.Function.Name, unwritable):
		return Tool{}, fmt.Errorf("function.name: %q: a tool's name may not hold spaces, control characters, quotes, backslashes or angle brackets: the model writes it in its calls, as JSON or XML", *t.Function.Name)
	}
	p := bytes.TrimSpace(t.Function.Parameters)
	if bytes.Equal(p, []byte("null")) {
		p = nil
	}
	if p != nil && p[0] != '{' {
		return Tool{}, errors.New("function.parameters: want a JSON Schema object")
	}
	s, err := ToJSON(def)
	if err != nil {
		return Tool{}, err
	}
	return Tool{Name: *t.Function.Name, Parameters: p, def: s}, nil
}

// unwritable reports a character a call's name cannot hold as the
// formats write it: Hermes' JSON ({"name": "..."}) would need it escaped,
// qwen3_coder's XML (<function=NAME>) has no escape at all.
func unwritable(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune(`"\<>`, r)
}

// NewTool makes the definition an OpenAI client would send for a function.
// parameters is its arguments' JSON Schema, or nil.
func NewTool(name, description string, parameters json.RawMessage) (Tool, error) {
	type function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	}
	def, err := json.Marshal(struct {
		Type     string   `json:"type"`
		Function function `json:"function"`
	}{"function", function{name, description, parameters}})
	if err != nil {
		return Tool{}, fmt.Errorf("tool %q: %w", name, err)
	}
	t, err := ParseTool(def)
	if err != nil {
		return Tool{}, fmt.Errorf("tool %q: %w", name, err)
	}
	return t, nil
}

// CheckArguments reports whether a call's arguments are the JSON text of
// an object, as the templates assume.
func CheckArguments(args string) error {
	var v any
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return errors.New("want a JSON object")
	}
	return nil
}
