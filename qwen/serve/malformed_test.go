package serve

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestMalformedFields: every field of a valid request of each protocol,
// given a value of each wrong shape in turn, is answered below 500: a
// success, or a 400 in the protocol's error shape whose message names
// the field by its path; and afterwards nothing runs, nothing waits and
// the server answers as before.
func TestMalformedFields(t *testing.T) {
	ts := newTestServer(t, modelOpts{Parallel: 2}, ServerOptions{})
	tools := `[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}}]`
	history := `[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"}]},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"ok"}]`
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"tiny-a","messages":` + history + `,"max_tokens":2,"temperature":0.5,"top_p":0.9,"stop":["x"],` +
			`"tools":` + tools + `,"tool_choice":"auto","stream":false,"logprobs":true,"top_logprobs":2,"seed":1}`},
		{"/v1/completions", `{"model":"tiny-a","prompt":"Hi","max_tokens":2,"logprobs":1,"stop":"x","echo":false}`},
		{"/v1/responses", `{"model":"tiny-a","instructions":"Be brief.","max_output_tokens":2,"reasoning":{"effort":"low"},` +
			`"input":[{"role":"user","content":[{"type":"input_text","text":"Hi"}]},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},` +
			`{"type":"function_call_output","call_id":"c1","output":"ok"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],` +
			`"text":{"format":{"type":"text"}},"include":["reasoning.encrypted_content"],"metadata":{"k":"v"}}`},
		{"/v1/messages", `{"model":"tiny-a","max_tokens":2,"system":[{"type":"text","text":"Be brief."}],"messages":[{"role":"user","content":"Hi"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{"a":"b"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"ok"}]}]}],` +
			`"tools":[{"name":"f","description":"d","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"},` +
			`"thinking":{"type":"adaptive","budget_tokens":4},"stop_sequences":["x"],"top_k":5}`},
		{"/api/chat", `{"model":"tiny-a","stream":false,"think":false,"messages":[{"role":"user","content":"Hi"}],` +
			`"tools":` + tools + `,"options":{"num_predict":2,"temperature":0.5,"stop":["x"],"num_ctx":512}}`},
		{"/api/generate", `{"model":"tiny-a","prompt":"Hi","system":"Be brief.","stream":false,"options":{"num_predict":2}}`},
		{"/api/show", `{"model":"tiny-a","verbose":false}`},
		// What agents send beside: formats next to tools, efforts and
		// budgets, the stream's options, a prediction.
		{"/v1/chat/completions", `{"model":"tiny-a","messages":[{"role":"user","content":"Hi"}],"max_completion_tokens":2,"tools":` + tools + `,` +
			`"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false,"stream":true,"stream_options":{"include_usage":true},` +
			`"response_format":{"type":"json_schema","json_schema":{"name":"n","strict":false,"schema":{"type":"object","properties":{"n":{"type":"integer"}}}}},` +
			`"reasoning_effort":"low","thinking_budget":4,"chat_template_kwargs":{"enable_thinking":true},"prediction":{"type":"content","content":"Hi"}}`},
		{"/v1/responses", `{"model":"tiny-a","input":"Hi","max_output_tokens":2,"stream":true,"store":false,"parallel_tool_calls":false,"top_logprobs":1,` +
			`"tools":[{"type":"function","name":"f","strict":true,"parameters":{"type":"object","properties":{"a":{"type":"string"}}}}],` +
			`"tool_choice":{"type":"function","name":"f"},"reasoning":{"effort":"medium","summary":"auto"},` +
			`"text":{"format":{"type":"json_schema","name":"n","strict":true,"schema":{"type":"object","properties":{"n":{"type":"integer"}}}}}}`},
		{"/v1/messages", `{"model":"tiny-a","max_tokens":2,"stream":true,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi","cache_control":{"type":"ephemeral"}}]}],` +
			`"tools":[{"name":"f","input_schema":{"type":"object","properties":{"a":{"type":"string"}}}}],"tool_choice":{"type":"tool","name":"f","disable_parallel_tool_use":true},` +
			`"thinking":{"type":"adaptive"},"output_config":{"effort":"low","format":{"type":"json_schema","schema":{"type":"object","properties":{"n":{"type":"integer"}}}}},` +
			`"temperature":0.5,"top_p":0.9,"metadata":{"user_id":"u"},"service_tier":"auto","context_management":{"edits":[]}}`},
		{"/v1/messages/count_tokens", `{"model":"tiny-a","system":"Be brief.","messages":[{"role":"user","content":"Hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}}]}`},
		{"/api/chat", `{"model":"tiny-a","stream":true,"think":"low","keep_alive":"5m","messages":[{"role":"user","content":"Hi"}],` +
			`"format":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]},"options":{"num_predict":2,"seed":3,"top_k":5}}`},
	} {
		var doc any
		if err := json.Unmarshal([]byte(c.body), &doc); err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		for _, at := range leaves(doc, nil) {
			for _, wrong := range []any{7.0, "x", true, map[string]any{"x": 1.0}, []any{1.0}} {
				if sameKind(get(doc, at), wrong) {
					continue
				}
				b, _ := json.Marshal(set(doc, at, wrong))
				resp, out := ts.post(t, c.path, string(b))
				name := pathName(at)
				switch {
				case resp.StatusCode >= 500:
					t.Errorf("%s %s = %v: %d %s", c.path, name, wrong, resp.StatusCode, out)
				case resp.StatusCode == 400 && !errorShaped(c.path, out):
					t.Errorf("%s %s = %v: not the protocol's error shape: %s", c.path, name, wrong, out)
				case resp.StatusCode == 400 && !namesField(out, at):
					t.Errorf("%s %s = %v: the error does not name the field: %s", c.path, name, wrong, out)
				}
			}
		}
	}
	waitFor(t, func() bool { st := ts.m.Stats(); return st.Active == 0 && st.Queued == 0 && st.KVBytes == 0 })
	if resp, out := ts.post(t, "/v1/chat/completions", `{"model":"tiny-a",`+hi+`,"max_tokens":2}`); resp.StatusCode != 200 {
		t.Errorf("after the malformed requests: %d %s", resp.StatusCode, out)
	}
}

// leaves are the paths of doc's values that are not objects or arrays,
// and of its objects and arrays too, each a list of keys and indices.
func leaves(doc any, at []any) [][]any {
	var out [][]any
	if len(at) > 0 {
		out = append(out, slices.Clone(at))
	}
	switch v := doc.(type) {
	case map[string]any:
		for k, x := range v {
			out = append(out, leaves(x, append(at, k))...)
		}
	case []any:
		for i, x := range v {
			out = append(out, leaves(x, append(at, i))...)
		}
	}
	return out
}

func get(doc any, at []any) any {
	for _, k := range at {
		switch k := k.(type) {
		case string:
			doc = doc.(map[string]any)[k]
		case int:
			doc = doc.([]any)[k]
		}
	}
	return doc
}

// set is a copy of doc with the value at path replaced.
func set(doc any, at []any, v any) any {
	if len(at) == 0 {
		return v
	}
	switch d := doc.(type) {
	case map[string]any:
		cp := map[string]any{}
		for k, x := range d {
			cp[k] = x
		}
		cp[at[0].(string)] = set(d[at[0].(string)], at[1:], v)
		return cp
	case []any:
		cp := slices.Clone(d)
		cp[at[0].(int)] = set(d[at[0].(int)], at[1:], v)
		return cp
	}
	return doc
}

func sameKind(a, b any) bool { return fmt.Sprintf("%T", a) == fmt.Sprintf("%T", b) }

// pathName writes a path as the errors do: messages[1].content.
func pathName(at []any) string {
	var b strings.Builder
	for _, k := range at {
		switch k := k.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(k)
		case int:
			fmt.Fprintf(&b, "[%d]", k)
		}
	}
	return b.String()
}

// errorShaped reports whether out is an error in the shape of the
// protocol of path.
func errorShaped(path, out string) bool {
	switch {
	case strings.HasPrefix(path, "/api/"):
		var e struct{ Error *string }
		return json.Unmarshal([]byte(out), &e) == nil && e.Error != nil && *e.Error != ""
	case strings.HasPrefix(path, "/v1/messages"):
		var e anthropicErrorJSON
		return json.Unmarshal([]byte(out), &e) == nil && e.Type == "error" && e.Error != nil && e.Error.Message != ""
	}
	var e openAIError
	return json.Unmarshal([]byte(out), &e) == nil && e.Error != nil && e.Error.Message != ""
}

// namesField reports whether an error names the field at path: its
// path, or its keys' path without the indices; within a JSON Schema, the
// schema's path, the JSON pointer to the keyword's schema and the
// keyword.
func namesField(out string, at []any) bool {
	var keys []string
	for _, k := range at {
		if s, ok := k.(string); ok {
			keys = append(keys, s)
		}
	}
	if strings.Contains(out, pathName(at)) || strings.Contains(out, strings.Join(keys, ".")) {
		return true
	}
	// Within a schema, an item of a keyword's list (required, enum) is
	// named by the keyword.
	for len(at) > 0 {
		if _, ok := at[len(at)-1].(int); !ok {
			break
		}
		at = at[:len(at)-1]
	}
	for k := 1; k < len(at); k++ {
		pointer := "#"
		if k < len(at)-1 {
			pointer = ""
			for _, key := range at[k : len(at)-1] {
				pointer += fmt.Sprintf("/%v", key)
			}
		}
		if strings.Contains(out, fmt.Sprintf("%s: json schema %s: %v", pathName(at[:k]), pointer, at[len(at)-1])) {
			return true
		}
		// A schema that is not one: the pointer to it.
		whole := ""
		for _, key := range at[k:] {
			whole += fmt.Sprintf("/%v", key)
		}
		if strings.Contains(out, fmt.Sprintf("%s: json schema %s: schema:", pathName(at[:k]), whole)) {
			return true
		}
	}
	return false
}
