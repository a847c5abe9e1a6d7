package tokenizer

import (
	"slices"
	"testing"
)

// TestCases checks the reference cases (Hugging Face tokenizers output) in
// both directions.
func TestCases(t *testing.T) {
	q := loadQwen(t)
	for i, c := range loadCases(t) {
		got := q.tok.Encode(c.Text, c.SpecialTokens)
		if !slices.Equal(got, c.IDs) {
			t.Errorf("case %d %q (specials=%v):\n encode = %v\n want     %v", i, c.Text, c.SpecialTokens, got, c.IDs)
		}
		if dec, want := q.tok.Decode(c.IDs), nfc(c.Text); dec != want {
			t.Errorf("case %d: decode = %q, want %q", i, dec, want)
		}
	}
}
