package report

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/qwenc/qwenc/qwen"
)

// ReadTexts gathers the texts qwenrun embed embeds and the documents
// qwenrun rerank scores: args, the arguments after the model; or the
// lines of the file at path, --file's, "-" for stdin; or else JSON lines
// on stdin.
func ReadTexts(args []string, path string, stdin io.Reader) ([]string, error) {
	switch {
	case len(args) > 0 && path != "":
		return nil, errors.New("give the texts as arguments or --file, not both")
	case len(args) > 0:
		return args, nil
	case path == "-":
		return ReadLines(stdin)
	case path != "":
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return ReadLines(f)
	}
	texts, err := ReadJSONTexts(stdin)
	if err != nil {
		return nil, fmt.Errorf("standard input, %w", err)
	}
	return texts, nil
}

// ReadLines reads texts to embed or documents to rerank, one a line,
// blank lines left out.
func ReadLines(r io.Reader) ([]string, error) {
	var texts []string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		if line := strings.TrimRight(sc.Text(), "\r"); line != "" {
			texts = append(texts, line)
		}
	}
	return texts, sc.Err()
}

// ReadJSONTexts reads texts as a stream of JSON values (JSON lines), each
// a string or {"text": ...}.
func ReadJSONTexts(r io.Reader) ([]string, error) {
	var texts []string
	dec := json.NewDecoder(r)
	for n := 1; ; n++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			return texts, nil
		} else if err != nil {
			return nil, fmt.Errorf("value %d: %w", n, err)
		}
		var text string
		var obj struct {
			Text *string `json:"text"`
		}
		switch {
		case json.Unmarshal(raw, &text) == nil:
		case json.Unmarshal(raw, &obj) == nil && obj.Text != nil:
			text = *obj.Text
		default:
			return nil, fmt.Errorf("value %d: want a string or {\"text\": ...}", n)
		}
		texts = append(texts, text)
	}
}

// WriteEmbeddings writes one line per vector, {"index", "embedding"}, in
// the inputs' order.
func WriteEmbeddings(w io.Writer, e qwen.Embeddings) error {
	enc := json.NewEncoder(w)
	for i, v := range e.Vectors {
		if err := enc.Encode(struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}{i, v}); err != nil {
			return err
		}
	}
	return nil
}

// WriteReranking writes the best n results (all for n <= 0), one line
// each, {"index", "score", "document"}: the best first, each with its
// document of docs, the request's.
func WriteReranking(w io.Writer, r qwen.Reranking, docs []string, n int) error {
	res := r.Results
	if n > 0 {
		res = res[:min(n, len(res))]
	}
	enc := json.NewEncoder(w)
	for _, x := range res {
		if err := enc.Encode(struct {
			Index    int     `json:"index"`
			Score    float64 `json:"score"`
			Document string  `json:"document"`
		}{x.Index, x.Score, docs[x.Index]}); err != nil {
			return err
		}
	}
	return nil
}
