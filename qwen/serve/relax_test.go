package serve

import (
	"fmt"
	"strings"
	"testing"
)

// TestSchemaRelaxedReported: a keyword the grammar cannot enforce, in a
// tool's parameters or a structured format that is not strict (OpenAI's
// response_format and text.format without strict: true, Ollama's
// format), is relaxed and named in the response's header, streamed or
// not, and in the request's log line with why; in a strict format, or
// Anthropic's output_config.format (which is always strict), it is a
// 400 naming the keyword.
func TestSchemaRelaxedReported(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	const notSchema = `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"not":{"required":["b"]}}`
	const tool = `{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"xs":{"type":"array","items":{"type":"integer"},"uniqueItems":true}}}}}`
	const noThink = `"chat_template_kwargs":{"enable_thinking":false}`
	const hi = `"messages":[{"role":"user","content":"Hi"}]`
	for _, c := range []struct{ path, body, header string }{
		{"/v1/chat/completions", `{"model":"tiny-a",` + hi + `,` + noThink + `,"max_tokens":30,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + notSchema + `}}}`,
			"not@response_format.json_schema.schema#"},
		{"/v1/chat/completions", `{"model":"tiny-a",` + hi + `,` + noThink + `,"max_tokens":30,"stream":true,"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":false,"schema":` + notSchema + `}}}`,
			"not@response_format.json_schema.schema#"},
		{"/v1/chat/completions", `{"model":"tiny-a",` + hi + `,` + noThink + `,"max_tokens":30,"tools":[{"type":"function","function":{"name":"g"}},` + tool + `],"tool_choice":"required"}`,
			"uniqueItems@tools[1].function.parameters#/properties/xs"},
		{"/v1/responses", `{"model":"tiny-a","input":"Hi","reasoning":{"effort":"none"},"max_output_tokens":30,"text":{"format":{"type":"json_schema","name":"x","strict":false,"schema":` + notSchema + `}}}`,
			"not@text.format.schema#"},
		{"/v1/responses", `{"model":"tiny-a","input":"Hi","reasoning":{"effort":"none"},"max_output_tokens":30,"stream":true,"tools":[{"type":"function","name":"f","strict":true,"parameters":{"type":"object","properties":{"p%;x":{"type":"string","format":"regex"}}}}]}`,
			"format@tools[0].parameters#/properties/p%25%3Bx"},
		{"/api/chat", `{"model":"tiny-a",` + hi + `,"think":false,"stream":false,"options":{"num_predict":30},"format":` + notSchema + `}`,
			"not@format#"},
		{"/v1/messages", `{"model":"tiny-a",` + hi + `,"max_tokens":30,"thinking":{"type":"disabled"},"tools":[{"name":"f","input_schema":{"type":"object","properties":{"xs":{"type":"array","uniqueItems":true}}}}],"tool_choice":{"type":"any"}}`,
			"uniqueItems@tools[0].input_schema#/properties/xs"},
	} {
		resp, out := ts.post(t, c.path, c.body)
		if resp.StatusCode != 200 || resp.Header.Get(relaxedHeader) != c.header {
			t.Errorf("%s %s: %d, %s %q; want 200, %q\n%s", c.path, c.body, resp.StatusCode, relaxedHeader, resp.Header.Get(relaxedHeader), c.header, out)
		}
	}
	rec := ts.log.logged(t, request("POST", "/api/chat", 200, "INFO"))
	if rec == nil || !strings.Contains(fmt.Sprint(rec["schema_relaxed"]), "format#: not: ") {
		t.Errorf("the log line does not say what was relaxed: %v", rec)
	}
	// Nothing relaxed, no header.
	resp, out := ts.post(t, "/v1/chat/completions", `{"model":"tiny-a",`+hi+`,`+noThink+`,"max_tokens":30,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}}}`)
	if resp.StatusCode != 200 || resp.Header.Values(relaxedHeader) != nil {
		t.Errorf("nothing to relax: %d %v %s", resp.StatusCode, resp.Header, out)
	}

	// Strict, the keyword is refused, named with where it is.
	wantBadRequest(t, ts, "/v1/chat/completions", `{"model":"tiny-a",`+hi+`,"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":`+notSchema+`}}}`,
		"response_format.json_schema.schema", "json schema #: not: ")
	wantBadRequest(t, ts, "/v1/responses", `{"model":"tiny-a","input":"Hi","text":{"format":{"type":"json_schema","name":"x","strict":true,"schema":`+notSchema+`}}}`,
		"text.format.schema", "json schema #: not: ")
	resp, out = ts.post(t, "/v1/messages", `{"model":"tiny-a",`+hi+`,"max_tokens":30,"output_config":{"format":{"type":"json_schema","schema":`+notSchema+`}}}`)
	if resp.StatusCode != 400 || !strings.Contains(out, `"type":"invalid_request_error"`) || !strings.Contains(out, "output_config.format.schema: json schema #: not: ") {
		t.Errorf("anthropic's format: %d %s", resp.StatusCode, out)
	}
}
