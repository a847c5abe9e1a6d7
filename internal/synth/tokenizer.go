package synth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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

// Qwen3.5's vocabulary (section 6 of the design note): 248,044 BPE
// tokens, then 33 added tokens from 248044 (Qwen2/3's 26, in their order,
// and seven audio and speech tokens).
const (
	Qwen35BPETokens  = 248044
	Qwen35AddedStart = Qwen35BPETokens
)

// qwen35NewAdded are the added tokens Qwen3.5 has beyond Qwen2/3's.
var qwen35NewAdded = []string{"<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>",
	"<tts_text_bos_single>", "<|audio_pad|>"}

// Qwen35Pattern is Qwen3.5's pre-tokenizer split pattern: Qwen2's with
// combining marks counted with letters.
const Qwen35Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// Qwen35Tokenizer makes a tokenizer of Qwen3.5's shape from a Qwen2/3
// one (tokenizer.json, and tokenizer_config.json with its chat template),
// since Qwen3.5's own cannot be had here: the BPE vocabulary is
// extended to 248,044 tokens by merges of existing tokens ranked after
// the others (so text the base tokenizes much as before), the added
// tokens move to 248044 and up with Qwen3.5's seven new ones after them,
// and the split pattern is Qwen3.5's. Ids are as real Qwen3.5's; the
// text of the new tokens is not (nor are its merges), which a test of
// the tokenizer's shape, or a benchmark of a model's, does not need.
func Qwen35Tokenizer(tokenizerJSON, tokenizerConfig []byte) (tj, tc []byte, err error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(tokenizerJSON, &doc); err != nil {
		return nil, nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	var model map[string]json.RawMessage
	if err := json.Unmarshal(doc["model"], &model); err != nil {
		return nil, nil, fmt.Errorf("tokenizer.json: model: %w", err)
	}
	var vocab map[string]int
	var merges []json.RawMessage
	if err := json.Unmarshal(model["vocab"], &vocab); err != nil {
		return nil, nil, fmt.Errorf("tokenizer.json: model.vocab: %w", err)
	}
	if err := json.Unmarshal(model["merges"], &merges); err != nil {
		return nil, nil, fmt.Errorf("tokenizer.json: model.merges: %w", err)
	}
	if bytes.Contains(doc["pre_tokenizer"], []byte(`\\p{M}`)) {
		return nil, nil, errors.New("tokenizer.json: its split pattern has \\p{M}: it is Qwen3.5's already, want a Qwen2/3 tokenizer to extend")
	}
	n := 0
	for _, id := range vocab {
		n = max(n, id+1)
	}
	if n != len(vocab) || n > Qwen35BPETokens {
		return nil, nil, fmt.Errorf("tokenizer.json: model.vocab has %d tokens up to id %d: want ids 0.. without holes, at most %d", len(vocab), n-1, Qwen35BPETokens)
	}
	shift := Qwen35BPETokens - n
	// New tokens: each an existing token with one more byte-level
	// character, found breadth first (deterministic, and every merge's
	// parts are tokens).
	byID := make([]string, n, Qwen35BPETokens)
	for s, id := range vocab {
		byID[id] = s
	}
	alpha := byteLevelAlphabet()
	chars := make([]string, 0, 94)
	for b := '!'; b <= '~'; b++ {
		chars = append(chars, string(alpha[b]))
	}
	for i := 0; len(byID) < Qwen35BPETokens; i++ {
		for _, c := range chars {
			s := byID[i] + c
			if _, dup := vocab[s]; dup {
				continue
			}
			vocab[s] = len(byID)
			byID = append(byID, s)
			m, _ := json.Marshal([2]string{byID[i], c})
			merges = append(merges, m)
			if len(byID) == Qwen35BPETokens {
				break
			}
		}
	}
	var added []map[string]any
	if err := json.Unmarshal(doc["added_tokens"], &added); err != nil {
		return nil, nil, fmt.Errorf("tokenizer.json: added_tokens: %w", err)
	}
	last := Qwen35AddedStart - 1
	for i, a := range added {
		id, ok := a["id"].(float64)
		if !ok || int(id) < n {
			return nil, nil, fmt.Errorf("tokenizer.json: added_tokens[%d]: id %v is not past the vocabulary's %d tokens", i, a["id"], n)
		}
		a["id"] = int(id) + shift
		last = max(last, int(id)+shift)
	}
	extra := map[int]string{}
	for _, c := range qwen35NewAdded {
		last++
		extra[last] = c
		added = append(added, map[string]any{"id": last, "content": c, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true})
	}
	if model["vocab"], err = json.Marshal(vocab); err != nil {
		return nil, nil, err
	}
	if model["merges"], err = json.Marshal(merges); err != nil {
		return nil, nil, err
	}
	var pre map[string]any
	if err := json.Unmarshal(doc["pre_tokenizer"], &pre); err != nil {
		return nil, nil, fmt.Errorf("tokenizer.json: pre_tokenizer: %w", err)
	}
	split, ok := pre["pretokenizers"].([]any)
	if !ok || len(split) == 0 {
		return nil, nil, errors.New("tokenizer.json: pre_tokenizer: not a Sequence of a Split and a ByteLevel")
	}
	s, ok := split[0].(map[string]any)
	if !ok || s["type"] != "Split" {
		return nil, nil, errors.New("tokenizer.json: pre_tokenizer.pretokenizers[0]: not a Split")
	}
	s["pattern"] = map[string]string{"Regex": Qwen35Pattern}
	for k, v := range map[string]any{"model": model, "added_tokens": added, "pre_tokenizer": pre} {
		if doc[k], err = json.Marshal(v); err != nil {
			return nil, nil, err
		}
	}
	if tj, err = json.Marshal(doc); err != nil {
		return nil, nil, err
	}

	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(tokenizerConfig, &cfg); err != nil {
		return nil, nil, fmt.Errorf("tokenizer_config.json: %w", err)
	}
	var decoder map[string]map[string]any
	if raw, ok := cfg["added_tokens_decoder"]; ok {
		if err := json.Unmarshal(raw, &decoder); err != nil {
			return nil, nil, fmt.Errorf("tokenizer_config.json: added_tokens_decoder: %w", err)
		}
	}
	moved := make(map[string]map[string]any, len(decoder)+len(extra))
	for k, v := range decoder {
		id, err := strconv.Atoi(k)
		if err != nil || id < n {
			return nil, nil, fmt.Errorf("tokenizer_config.json: added_tokens_decoder[%q]: not an id past the vocabulary's %d tokens", k, n)
		}
		moved[strconv.Itoa(id+shift)] = v
	}
	for id, c := range extra {
		moved[strconv.Itoa(id)] = map[string]any{"content": c, "lstrip": false, "normalized": false, "rstrip": false,
			"single_word": false, "special": true}
	}
	if cfg["added_tokens_decoder"], err = json.Marshal(moved); err != nil {
		return nil, nil, err
	}
	if tc, err = json.Marshal(cfg); err != nil {
		return nil, nil, err
	}
	return tj, tc, nil
}

// Qwen35EOS are Qwen3.5's generation_config eos ids, <|im_end|> and
// <|endoftext|>, in Qwen35Tokenizer's vocabulary.
var Qwen35EOS = []int{Qwen35AddedStart + 2, Qwen35AddedStart}
