package tokenizer

import (
	"encoding/json"
	"fmt"
	"testing"
	"unicode/utf8"
)

// byteLevel converts raw bytes to the GPT-2 byte-to-unicode form that
// tokenizer.json uses.
func byteLevel(raw string) string {
	alpha := byteLevelAlphabet()
	var b []byte
	for i := 0; i < len(raw); i++ {
		b = utf8.AppendRune(b, alpha[raw[i]])
	}
	return string(b)
}

// smallMerges are the merges of the test vocabulary, as raw strings.
var smallMerges = [][2]string{
	{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}, {"o", "r"},
	{" w", "or"}, {"l", "d"}, {" wor", "ld"}, {" ", " "}, {"\xe4", "\xb8"}, {"\xe4\xb8", "\xad"},
	{"a", "a"}, {"aa", "aa"}, {"aaaa", "a"},
}

// smallAdded are its added tokens, exercising every flag.
var smallAdded = []hfAdded{
	{Content: "<|end|>", Special: true},
	{Content: "<think>"},
	{Content: "<|L|>", LStrip: true, Special: true},
	{Content: "<|R|>", RStrip: true, Special: true},
	{Content: "word", SingleWord: true},
	{Content: "é!", Normalized: true}, // NFC form of "e\u0301!"
	{Content: "<think>>"},             // "<think>" is a prefix: longest match wins
}

// smallTokenizerJSON builds a byte-level BPE tokenizer.json: the 256 byte
// tokens as ids 0..255, then one token per merge, then the added tokens.
// pairs selects the ["a","b"] merges form instead of "a b".
func smallTokenizerJSON(t testing.TB, pairs bool) []byte {
	t.Helper()
	vocab := map[string]int{}
	for b := range 256 {
		vocab[byteLevel(string([]byte{byte(b)}))] = b
	}
	var merges []any
	for _, m := range smallMerges {
		l, r := byteLevel(m[0]), byteLevel(m[1])
		if _, ok := vocab[l+r]; !ok {
			vocab[l+r] = len(vocab)
		}
		if pairs {
			merges = append(merges, []string{l, r})
		} else {
			merges = append(merges, l+" "+r)
		}
	}
	var added []hfAdded
	for i, a := range smallAdded {
		id := len(vocab) + i
		a.ID = &id
		added = append(added, a)
	}
	doc := map[string]any{
		"version":      "1.0",
		"added_tokens": added,
		"normalizer":   map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": Qwen2.Regex()}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": merges,
		},
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const smallConfig = `{"eos_token": {"content": "<|end|>"}, "pad_token": "<|end|>", "bos_token": null,
 "added_tokens_decoder": {"999": {"content": "<|extra|>", "special": true}}}`

func smallVocab(t testing.TB) *Vocab {
	t.Helper()
	v, err := LoadHF(smallTokenizerJSON(t, false), []byte(smallConfig))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func smallTokenizer(t testing.TB) (*Tokenizer, []byte) {
	t.Helper()
	return loadVocab(t, smallVocab(t))
}

// loadVocab encodes v and loads the result.
func loadVocab(t testing.TB, v *Vocab) (*Tokenizer, []byte) {
	t.Helper()
	blob, err := v.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Load(blob)
	if err != nil {
		t.Fatal(err)
	}
	return tok, blob
}

// ids of the small vocabulary's tokens, for readable expectations.
func smallID(t testing.TB, tok *Tokenizer, s string) int32 {
	t.Helper()
	id, ok := tok.TokenID(s)
	if !ok {
		t.Fatalf("no token %q", s)
	}
	return id
}

func fmtIDs(tok *Tokenizer, ids []int32) string {
	s := ""
	for _, id := range ids {
		s += fmt.Sprintf("%q ", tok.TokenBytes(id))
	}
	return s
}
