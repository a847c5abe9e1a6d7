package tokenizer

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestLoadHFMergeForms(t *testing.T) {
	a, err := LoadHF(smallTokenizerJSON(t, false), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadHF(smallTokenizerJSON(t, true), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal(`"a b" and ["a","b"] merges give different vocabularies`)
	}
	if len(a.Merges) != len(smallMerges) {
		t.Fatalf("%d merges, want %d", len(a.Merges), len(smallMerges))
	}
	m := a.Merges[2] // "he" + "ll"
	if string(a.Tokens[m.Left]) != "he" || string(a.Tokens[m.Right]) != "ll" || string(a.Tokens[m.Result]) != "hell" {
		t.Fatalf("merge 2 = %q %q -> %q", a.Tokens[m.Left], a.Tokens[m.Right], a.Tokens[m.Result])
	}
	// Token strings are stored as raw bytes, not in byte-level form.
	if string(a.Tokens[' ']) != " " || string(a.Tokens[0xe4]) != "\xe4" {
		t.Fatalf("byte tokens not converted: %q %q", a.Tokens[' '], a.Tokens[0xe4])
	}
}

func TestLoadHFConfig(t *testing.T) {
	v := smallVocab(t)
	if v.EOS != "<|end|>" || v.Pad != "<|end|>" || v.BOS != "" {
		t.Fatalf("eos %q pad %q bos %q", v.EOS, v.Pad, v.BOS)
	}
	if !v.NFC {
		t.Fatal("NFC normalizer not recorded")
	}
	i := slices.IndexFunc(v.Added, func(a AddedToken) bool { return a.Content == "<|extra|>" })
	if i < 0 || v.Added[i].ID != 999 || !v.Added[i].Special {
		t.Fatalf("added_tokens_decoder entry not added: %+v", v.Added)
	}
	tok, _ := smallTokenizer(t)
	if id, ok := tok.EOS(); !ok || id != smallID(t, tok, "<|end|>") {
		t.Fatalf("EOS() = %d, %v", id, ok)
	}
	if _, ok := tok.BOS(); ok {
		t.Fatal("BOS() reports a token")
	}
	if tok.VocabSize() != 1000 {
		t.Fatalf("VocabSize() = %d, want 1000 (largest id 999)", tok.VocabSize())
	}
	if !tok.IsSpecial(999) || tok.IsSpecial(smallID(t, tok, "<think>")) || tok.IsSpecial('a') || tok.IsSpecial(-1) || tok.IsSpecial(5000) {
		t.Fatal("IsSpecial wrong")
	}
	if !tok.IsAdded(smallID(t, tok, "<think>")) || tok.IsAdded('a') {
		t.Fatal("IsAdded wrong")
	}
}

func TestLoadHFQwen(t *testing.T) {
	q := loadQwen(t)
	if len(q.vocab.Tokens) != 151643 || len(q.vocab.Merges) != 151387 || len(q.vocab.Added) != 26 {
		t.Fatalf("%d tokens, %d merges, %d added", len(q.vocab.Tokens), len(q.vocab.Merges), len(q.vocab.Added))
	}
	if q.tok.VocabSize() != 151669 {
		t.Fatalf("VocabSize() = %d", q.tok.VocabSize())
	}
	for _, c := range []struct {
		s       string
		id      int32
		special bool
	}{{"<|endoftext|>", 151643, true}, {"<|im_start|>", 151644, true}, {"<|im_end|>", 151645, true},
		{"<tool_call>", 151657, false}, {"<think>", 151667, false}, {"</think>", 151668, false}} {
		id, ok := q.tok.TokenID(c.s)
		if !ok || id != c.id || q.tok.IsSpecial(id) != c.special {
			t.Errorf("TokenID(%q) = %d, %v; special %v", c.s, id, ok, q.tok.IsSpecial(id))
		}
	}
	if id, ok := q.tok.EOS(); !ok || id != 151645 {
		t.Errorf("EOS() = %d, %v; want <|im_end|> 151645", id, ok)
	}
	if id, ok := q.tok.TokenID(" world"); !ok || id != 1879 {
		t.Errorf(`TokenID(" world") = %d, %v; want 1879`, id, ok)
	}
	// Ids above the tokenizer's range exist in the model (vocab_size 151936).
	if q.tok.Decode([]int32{151700, 151935, math.MaxInt32, -3}) != "" || q.tok.TokenBytes(151700) != nil {
		t.Error("ids without text decode to something")
	}
}

// edit decodes tokenizer.json, applies f to it and encodes it again.
func edit(t *testing.T, data []byte, f func(doc map[string]any)) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	f(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLoadHFErrors(t *testing.T) {
	base := smallTokenizerJSON(t, false)
	model := func(doc map[string]any) map[string]any { return doc["model"].(map[string]any) }
	cases := []struct {
		name string
		f    func(doc map[string]any)
		want string
	}{
		{"wordpiece", func(d map[string]any) { model(d)["type"] = "WordPiece" },
			`not a byte-level BPE tokenizer: model.type is "WordPiece"`},
		{"metaspace", func(d map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁"}
		}, "not a byte-level BPE tokenizer: pre_tokenizer is Metaspace"},
		{"decoder", func(d map[string]any) { d["decoder"] = map[string]any{"type": "Metaspace"} },
			"not a byte-level BPE tokenizer: decoder is Metaspace"},
		{"no model", func(d map[string]any) { delete(d, "model") }, "not a byte-level BPE tokenizer"},
		{"pattern", func(d map[string]any) {
			d["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["pattern"] = map[string]any{"Regex": `\s+`}
		}, `pre_tokenizer.pretokenizers[0].pattern.Regex "\\s+" is not supported: the split patterns implemented are Qwen2/Qwen3's and Qwen3.5's`},
		{"split behaviour", func(d map[string]any) {
			d["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["behavior"] = "Removed"
		}, "pre_tokenizer Sequence[Split, ByteLevel] is not supported"},
		{"bert", func(d map[string]any) { d["post_processor"] = map[string]any{"type": "BertProcessing"} },
			"post_processor BertProcessing is not supported"},
		{"normalizer", func(d map[string]any) { d["normalizer"] = map[string]any{"type": "NFKC"} },
			"normalizer NFKC is not supported"},
		{"byte fallback", func(d map[string]any) { model(d)["byte_fallback"] = true }, "model.byte_fallback"},
		{"negative id", func(d map[string]any) { model(d)["vocab"].(map[string]any)["zz"] = -1 },
			`model.vocab["zz"]: id -1 out of range`},
		{"duplicate id", func(d map[string]any) { model(d)["vocab"].(map[string]any)["zz"] = 3 },
			"model.vocab: id 3 used by both"},
		{"not byte-level", func(d map[string]any) { model(d)["vocab"].(map[string]any)["z z"] = 400 },
			`model.vocab["z z"] (id 400): character ' ' is not in the byte-level alphabet`},
		{"merge part", func(d map[string]any) { model(d)["merges"] = []any{"hq e"} },
			`model.merges[0]: "hq" is not in model.vocab`},
		{"merge result", func(d map[string]any) { model(d)["merges"] = []any{"e h"} },
			`model.merges[0]: result "eh" is not in model.vocab`},
		{"merge shape", func(d map[string]any) { model(d)["merges"] = []any{[]string{"a", "b", "c"}} },
			"has 3 parts, want 2"},
		{"merge string", func(d map[string]any) { model(d)["merges"] = []any{"abc"} },
			`merge "abc" is not two tokens`},
		{"duplicate merge", func(d map[string]any) { model(d)["merges"] = []any{"h e", "h e"} },
			"merges[1] (\"h\" \"e\") repeats merges[0]"},
		{"added id", func(d map[string]any) { d["added_tokens"].([]any)[0].(map[string]any)["id"] = MaxIDs },
			"tokenizer.json: added_tokens[0]: id 16777216 out of range"},
		{"added dup", func(d map[string]any) {
			d["added_tokens"].([]any)[1].(map[string]any)["content"] = "<|end|>"
		}, `both have content "<|end|>"`},
		{"added over vocab", func(d map[string]any) { d["added_tokens"].([]any)[0].(map[string]any)["id"] = 5 },
			`added token "<|end|>" has id 5, which is the model token "\x05"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadHF(edit(t, base, c.f), nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
	for _, c := range []struct{ cfg, want string }{
		{`{"added_tokens_decoder": {"271": {"content": "other"}}}`, `added_tokens_decoder["271"]: id 271 is "other" here but "<|end|>" in tokenizer.json`},
		{`{"added_tokens_decoder": {"x": {"content": "other"}}}`, `added_tokens_decoder["x"]: key is not an id`},
		{`{"eos_token": "<nope>"}`, `eos_token "<nope>" is not a token`},
		{`{"eos_token": 7}`, `eos_token is neither a string nor a token object`},
		{`[`, `tokenizer_config.json`},
	} {
		_, err := LoadHF(base, []byte(c.cfg))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config %s: error %v, want one containing %q", c.cfg, err, c.want)
		}
	}
	if _, err := LoadHF([]byte("{"), nil); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("truncated JSON: %v", err)
	}
}

func TestVocabValidate(t *testing.T) {
	v := smallVocab(t)
	v.Merges = append(v.Merges, Merge{Left: 'a', Right: 'b', Result: 'c'})
	if _, err := v.MarshalBinary(); err == nil || !strings.Contains(err.Error(), `"a" + "b" does not give "c"`) {
		t.Fatalf("bad merge result: %v", err)
	}
	v = smallVocab(t)
	v.Merges[0].Left = 100000
	if _, err := v.MarshalBinary(); err == nil || !strings.Contains(err.Error(), "not a model token") {
		t.Fatalf("out-of-range merge id: %v", err)
	}
	v = smallVocab(t)
	v.Added = append(v.Added, AddedToken{ID: -1, Content: "x"})
	if _, err := v.MarshalBinary(); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("negative added id: %v", err)
	}
	v = smallVocab(t)
	v.EOS = "missing"
	if _, err := v.MarshalBinary(); err == nil || !strings.Contains(err.Error(), `eos_token "missing" is not a token`) {
		t.Fatalf("unknown eos: %v", err)
	}
}

func TestMarshalDeterministic(t *testing.T) {
	a, err := smallVocab(t).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// The same vocabulary with its added tokens listed in another order.
	v := smallVocab(t)
	slices.Reverse(v.Added)
	b, err := v.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("MarshalBinary output depends on more than the vocabulary")
	}
	q := loadQwen(t)
	again, err := q.vocab.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, q.blob) {
		t.Fatal("MarshalBinary of the Qwen vocabulary is not deterministic")
	}
	t.Logf("Qwen tokenizer blob: %d bytes", len(q.blob))
}
