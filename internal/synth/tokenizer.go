package synth

import (
	"encoding/json"
	"fmt"
)

// MiniEOS are MiniTokenizer's <|im_end|> and <|endoftext|> ids.
var MiniEOS = []int{263, 261}

// MiniTokenizer returns a small byte-level BPE tokenizer in Hugging Face
// form (tokenizer.json, tokenizer_config.json with a Qwen3-style ChatML
// template): the 256 byte tokens, a few merges, and Qwen's special tokens
// right after them. Tests of other shapes use it so they need not parse
// the 11 MB Qwen vocabulary.
func MiniTokenizer() (tokenizerJSON, tokenizerConfig []byte) {
	alpha := byteLevelAlphabet()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(alpha[b])] = b
	}
	merges := [][2]string{{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"a", "n"}}
	for _, m := range merges {
		vocab[m[0]+m[1]] = len(vocab)
	}
	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	var adds []added
	for i, c := range []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"} {
		adds = append(adds, added{ID: len(vocab) + i, Content: c, Special: i < 3})
	}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	tok := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": adds,
		"normalizer": map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]string{"Regex": qwenPattern}, "behavior": "Isolated", "invert": false},
			byteLevel,
		}},
		"post_processor": byteLevel, "decoder": byteLevel,
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": merges},
	}
	decoder := map[string]any{}
	for _, a := range adds {
		decoder[fmt.Sprint(a.ID)] = map[string]any{"content": a.Content, "lstrip": false, "normalized": false,
			"rstrip": false, "single_word": false, "special": a.Special}
	}
	cfg := map[string]any{
		"add_bos_token": false, "add_prefix_space": false, "added_tokens_decoder": decoder,
		"bos_token": nil, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "errors": "replace",
		"model_max_length": 4096, "split_special_tokens": false, "tokenizer_class": "Qwen2Tokenizer", "unk_token": nil,
		"chat_template": "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endfor %}" +
			"{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}",
	}
	tj, _ := json.Marshal(tok)
	tc, _ := json.Marshal(cfg)
	return tj, tc
}

const qwenPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// byteLevelAlphabet is GPT-2's byte-to-unicode map: printable bytes map to
// themselves, the rest to code points from 256 up.
func byteLevelAlphabet() [256]rune {
	var m [256]rune
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE {
			m[b] = rune(b)
		} else {
			m[b] = rune(256 + n)
			n++
		}
	}
	return m
}

// WriteMini writes the checkpoint with MiniTokenizer's files.
func WriteMini(dir string, s Shape) error {
	tj, tc := MiniTokenizer()
	return Write(dir, s, tj, tc)
}
