package qwen_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/qwenc/qwenc/compiler"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/testmodel"
	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/runtime/sampling"
)

// TestQwen35Vocabulary runs a small Qwen3.5 with Qwen3.5's vocabulary, as
// qwengen --preset qwen3.5-* writes it: a 248,320-row head over a
// tokenizer of 248,077 ids (its added tokens from 248044, its eos ids
// 248046 and 248044, read from the files). Sampled nearly at random for
// 3,000 tokens (where each would take a padding row one time in a
// thousand), it never gives an id past the tokenizer's; the chat markers
// are the vocabulary's; and a tool call forced by the grammar comes
// back, valid.
func TestQwen35Vocabulary(t *testing.T) {
	if testing.Short() || qwen.RaceEnabled {
		t.Skip("a 248,320-row model")
	}
	// tiny-q35's files: the Qwen2/3 tokenizer, Qwen3.5's template.
	q35 := filepath.Join(t.TempDir(), "tiny-q35")
	if err := testmodel.Materialise(filepath.Join(qwen.Testdata(), "tiny-q35"), filepath.Join(qwen.Testdata(), "tokenizer", "tokenizer.json.gz"), q35); err != nil {
		t.Fatal(err)
	}
	base, err := os.ReadFile(filepath.Join(q35, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(q35, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	tj, tc, err := synth.Qwen35Tokenizer(base, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := synth.Qwen35_08B()
	s.Layers, s.Hidden, s.Intermediate, s.Heads, s.KVHeads, s.HeadDim = 4, 32, 48, 2, 1, 16
	s.LinearKeyHeads, s.LinearValueHeads, s.LinearKeyHeadDim, s.LinearValueHeadDim = 1, 2, 8, 8
	s.Vision, s.EOS = false, synth.Qwen35EOS
	dir := filepath.Join(t.TempDir(), "q35-vocab")
	if err := synth.Write(dir, s, tj, tc); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "q35-vocab.qbin")
	if _, err := compiler.Compile(context.Background(), dir, compiler.Options{Output: path, MaxPrefill: 64, NoSync: true}); err != nil {
		t.Fatal(err)
	}
	m := open(t, path)
	for text, id := range map[string]int32{"<|im_start|>": 248045, "<|im_end|>": 248046, "<tool_call>": 248058, "</think>": 248069, "<|audio_pad|>": 248076} {
		if got := m.Tokenize(text); len(got) != 1 || got[0] != id {
			t.Errorf("%s tokenizes to %v, want [%d]", text, got, id)
		}
	}
	var ids []int32
	for d, err := range m.Generate(t.Context(), qwen.Request{Tokens: []int32{1, 2, 3}, MaxTokens: 3000, IgnoreEOS: true,
		Sampling: &sampling.Params{Temperature: 2, Seed: 5}}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.IDs...)
	}
	if len(ids) != 3000 {
		t.Fatalf("%d tokens, want 3000", len(ids))
	}
	for _, id := range ids {
		if id < 0 || id >= 248077 {
			t.Fatalf("sampled %d, which the tokenizer does not have", id)
		}
	}
	params := `{"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]}, "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"]}`
	tool, err := qwen.NewTool("weather", "", json.RawMessage(params))
	if err != nil {
		t.Fatal(err)
	}
	var name, args string
	var last qwen.Delta
	for d, err := range m.Generate(t.Context(), qwen.Request{Messages: []qwen.Message{{Role: "user", Content: "Weather?"}}, Tools: []qwen.Tool{tool},
		ToolChoice: "required", OneToolCall: true, NoThinking: true, MaxTokens: 100, Sampling: &sampling.Params{Temperature: 1, Seed: 2}}) {
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range d.ToolCalls {
			name, args = name+c.Name, args+c.Arguments
		}
		last = d
	}
	if last.Stop != qwen.StopEOS || name != "weather" || validate(t, compileSchema(t, params), args) != nil {
		t.Fatalf("stop %s, call %s %s", last.Stop, name, args)
	}
}
