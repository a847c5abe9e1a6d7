package testmodel

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

// EmbedCase is one case of tiny-emb's expected/embeddings.json.
type EmbedCase struct {
	Text      string    `json:"text"`
	IDs       []int32   `json:"ids"` // the text's tokens, <|endoftext|> appended
	Embedding []float64 `json:"embedding"`
}

// RerankCase is one case of tiny-rerank's expected/rerank.json.
type RerankCase struct {
	Name        string  `json:"name"`
	Query       string  `json:"query"`
	Document    string  `json:"document"`
	Instruction *string `json:"instruction"` // nil: the default
	IDs         []int32 `json:"ids"`         // the whole prompt's tokens
	LogitYes    float64 `json:"logit_yes"`
	LogitNo     float64 `json:"logit_no"`
	Score       float64 `json:"score"`
}

// ReadCases reads the cases of a reference file ({"cases": [...]}).
func ReadCases[T any](tb testing.TB, path string) []T {
	tb.Helper()
	var r struct{ Cases []T }
	ReadJSON(tb, path, &r)
	return r.Cases
}

// ReadJSON reads the JSON file at path into v, failing the test if it
// cannot.
func ReadJSON(tb testing.TB, path string, v any) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
}

// Cosine is the cosine similarity of a vector and a reference one (of at
// least its length).
func Cosine(a []float32, b []float64) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * b[i]
		aa += float64(a[i]) * float64(a[i])
		bb += b[i] * b[i]
	}
	return ab / math.Sqrt(aa*bb)
}
