package tokenizer

import (
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/testmodel"
)

// qwen35Added is the design note's table of Qwen3.5's added tokens, from
// 248044 on.
var qwen35Added = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
	"<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
	"<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
	"<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
	"<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>", "<tts_text_bos_single>", "<|audio_pad|>"}

// TestQwen35Vocabulary reads a tokenizer of Qwen3.5's shape (synth's,
// from the Qwen2 vocabulary: Qwen3.5's own cannot be had here) as the
// compiler does: the Qwen3.5 pattern recognised and kept through the
// binary form, the added tokens' ids those of the files, and encoding
// by the Qwen3.5 pattern equal to the naive reference's.
func TestQwen35Vocabulary(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a 248,077-id tokenizer")
	}
	base, err := os.ReadFile(testmodel.TokenizerJSON(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(testmodel.Testdata(t, "tiny-q35", "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	tj, tc, err := synth.Qwen35Tokenizer(base, cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := LoadHF(tj, tc)
	if err != nil {
		t.Fatal(err)
	}
	if v.Pretokenizer != Qwen35 || len(v.Tokens) != 248044 || len(v.Added) != 33 {
		t.Fatalf("pre-tokenizer %v, %d tokens, %d added; want qwen3.5, 248044, 33", v.Pretokenizer, len(v.Tokens), len(v.Added))
	}
	// A GGUF of it, whose tokenizer.ggml.pre is llama.cpp's "qwen35",
	// gives the same vocabulary.
	ggmlAsHF(t, ggmlFromHF(t, tj, 248320, "qwen35", v), v)
	tok, _ := loadVocab(t, v)
	if tok.Pretokenizer() != Qwen35 || tok.VocabSize() != 248077 {
		t.Fatalf("loaded: pre-tokenizer %v, VocabSize %d; want qwen3.5, 248077", tok.Pretokenizer(), tok.VocabSize())
	}
	for i, content := range qwen35Added {
		if id, ok := tok.TokenID(content); !ok || id != int32(248044+i) {
			t.Errorf("TokenID(%q) = %d, %v; want %d", content, id, ok, 248044+i)
		}
	}
	// tokenizer_config.json's eos_token is <|endoftext|>, as Qwen3.5's.
	if id, ok := tok.EOS(); !ok || id != 248044 {
		t.Errorf("EOS() = %d, %v; want 248044", id, ok)
	}
	// The 248,320-row head has padding rows past the tokenizer's ids.
	if tok.Decode([]int32{248077, 248319}) != "" || tok.TokenBytes(248100) != nil {
		t.Error("padding ids decode to something")
	}
	ids := tok.Encode("<|im_start|>user\nहिन्दी<|im_end|>", true)
	if ids[0] != 248045 || ids[len(ids)-1] != 248046 {
		t.Errorf("markers encode to %v", ids)
	}

	ref := newRefEncoder(v)
	rng := rand.New(rand.NewPCG(3, 5))
	texts := []string{benchText, "e\u0301 x\u0301y \u0939\u093f\u0928\u094d\u0926\u0940 \u0645\u064e\u0631\u0652\u062d\u064e\u0628\u064b\u0627 \u2764\ufe0f\u2764\ufe0f"}
	for range 1000 {
		texts = append(texts, randomText(rng)+"\u0301"+randomText(rng))
	}
	differs := 0
	for _, text := range texts {
		got, want := tok.Encode(text, false), ref.encode(text)
		if !slices.Equal(got, want) {
			t.Fatalf("Encode(%.200q):\n got  %.300v\n want %.300v", text, got, want)
		}
		if back := tok.Decode(got); back != nfc(text) {
			t.Fatalf("Decode(Encode(%.200q)) = %.200q", text, back)
		}
		if !slices.Equal(pretokenize(text, Qwen35), pretokenize(text, Qwen2)) {
			differs++
		}
	}
	if differs == 0 {
		t.Error("no text pre-tokenizes differently under the two patterns: the test does not reach marks")
	}
}
