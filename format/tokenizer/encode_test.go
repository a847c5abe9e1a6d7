package tokenizer

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// The expected splits come from running the Qwen pattern with Python's
// `regex` module (same semantics as Oniguruma for this pattern).
var pretokCases = []struct {
	in   string
	want []string
}{
	{"Hello world", []string{"Hello", " world"}},
	{"  Hello", []string{" ", " Hello"}},
	{"I'm here, they'RE 'Ll go'd", []string{"I", "'m", " here", ",", " they", "'RE", " '", "Ll", " go", "'d"}},
	{"don'T '\u017fun' x'", []string{"don", "'T", " '", "\u017fun", "'", " x", "'"}},
	{"'", []string{"'"}},
	{"''s", []string{"''", "s"}},
	{"a  b", []string{"a", " ", " b"}},
	{"a   \n  b", []string{"a", "   \n", " ", " b"}},
	{"x \n\n ", []string{"x", " \n\n", " "}},
	{"  ", []string{"  "}},
	{"\t\tfoo", []string{"\t", "\tfoo"}},
	{" \u00a0bar", []string{" ", "\u00a0bar"}},
	{"\u3000\u4e2d\u6587", []string{"\u3000\u4e2d\u6587"}},
	{"x\u00a0\u00a0y", []string{"x", "\u00a0", "\u00a0y"}},
	{"3.14159", []string{"3", ".", "1", "4", "1", "5", "9"}},
	{"\u00bd \u216b \u00b2", []string{"\u00bd", " ", "\u216b", " ", "\u00b2"}},
	{"a, b!! ?\n\nc", []string{"a", ",", " b", "!!", " ?\n\n", "c"}},
	{" !!\r\n\r\nx", []string{" !!\r\n\r\n", "x"}},
	{"...\n", []string{"...\n"}},
	{"\r\n\r\n", []string{"\r\n\r\n"}},
	{" \r\n  \r\n  z", []string{" \r\n  \r\n", " ", " z"}},
	{"foo\u2028bar", []string{"foo", "\u2028bar"}},
	{"e\u0301 x\u0301y", []string{"e", "\u0301", " x", "\u0301y"}},
	{"\U0001F600\U0001F600 x", []string{"\U0001F600\U0001F600", " x"}},
	{"a\u0085b", []string{"a", "\u0085b"}},
	{"  \u0085\n", []string{"  \u0085\n"}},
	{"'Ss'T", []string{"'S", "s", "'T"}},
	{"abc'def", []string{"abc", "'d", "ef"}},
	{"snake_case_name", []string{"snake", "_case", "_name"}},
	{"#include <stdio.h>", []string{"#include", " <", "stdio", ".h", ">"}},
	{"\u000b\fX", []string{"\u000b", "\fX"}},
	// Invalid UTF-8 bytes behave like punctuation.
	{"a\xff\xfeb \xc3", []string{"a", "\xff\xfe", "b", " \xc3"}},
}

// marksCases hold where the Qwen3.5 pattern, which counts combining
// marks (\p{M}) with letters, cuts text, and where Qwen2's does. They are
// worked out from the regular expressions (leftmost-first alternation,
// greedy with backtracking) and were checked with Perl's engine, which
// runs both alike (TestPretokenizeAgainstPerl does it again when Perl is
// there):
//   - [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+: a mark joins the letters around it,
//     and, as they do, takes one character before it that is no letter,
//     number or newline: a space, a punctuation mark, even another mark;
//   - \p{N} takes a number alone, so a mark after a digit starts a piece;
//   - ' ?[^\s\p{L}\p{M}\p{N}]+': a run of punctuation stops at a mark, which
//     Qwen2's pattern counted as punctuation.
var marksCases = []struct {
	in         string
	q35, qwen2 []string
}{
	{"e\u0301 x\u0301y", []string{"e\u0301", " x\u0301y"}, []string{"e", "\u0301", " x", "\u0301y"}},
	{"\u0301abc", []string{"\u0301abc"}, []string{"\u0301abc"}},
	{" \u0301abc", []string{" \u0301abc"}, []string{" \u0301", "abc"}},
	{"a\u0300\u0301\u0302b c", []string{"a\u0300\u0301\u0302b", " c"}, []string{"a", "\u0300\u0301\u0302", "b", " c"}},
	{" \u0301\u0302\u0303", []string{" \u0301\u0302\u0303"}, []string{" \u0301\u0302\u0303"}},
	{"\u0301\u0302 \u0303", []string{"\u0301\u0302", " \u0303"}, []string{"\u0301\u0302", " \u0303"}},
	// After digits.
	{"1\u0301", []string{"1", "\u0301"}, []string{"1", "\u0301"}},
	{"12\u0301a", []string{"1", "2", "\u0301a"}, []string{"1", "2", "\u0301a"}},
	{"\u03012", []string{"\u0301", "2"}, []string{"\u0301", "2"}},
	{"1\u20dd", []string{"1", "\u20dd"}, []string{"1", "\u20dd"}}, // an enclosing mark (Me)
	// After punctuation: one character before a mark is taken with it,
	// a run is not.
	{"!\u0301", []string{"!\u0301"}, []string{"!\u0301"}},
	{"!!\u0301", []string{"!!", "\u0301"}, []string{"!!\u0301"}},
	{" !\u0301x", []string{" !", "\u0301x"}, []string{" !\u0301", "x"}},
	{" ..\u0301", []string{" ..", "\u0301"}, []string{" ..\u0301"}},
	{"\u0301..", []string{"\u0301", ".."}, []string{"\u0301.."}},
	{"a\u0301!\u0301", []string{"a\u0301", "!\u0301"}, []string{"a", "\u0301!\u0301"}},
	{"(\u0301)", []string{"(\u0301", ")"}, []string{"(\u0301)"}},
	{"\u2764\ufe0f\u2764\ufe0f x", []string{"\u2764\ufe0f", "\u2764\ufe0f", " x"}, []string{"\u2764\ufe0f\u2764\ufe0f", " x"}}, // VS16 is Mn
	// After white space and line breaks.
	{"  \u0301", []string{" ", " \u0301"}, []string{" ", " \u0301"}},
	{"\t\u0301x", []string{"\t\u0301x"}, []string{"\t", "\u0301x"}},
	{"\n\u0301", []string{"\n", "\u0301"}, []string{"\n", "\u0301"}},
	{"a\u0301\n", []string{"a\u0301", "\n"}, []string{"a", "\u0301\n"}},
	// Apostrophes: a contraction comes first.
	{"'\u0301", []string{"'\u0301"}, []string{"'\u0301"}},
	{"x'\u0301", []string{"x", "'\u0301"}, []string{"x", "'\u0301"}},
	{"'s\u0301", []string{"'s", "\u0301"}, []string{"'s", "\u0301"}},
	{"don\u0301't", []string{"don\u0301", "'t"}, []string{"don", "\u0301'", "t"}},
	// Scripts written with marks: Hangul's tone mark (Mc), Devanagari's
	// vowel signs and virama, Arabic's harakat, Hebrew's points, Thai's
	// vowels and tone marks.
	{"\ud55c\u302e\uad6d\uc5b4", []string{"\ud55c\u302e\uad6d\uc5b4"}, []string{"\ud55c", "\u302e\uad6d\uc5b4"}},
	{"\u0939\u093f\u0928\u094d\u0926\u0940 \u092d\u093e\u0937\u093e", []string{"\u0939\u093f\u0928\u094d\u0926\u0940", " \u092d\u093e\u0937\u093e"},
		[]string{"\u0939", "\u093f\u0928", "\u094d\u0926", "\u0940", " \u092d", "\u093e\u0937", "\u093e"}},
	{"\u0645\u064e\u0631\u0652\u062d\u064e\u0628\u064b\u0627 \u0628\u0643", []string{"\u0645\u064e\u0631\u0652\u062d\u064e\u0628\u064b\u0627", " \u0628\u0643"},
		[]string{"\u0645", "\u064e\u0631", "\u0652\u062d", "\u064e\u0628", "\u064b\u0627", " \u0628\u0643"}},
	{"\u05e9\u05b8\u05c1\u05dc\u05d5\u05b9\u05dd", []string{"\u05e9\u05b8\u05c1\u05dc\u05d5\u05b9\u05dd"}, []string{"\u05e9", "\u05b8\u05c1", "\u05dc\u05d5", "\u05b9\u05dd"}},
	{"\u0e01\u0e34\u0e19\u0e02\u0e49\u0e32\u0e27", []string{"\u0e01\u0e34\u0e19\u0e02\u0e49\u0e32\u0e27"}, []string{"\u0e01", "\u0e34\u0e19\u0e02", "\u0e49\u0e32\u0e27"}},
	{"caf\u00e9 na\u00efve", []string{"caf\u00e9", " na\u00efve"}, []string{"caf\u00e9", " na\u00efve"}}, // precomposed: letters
}

func pretokenize(s string, p Pretokenizer) []string {
	var out []string
	for i := 0; i < len(s); {
		j := nextPretoken(s, i, p == Qwen35)
		out = append(out, s[i:j])
		i = j
	}
	return out
}

func TestPretokenize(t *testing.T) {
	for _, c := range pretokCases {
		if got := pretokenize(c.in, Qwen2); !slices.Equal(got, c.want) {
			t.Errorf("%q:\n got  %q\n want %q", c.in, got, c.want)
		}
	}
	for _, c := range marksCases {
		for _, p := range []struct {
			p    Pretokenizer
			want []string
		}{{Qwen35, c.q35}, {Qwen2, c.qwen2}} {
			if got := pretokenize(c.in, p.p); !slices.Equal(got, p.want) {
				t.Errorf("%v, %+q:\n got  %+q\n want %+q", p.p, c.in, got, p.want)
			}
		}
	}
}

// TestPretokenizeAgainstPerl runs both patterns, as tokenizer.json
// writes them, in Perl, whose regular expressions agree with Oniguruma's
// on them (Unicode classes, (?i), look-ahead, leftmost-first alternation),
// over random text of the characters the patterns tell apart; skipped
// where there is no perl.
func TestPretokenizeAgainstPerl(t *testing.T) {
	perl, err := exec.LookPath("perl")
	if err != nil {
		t.Skip("no perl to run the patterns with")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	// Characters assigned before Unicode 14 (Perl's tables may be older
	// than Go's): letters, marks of every kind, numbers, spaces, line
	// breaks, punctuation, symbols, a format character.
	chars := []string{"a", "Z", "\u00e9", "\u017f", "s", "t", "'", "\u0301", "\u0300", "\u20dd", "\u093f", "\u094d", "\u0939",
		"\u0645", "\u064e", "\u05b8", "\u0e34", "\ufe0f", "\u302e", "\ud55c", "\u4e2d", "1", "\u00bd", "\u216b", "\u0661",
		" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2028", "\u0085", ".", "!", "(", "\u2764", "\U0001F600", "\u200d", "_", "-"}
	rng := rand.New(rand.NewPCG(5, 35))
	var texts []string
	for range 2000 {
		var b strings.Builder
		for range 1 + rng.IntN(12) {
			b.WriteString(chars[rng.IntN(len(chars))])
		}
		texts = append(texts, b.String())
	}
	for _, c := range marksCases {
		texts = append(texts, c.in)
	}
	for _, p := range []Pretokenizer{Qwen2, Qwen35} {
		// Perl reads the texts as JSON lines and writes each one's
		// matches the same way.
		script := `use JSON::PP; binmode STDIN; binmode STDOUT; my $js = JSON::PP->new->utf8;` +
			`my $re = qr/` + p.Regex() + `/;` +
			`while (my $l = <STDIN>) { my $t = $js->decode($l); my @m; push @m, $& while $t =~ /$re/g; print $js->encode(\@m), "\n"; }`
		var in bytes.Buffer
		for _, text := range texts {
			line, _ := json.Marshal(text)
			in.Write(append(line, '\n'))
		}
		cmd := exec.Command(perl, "-e", script)
		cmd.Stdin = &in
		out, err := cmd.Output()
		if err != nil {
			t.Skipf("perl cannot run the pattern (%v): JSON::PP missing?", err)
		}
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if len(lines) != len(texts) {
			t.Fatalf("%v: perl gave %d lines for %d texts", p, len(lines), len(texts))
		}
		for i, text := range texts {
			var want []string
			if err := json.Unmarshal([]byte(lines[i]), &want); err != nil {
				t.Fatalf("%v: perl's output %q: %v", p, lines[i], err)
			}
			if got := pretokenize(text, p); !slices.Equal(got, want) {
				t.Errorf("%v, %+q:\n got  %+q\n perl %+q", p, text, got, want)
			}
		}
	}
}

func TestAddedTokens(t *testing.T) {
	tok, _ := smallTokenizer(t)
	id := func(s string) int32 { return smallID(t, tok, s) }
	hello, world := id("hello"), id(" world")
	cases := []struct {
		text     string
		specials bool
		want     []int32
	}{
		{"hello<|end|> world", true, []int32{hello, id("<|end|>"), world}},
		{"hello<think> world", true, []int32{hello, id("<think>"), world}},
		{"<think>>>", true, []int32{id("<think>>"), '>'}},
		{"a  <|L|>b", true, []int32{'a', id("<|L|>"), 'b'}},
		{"a<|R|> \t b", true, []int32{'a', id("<|R|>"), 'b'}},
		{"a word b", true, []int32{'a', ' ', id("word"), ' ', 'b'}},
		{"word", true, []int32{id("word")}},
		{"swordfish", true, []int32{'s', 'w', id("or"), 'd', 'f', 'i', 's', 'h'}},
		{"word_", true, []int32{'w', id("or"), 'd', '_'}},
		{"x e\u0301!", true, []int32{'x', ' ', id("é!")}},
		{"x \u00e9!", true, []int32{'x', ' ', id("é!")}},
		{"<|extra|>", true, []int32{999}},
		{"hello<|end|>", false, []int32{hello, '<', '|', 'e', 'n', 'd', '|', '>'}},
		{"a<|L|>", false, []int32{'a', '<', '|', 'L', '|', '>'}},
	}
	for _, c := range cases {
		got := tok.Encode(c.text, c.specials)
		if !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q, %v) = %v (%s), want %v", c.text, c.specials, got, fmtIDs(tok, got), c.want)
		}
	}
}

// refEncoder is a deliberately naive BPE over a Vocab (string maps, best
// pair by full scan) to check the table-driven encoder against.
type refEncoder struct {
	ids    map[string]int32
	ranks  map[[2]string]int
	pretok Pretokenizer
}

func newRefEncoder(v *Vocab) *refEncoder {
	r := &refEncoder{ids: map[string]int32{}, ranks: map[[2]string]int{}, pretok: v.Pretokenizer}
	for id, b := range v.Tokens {
		if len(b) > 0 {
			r.ids[string(b)] = int32(id)
		}
	}
	for i, m := range v.Merges {
		r.ranks[[2]string{string(v.Tokens[m.Left]), string(v.Tokens[m.Right])}] = i
	}
	return r
}

func (r *refEncoder) word(w string) []int32 {
	syms := make([]string, len(w))
	for i := range len(w) {
		syms[i] = w[i : i+1]
	}
	for {
		best, bestRank := -1, 0
		for i := 0; i+1 < len(syms); i++ {
			if rank, ok := r.ranks[[2]string{syms[i], syms[i+1]}]; ok && (best < 0 || rank < bestRank) {
				best, bestRank = i, rank
			}
		}
		if best < 0 {
			break
		}
		syms = slices.Replace(syms, best, best+2, syms[best]+syms[best+1])
	}
	ids := make([]int32, len(syms))
	for i, s := range syms {
		ids[i] = r.ids[s]
	}
	return ids
}

func (r *refEncoder) encode(text string) []int32 {
	var ids []int32
	for _, w := range pretokenize(nfc(text), r.pretok) {
		ids = append(ids, r.word(w)...)
	}
	return ids
}

// randomText mixes the character kinds the pre-tokenizer and the merges
// treat differently, with occasional long runs of one kind (which take the
// heap path of the BPE).
func randomText(rng *rand.Rand) string {
	pieces := []string{"a", "e", "s", "t", "the", "The", " ", "  ", "\n", "\t", "'s", "'RE", "1", "42", ".", ",", "!", "(", ")",
		"{", "}", ":=", "//", "中", "文", "的", "是", "é", "e\u0301", "ß", "😀", "🦙", "\u00a0", "\u3000", "ſ", "Ⅻ", "²",
		"<|im_end|>", "<think>", "func", "return", " return", "Привет", "مرحبا", "ก", "\r\n", "==", "-", "_", "\u200d"}
	var b strings.Builder
	for range rng.IntN(40) {
		p := pieces[rng.IntN(len(pieces))]
		if rng.IntN(30) == 0 {
			p = strings.Repeat(p, 20+rng.IntN(60))
		}
		b.WriteString(p)
	}
	return b.String()
}

func TestEncodeMatchesReference(t *testing.T) {
	q := loadQwen(t)
	ref := newRefEncoder(q.vocab)
	rng := rand.New(rand.NewPCG(1, 2))
	texts := []string{benchText, strings.Repeat("中文字", 100), strings.Repeat("=", 300), strings.Repeat(" ", 500) + "x"}
	for range 3000 {
		texts = append(texts, randomText(rng))
	}
	for _, text := range texts {
		got, want := q.tok.Encode(text, false), ref.encode(text)
		if !slices.Equal(got, want) {
			t.Fatalf("Encode(%.200q):\n got  %.300v\n want %.300v", text, got, want)
		}
	}
}

// TestMergePaths checks that the quadratic and the heap BPE agree, on
// words of every length around and beyond smallWord.
func TestMergePaths(t *testing.T) {
	q := loadQwen(t)
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "b", "e", "n", "t", " ", "中", "文", "!", "=", "\xe4", "😀"}
	var sc1, sc2 scratch
	for n := 2; n < 160; n++ {
		for range 10 {
			var b strings.Builder
			for b.Len() < n {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			w := b.String()
			syms := make([]int32, len(w))
			for i := range len(w) {
				syms[i] = q.tok.byteTok[w[i]]
			}
			small := q.tok.mergeSmall(slices.Clone(syms), &sc1)
			heap := q.tok.mergeHeap(slices.Clone(syms), &sc2)
			if !slices.Equal(small, heap) {
				t.Fatalf("%q: scan %v, heap %v", w, small, heap)
			}
		}
	}
}

func TestEncodeInvalidUTF8(t *testing.T) {
	q := loadQwen(t)
	for _, s := range []string{"\xff", "a\xc3", "\xe4\xb8", "ok\x80\x80ok", "\xed\xa0\x80", "<|im_end|>\xfe<|im_end|>"} {
		for _, specials := range []bool{false, true} {
			var raw []byte
			for _, id := range q.tok.Encode(s, specials) {
				raw = append(raw, q.tok.TokenBytes(id)...)
			}
			if string(raw) != s {
				t.Errorf("Encode(%q, %v) covers the bytes %q", s, specials, raw)
			}
		}
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	q := loadQwen(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		s := randomText(rng)
		for _, specials := range []bool{false, true} {
			if got, want := q.tok.Decode(q.tok.Encode(s, specials)), nfc(s); got != want {
				t.Fatalf("Decode(Encode(%q, %v)) = %q", s, specials, got)
			}
		}
	}
	if !utf8.ValidString(benchText) {
		t.Fatal("benchText is not UTF-8")
	}
}

func TestAppendEncodeNoAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	q := loadQwen(t)
	dst := make([]int32, 0, 4096)
	q.tok.AppendEncode(dst, benchText, true) // warm the scratch pool
	allocs := testing.AllocsPerRun(20, func() { q.tok.AppendEncode(dst[:0], benchText, true) })
	if allocs > 1 {
		t.Errorf("AppendEncode allocates %.1f times per call", allocs)
	}
}

// TestNFCUnbounded: HF's NFC (unicode-normalization's nfc(), like
// Python's unicodedata) orders a run of combining marks whole, however
// long; x/text's norm.NFC follows UAX #15's stream-safe format, which
// inserts U+034F after 30 marks in a row and orders each 30 on their own:
// extra tokens, other pieces, and a decoded text that is not the NFC of
// the input. Runs of up to 30 take norm's result as before.
func TestNFCUnbounded(t *testing.T) {
	tok := loadQwen(t).tok
	for _, c := range []struct{ in, nfc string }{
		// Already NFC: é and 34 acute accents.
		{"\u00e9" + strings.Repeat("\u0301", 34), "\u00e9" + strings.Repeat("\u0301", 34)},
		// Marks below (class 220) and above (230) interleaved: the 220s
		// first, then a and the first U+0301 compose.
		{"a" + strings.Repeat("\u0316\u0301", 20), "\u00e1" + strings.Repeat("\u0316", 20) + strings.Repeat("\u0301", 19)},
		// A CGJ the text has stays, and so does what norm gives a short run.
		{"x\u034f\u0301e\u0301\u0316", "x\u034f\u0301\u00e9\u0316"},
	} {
		if got := tok.Decode(tok.Encode(c.in, false)); got != c.nfc {
			t.Errorf("Decode(Encode(%+q))\n got %+q\nwant %+q", c.in, got, c.nfc)
		}
		want := tok.encodeNormalized(nil, c.nfc, new(scratch))
		if ids := tok.Encode(c.in, false); !slices.Equal(ids, want) {
			t.Errorf("%+q: ids %v, want those of its NFC %v", c.in, ids, want)
		}
	}
}

// TestNFCUnboundedAgrees: below the stream-safe limit, nfcUnbounded is
// norm.NFC exactly, on random text of letters, precomposed letters,
// combining marks of several classes, Hangul jamo and syllables, and
// singletons.
func TestNFCUnboundedAgrees(t *testing.T) {
	pool := []rune("aeoAEOuUnNcCsSzZ\u00e9\u00c5\u1e09\u0301\u0300\u0316\u0323\u0327\u0328\u0308\u0342\u0345\u05b0\u0591\u093c\u094d" +
		"\u1100\u1161\u11a8\uac00\u212b\u2126\u0f73\u0f75\u0cc6\u0cc2\u0cd5\u3099\u304b\u30fb \u034f")
	rng := rand.New(rand.NewPCG(7, 8))
	for range 20000 {
		r := make([]rune, 1+rng.IntN(12))
		for i := range r {
			r[i] = pool[rng.IntN(len(pool))]
		}
		s := string(r)
		if got, want := nfcUnbounded(s), norm.NFC.String(s); got != want {
			t.Fatalf("nfcUnbounded(%+q) = %+q, norm.NFC %+q", s, got, want)
		}
	}
}
