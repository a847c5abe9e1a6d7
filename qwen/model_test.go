package qwen

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/compiler"
	"github.com/qwenc/qwenc/internal/testmodel"
	"github.com/qwenc/qwenc/runtime/sampling"
)

// TestNoChatTemplate: a model compiled without a chat template takes raw
// prompts and refuses conversations with ErrNoChatTemplate.
func TestNoChatTemplate(t *testing.T) {
	m := openWithTemplate(t, t.TempDir(), "")
	if m.Info().ChatTemplate != "" {
		t.Fatalf("chat template %q", m.Info().ChatTemplate)
	}
	if _, err := m.Start(context.Background(), Request{Messages: []Message{{Role: "user", Content: "hi"}}}); !errors.Is(err, ErrNoChatTemplate) {
		t.Errorf("a chat: %v, want ErrNoChatTemplate", err)
	}
	n := 0
	for d, err := range m.Generate(context.Background(), Request{Prompt: "Hello", MaxTokens: 3, Sampling: &sampling.Params{}}) {
		if err != nil {
			t.Fatal(err)
		}
		n += len(d.IDs)
	}
	if n != 3 {
		t.Errorf("a raw prompt gave %d tokens, want 3", n)
	}
}

// TestContextBoundsTheAnswer: Request.Context (Ollama's num_ctx) bounds
// the prompt and the answer together, as the model's own context does;
// IgnoreEOS generates exactly MaxTokens; Stream.Close stops a stream.
func TestContextBoundsTheAnswer(t *testing.T) {
	m := tinyModel(t)
	ctx := context.Background()
	prompt := "The capital of France is"
	n, err := m.Count(Request{Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	var last Delta
	for d := range m.Generate(ctx, Request{Prompt: prompt, Context: n + 3, IgnoreEOS: true, Sampling: &sampling.Params{}}) {
		last = d
	}
	if last.Usage.CompletionTokens != 4 || last.Stop != StopLength {
		t.Errorf("context %d for a %d-token prompt: %d tokens, %s; want 4, length", n+3, n, last.Usage.CompletionTokens, last.Stop)
	}
	st, err := m.Start(ctx, Request{Prompt: prompt, IgnoreEOS: true, Sampling: &sampling.Params{}})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	for d, err := range st.Deltas() {
		if d.Stop != "" && (d.Stop != StopInterrupt || err != nil || d.Usage.CompletionTokens > 2) {
			t.Errorf("a closed stream: %s after %d tokens (%v)", d.Stop, d.Usage.CompletionTokens, err)
		}
	}
	// Ranged again, a stream read to its end says so, not a bare EOF.
	for _, err := range st.Deltas() {
		if err == nil || errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "stream") {
			t.Errorf("a stream read twice: %v", err)
		}
	}
	if _, err := m.Start(ctx, Request{Prompt: prompt, Context: n - 1}); err == nil || !strings.Contains(err.Error(), "more than the context of") {
		t.Errorf("a context below the prompt: %v", err)
	}
}

// openWithTemplate opens tiny-a compiled into dir with the chat template
// template (none when empty), until the test ends.
func openWithTemplate(t *testing.T, dir, template string) *Model {
	t.Helper()
	out, err := compileWithTemplate(dir, "tiny-a", template)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Open(out, WithThreads(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// compileWithTemplate compiles the test model name into dir with the chat
// template of its tokenizer_config.json replaced by template (taken out
// when it is empty): the path of the .qbin.
func compileWithTemplate(dir, name, template string) (string, error) {
	src := filepath.Join(dir, name)
	if err := testmodel.Materialise(filepath.Join(testRoot, "testdata", name),
		filepath.Join(testRoot, "testdata", "tokenizer", "tokenizer.json.gz"), src); err != nil {
		return "", err
	}
	cfgPath := filepath.Join(src, "tokenizer_config.json")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		return "", err
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		return "", err
	}
	if template == "" {
		delete(cfg, "chat_template")
	} else {
		cfg["chat_template"] = template
	}
	b, _ = json.Marshal(cfg)
	os.Remove(cfgPath) // a link to testdata
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, name+".qbin")
	_, err = compiler.Compile(context.Background(), src, compiler.Options{Output: out, MaxPrefill: 16, NoSync: true})
	return out, err
}

// TestThinkingSwitch: a model that cannot switch its thinking off (one
// that always thinks, Qwen3's thinking-only releases) refuses a request
// that switches it off, rather than render a prompt its template never
// prints; a conversation refuses the setting on it and on a model that
// does not think, where it would do nothing.
func TestThinkingSwitch(t *testing.T) {
	if RaceEnabled {
		t.Skip("compiles its own models: too slow under the race detector")
	}
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	testmodel.ReadJSON(t, filepath.Join(testRoot, "testdata", "tiny-a", "tokenizer_config.json"), &cfg)
	const qwen3Prompt = "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n" +
		"    {%- if enable_thinking is defined and enable_thinking is false %}\n        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- endif %}\n{%- endif %}"
	always := strings.Replace(cfg.ChatTemplate, qwen3Prompt,
		"{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n<think>\\n' }}\n{%- endif %}", 1)
	if always == cfg.ChatTemplate {
		t.Fatal("tiny-a's template no longer ends with Qwen3's generation prompt")
	}
	const chatML = "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}" +
		"{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
	dir := t.TempDir()
	for _, c := range []struct {
		name, template, format string
		always                 bool
	}{{"always", always, "qwen3-thinking", true}, {"never", chatML, "chatml", false}} {
		m := openWithTemplate(t, filepath.Join(dir, c.name), c.template)
		if m.Info().ChatTemplate != c.format {
			t.Fatalf("%s: format %s, want %s", c.name, m.Info().ChatTemplate, c.format)
		}
		msgs := []Message{{Role: "user", Content: "Hi"}}
		_, err := m.Start(context.Background(), Request{Messages: msgs, NoThinking: true, MaxTokens: 1})
		if c.always != (err != nil && strings.Contains(err.Error(), "always thinks")) {
			t.Errorf("%s: a request without thinking: %v", c.name, err)
		}
		conv, err := m.NewConversation("")
		if err != nil {
			t.Fatal(err)
		}
		if err := conv.SetSettings(Request{NoThinking: true}); err == nil || !strings.Contains(err.Error(), "no switch for thinking") {
			t.Errorf("%s: SetSettings with NoThinking: %v, want it refused", c.name, err)
		}
		if err := conv.SetThinking(false); err == nil {
			t.Errorf("%s: SetThinking(false) taken", c.name)
		}
	}
}
