package grammar

import (
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/qwenc/qwenc/format/tokenizer"
	"github.com/qwenc/qwenc/internal/testmodel"
)

var (
	vocabOnce sync.Once
	vocabVal  *Vocab
	tokVal    *tokenizer.Tokenizer
	vocabErr  error
)

// qwenVocab is the real Qwen vocabulary, padded to Qwen3's 151,936 logits
// as the models' heads are.
func qwenVocab(t testing.TB) (*Vocab, *tokenizer.Tokenizer) {
	t.Helper()
	vocabOnce.Do(func() {
		var tj, cfg, blob []byte
		if tj, vocabErr = os.ReadFile(testmodel.TokenizerJSON(t)); vocabErr != nil {
			return
		}
		if cfg, vocabErr = os.ReadFile(testmodel.Testdata(t, "tiny-a", "tokenizer_config.json")); vocabErr != nil {
			return
		}
		var v *tokenizer.Vocab
		if v, vocabErr = tokenizer.LoadHF(tj, cfg); vocabErr != nil {
			return
		}
		if blob, vocabErr = v.MarshalBinary(); vocabErr != nil {
			return
		}
		if tokVal, vocabErr = tokenizer.Load(blob); vocabErr != nil {
			return
		}
		var eos []int32
		for _, s := range []string{"<|im_end|>", "<|endoftext|>"} {
			id, _ := tokVal.TokenID(s)
			eos = append(eos, id)
		}
		vocabVal = VocabOf(tokVal, 151936, eos)
	})
	if vocabErr != nil {
		t.Fatal(vocabErr)
	}
	return vocabVal, tokVal
}

// referenceMask is the plain definition the tables and walks must agree
// with: each token's bytes fed to the stacks one by one.
func referenceMask(m *Matcher) Mask {
	v := m.g.vocab
	mask := v.NewMask()
	if m.done {
		return mask
	}
	for id := range int32(v.size) {
		switch {
		case m.isEOS(id):
			if m.CanEnd() {
				mask.set(id)
			}
		case v.special[id]:
			if len(m.s.advanceToken(nil, m.cur.st, id)) > 0 {
				mask.set(id)
			}
		case v.text[id] != nil:
			st := m.cur.st
			for _, c := range v.text[id] {
				if st = m.s.advanceByte(nil, st, c); len(st) == 0 {
					break
				}
			}
			if len(st) > 0 {
				mask.set(id)
			}
		}
	}
	return mask
}

// jsonish is a small JSON grammar by hand: objects, arrays, strings with
// escapes, integers, true, false, null, and bounded whitespace.
func jsonish(b *Builder) int32 {
	value := b.Rule("value")
	ws := b.Repeat("ws", []Elem{b.Byte(' ')}, 0, 2)
	var strChar, digit, nonzero ByteSet
	strChar.Add(0x20, 0xff)
	strChar[0] &^= 1 << '"'
	strChar[1] &^= 1 << ('\\' - 64)
	digit.Add('0', '9')
	nonzero.Add('1', '9')
	var esc ByteSet
	for _, c := range `"\/bfnrt` {
		esc.Add(byte(c), byte(c))
	}
	char := b.Alt("char", []Elem{b.Set(strChar)}, Seq(b.Byte('\\'), b.Set(esc)))
	str := b.New("string", Seq(b.Byte('"'), b.Repeat("chars", []Elem{char}, 0, -1), b.Byte('"')))
	integer := b.Alt("integer", b.Lit("0"), Seq(b.Optional("minus", b.Lit("-")), b.Set(nonzero), b.Repeat("digits", []Elem{b.Set(digit)}, 0, 6)))
	member := Seq(Ref(str), ws, b.Byte(':'), ws, Ref(value))
	members := b.Repeat("members", Seq(b.Byte(','), ws, member), 0, -1)
	object := b.Alt("object", Seq(b.Byte('{'), ws, b.Byte('}')), Seq(b.Byte('{'), ws, member, members, ws, b.Byte('}')))
	items := b.Repeat("items", Seq(b.Byte(','), ws, Ref(value)), 0, 3)
	array := b.Alt("array", Seq(b.Byte('['), ws, b.Byte(']')), Seq(b.Byte('['), ws, Ref(value), items, ws, b.Byte(']')))
	b.Define(value, []Elem{object}, []Elem{array}, []Elem{Ref(str)}, []Elem{integer}, b.Lit("true"), b.Lit("false"), b.Lit("null"))
	return b.New("root", Seq(ws, Ref(value)))
}

// TestMasksAgainstReference follows random paths through grammars, with
// the real vocabulary, and checks every step's mask against the plain
// definition.
func TestMasksAgainstReference(t *testing.T) {
	v, _ := qwenVocab(t)
	b := NewBuilder()
	g, err := b.Build(jsonish(b), v)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", g.Stats())
	checkWalks(t, g, 3, 25)
}

// TestLoopMasksAgainstReference: counted loops (Builder.Loop), whose
// tables are built for any count, give the reference's masks at every
// count: below min, near max, and through a rule with no step.
func TestLoopMasksAgainstReference(t *testing.T) {
	v, _ := qwenVocab(t)
	b := NewBuilder()
	var strChar ByteSet
	strChar.Add(0x20, 0x7e)
	strChar[0] &^= 1 << '"'
	char := b.Alt("char", []Elem{b.Set(strChar)}, b.Lit(`\n`))
	str := b.New("string", Seq(b.Byte('"'), b.Repeat("chars", []Elem{char}, 2, 9), b.Byte('"')))
	// (ab)* then c, at least 3 and at most 7 letters; c leads to a rule
	// without a step.
	a, bb, c := b.Rule("a"), b.Rule("b"), b.Rule("c")
	b.Define(a, Seq(b.Byte('a'), Ref(bb)), Seq(b.Byte('c'), Ref(c)))
	b.Define(bb, Seq(b.Byte('b'), Ref(a)))
	b.Define(c, nil)
	word := b.New("word", Seq(b.Byte('<'), b.Loop(3, 7, a, bb, c), b.Byte('>')))
	// Room for the longest token: the tables alone decide.
	long := b.New("long", Seq(b.Byte('\''), b.Repeat("long", []Elem{char}, 1, 300), b.Byte('\'')))
	item := b.Alt("item", []Elem{Ref(str)}, []Elem{Ref(word)}, []Elem{Ref(long)})
	list := b.New("list", Seq(b.Byte('['), item, b.Repeat("items", Seq(b.Byte(','), item), 1, 6), b.Byte(']')))
	g, err := b.Build(b.New("root", []Elem{Ref(list)}), v)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", g.Stats())
	checkWalks(t, g, 5, 40)
}

// checkWalks follows random paths through g and checks every step's mask
// against the reference.
func checkWalks(t *testing.T, g *Grammar, seeds uint64, maxSteps int) {
	t.Helper()
	v := g.vocab
	mask := v.NewMask()
	steps := 0
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 1))
		m := g.NewMatcher()
		var text []byte
		for step := 0; step < maxSteps && !m.Done(); step++ {
			m.Fill(mask)
			want := referenceMask(m)
			for i := range want {
				if mask[i] != want[i] {
					t.Fatalf("seed %d after %q: mask word %d is %x, want %x (%d tokens, want %d)", seed, text, i, mask[i], want[i], mask.Count(), want.Count())
				}
			}
			var allowed []int32
			for id := range int32(v.size) {
				if mask.Has(id) {
					allowed = append(allowed, id)
				}
			}
			if len(allowed) == 0 {
				t.Fatalf("seed %d after %q: nothing allowed", seed, text)
			}
			id := allowed[rng.IntN(len(allowed))]
			if err := m.Accept(id); err != nil {
				t.Fatal(err)
			}
			text = append(text, v.text[id]...)
			steps++
		}
	}
	t.Logf("%d steps checked", steps)
}

// TestPrefix: Prefix counts the tokens a walk through the grammar takes,
// up to a token it refuses, and leaves the matcher where it was.
func TestPrefix(t *testing.T) {
	v, tok := qwenVocab(t)
	b := NewBuilder()
	g, err := b.Build(jsonish(b), v)
	if err != nil {
		t.Fatal(err)
	}
	m := g.NewMatcher()
	if err := m.Accept(tok.Encode("{", false)[0]); err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(`"a": [1, 2}, "b"`, false)
	// The walk goes as far as "2"; "}" closes no array.
	want := len(tok.Encode(`"a": [1, 2`, false))
	if got := m.Prefix(ids); got != want {
		t.Errorf("Prefix(%q) = %d, want %d", tok.Decode(ids), got, want)
	}
	for i, id := range ids[:want] {
		if err := m.Accept(id); err != nil {
			t.Fatalf("token %d (%q) after Prefix: %v", i, tok.Decode([]int32{id}), err)
		}
	}
	if m.Accept(ids[want]) == nil {
		t.Errorf("%q accepted", tok.Decode(ids[want:want+1]))
	}
	if got := m.Prefix(nil); got != 0 {
		t.Errorf("Prefix(nil) = %d", got)
	}
}
