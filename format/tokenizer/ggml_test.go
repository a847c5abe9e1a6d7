package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/internal/testmodel"
)

// ggmlFromHF is the tokenizer of a tokenizer.json (tj) as llama.cpp's
// converter writes a Qwen checkpoint's into a GGUF (the shared peers'
// to_gguf.py does the same): every id up to vocab, the added tokens as
// control or user-defined tokens, the BPE tokens as normal ones, the ids
// between as unused pads; eos and pad are the ids of v's.
func ggmlFromHF(tb testing.TB, tj []byte, vocab int, pre string, v *Vocab) *GGML {
	tb.Helper()
	var hf struct {
		Model struct {
			Vocab  map[string]int `json:"vocab"`
			Merges []hfMerge      `json:"merges"`
		} `json:"model"`
		Added []hfAdded `json:"added_tokens"`
	}
	if err := json.Unmarshal(tj, &hf); err != nil {
		tb.Fatal(err)
	}
	g := &GGML{Model: "gpt2", Pre: pre, Tokens: make([]string, vocab), Types: make([]int32, vocab), EOS: -1, Pad: -1}
	for i := range g.Tokens {
		g.Tokens[i], g.Types[i] = fmt.Sprintf("[PAD%d]", i), ggmlUnused
	}
	for s, id := range hf.Model.Vocab {
		g.Tokens[id], g.Types[id] = s, ggmlNormal
	}
	for _, a := range hf.Added {
		g.Tokens[*a.ID], g.Types[*a.ID] = a.Content, ggmlUserDefined
		if a.Special {
			g.Types[*a.ID] = ggmlControl
		}
		if a.Content == v.EOS {
			g.EOS = *a.ID
		}
		if a.Content == v.Pad {
			g.Pad = *a.ID
		}
	}
	for _, m := range hf.Model.Merges {
		g.Merges = append(g.Merges, m[0]+" "+m[1])
	}
	return g
}

// ggmlAsHF checks that the vocabulary LoadGGML reads from g is v, to the
// byte of the binary form.
func ggmlAsHF(t *testing.T, g *GGML, v *Vocab) {
	t.Helper()
	got, err := LoadGGML(g)
	if err != nil {
		t.Fatal(err)
	}
	a, err := got.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	b, err := v.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("the binary tokenizer from the GGUF keys differs from tokenizer.json's (%d and %d bytes)", len(a), len(b))
	}
}

// TestGGMLAsHF: the vocabulary read from a GGUF's keys is the one read
// from the tokenizer.json it was converted from, to the byte of the
// binary form.
func TestGGMLAsHF(t *testing.T) {
	tj, err := os.ReadFile(testmodel.TokenizerJSON(t))
	if err != nil {
		t.Fatal(err)
	}
	q := loadQwen(t)
	ggmlAsHF(t, ggmlFromHF(t, tj, 151936, "qwen2", q.vocab), q.vocab)
}

func TestGGMLRefused(t *testing.T) {
	base := func() *GGML {
		return &GGML{Model: "gpt2", Pre: "qwen2", Tokens: []string{"a", "b", "ab", "<|end|>"}, Types: []int32{1, 1, 1, 3}, Merges: []string{"a b"}, EOS: 3, Pad: -1}
	}
	if _, err := LoadGGML(base()); err != nil {
		t.Fatalf("the base case: %v", err)
	}
	// Each Qwen pre-tokenizer llama.cpp names is the split pattern it
	// stands for.
	for pre, want := range map[string]Pretokenizer{"qwen2": Qwen2, "deepseek-r1-qwen": Qwen2, "qwen35": Qwen35} {
		g := base()
		g.Pre = pre
		v, err := LoadGGML(g)
		if err != nil {
			t.Errorf("tokenizer.ggml.pre %q: %v", pre, err)
		} else if v.Pretokenizer != want {
			t.Errorf("tokenizer.ggml.pre %q: pattern %v, want %v", pre, v.Pretokenizer, want)
		}
	}
	for _, c := range []struct {
		name string
		edit func(g *GGML)
		want string
	}{
		{"spm", func(g *GGML) { g.Model = "llama" }, `tokenizer.ggml.model "llama"`},
		{"pre", func(g *GGML) { g.Pre = "llama3" }, `tokenizer.ggml.pre "llama3"`},
		{"types", func(g *GGML) { g.Types = g.Types[:2] }, "token_type has 2 entries for 4 tokens"},
		{"byte token", func(g *GGML) { g.Types[0] = 6 }, `tokenizer.ggml.tokens[0] ("a"): token type 6`},
		{"bad type", func(g *GGML) { g.Types[0] = 9 }, "token_type 9"},
		{"not byte-level", func(g *GGML) { g.Tokens[0] = "\u4e00" }, "tokenizer.ggml.tokens[0]"},
		{"merge", func(g *GGML) { g.Merges[0] = "a c" }, `tokenizer.ggml.merges[0]: "c" is not a token`},
		{"merge form", func(g *GGML) { g.Merges[0] = "ab" }, `tokenizer.ggml.merges[0] "ab" is not two tokens`},
		{"eos", func(g *GGML) { g.EOS = 9 }, "tokenizer.ggml.eos_token_id 9 is not a token id"},
	} {
		g := base()
		c.edit(g)
		_, err := LoadGGML(g)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
