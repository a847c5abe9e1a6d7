package tokenizer

import (
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestBinaryRoundTrip(t *testing.T) {
	tok, blob := smallTokenizer(t)
	again, err := Load(blob)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"hello world", "<|end|>aaaaaaa 中中", "x"} {
		if a, b := tok.Encode(s, true), again.Encode(s, true); !slices.Equal(a, b) {
			t.Fatalf("%q: %v vs %v", s, a, b)
		}
	}
	// The real vocabulary: through the blob, encodings are those of the
	// naive reference over the Vocab (TestEncodeMatchesReference covers
	// much more; this checks Load of a second copy).
	q := loadQwen(t)
	tok2, err := Load(slices.Clone(q.blob))
	if err != nil {
		t.Fatal(err)
	}
	ref := newRefEncoder(q.vocab)
	for _, s := range []string{benchText, "Hello, y'all! 😁 ?我想在apple工作1314151天～"} {
		if got, want := tok2.Encode(s, false), ref.encode(s); !slices.Equal(got, want) {
			t.Fatalf("%q: %v, want %v", s, got, want)
		}
	}
}

func TestLoadTruncated(t *testing.T) {
	_, blob := smallTokenizer(t)
	for n := range len(blob) {
		if _, err := Load(blob[:n]); err == nil {
			t.Fatalf("Load of the first %d of %d bytes succeeded", n, len(blob))
		}
	}
	if _, err := Load(append(slices.Clone(blob), 0)); err == nil {
		t.Fatal("Load with a trailing byte succeeded")
	}
}

func TestLoadCorrupt(t *testing.T) {
	_, blob := smallTokenizer(t)
	rng := rand.New(rand.NewPCG(9, 10))
	for range 2000 {
		b := slices.Clone(blob)
		for range 1 + rng.IntN(3) {
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		}
		if _, err := Load(b); err == nil {
			t.Fatal("Load of a corrupted blob succeeded")
		}
	}
}

// withCRC fixes the checksum of a blob so that a test reaches the
// structural checks behind it.
func withCRC(b []byte) []byte {
	if len(b) >= headerSize {
		le.PutUint32(b[crcOffset:], checksum(b))
	}
	return b
}

func TestLoadStructure(t *testing.T) {
	_, blob := smallTokenizer(t)
	field := func(i int, v uint32) []byte {
		b := slices.Clone(blob)
		le.PutUint32(b[4+4*i:], v)
		return withCRC(b)
	}
	cases := []struct {
		name string
		blob []byte
		want string
	}{
		{"magic", withCRC(append([]byte("QTOX"), blob[4:]...)), "bad magic"},
		{"version", field(0, 2), "format version 2"},
		{"flags", field(1, 6), "unknown header flags"},
		{"ids", field(2, MaxIDs+1), "more than"},
		{"ids size", field(2, 1001), "header describes"},
		{"added", field(4, 5000), "added tokens but only"},
		{"probe", field(7, 1<<20), "probe lengths"},
		{"table", field(6, 40), "hash table sizes"},
		{"eos", field(10, 5000), "eos id 5000 out of range"},
		{"pre-tokenizer", field(13, 2), "pre-tokenizer 2 is not one this reader knows"},
		{"crc", func() []byte { b := slices.Clone(blob); b[len(b)-1] ^= 1; return b }(), "checksum"},
	}
	for _, c := range cases {
		_, err := Load(c.blob)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	// Structural corruption that the checksum does not hide: random flips
	// with the CRC recomputed must give an error or a tokenizer that works.
	rng := rand.New(rand.NewPCG(11, 12))
	for range 3000 {
		b := slices.Clone(blob)
		for range 1 + rng.IntN(4) {
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		}
		exercise(t, withCRC(b))
	}
}

// exercise loads b and, if it loads, runs every entry point on it; the
// point is that nothing panics.
func exercise(t testing.TB, b []byte) {
	tok, err := Load(b)
	if err != nil {
		return
	}
	for _, s := range []string{"hello world<|end|>", "aaaaaaaaa 中\xff<think>>", "word é!", strings.Repeat("a", 100)} {
		ids := tok.Encode(s, true)
		tok.Decode(ids)
		tok.Decode([]int32{-1, 0, 1 << 30, int32(tok.VocabSize()) - 1, int32(tok.VocabSize())})
	}
	d := tok.NewStreamDecoder()
	for id := int32(-1); id <= int32(tok.VocabSize()); id++ {
		d.Add(id)
		tok.IsSpecial(id)
		tok.TokenBytes(id)
	}
	d.Flush()
	tok.TokenID("<|end|>")
	tok.EOS()
}

// TestSpecTableSize: SPEC.md's rule for a hash table's slot count is the
// one tableLog2 follows, so that another writer gives the same bytes.
func TestSpecTableSize(t *testing.T) {
	b, err := os.ReadFile("../SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	const rule = "slot counts are the smallest power of two with at least `keys + floor(keys / 2) + 1` slots."
	if spec := strings.Join(strings.Fields(string(b)), " "); !strings.Contains(spec, rule) {
		t.Errorf("SPEC.md does not say %q", rule)
	}
	for keys := range 5000 {
		need := keys + keys/2 + 1
		if got := 1 << tableLog2(keys); got < need || got/2 >= need && got > 1 {
			t.Fatalf("%d keys: %d slots, want the smallest power of two of at least %d", keys, got, need)
		}
	}
}

// TestNoMerges: a vocabulary of no merges (every pre-token split into
// bytes) encodes and loads. Its merge table is one empty slot, which the
// loader's range check read as holding merge 0 of none, and MarshalBinary
// reported as an internal error.
func TestNoMerges(t *testing.T) {
	v := smallVocab(t)
	v.Merges = nil
	tok, _ := loadVocab(t, v)
	if got := tok.Encode("ab", false); len(got) != 2 {
		t.Errorf("\"ab\" encodes as %v, want its two bytes", got)
	}
}
