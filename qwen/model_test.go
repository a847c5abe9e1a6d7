package qwen

import (
	"context"
	"encoding/json"
	"errors"
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
	out, err := compileWithTemplate(t.TempDir(), "tiny-a", "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Open(out, WithThreads(1))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
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
	if _, err := m.Start(ctx, Request{Prompt: prompt, Context: n - 1}); err == nil || !strings.Contains(err.Error(), "more than the context of") {
		t.Errorf("a context below the prompt: %v", err)
	}
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
