package report

import (
	"io"
	"os"
	"path/filepath"
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

// ReadTexts takes the arguments, or --file's lines ("-" for stdin), or
// else JSON lines on stdin; the arguments and --file together are
// refused.
func TestReadTexts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "texts")
	if err := os.WriteFile(path, []byte("one\n\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdin := func() io.Reader { return strings.NewReader("\"a\"\n{\"text\": \"b\"}\n") }
	for _, tc := range []struct {
		args []string
		path string
		want []string
	}{
		{[]string{"x", "y"}, "", []string{"x", "y"}},
		{nil, path, []string{"one", "two"}},
		{nil, "-", []string{"\"a\"", "{\"text\": \"b\"}"}},
		{nil, "", []string{"a", "b"}},
	} {
		got, err := ReadTexts(tc.args, tc.path, stdin())
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q, %q: %q, %v; want %q", tc.args, tc.path, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		args       []string
		path, want string
	}{
		{[]string{"x"}, path, "give the texts as arguments or --file, not both"},
		{nil, path + ".missing", "open " + path + ".missing: no such file or directory"},
	} {
		if _, err := ReadTexts(tc.args, tc.path, stdin()); err == nil || err.Error() != tc.want {
			t.Errorf("%q, %q: %v, want %q", tc.args, tc.path, err, tc.want)
		}
	}
	if _, err := ReadTexts(nil, "", strings.NewReader("3")); err == nil || err.Error() != `standard input, value 1: want a string or {"text": ...}` {
		t.Errorf("a number on stdin: %v", err)
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
