package tokenizer

import (
	"encoding/binary"
	"testing"
	"unicode/utf8"
)

var fuzzTexts = []string{
	"", "Hello, world!", " \n\n \t\t x", "I'm won'T 'ſ", "中文 🦙 😶‍🌫️ e\u0301", "<|im_start|>user\nhi<|im_end|>",
	"<think>\n\n</think>", "\xff\xfe\xc3", "a\xe4\xb8", "\u00a0\u3000\u2028\u0085", "1234567890", "<|im_end", "=====",
}

// FuzzEncode: any string encodes without panicking, and valid UTF-8
// round-trips to its NFC form.
func FuzzEncode(f *testing.F) {
	for _, s := range fuzzTexts {
		f.Add(s, false)
		f.Add(s, true)
	}
	q := loadQwen(f)
	f.Fuzz(func(t *testing.T, s string, specials bool) {
		ids := q.tok.Encode(s, specials)
		if !utf8.ValidString(s) {
			return
		}
		got, want := q.tok.Decode(ids), nfc(s)
		if specials {
			// The text around added tokens is normalized piece by piece,
			// as HF does, so only canonical equivalence is guaranteed.
			got = nfc(got)
		}
		if got != want {
			t.Fatalf("Decode(Encode(%q, %v)) = %q, want %q", s, specials, got, want)
		}
	})
}

// FuzzDecode: any ids decode without panicking, to valid UTF-8, and the
// stream decoder agrees with Decode.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0})
	f.Add(binary.LittleEndian.AppendUint32(nil, 151645))
	f.Add([]byte{0xe4, 0, 0, 0, 0xb8, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x80})
	q := loadQwen(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		ids := make([]int32, 0, len(b)/4)
		for len(b) >= 4 {
			// Signed, so negative and huge ids are covered too.
			ids = append(ids, int32(binary.LittleEndian.Uint32(b)))
			b = b[4:]
		}
		text := q.tok.Decode(ids)
		if !utf8.ValidString(text) {
			t.Fatalf("Decode(%v) = %q is not UTF-8", ids, text)
		}
		if s, _ := streamAll(q.tok, ids); s != text {
			t.Fatalf("stream %q, Decode %q", s, text)
		}
	})
}

// FuzzLoad: any blob either fails to load or gives a tokenizer that works.
// The fuzzer's mutations are applied under a fixed-up checksum, otherwise
// they would all stop at the CRC.
func FuzzLoad(f *testing.F) {
	_, blob := smallTokenizer(f)
	f.Add(blob)
	tiny := &Vocab{
		Tokens: [][]byte{[]byte("a"), []byte("b"), []byte("ab"), []byte("abb"), nil, []byte("\xe4"), []byte("\xb8")},
		Merges: []Merge{{0, 1, 2}, {2, 1, 3}},
		Added:  []AddedToken{{ID: 4, Content: "<|x|>", Special: true, RStrip: true}, {ID: 7, Content: "é", Normalized: true}},
		EOS:    "<|x|>",
		NFC:    true,
	}
	tinyBlob, err := tiny.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tinyBlob)
	f.Add(blob[:headerSize])
	f.Add([]byte("QTOK"))
	f.Fuzz(func(t *testing.T, b []byte) {
		exercise(t, b)
		exercise(t, withCRC(b))
	})
}
