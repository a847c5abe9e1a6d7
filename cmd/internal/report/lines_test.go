package report

import (
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/qwen"
)

// ReadLines: one text a line, blank ones left out; ReadJSONTexts: JSON
// values, each a string or {"text": ...}, the bad one named by its place.
func TestReadInputs(t *testing.T) {
	got, err := ReadLines(strings.NewReader("one\r\n\ntwo words\n"))
	if want := []string{"one", "two words"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("lines: %q, %v; want %q", got, err, want)
	}
	got, err = ReadJSONTexts(strings.NewReader(`"a" {"text": "b\nc"}` + "\n" + `{"text": ""}`))
	if want := []string{"a", "b\nc", ""}; err != nil || !slices.Equal(got, want) {
		t.Errorf("JSON: %q, %v; want %q", got, err, want)
	}
	for in, want := range map[string]string{
		`"a" 3`:            `value 2: want a string or {"text": ...}`,
		`{"txt": "a"}`:     `value 1: want a string or {"text": ...}`,
		`"a" {"text": "b"`: "value 2: unexpected EOF",
		`{"text": ["a"]}`:  `value 1: want a string or {"text": ...}`,
	} {
		if _, err := ReadJSONTexts(strings.NewReader(in)); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

// The JSON lines of embed and rerank: a vector per input in order; the
// best n documents, each with its index and text.
func TestWriteJSONLines(t *testing.T) {
	var b strings.Builder
	if err := WriteEmbeddings(&b, qwen.Embeddings{Vectors: [][]float32{{1, 0}, {0.5, -0.25}}}); err != nil {
		t.Fatal(err)
	}
	if want := "{\"index\":0,\"embedding\":[1,0]}\n{\"index\":1,\"embedding\":[0.5,-0.25]}\n"; b.String() != want {
		t.Errorf("embeddings %q, want %q", b.String(), want)
	}
	r := qwen.Reranking{Results: []qwen.RerankResult{{Index: 2, Score: 0.75}, {Index: 0, Score: 0.5}, {Index: 1, Score: 0.125}}}
	docs := []string{"zero", "one", "two"}
	for n, want := range map[int]string{
		0: "{\"index\":2,\"score\":0.75,\"document\":\"two\"}\n{\"index\":0,\"score\":0.5,\"document\":\"zero\"}\n{\"index\":1,\"score\":0.125,\"document\":\"one\"}\n",
		1: "{\"index\":2,\"score\":0.75,\"document\":\"two\"}\n",
		5: "{\"index\":2,\"score\":0.75,\"document\":\"two\"}\n{\"index\":0,\"score\":0.5,\"document\":\"zero\"}\n{\"index\":1,\"score\":0.125,\"document\":\"one\"}\n",
	} {
		b.Reset()
		if err := WriteReranking(&b, r, docs, n); err != nil || b.String() != want {
			t.Errorf("best %d: %q, %v; want %q", n, b.String(), err, want)
		}
	}
}
