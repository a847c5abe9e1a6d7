package serve

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// qwen36Changes are the two lines Qwen3.6's template changes in
// Qwen3.5's (format/chat/testdata/gen_tools.py).
var qwen36Changes = [][2]string{
	{"{%- if loop.index0 > ns.last_query_index %}",
		"{%- if (preserve_thinking is defined and preserve_thinking is true) or (loop.index0 > ns.last_query_index) %}"},
	{"{%- set args_value = args_value | tojson | safe if args_value is mapping or (args_value is sequence and args_value is not string) else args_value | string %}",
		"{%- set args_value = args_value | string if args_value is string else args_value | tojson | safe %}"},
}

// qwen36Path is tiny-q35 with Qwen3.6's template, compiled once: the
// model a Qwen3.6 checkpoint makes, its weights aside.
func qwen36Path(t *testing.T) string {
	t.Helper()
	return compiledVariant(t, "tiny-q36", "tiny-q35", func(dir string) {
		cfgPath := filepath.Join(dir, "tokenizer_config.json")
		var cfg map[string]any
		readFile(t, cfgPath, &cfg)
		tmpl := cfg["chat_template"].(string)
		for _, c := range qwen36Changes {
			if strings.Count(tmpl, c[0]) != 1 {
				t.Fatalf("tiny-q35's template has %q %d times", c[0], strings.Count(tmpl, c[0]))
			}
			tmpl = strings.Replace(tmpl, c[0], c[1], 1)
		}
		cfg["chat_template"] = tmpl
		b, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(cfgPath); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
			t.Fatal(err)
		}
	})
}

// TestApplyTemplateQwen35 posts the Qwen3.5 and Qwen3.6 renderings of
// chat's cases (Hugging Face's apply_chat_template) to /apply-template on
// the compiled models, as an OpenAI client sends the conversations, with
// add_generation_prompt and chat_template_kwargs: the prompt is the
// rendering, byte for byte.
func TestApplyTemplateQwen35(t *testing.T) {
	q35, _ := serveBundled(t, "tiny-q35")
	q36, _ := serveFile(t, qwen36Path(t))
	var cases []struct {
		Name                string
		Template            string
		Messages, Tools     json.RawMessage
		AddGenerationPrompt bool  `json:"add_generation_prompt"`
		EnableThinking      *bool `json:"enable_thinking"`
		PreserveThinking    *bool `json:"preserve_thinking"`
		Rendered            string
	}
	readFile(t, "../../format/chat/testdata/qwen35/chat_cases.json", &cases)
	if len(cases) < 8 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, c := range cases {
		ts := map[string]*testServer{"qwen3.5": q35, "qwen3.6": q36}[c.Template]
		if ts == nil {
			t.Fatalf("%s: template %q", c.Name, c.Template)
		}
		kwargs := map[string]any{}
		if c.EnableThinking != nil {
			kwargs["enable_thinking"] = *c.EnableThinking
		}
		if c.PreserveThinking != nil {
			kwargs["preserve_thinking"] = *c.PreserveThinking
		}
		req := map[string]any{"messages": c.Messages, "add_generation_prompt": c.AddGenerationPrompt, "chat_template_kwargs": kwargs}
		if len(c.Tools) > 0 && string(c.Tools) != "null" {
			req["tools"] = c.Tools
		}
		body, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		resp, out := ts.post(t, "/apply-template", string(body))
		var got struct{ Prompt string }
		unmarshal(t, out, &got)
		if resp.StatusCode != 200 || got.Prompt != c.Rendered {
			t.Errorf("%s: %d %s\n got %q\nwant %q", c.Name, resp.StatusCode, out, got.Prompt, c.Rendered)
		}
		// The reasoning given back as vLLM's newer responses name it,
		// reasoning, renders the same.
		var msgs []map[string]any
		unmarshal(t, string(c.Messages), &msgs)
		renamed := false
		for _, m := range msgs {
			if r, ok := m["reasoning_content"]; ok {
				delete(m, "reasoning_content")
				m["reasoning"], renamed = r, true
			}
		}
		if !renamed {
			continue
		}
		req["messages"] = msgs
		body, _ = json.Marshal(req)
		resp, out = ts.post(t, "/apply-template", string(body))
		unmarshal(t, out, &got)
		if resp.StatusCode != 200 || got.Prompt != c.Rendered {
			t.Errorf("%s, reasoning: %d %s\n got %q\nwant %q", c.Name, resp.StatusCode, out, got.Prompt, c.Rendered)
		}
	}
	// A developer message mid-conversation, which the template refuses,
	// is a system turn where it comes (Codex sends them).
	resp, out := q35.post(t, "/apply-template", `{"messages":[{"role":"system","content":"S"},{"role":"user","content":"hi"},
		{"role":"developer","content":"Approval policy is now never."},{"role":"user","content":"go on"}],"add_generation_prompt":true}`)
	var got struct{ Prompt string }
	unmarshal(t, out, &got)
	want := "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>system\nApproval policy is now never.<|im_end|>\n" +
		"<|im_start|>user\ngo on<|im_end|>\n<|im_start|>assistant\n<think>\n"
	if resp.StatusCode != 200 || got.Prompt != want {
		t.Errorf("a later developer message: %d %s\n got %q\nwant %q", resp.StatusCode, out, got.Prompt, want)
	}
}

// TestTemplateKwargsMalformed: chat_template_kwargs of the wrong shape is
// refused, naming the field, on every endpoint that takes it.
func TestTemplateKwargsMalformed(t *testing.T) {
	ts, _ := serveBundled(t, "tiny-q35")
	msgs := `"messages": [{"role": "user", "content": "Hi"}]`
	input := `"model": "` + ts.Name() + `", "input": "Hi"`
	for _, c := range []struct{ path, body, param string }{
		{"/v1/chat/completions", `{` + msgs + `, "chat_template_kwargs": {"enable_thinking": "no"}}`, "chat_template_kwargs.enable_thinking"},
		{"/v1/chat/completions", `{` + msgs + `, "chat_template_kwargs": {"preserve_thinking": 1}}`, "chat_template_kwargs.preserve_thinking"},
		{"/v1/chat/completions", `{` + msgs + `, "chat_template_kwargs": [true]}`, "chat_template_kwargs"},
		{"/apply-template", `{` + msgs + `, "chat_template_kwargs": {"enable_thinking": null, "preserve_thinking": "yes"}}`, "chat_template_kwargs.preserve_thinking"},
		{"/apply-template", `{` + msgs + `, "add_generation_prompt": "false"}`, "add_generation_prompt"},
		{"/v1/responses", `{` + input + `, "chat_template_kwargs": {"enable_thinking": 0}}`, "chat_template_kwargs.enable_thinking"},
		{"/v1/responses", `{` + input + `, "chat_template_kwargs": {"enable_thinking": true}, "reasoning": {"effort": "none"}}`, "reasoning.effort"},
		{"/v1/responses", `{` + input + `, "chat_template_kwargs": {"enable_thinking": false}, "reasoning": {"effort": "high"}}`, "reasoning.effort"},
	} {
		resp, out := ts.post(t, c.path, c.body)
		var e struct {
			Error struct{ Message, Param string }
		}
		unmarshal(t, out, &e)
		if resp.StatusCode != 400 || e.Error.Param != c.param || !strings.Contains(e.Error.Message, c.param) {
			t.Errorf("%s %s: %d %s, want 400 naming %s", c.path, c.body, resp.StatusCode, out, c.param)
		}
	}
}

// TestQwen35ThinkingEveryFrontEnd: on tiny-q35, whose prompt opens the
// thinking (and whose random weights never close it), an answer is all
// reasoning with thinking on and all content with it off, as each front
// end sets it: OpenAI's chat_template_kwargs.enable_thinking, the
// Responses API's chat_template_kwargs and reasoning.effort, Anthropic's
// thinking, Ollama's think.
func TestQwen35ThinkingEveryFrontEnd(t *testing.T) {
	ts, _ := serveBundled(t, "tiny-q35")
	model := `"model": "` + ts.Name() + `", `
	msgs := `"messages": [{"role": "user", "content": "Hi"}], `
	type answer struct{ thought, said bool }
	openAI := func(out string) answer {
		var r struct {
			Choices []struct {
				Message struct {
					Content          string
					ReasoningContent string `json:"reasoning_content"`
				}
			}
		}
		unmarshal(t, out, &r)
		m := r.Choices[0].Message
		return answer{m.ReasoningContent != "", m.Content != ""}
	}
	responses := func(out string) answer {
		var r struct {
			Output []struct {
				Type    string
				Content []struct{ Text string }
			}
		}
		unmarshal(t, out, &r)
		var a answer
		for _, it := range r.Output {
			a.thought = a.thought || it.Type == "reasoning"
			a.said = a.said || it.Type == "message" && len(it.Content) > 0 && it.Content[0].Text != ""
		}
		return a
	}
	anthropic := func(out string) answer {
		var r struct{ Content []struct{ Type string } }
		unmarshal(t, out, &r)
		var a answer
		for _, b := range r.Content {
			a.thought = a.thought || b.Type == "thinking"
			a.said = a.said || b.Type == "text"
		}
		return a
	}
	ollama := func(out string) answer {
		var r struct {
			Message struct{ Content, Thinking string }
		}
		unmarshal(t, out, &r)
		return answer{r.Message.Thinking != "", r.Message.Content != ""}
	}
	on, off := answer{thought: true}, answer{said: true}
	for _, c := range []struct {
		path, body string
		read       func(string) answer
		want       answer
	}{
		{"/v1/chat/completions", `{` + model + msgs + `"max_tokens": 6, "temperature": 0}`, openAI, on},
		{"/v1/chat/completions", `{` + model + msgs + `"max_tokens": 6, "temperature": 0, "chat_template_kwargs": {"enable_thinking": true}}`, openAI, on},
		{"/v1/chat/completions", `{` + model + msgs + `"max_tokens": 6, "temperature": 0, "chat_template_kwargs": {"enable_thinking": false}}`, openAI, off},
		{"/v1/responses", `{` + model + `"input": "Hi", "max_output_tokens": 6, "temperature": 0}`, responses, on},
		{"/v1/responses", `{` + model + `"input": "Hi", "max_output_tokens": 6, "temperature": 0, "chat_template_kwargs": {"enable_thinking": false}}`, responses, off},
		{"/v1/responses", `{` + model + `"input": "Hi", "max_output_tokens": 6, "temperature": 0, "reasoning": {"effort": "none"}}`, responses, off},
		{"/v1/messages", `{` + model + msgs + `"max_tokens": 6, "temperature": 0, "thinking": {"type": "adaptive", "budget_tokens": 100}}`, anthropic, on},
		{"/v1/messages", `{` + model + msgs + `"max_tokens": 6, "temperature": 0, "thinking": {"type": "disabled"}}`, anthropic, off},
		{"/api/chat", `{` + model + msgs + `"stream": false, "options": {"num_predict": 6, "temperature": 0}}`, ollama, on},
		{"/api/chat", `{` + model + msgs + `"stream": false, "think": false, "options": {"num_predict": 6, "temperature": 0}}`, ollama, off},
	} {
		resp, out := ts.post(t, c.path, c.body)
		if resp.StatusCode != 200 {
			t.Errorf("%s %s: %d %s", c.path, c.body, resp.StatusCode, out)
			continue
		}
		if got := c.read(out); got != c.want {
			t.Errorf("%s %s: thought %v, said %v; want %v, %v\n%s", c.path, c.body, got.thought, got.said, c.want.thought, c.want.said, out)
		}
	}
}

// TestPreserveThinking: chat_template_kwargs.preserve_thinking keeps the
// reasoning of an answer before the last user message in a Qwen3.6
// prompt, through chat completions and the Responses API: the prompt has
// the reasoning's tokens more. Qwen3.5's template has no such switch.
func TestPreserveThinking(t *testing.T) {
	q36, _ := serveFile(t, qwen36Path(t))
	q35, _ := serveBundled(t, "tiny-q35")
	const reasoning = "I weigh the options one by one before I answer."
	chatBody := func(model, kwargs string) string {
		return `{"model": "` + model + `", "max_tokens": 1, "messages": [{"role": "user", "content": "Q1"}, ` +
			`{"role": "assistant", "content": "A1", "reasoning_content": "` + reasoning + `"}, {"role": "user", "content": "Q2"}], "chat_template_kwargs": ` + kwargs + `}`
	}
	responsesBody := func(model, kwargs string) string {
		return `{"model": "` + model + `", "max_output_tokens": 16, "input": [{"role": "user", "content": "Q1"}, ` +
			`{"type": "reasoning", "summary": [{"type": "summary_text", "text": "` + reasoning + `"}]}, {"role": "assistant", "content": "A1"}, ` +
			`{"role": "user", "content": "Q2"}], "chat_template_kwargs": ` + kwargs + `}`
	}
	prompt := func(ts *testServer, path, body string) int {
		resp, out := ts.post(t, path, body)
		var u struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
				InputTokens  int `json:"input_tokens"`
			}
		}
		unmarshal(t, out, &u)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", path, body, resp.StatusCode, out)
		}
		return u.Usage.PromptTokens + u.Usage.InputTokens
	}
	for _, c := range []struct {
		path string
		body func(model, kwargs string) string
	}{{"/v1/chat/completions", chatBody}, {"/v1/responses", responsesBody}} {
		kept, dropped := prompt(q36, c.path, c.body(q36.Name(), `{"preserve_thinking": true}`)), prompt(q36, c.path, c.body(q36.Name(), `{}`))
		if kept <= dropped+5 {
			t.Errorf("%s, Qwen3.6: %d prompt tokens with preserve_thinking, %d without", c.path, kept, dropped)
		}
		kept, dropped = prompt(q35, c.path, c.body(q35.Name(), `{"preserve_thinking": true}`)), prompt(q35, c.path, c.body(q35.Name(), `{}`))
		if kept != dropped {
			t.Errorf("%s, Qwen3.5: %d prompt tokens with preserve_thinking, %d without", c.path, kept, dropped)
		}
	}
}
