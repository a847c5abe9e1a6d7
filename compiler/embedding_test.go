package compiler

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/testmodel"
)

// TestEmbeddingLayoutCompiles: Qwen3-Embedding's layout (bare tensor
// names, no head, a post-processor appending <|endoftext|>) compiles to an
// embedding model for every weight type, with no head section and the
// appended token recorded.
func TestEmbeddingLayoutCompiles(t *testing.T) {
	model := testmodel.Dir(t, "tiny-emb")
	for _, typ := range []format.DType{format.F16, format.Q8, format.Q4} {
		out := filepath.Join(t.TempDir(), "emb.qbin")
		if _, err := Compile(context.Background(), model, Options{Output: out, MaxPrefill: 64, NoSync: true, Type: typ}); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		f, err := format.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		c := f.Header.Config
		if !c.Embedding || c.TieEmbeddings || !slices.Equal(c.Append, []int32{151643}) || c.Vocab != 151669 {
			t.Errorf("%s: config %+v", typ, c)
		}
		if _, ok := f.Header.Section(format.SecLMHead); ok {
			t.Errorf("%s: an lm_head section", typ)
		}
		if _, ok := f.Header.Section(format.SecEmbed); !ok {
			t.Errorf("%s: no embed_tokens section", typ)
		}
		f.Close()
	}
}

// TestPostProcessors: what a tokenizer's post-processor appends, and what
// cannot be honoured by appending, refused with its JSON path.
func TestPostProcessors(t *testing.T) {
	special := `"special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [151643], "tokens": ["<|endoftext|>"]}}`
	for pp, want := range map[string]string{
		`null`:                  "[]",
		`{"type": "ByteLevel"}`: "[]",
		`{"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A"}}, {"SpecialToken": {"id": "<|endoftext|>"}}], ` + special + `}`:                                                              "[151643]",
		`{"type": "Sequence", "processors": [{"type": "ByteLevel"}, {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A"}}, {"SpecialToken": {"id": "<|endoftext|>"}}], ` + special + `}]}`: "[151643]",
		`{"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|endoftext|>"}}, {"Sequence": {"id": "A"}}], ` + special + `}`:                                                              "post_processor.single[0]: only special tokens after the sequence are supported",
		`{"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A"}}, {"SpecialToken": {"id": "[SEP]"}}], ` + special + `}`:                                                                      `post_processor.single[1]: special token "[SEP]" is not in special_tokens`,
		`{"type": "BertProcessing"}`: `post_processor.type: "BertProcessing" is not supported (ByteLevel, TemplateProcessing, Sequence)`,
	} {
		ids, err := postProcessor([]byte(`{"post_processor": ` + pp + `}`))
		got := "[]"
		if err != nil {
			got = err.Error()
		} else if len(ids) > 0 {
			b, _ := json.Marshal(ids)
			got = string(b)
		}
		if got != want {
			t.Errorf("%s: got %s, want %s", pp, got, want)
		}
	}
}

// TestGenerationModelMustNotAppend: a checkpoint with an LM head whose
// tokenizer appends tokens to every input is refused, not compiled with
// the post-processor ignored.
func TestGenerationModelMustNotAppend(t *testing.T) {
	model := testmodel.Dir(t, "tiny-a")
	emb, err := os.ReadFile(filepath.Join(testmodel.Dir(t, "tiny-emb"), "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(model, "tokenizer.json")
	os.Remove(tok)
	if err := os.WriteFile(tok, emb, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "a.qbin")
	_, err = Compile(context.Background(), model, Options{Output: out, MaxPrefill: 64, NoSync: true})
	if err == nil || !strings.Contains(err.Error(), "tokenizer.json: post_processor: appends [151643] to every input, which only an embedding model's inputs take") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the output was written")
	}
}

// TestEmbeddingNeedsPostProcessor: an embedding checkpoint whose
// tokenizer appends nothing (a ByteLevel post-processor, or none) is
// refused, naming tokenizer.json and its post_processor, rather than
// compiled to give the vectors of the text's last token.
func TestEmbeddingNeedsPostProcessor(t *testing.T) {
	model := testmodel.Dir(t, "tiny-emb")
	tok := filepath.Join(model, "tokenizer.json")
	b, err := os.ReadFile(tok)
	if err != nil {
		t.Fatal(err)
	}
	var tj map[string]any
	if err := json.Unmarshal(b, &tj); err != nil {
		t.Fatal(err)
	}
	for _, pp := range []any{map[string]any{"type": "ByteLevel"}, nil} {
		tj["post_processor"] = pp
		b, err := json.Marshal(tj)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(tok, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "emb.qbin")
		_, err = Compile(context.Background(), model, Options{Output: out, MaxPrefill: 64, NoSync: true})
		if err == nil || !strings.Contains(err.Error(), "tokenizer.json: post_processor: appends no token, but the checkpoint is an embedding model's") {
			t.Errorf("post_processor %v: %v", pp, err)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("post_processor %v: the output was written", pp)
		}
	}
}
