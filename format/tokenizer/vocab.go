package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// MaxIDs bounds token ids (and so every table a tokenizer allocates). Real
// vocabularies are well under 2^18; the bound only stops a corrupt file from
// asking for gigabytes.
const MaxIDs = 1 << 24

// Vocab is the tokenizer as plain data, as read from Hugging Face files and
// before the lookup structures are built. Build a Tokenizer from it with
// MarshalBinary and Load.
type Vocab struct {
	// Tokens holds the raw bytes (already converted from the GPT-2
	// byte-to-unicode form) of each model token, indexed by id. An empty
	// entry means the id is not a model token.
	Tokens [][]byte
	// Merges in rank order: Merges[0] is applied first.
	Merges []Merge
	// Added tokens, in any order (MarshalBinary sorts them by id).
	Added []AddedToken
	// EOS, BOS and Pad are the contents of those tokens ("" if none).
	EOS, BOS, Pad string
	// NFC is whether the normalizer is NFC (otherwise there is none).
	NFC bool
	// IgnoreMerges mirrors the BPE option of that name: a pre-token that is
	// itself a token is emitted as is, without running the merges.
	IgnoreMerges bool
	// Pretokenizer is the split pattern of tokenizer.json's
	// pre_tokenizer.
	Pretokenizer Pretokenizer
}

// Merge is one BPE merge rule: tokens Left and Right, adjacent, become Result.
type Merge struct {
	Left, Right, Result int32
}

// AddedToken is a token matched in the text before pre-tokenization, with
// the Hugging Face flags that govern how it is matched.
type AddedToken struct {
	ID      int
	Content string
	// Special tokens are control tokens (<|im_end|>); the others (<think>)
	// are matched the same way but are ordinary text to a chat template.
	Special bool
	// LStrip and RStrip make a match absorb the whitespace on its left or
	// right; SingleWord only matches when not inside a word; Normalized
	// tokens are matched in the normalized text instead of the raw text.
	LStrip, RStrip, SingleWord, Normalized bool
}

type hfAdded struct {
	ID         *int   `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// hfMerge accepts both serialisations Hugging Face has used: "a b" (older
// files) and ["a", "b"] (tokenizers >= 0.20, which allows spaces in tokens).
type hfMerge [2]string

func (m *hfMerge) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		a, c, ok := strings.Cut(s, " ")
		if !ok || strings.Contains(c, " ") {
			return fmt.Errorf("merge %q is not two tokens separated by one space", s)
		}
		m[0], m[1] = a, c
		return nil
	}
	var p []string
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if len(p) != 2 {
		return fmt.Errorf("merge %q has %d parts, want 2", p, len(p))
	}
	m[0], m[1] = p[0], p[1]
	return nil
}

type hfTokenizerJSON struct {
	Model *struct {
		Type                    string         `json:"type"`
		Vocab                   map[string]int `json:"vocab"`
		Merges                  []hfMerge      `json:"merges"`
		Dropout                 *float64       `json:"dropout"`
		UnkToken                *string        `json:"unk_token"`
		ContinuingSubwordPrefix *string        `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string        `json:"end_of_word_suffix"`
		ByteFallback            bool           `json:"byte_fallback"`
		IgnoreMerges            bool           `json:"ignore_merges"`
	} `json:"model"`
	AddedTokens   []hfAdded       `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
}

// hfComponent is the common shape of normalizers, pre-tokenizers,
// post-processors and decoders in tokenizer.json.
type hfComponent struct {
	Type           string          `json:"type"`
	Pretokenizers  []hfComponent   `json:"pretokenizers"`
	Normalizers    []hfComponent   `json:"normalizers"`
	Decoders       []hfComponent   `json:"decoders"`
	Processors     []hfComponent   `json:"processors"`
	Pattern        json.RawMessage `json:"pattern"`
	Behavior       string          `json:"behavior"`
	Invert         bool            `json:"invert"`
	AddPrefixSpace bool            `json:"add_prefix_space"`
	UseRegex       *bool           `json:"use_regex"`
}

func parseComponent(raw json.RawMessage) (*hfComponent, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c hfComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *hfComponent) describe() string {
	if c == nil {
		return "null"
	}
	var parts []string
	for _, s := range [][]hfComponent{c.Pretokenizers, c.Normalizers, c.Decoders, c.Processors} {
		for i := range s {
			parts = append(parts, s[i].describe())
		}
	}
	if len(parts) == 0 {
		return c.Type
	}
	return c.Type + "[" + strings.Join(parts, ", ") + "]"
}

// LoadHF reads a Hugging Face tokenizer.json and, if not nil, the
// tokenizer_config.json next to it. Only byte-level BPE tokenizers with
// one of the Qwen split patterns (Pretokenizer) are accepted; anything
// that would tokenize differently is refused rather than approximated.
func LoadHF(tokenizerJSON, tokenizerConfigJSON []byte) (*Vocab, error) {
	var hf hfTokenizerJSON
	if err := json.Unmarshal(tokenizerJSON, &hf); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	m := hf.Model
	if m == nil {
		return nil, errors.New("not a byte-level BPE tokenizer: tokenizer.json has no model")
	}
	if m.Type != "BPE" {
		return nil, fmt.Errorf("not a byte-level BPE tokenizer: model.type is %q", m.Type)
	}
	pretok, err := checkPipeline(&hf)
	if err != nil {
		return nil, err
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return nil, fmt.Errorf("tokenizer.json: model.dropout %v is not supported", *m.Dropout)
	}
	if m.UnkToken != nil {
		return nil, fmt.Errorf("tokenizer.json: model.unk_token %q is not supported (byte-level BPE needs none)", *m.UnkToken)
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return nil, fmt.Errorf("tokenizer.json: model.continuing_subword_prefix %q is not supported", *m.ContinuingSubwordPrefix)
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return nil, fmt.Errorf("tokenizer.json: model.end_of_word_suffix %q is not supported", *m.EndOfWordSuffix)
	}
	if m.ByteFallback {
		return nil, errors.New("tokenizer.json: model.byte_fallback is not supported")
	}

	v := &Vocab{IgnoreMerges: m.IgnoreMerges, Pretokenizer: pretok}
	norm, err := parseComponent(hf.Normalizer)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: normalizer: %w", err)
	}
	switch {
	case norm == nil:
	case norm.Type == "NFC":
		v.NFC = true
	case norm.Type == "Sequence" && len(norm.Normalizers) == 1 && norm.Normalizers[0].Type == "NFC":
		v.NFC = true
	case norm.Type == "Sequence" && len(norm.Normalizers) == 0:
	default:
		return nil, fmt.Errorf("tokenizer.json: normalizer %s is not supported (only NFC)", norm.describe())
	}

	// Vocabulary: ids in range and unique, strings in byte-level form.
	maxID := -1
	for s, id := range m.Vocab {
		if id < 0 || id >= MaxIDs {
			return nil, fmt.Errorf("tokenizer.json: model.vocab[%q]: id %d out of range [0, %d)", s, id, MaxIDs)
		}
		maxID = max(maxID, id)
	}
	v.Tokens = make([][]byte, maxID+1)
	for s, id := range m.Vocab {
		if v.Tokens[id] != nil {
			a, b := s, string(unByteLevel(v.Tokens[id]))
			if a > b {
				a, b = b, a // deterministic message whatever the map order
			}
			return nil, fmt.Errorf("tokenizer.json: model.vocab: id %d used by both %q and %q", id, a, b)
		}
		raw, err := byteLevelDecode(s)
		if err != nil {
			return nil, fmt.Errorf("tokenizer.json: model.vocab[%q] (id %d): %w", s, id, err)
		}
		v.Tokens[id] = raw
	}

	v.Merges = make([]Merge, len(m.Merges))
	for i, mg := range m.Merges {
		l, okl := m.Vocab[mg[0]]
		r, okr := m.Vocab[mg[1]]
		res, okres := m.Vocab[mg[0]+mg[1]]
		switch {
		case !okl:
			return nil, fmt.Errorf("tokenizer.json: model.merges[%d]: %q is not in model.vocab", i, mg[0])
		case !okr:
			return nil, fmt.Errorf("tokenizer.json: model.merges[%d]: %q is not in model.vocab", i, mg[1])
		case !okres:
			return nil, fmt.Errorf("tokenizer.json: model.merges[%d]: result %q is not in model.vocab", i, mg[0]+mg[1])
		}
		v.Merges[i] = Merge{int32(l), int32(r), int32(res)}
	}

	// Added tokens: tokenizer.json first, then tokenizer_config.json's
	// added_tokens_decoder, which transformers also registers.
	byID := map[int]int{}
	for i, a := range hf.AddedTokens {
		if a.ID == nil {
			return nil, fmt.Errorf("tokenizer.json: added_tokens[%d] (%q) has no id", i, a.Content)
		}
		if err := v.addToken(byID, *a.ID, a, fmt.Sprintf("tokenizer.json: added_tokens[%d]", i)); err != nil {
			return nil, err
		}
	}
	if tokenizerConfigJSON != nil {
		if err := v.applyConfig(byID, tokenizerConfigJSON); err != nil {
			return nil, err
		}
	}
	if err := v.validate(); err != nil {
		return nil, err
	}
	return v, nil
}

func (v *Vocab) addToken(byID map[int]int, id int, a hfAdded, where string) error {
	if id < 0 || id >= MaxIDs {
		return fmt.Errorf("%s: id %d out of range [0, %d)", where, id, MaxIDs)
	}
	if a.Content == "" {
		return fmt.Errorf("%s: empty content", where)
	}
	if !utf8.ValidString(a.Content) {
		return fmt.Errorf("%s: content is not valid UTF-8", where)
	}
	t := AddedToken{ID: id, Content: a.Content, Special: a.Special, LStrip: a.LStrip,
		RStrip: a.RStrip, SingleWord: a.SingleWord, Normalized: a.Normalized}
	if i, ok := byID[id]; ok {
		if v.Added[i].Content != a.Content {
			return fmt.Errorf("%s: id %d is %q here but %q in tokenizer.json", where, id, a.Content, v.Added[i].Content)
		}
		return nil // the same token listed again; tokenizer.json's flags win
	}
	byID[id] = len(v.Added)
	v.Added = append(v.Added, t)
	return nil
}

func (v *Vocab) applyConfig(byID map[int]int, data []byte) error {
	var cfg struct {
		AddedTokensDecoder map[string]hfAdded `json:"added_tokens_decoder"`
		EOS                json.RawMessage    `json:"eos_token"`
		BOS                json.RawMessage    `json:"bos_token"`
		Pad                json.RawMessage    `json:"pad_token"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("tokenizer_config.json: %w", err)
	}
	keys := make([]string, 0, len(cfg.AddedTokensDecoder))
	for k := range cfg.AddedTokensDecoder {
		keys = append(keys, k)
	}
	slices.Sort(keys) // deterministic order of Added and of errors
	for _, k := range keys {
		id, err := strconv.Atoi(k)
		where := fmt.Sprintf("tokenizer_config.json: added_tokens_decoder[%q]", k)
		if err != nil {
			return fmt.Errorf("%s: key is not an id", where)
		}
		if err := v.addToken(byID, id, cfg.AddedTokensDecoder[k], where); err != nil {
			return err
		}
	}
	var err error
	if v.EOS, err = tokenContent(cfg.EOS, "eos_token"); err != nil {
		return err
	}
	if v.BOS, err = tokenContent(cfg.BOS, "bos_token"); err != nil {
		return err
	}
	if v.Pad, err = tokenContent(cfg.Pad, "pad_token"); err != nil {
		return err
	}
	return nil
}

// tokenContent reads a tokenizer_config.json token field, which is null, a
// string or an AddedToken-like object with a "content".
func tokenContent(raw json.RawMessage, field string) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var o struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", fmt.Errorf("tokenizer_config.json: %s is neither a string nor a token object: %w", field, err)
	}
	return o.Content, nil
}

// checkPipeline refuses pipelines the encoder does not implement: the
// pre-tokenizer must be exactly a Qwen split pattern followed by a
// byte-level mapping, and the decoder byte-level. It returns the pattern.
func checkPipeline(hf *hfTokenizerJSON) (Pretokenizer, error) {
	pre, err := parseComponent(hf.PreTokenizer)
	if err != nil {
		return 0, fmt.Errorf("tokenizer.json: pre_tokenizer: %w", err)
	}
	dec, err := parseComponent(hf.Decoder)
	if err != nil {
		return 0, fmt.Errorf("tokenizer.json: decoder: %w", err)
	}
	post, err := parseComponent(hf.PostProcessor)
	if err != nil {
		return 0, fmt.Errorf("tokenizer.json: post_processor: %w", err)
	}
	hasByteLevel := pre != nil && (pre.Type == "ByteLevel" ||
		slices.ContainsFunc(pre.Pretokenizers, func(c hfComponent) bool { return c.Type == "ByteLevel" }))
	if !hasByteLevel {
		return 0, fmt.Errorf("not a byte-level BPE tokenizer: pre_tokenizer is %s", pre.describe())
	}
	if dec == nil || dec.Type != "ByteLevel" {
		return 0, fmt.Errorf("not a byte-level BPE tokenizer: decoder is %s", dec.describe())
	}
	var pat struct {
		Regex *string `json:"Regex"`
	}
	ok := pre.Type == "Sequence" && len(pre.Pretokenizers) == 2
	if ok {
		split, bl := &pre.Pretokenizers[0], &pre.Pretokenizers[1]
		ok = split.Type == "Split" && json.Unmarshal(split.Pattern, &pat) == nil && pat.Regex != nil &&
			split.Behavior == "Isolated" && !split.Invert &&
			bl.Type == "ByteLevel" && !bl.AddPrefixSpace && bl.UseRegex != nil && !*bl.UseRegex
	}
	if !ok {
		return 0, fmt.Errorf("tokenizer.json: pre_tokenizer %s is not supported: only Split(a Qwen pattern, Isolated) then ByteLevel(add_prefix_space=false, use_regex=false) is implemented", pre.describe())
	}
	p, known := pretokenizerOf(*pat.Regex)
	if !known {
		return 0, fmt.Errorf("tokenizer.json: pre_tokenizer.pretokenizers[0].pattern.Regex %q is not supported: the split patterns implemented are Qwen2/Qwen3's and Qwen3.5's", *pat.Regex)
	}
	// TemplateProcessing adds tokens to every input; the encoder does not,
	// and the compiler records what it appends for the models whose
	// inputs take it (Qwen3-Embedding's <|endoftext|>).
	if post != nil && post.Type != "ByteLevel" && post.Type != "TemplateProcessing" && post.Type != "Sequence" {
		return 0, fmt.Errorf("tokenizer.json: post_processor %s is not supported: only ByteLevel and TemplateProcessing are", post.describe())
	}
	return p, nil
}

// validate checks the invariants MarshalBinary and the encoder rely on, so a
// hand-built Vocab gets the same checks as one from LoadHF.
func (v *Vocab) validate() error {
	if len(v.Tokens) > MaxIDs {
		return fmt.Errorf("tokenizer: %d tokens, more than %d", len(v.Tokens), MaxIDs)
	}
	if len(v.Merges) > MaxIDs {
		return fmt.Errorf("tokenizer: %d merges, more than %d", len(v.Merges), MaxIDs)
	}
	isTok := func(id int32) bool { return id >= 0 && int(id) < len(v.Tokens) && len(v.Tokens[id]) > 0 }
	pairs := make(map[[2]int32]int, len(v.Merges))
	for i, m := range v.Merges {
		if !isTok(m.Left) || !isTok(m.Right) || !isTok(m.Result) {
			return fmt.Errorf("tokenizer: merges[%d] (%d, %d -> %d): id is not a model token", i, m.Left, m.Right, m.Result)
		}
		l, r, res := v.Tokens[m.Left], v.Tokens[m.Right], v.Tokens[m.Result]
		if len(res) != len(l)+len(r) || !bytes.HasPrefix(res, l) || !bytes.HasSuffix(res, r) {
			return fmt.Errorf("tokenizer: merges[%d]: %q + %q does not give %q", i, l, r, res)
		}
		if j, dup := pairs[[2]int32{m.Left, m.Right}]; dup {
			return fmt.Errorf("tokenizer: merges[%d] (%q %q) repeats merges[%d]", i, l, r, j)
		}
		pairs[[2]int32{m.Left, m.Right}] = i
	}
	ids := map[int]bool{}
	contents := map[string]int{}
	for i, a := range v.Added {
		if a.ID < 0 || a.ID >= MaxIDs {
			return fmt.Errorf("tokenizer: added token %q: id %d out of range [0, %d)", a.Content, a.ID, MaxIDs)
		}
		if a.Content == "" {
			return fmt.Errorf("tokenizer: added token %d has empty content", a.ID)
		}
		if ids[a.ID] {
			return fmt.Errorf("tokenizer: added token id %d appears twice", a.ID)
		}
		ids[a.ID] = true
		if j, dup := contents[a.Content]; dup {
			return fmt.Errorf("tokenizer: added tokens %d and %d both have content %q", v.Added[j].ID, a.ID, a.Content)
		}
		contents[a.Content] = i
		if a.ID < len(v.Tokens) && len(v.Tokens[a.ID]) > 0 && string(v.Tokens[a.ID]) != a.Content {
			return fmt.Errorf("tokenizer: added token %q has id %d, which is the model token %q", a.Content, a.ID, v.Tokens[a.ID])
		}
	}
	for _, f := range []struct{ name, content string }{{"eos_token", v.EOS}, {"bos_token", v.BOS}, {"pad_token", v.Pad}} {
		if f.content == "" {
			continue
		}
		if _, ok := contents[f.content]; ok {
			continue
		}
		if !slices.ContainsFunc(v.Tokens, func(t []byte) bool { return string(t) == f.content }) {
			return fmt.Errorf("tokenizer: %s %q is not a token", f.name, f.content)
		}
	}
	return nil
}

// byteLevelAlphabet returns GPT-2's bytes_to_unicode table: printable
// Latin-1 bytes stand for themselves and the others are shifted to U+0100
// and up, so that every token is printable text in tokenizer.json.
func byteLevelAlphabet() [256]rune {
	var t [256]rune
	n := rune(0)
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			t[b] = rune(b)
		} else {
			t[b] = 256 + n
			n++
		}
	}
	return t
}

// byteLevelInverse maps a byte-level character back to its byte (-1 for
// characters outside the alphabet); the alphabet ends at U+0143.
var byteLevelInverse = sync.OnceValue(func() *[0x144]int16 {
	var inv [0x144]int16
	for i := range inv {
		inv[i] = -1
	}
	for b, r := range byteLevelAlphabet() {
		inv[r] = int16(b)
	}
	return &inv
})

func byteLevelDecode(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("empty token")
	}
	inv := byteLevelInverse()
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r < 0 || int(r) >= len(inv) || inv[r] < 0 {
			return nil, fmt.Errorf("character %q is not in the byte-level alphabet", r)
		}
		out = append(out, byte(inv[r]))
	}
	return out, nil
}

// unByteLevel is the inverse of byteLevelDecode, for error messages.
func unByteLevel(b []byte) []byte {
	alpha := byteLevelAlphabet()
	var sb []byte
	for _, c := range b {
		sb = utf8.AppendRune(sb, alpha[c])
	}
	return sb
}
