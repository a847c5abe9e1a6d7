package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestLossy pins the replacement rule to Rust's String::from_utf8_lossy:
// one U+FFFD per maximal invalid subpart (not per byte, not per run).
func TestLossy(t *testing.T) {
	const r = "\uFFFD"
	for _, c := range []struct{ in, want string }{
		{"abc", "abc"},
		{"\xe4\xb8", r},        // truncated 3-byte sequence
		{"\xe4\xb8A", r + "A"}, // cut short by ASCII
		{"\xe4\xb8\xe4\xb8\xad", r + "中"},
		{"\xf0\x9f\x98", r},         // truncated emoji
		{"\xf0\x80\x80", r + r + r}, // overlong: F0 must be followed by 90..BF
		{"\xed\xa0\x80", r + r + r}, // surrogate
		{"\xc0\xaf", r + r},         // C0 never starts a sequence
		{"\xf4\x90\x80\x80", r + r + r + r},
		{"\x80\x80", r + r},
		{"\xff", r},
		{"a\xf1\x80\x80", "a" + r},
	} {
		if got := string(appendLossy(nil, []byte(c.in), true)); got != c.want {
			t.Errorf("lossy(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestDecodeSpecial(t *testing.T) {
	q := loadQwen(t)
	ids := q.tok.Encode("<|im_start|>user\nhi<|im_end|><think>", true)
	if got := q.tok.Decode(ids); got != "<|im_start|>user\nhi<|im_end|><think>" {
		t.Fatalf("Decode = %q", got)
	}
}

// streamAll decodes ids one at a time and concatenates the pieces.
func streamAll(tok *Tokenizer, ids []int32) (string, []string) {
	d := tok.NewStreamDecoder()
	var b strings.Builder
	var pieces []string
	for _, id := range ids {
		p := d.Add(id)
		pieces = append(pieces, p)
		b.WriteString(p)
	}
	p := d.Flush()
	pieces = append(pieces, p)
	b.WriteString(p)
	return b.String(), pieces
}

func TestStreamDecode(t *testing.T) {
	q := loadQwen(t)
	text := "Hello 世界! 大型语言模型 🦙🚀 😶‍🌫️ naïve café Ελληνικά <|im_end|> done"
	ids := q.tok.Encode(text, true)
	got, pieces := streamAll(q.tok, ids)
	if got != text || got != q.tok.Decode(ids) {
		t.Fatalf("stream = %q, want %q", got, text)
	}
	split := false
	for i, p := range pieces {
		if !utf8.ValidString(p) || strings.ContainsRune(p, utf8.RuneError) {
			t.Fatalf("piece %d %q is not clean text", i, p)
		}
		if p == "" && i < len(ids) {
			split = true // a token that ends inside a character
		}
	}
	if !split {
		t.Fatal("test text has no character split across tokens; it tests nothing")
	}

	// Random ids, including invalid sequences and ids without text: the
	// stream still equals Decode.
	rng := rand.New(rand.NewPCG(7, 8))
	d := q.tok.NewStreamDecoder()
	for range 500 {
		ids := make([]int32, rng.IntN(12))
		for i := range ids {
			switch rng.IntN(4) {
			case 0:
				ids[i] = 128 + rng.Int32N(128) // lone high bytes, mostly invalid
			case 1:
				ids[i] = rng.Int32N(160000)
			default:
				ids[i] = 100000 + rng.Int32N(50000) // CJK-heavy region
			}
		}
		want := q.tok.Decode(ids)
		got, _ := streamAll(q.tok, ids)
		if got != want {
			t.Fatalf("ids %v: stream %q, Decode %q", ids, got, want)
		}
		// A reused decoder behaves like a new one after Flush.
		var b strings.Builder
		for _, id := range ids {
			b.WriteString(d.Add(id))
		}
		b.WriteString(d.Flush())
		if b.String() != want {
			t.Fatalf("reused decoder: %q, want %q", b.String(), want)
		}
	}
}
