package tokenizer

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer encodes text to token ids and back. It is immutable after Load
// and safe for concurrent use.
type Tokenizer struct {
	n       int
	offsets []byte // n+1 little-endian u32 into text
	flags   []byte // n per-id flags
	text    []byte
	merges  []byte // nMerges × (left, right, result) u32
	nMerges uint32

	tokTab    []byte // u64 slots: model token id | fingerprint<<32, or none
	tokMask   uint32
	tokProbe  uint32
	pairTab   []byte // u64 slots: merge rank | fingerprint<<32, or none
	pairMask  uint32
	pairProbe uint32

	eos, bos, pad int32
	nfc           bool
	pretok        Pretokenizer

	added []addedToken
	// rawMatch finds added tokens matched in the raw text, normMatch those
	// matched after normalization (HF's "normalized" flag).
	rawMatch, normMatch addedMatcher
	byteTok             [256]int32 // id of each single-byte token, -1 if none

	scratch sync.Pool // *scratch
}

type addedToken struct {
	id                                              int32
	content                                         string
	special, lstrip, rstrip, singleWord, normalized bool
}

// addedMatcher finds the leftmost-longest added token in a text; byFirst
// lists candidate tokens by first byte, longest first.
type addedMatcher struct {
	byFirst [256][]addedCand
	any     bool
}

type addedCand struct {
	text string // what is matched (NFC of the content for normalized tokens)
	tok  int    // index into Tokenizer.added
}

// buildDerived computes the small per-process structures Load does not
// store in the blob: they cost microseconds to build.
func (t *Tokenizer) buildDerived() {
	t.scratch.New = func() any { return new(scratch) }
	for b := range 256 {
		t.byteTok[b] = -1
		if id, ok := t.lookupToken(string([]byte{byte(b)})); ok {
			t.byteTok[b] = int32(id)
		}
	}
	for i, a := range t.added {
		m, text := &t.rawMatch, a.content
		if a.normalized {
			m = &t.normMatch
			text = t.normalize(text)
		}
		if text == "" {
			continue
		}
		m.byFirst[text[0]] = append(m.byFirst[text[0]], addedCand{text, i})
		m.any = true
	}
	for _, m := range []*addedMatcher{&t.rawMatch, &t.normMatch} {
		for _, c := range m.byFirst {
			slices.SortStableFunc(c, func(a, b addedCand) int { return cmp.Compare(len(b.text), len(a.text)) })
		}
	}
}

func (t *Tokenizer) normalize(s string) string {
	if !t.nfc {
		return s
	}
	return nfc(s)
}

// nfc is Unicode's NFC as Hugging Face's tokenizers (and Python) compute
// it.
func nfc(s string) string {
	out := norm.NFC.String(s)
	// x/text's NFC follows UAX #15's stream-safe format: after 30
	// non-starters in a row it inserts U+034F and reorders each chunk on
	// its own. HF's NFC (like Python's) has no such limit. norm never
	// removes a CGJ, so an equal count means none was inserted.
	if strings.Count(out, norm.GraphemeJoiner) == strings.Count(s, norm.GraphemeJoiner) {
		return out
	}
	return nfcUnbounded(s)
}

// nfcUnbounded is NFC without the stream-safe limit: canonical
// decomposition rune by rune, canonical ordering of each whole run of
// non-starters, then canonical composition.
func nfcUnbounded(s string) string {
	ccc := func(r rune) int { return int(norm.NFD.PropertiesString(string(r)).CCC()) }
	var rs []rune
	for _, r := range s {
		rs = append(rs, []rune(norm.NFD.String(string(r)))...)
	}
	for i := 0; i < len(rs); {
		if ccc(rs[i]) == 0 {
			i++
			continue
		}
		j := i
		for j < len(rs) && ccc(rs[j]) != 0 {
			j++
		}
		slices.SortStableFunc(rs[i:j], func(a, b rune) int { return cmp.Compare(ccc(a), ccc(b)) })
		i = j
	}
	out := make([]rune, 0, len(rs))
	starter, last := -1, -1 // index of the last starter in out; ccc of the last rune kept after it (-1: none)
	for _, r := range rs {
		c := ccc(r)
		if starter >= 0 && (last == -1 || last != 0 && last < c) {
			if p := []rune(norm.NFC.String(string(out[starter]) + string(r))); len(p) == 1 {
				out[starter] = p[0]
				continue
			}
		}
		out = append(out, r)
		if c == 0 {
			starter, last = len(out)-1, -1
		} else {
			last = c
		}
	}
	return string(out)
}

// token returns the text of id: raw bytes for a model token, the content for
// an added token, nothing for an id without text or out of range.
func (t *Tokenizer) token(id int32) []byte {
	if id < 0 || int(id) >= t.n {
		return nil
	}
	return t.text[le.Uint32(t.offsets[4*id:]):le.Uint32(t.offsets[4*id+4:])]
}

// lookupToken finds the model token whose bytes are s.
func (t *Tokenizer) lookupToken(s string) (int32, bool) {
	h := hashString(s)
	fp := h >> 32
	for p := uint32(0); p <= t.tokProbe; p++ {
		slot := (uint32(h) + p) & t.tokMask
		x := le.Uint64(t.tokTab[8*slot:])
		id := uint32(x)
		if id == none {
			return 0, false
		}
		if x>>32 == fp && string(t.token(int32(id))) == s {
			return int32(id), true
		}
	}
	return 0, false
}

// VocabSize is the number of ids the tokenizer knows: the largest model or
// added token id plus one (151669 for Qwen3). The model's embedding may
// have more rows (151936); those ids, like any id without text, decode to
// nothing.
func (t *Tokenizer) VocabSize() int { return t.n }

// TokenID returns the id of an added token with this content, or else of
// the model token whose raw bytes are content.
func (t *Tokenizer) TokenID(content string) (int32, bool) {
	for _, a := range t.added {
		if a.content == content {
			return int32(a.id), true
		}
	}
	return t.lookupToken(content)
}

// IsSpecial reports whether id is an added token marked special (a control
// token such as <|im_end|>); <think> and other non-special added tokens and
// out-of-range ids are not.
func (t *Tokenizer) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < t.n && t.flags[id]&flagSpecial != 0
}

// IsAdded reports whether id is an added token (special or not).
func (t *Tokenizer) IsAdded(id int32) bool {
	return id >= 0 && int(id) < t.n && t.flags[id]&flagAdded != 0
}

// TokenBytes returns the bytes id decodes to (nil for ids without text).
// The slice aliases the loaded data and must not be modified.
func (t *Tokenizer) TokenBytes(id int32) []byte { return t.token(id) }

// EOS returns the eos_token of tokenizer_config.json.
func (t *Tokenizer) EOS() (int32, bool) { return int32(t.eos), t.eos >= 0 }

// BOS returns the bos_token of tokenizer_config.json (Qwen has none).
func (t *Tokenizer) BOS() (int32, bool) { return int32(t.bos), t.bos >= 0 }

// Pad returns the pad_token of tokenizer_config.json.
func (t *Tokenizer) Pad() (int32, bool) { return int32(t.pad), t.pad >= 0 }

// Encode tokenizes text. With specials, added tokens (<|im_start|>,
// <think>, ...) written in the text are recognised as Hugging Face's
// tokenizer.encode does by default; without, all of the text is ordinary
// text, added tokens included. Invalid UTF-8 is encoded byte by byte.
func (t *Tokenizer) Encode(text string, specials bool) []int32 {
	return t.AppendEncode(nil, text, specials)
}

// AppendEncode is Encode appending to dst.
func (t *Tokenizer) AppendEncode(dst []int32, text string, specials bool) []int32 {
	sc := t.scratch.Get().(*scratch)
	defer t.scratch.Put(sc)
	if !specials {
		return t.encodeNormalized(dst, t.normalize(text), sc)
	}
	// HF order: tokens with normalized=false are found in the raw text;
	// the rest is normalized piece by piece, then searched for the
	// normalized ones.
	return t.splitAdded(dst, text, &t.rawMatch, sc, func(dst []int32, piece string) []int32 {
		piece = t.normalize(piece)
		return t.splitAdded(dst, piece, &t.normMatch, sc, func(dst []int32, piece string) []int32 {
			return t.encodeNormalized(dst, piece, sc)
		})
	})
}

// splitAdded emits the added tokens m finds in s and hands the text
// between them to rest, with the semantics of HF's AddedVocabulary:
// leftmost-longest non-overlapping matches; a single_word match inside a
// word is skipped (not retried shorter); lstrip/rstrip absorb whitespace.
func (t *Tokenizer) splitAdded(dst []int32, s string, m *addedMatcher, sc *scratch,
	rest func([]int32, string) []int32) []int32 {
	if !m.any {
		return rest(dst, s)
	}
	start := 0
	for i := 0; i < len(s); {
		best, mLen := -1, 0
		for _, c := range m.byFirst[s[i]] {
			if strings.HasPrefix(s[i:], c.text) {
				best, mLen = c.tok, len(c.text)
				break
			}
		}
		if best < 0 {
			i++
			continue
		}
		a := &t.added[best]
		mStart, mEnd := i, i+mLen
		i = mEnd
		if a.singleWord && (endsWithWord(s[:mStart]) || startsWithWord(s[mEnd:])) {
			continue
		}
		if a.lstrip {
			mStart = max(start, len(strings.TrimRightFunc(s[:mStart], unicode.IsSpace)))
		}
		if a.rstrip {
			mEnd = len(s) - len(strings.TrimLeftFunc(s[mEnd:], unicode.IsSpace))
			i = mEnd
		}
		if start < mStart {
			dst = rest(dst, s[start:mStart])
		}
		dst = append(dst, int32(a.id))
		start = mEnd
	}
	if start < len(s) {
		dst = rest(dst, s[start:])
	}
	return dst
}

// isWordChar is regex \w as HF uses it for single_word added tokens.
func isWordChar(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) ||
		unicode.Is(unicode.Pc, r) || unicode.Is(unicode.Nl, r) ||
		unicode.Is(unicode.Other_Alphabetic, r) || unicode.Is(unicode.Join_Control, r)
}

func endsWithWord(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && isWordChar(r)
}

func startsWithWord(s string) bool {
	for _, r := range s {
		return isWordChar(r)
	}
	return false
}

// Pretokenizer is the split pattern the tokenizer cuts text with.
func (t *Tokenizer) Pretokenizer() Pretokenizer { return t.pretok }

// encodeNormalized runs the pre-tokenizer and BPE over normalized text.
func (t *Tokenizer) encodeNormalized(dst []int32, s string, sc *scratch) []int32 {
	marks := t.pretok == Qwen35
	for i := 0; i < len(s); {
		j := nextPretoken(s, i, marks)
		dst = t.bpe(dst, s[i:j], sc)
		i = j
	}
	return dst
}
