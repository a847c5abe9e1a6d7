package tokenizer

import (
	"fmt"
	"unicode/utf8"
)

// GGML is a tokenizer as a GGUF file stores it, in llama.cpp's
// tokenizer.ggml.* keys.
type GGML struct {
	Model  string   // tokenizer.ggml.model: "gpt2" is byte-level BPE
	Pre    string   // tokenizer.ggml.pre: llama.cpp's name of the split pattern
	Tokens []string // tokenizer.ggml.tokens, by id
	// Types is tokenizer.ggml.token_type, by id (nil: every token normal).
	Types  []int32
	Merges []string // tokenizer.ggml.merges: "left right", in rank order
	// EOS and Pad are ids of tokenizer.ggml.eos_token_id and
	// padding_token_id, -1 for none.
	EOS, Pad int
}

// llama.cpp's token types (llama_token_type).
const (
	ggmlNormal      = 1
	ggmlUnknown     = 2
	ggmlControl     = 3
	ggmlUserDefined = 4
	ggmlUnused      = 5
	ggmlByte        = 6
)

// ggmlPre maps the names llama.cpp gives the pre-tokenizers of Qwen
// vocabularies (llama-vocab.cpp) to the split patterns they stand for.
var ggmlPre = map[string]Pretokenizer{
	"qwen2":            Qwen2,
	"deepseek-r1-qwen": Qwen2, // DeepSeek-R1's distillations into Qwen2.5
	"qwen35":           Qwen35,
}

// CheckGGML refuses a GGUF's tokenizer model and pre-tokenizer
// (tokenizer.ggml.model and .pre) unless they are byte-level BPE with a
// Qwen split pattern this tokenizer implements: a cheap check a compiler
// makes before it reads the weights.
func CheckGGML(model, pre string) error {
	_, err := ggmlPretokenizer(model, pre)
	return err
}

func ggmlPretokenizer(model, pre string) (Pretokenizer, error) {
	if model != "gpt2" {
		return 0, fmt.Errorf("tokenizer.ggml.model %q: only byte-level BPE (\"gpt2\") is supported", model)
	}
	p, ok := ggmlPre[pre]
	if !ok {
		return 0, fmt.Errorf("tokenizer.ggml.pre %q: not a Qwen pre-tokenizer (qwen2, deepseek-r1-qwen, qwen35)", pre)
	}
	return p, nil
}

// LoadGGML reads a GGUF file's tokenizer into a Vocab. Only byte-level
// BPE with a Qwen split pattern is accepted. GGUF does not record a
// normalizer; the Qwen vocabularies' tokenizer.json has NFC, which
// Hugging Face applies (llama.cpp does not), so the Vocab has it too.
// Control tokens are added special tokens, user-defined ones added plain
// tokens (<think>), as llama.cpp's converter made them from
// tokenizer.json's added tokens; unused ids ([PAD151700]) are no token.
// An error names the key at fault.
func LoadGGML(g *GGML) (*Vocab, error) {
	pretok, err := ggmlPretokenizer(g.Model, g.Pre)
	if err != nil {
		return nil, err
	}
	if len(g.Tokens) > MaxIDs {
		return nil, fmt.Errorf("tokenizer.ggml.tokens: %d tokens, more than %d", len(g.Tokens), MaxIDs)
	}
	if g.Types != nil && len(g.Types) != len(g.Tokens) {
		return nil, fmt.Errorf("tokenizer.ggml.token_type has %d entries for %d tokens", len(g.Types), len(g.Tokens))
	}
	v := &Vocab{NFC: true, Pretokenizer: pretok, Tokens: make([][]byte, len(g.Tokens))}
	ids := make(map[string]int32, len(g.Tokens)) // byte-level text of the model tokens
	for id, s := range g.Tokens {
		typ := int32(ggmlNormal)
		if g.Types != nil {
			typ = g.Types[id]
		}
		where := fmt.Sprintf("tokenizer.ggml.tokens[%d] (%q)", id, s)
		switch typ {
		case ggmlNormal:
			raw, err := byteLevelDecode(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			if prev, dup := ids[s]; dup {
				return nil, fmt.Errorf("%s: the same token as id %d", where, prev)
			}
			ids[s] = int32(id)
			v.Tokens[id] = raw
		case ggmlControl, ggmlUserDefined:
			if s == "" || !utf8.ValidString(s) {
				return nil, fmt.Errorf("%s: an added token must be non-empty UTF-8", where)
			}
			v.Added = append(v.Added, AddedToken{ID: id, Content: s, Special: typ == ggmlControl})
		case ggmlUnused:
		case ggmlUnknown, ggmlByte:
			return nil, fmt.Errorf("%s: token type %d (unknown or byte) has no place in a byte-level BPE vocabulary", where, typ)
		default:
			return nil, fmt.Errorf("%s: tokenizer.ggml.token_type %d is not a llama.cpp token type", where, typ)
		}
	}
	// Unused ids past the last model token are no token: the binary
	// form's table of ids ends at the last token, as LoadHF's does.
	for len(v.Tokens) > 0 && v.Tokens[len(v.Tokens)-1] == nil {
		v.Tokens = v.Tokens[:len(v.Tokens)-1]
	}
	v.Merges = make([]Merge, len(g.Merges))
	for i, m := range g.Merges {
		var l, r string
		for j := 0; j < len(m); j++ {
			if m[j] == ' ' {
				l, r = m[:j], m[j+1:]
				break
			}
		}
		li, okl := ids[l]
		ri, okr := ids[r]
		res, okres := ids[l+r]
		switch {
		case l == "" || r == "":
			return nil, fmt.Errorf("tokenizer.ggml.merges[%d] %q is not two tokens separated by a space", i, m)
		case !okl:
			return nil, fmt.Errorf("tokenizer.ggml.merges[%d]: %q is not a token", i, l)
		case !okr:
			return nil, fmt.Errorf("tokenizer.ggml.merges[%d]: %q is not a token", i, r)
		case !okres:
			return nil, fmt.Errorf("tokenizer.ggml.merges[%d]: result %q is not a token", i, l+r)
		}
		v.Merges[i] = Merge{li, ri, res}
	}
	content := func(id int, key string) (string, error) {
		if id < 0 {
			return "", nil
		}
		if id >= len(g.Tokens) {
			return "", fmt.Errorf("tokenizer.ggml.%s %d is not a token id (%d tokens)", key, id, len(g.Tokens))
		}
		if id < len(v.Tokens) && v.Tokens[id] != nil {
			return string(v.Tokens[id]), nil
		}
		return g.Tokens[id], nil
	}
	if v.EOS, err = content(g.EOS, "eos_token_id"); err != nil {
		return nil, err
	}
	if v.Pad, err = content(g.Pad, "padding_token_id"); err != nil {
		return nil, err
	}
	if err := v.validate(); err != nil {
		return nil, err
	}
	return v, nil
}
