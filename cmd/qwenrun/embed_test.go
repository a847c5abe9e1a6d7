package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/compiler"
	"github.com/qwenc/qwenc/internal/testmodel"
)

// compileBundled compiles a bundled model into the test binary's work
// directory (once per test).
func compileBundled(t *testing.T, name string) string {
	t.Helper()
	out := filepath.Join(work, name+".qbin")
	if _, err := os.Stat(out); err == nil {
		return out
	}
	dir := filepath.Join(work, name)
	if err := testmodel.Materialise(testmodel.Testdata(t, name), testmodel.Testdata(t, "tokenizer", "tokenizer.json.gz"), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := compiler.Compile(context.Background(), dir, compiler.Options{Output: out, MaxPrefill: 64, NoSync: true}); err != nil {
		t.Fatal(err)
	}
	return out
}

type scored struct {
	Index     int
	Embedding []float32
	Score     float64
	Document  string
}

func scoredLines(t *testing.T, out string) []scored {
	t.Helper()
	var rs []scored
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r scored
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		rs = append(rs, r)
	}
	return rs
}

// TestEmbedCommand: texts from arguments, a file and JSON lines on
// standard input give the reference's vectors, one JSON line each;
// --dimensions and --instruct as the Go API has them.
func TestEmbedCommand(t *testing.T) {
	model := compileBundled(t, "tiny-emb")
	cases := testmodel.ReadCases[testmodel.EmbedCase](t, testmodel.Testdata(t, "tiny-emb", "expected", "embeddings.json"))
	a, b := cases[0], cases[2]
	file := filepath.Join(t.TempDir(), "texts.txt")
	if err := os.WriteFile(file, []byte(a.Text+"\n\n"+b.Text+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdin := `"` + a.Text + `"` + "\n" + `{"text": "` + b.Text + `"}` + "\n"
	for _, run := range []struct {
		stdin string
		args  []string
	}{
		{"", []string{"embed", model, a.Text, b.Text}},
		{"", []string{"embed", "-f", file, model}},
		{stdin, []string{"embed", model}},
	} {
		out, errOut, code := qwenrun(t, run.stdin, run.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", run.args, code, errOut)
		}
		rs := scoredLines(t, out)
		if len(rs) != 2 || rs[1].Index != 1 {
			t.Fatalf("%v: %s", run.args, out)
		}
		for i, c := range []testmodel.EmbedCase{a, b} {
			if cos := testmodel.Cosine(rs[i].Embedding, c.Embedding); cos < 0.9999 {
				t.Errorf("%v, %q: cosine %.6f", run.args, c.Text, cos)
			}
		}
	}
	out, _, _ := qwenrun(t, "", "embed", "--dimensions", "8", model, a.Text)
	if rs := scoredLines(t, out); len(rs[0].Embedding) != 8 || testmodel.Cosine(rs[0].Embedding, a.Embedding[:8]) < 0.9999 {
		t.Errorf("--dimensions 8: %s", out)
	}
	q := cases[1]
	task, query, _ := strings.Cut(strings.TrimPrefix(q.Text, "Instruct: "), "\nQuery:")
	out, _, _ = qwenrun(t, "", "embed", "--instruct", task, model, query)
	if rs := scoredLines(t, out); testmodel.Cosine(rs[0].Embedding, q.Embedding) < 0.9999 {
		t.Errorf("--instruct: %s", out)
	}
}

// TestRerankCommand: documents scored as the reference scores them, the
// best first, --top-n kept; and the refusals.
func TestRerankCommand(t *testing.T) {
	model := compileBundled(t, "tiny-rerank")
	var docs []string
	want := map[string]float64{}
	for _, c := range testmodel.ReadCases[testmodel.RerankCase](t, testmodel.Testdata(t, "tiny-rerank", "expected", "rerank.json")) {
		if c.Query == "What is the capital of China?" && c.Instruction == nil {
			docs = append(docs, c.Document)
			want[c.Document] = c.Score
		}
	}
	out, errOut, code := qwenrun(t, "", append([]string{"rerank", model, "--query", "What is the capital of China?"}, docs...)...)
	if code != 0 || len(docs) < 2 {
		t.Fatalf("exit %d: %s (%d documents)", code, errOut, len(docs))
	}
	rs := scoredLines(t, out)
	for i, r := range rs {
		if d := r.Score - want[r.Document]; d > 0.005 || d < -0.005 || docs[r.Index] != r.Document {
			t.Errorf("%+v: the reference's score %.5f", r, want[r.Document])
		}
		if i > 0 && r.Score > rs[i-1].Score {
			t.Errorf("out of order: %s", out)
		}
	}
	out, _, _ = qwenrun(t, "", "rerank", "--top-n", "1", model, "-q", "What is the capital of China?", docs[0], docs[1])
	if rs := scoredLines(t, out); len(rs) != 1 {
		t.Errorf("--top-n 1: %s", out)
	}
	emb := compileBundled(t, "tiny-emb")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rerank", model, "doc"}, "rerank: --query is required"},
		{[]string{"rerank", model, "-q", "q"}, "rerank: no input"},
		{[]string{"embed", model, "x"}, "embeddings need an embedding model"},
		{[]string{"rerank", emb, "-q", "q", "d"}, "reranking needs a reranker"},
		{[]string{"embed", "--dimensions", "65", emb, "x"}, "dimensions 65: want 1 to 64"},
		{[]string{"embed", "--ctx", "16", emb, strings.Repeat("word ", 40)}, "input 0: the prompt has 42 tokens, more than the context of 16"},
		{[]string{"embed", emb}, "embed: no input"},
		{[]string{"embed", emb, "x", ""}, "input 1: an empty text has no embedding"},
	} {
		_, errOut, code := qwenrun(t, "", tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q, want %q", tc.args, code, errOut, tc.want)
		}
	}
	if out, _, code := qwenrun(t, "", "embed", "--ctx", "16", "--truncate", emb, strings.Repeat("word ", 40)); code != 0 || len(scoredLines(t, out)) != 1 {
		t.Errorf("--truncate: exit %d, %s", code, out)
	}
}

// TestDraftFlags: --draft ngram, a draft model, both, and drafts under
// --json-object keep the text and say what they drafted; the draft
// flags' refusals, a draft model of another vocabulary among them.
func TestDraftFlags(t *testing.T) {
	model := compileBundled(t, "qwen3-go-demo")
	prompt := "func (s *Set) Add(v int) { s.m[v] = struct{}{} }\nfunc (s *Set) Has(v int) bool {"
	var outs [2]struct {
		GeneratedIDs []int `json:"generated_ids"`
		Timings      struct {
			Drafted  int `json:"drafted_tokens"`
			Accepted int `json:"accepted_tokens"`
		}
	}
	for _, extra := range [][]string{{"--draft", "ngram", "--draft-max", "8"}, {"--draft", model}, {"--draft", "ngram," + model, "--draft-p-min", "0"},
		{"--draft", model, "--json-object"}} {
		for i, flags := range [][]string{nil, extra} {
			if slices.Contains(extra, "--json-object") {
				flags = append(flags, "--json-object")
			}
			out, errOut, code := qwenrun(t, "", append([]string{model, "-p", prompt, "-n", "60", "--temp", "0", "--json"}, flags...)...)
			if code != 0 {
				t.Fatalf("%v: exit %d: %s", flags, code, errOut)
			}
			if err := json.Unmarshal([]byte(out), &outs[i]); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(outs[0].GeneratedIDs, outs[1].GeneratedIDs) || outs[1].Timings.Drafted == 0 {
			t.Errorf("with %v %v (%+v), without %v", extra, outs[1].GeneratedIDs, outs[1].Timings, outs[0].GeneratedIDs)
		}
	}
	// The Qwen3.5 demo drafting with its MTP block, one guess a step and
	// chains of 2, against --draft none.
	q35 := compileBundled(t, "qwen35-go-demo")
	for _, extra := range [][]string{{"--draft", "mtp"}, {"--draft", "mtp,ngram", "--draft-max", "2"}} {
		for i, flags := range [][]string{{"--draft", "none"}, extra} {
			out, errOut, code := qwenrun(t, "", append([]string{q35, "-p", prompt, "-n", "40", "--temp", "0", "--json"}, flags...)...)
			if code != 0 {
				t.Fatalf("%v: exit %d: %s", flags, code, errOut)
			}
			if err := json.Unmarshal([]byte(out), &outs[i]); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(outs[0].GeneratedIDs, outs[1].GeneratedIDs) || outs[1].Timings.Drafted == 0 || outs[0].Timings.Drafted != 0 {
			t.Errorf("with %v %v (%+v), without %v (%+v)", extra, outs[1].GeneratedIDs, outs[1].Timings, outs[0].GeneratedIDs, outs[0].Timings)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--draft", "model.qbin"}, `--draft "model.qbin": want ngram, mtp or a draft model's .qbin file`},
		{[]string{"--draft-max", "4"}, "--draft-max needs --draft ngram, mtp or FILE.qbin"},
		{[]string{"--draft", "mtp"}, "MTP drafts: the model has no MTP block"},
		{[]string{"--draft", "ngram", "--draft-max", "0"}, "--draft-max 0: want 1 or more"},
		{[]string{"--draft", "ngram", "--draft-min", "9", "--draft-max", "4"}, "--draft-min 9: want 1 to --draft-max (4)"},
		{[]string{"--draft", "ngram", "--draft-p-min", "1"}, "--draft-p-min 1: want 0 to less than 1"},
		{[]string{"--draft", model + "," + model}, "ngram, mtp and one draft model, each once at most"},
		{[]string{"--draft", compileBundled(t, "tiny-rerank")}, "its vocabulary is 151669 tokens in 151669 rows, the model's 151669 tokens in 151936 rows: a draft model must share the vocabulary"},
	} {
		_, errOut, code := qwenrun(t, "", append([]string{model, "-p", "x"}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q, want %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestBenchSpec: bench-spec's table, a row per prompt of the directory,
// every one with the same text with drafts as without.
func TestBenchSpec(t *testing.T) {
	model := compileBundled(t, "qwen3-go-demo")
	dir := filepath.Join(testmodel.Testdata(t, "spec-prompts"))
	out, errOut, code := qwenrun(t, "", "bench-spec", "--threads", "2", "--tokens", "24", "--rounds", "1", "--draft", "ngram,"+model, "--prompts", dir, model)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	files, _ := os.ReadDir(dir)
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 8 && strings.HasSuffix(f[6], "x") {
			rows++
			if f[7] != "yes" {
				t.Errorf("not the same text: %s", line)
			}
		}
	}
	if rows != len(files) {
		t.Errorf("%d rows for %d prompts:\n%s", rows, len(files), out)
	}
	if _, errOut, code := qwenrun(t, "", "bench-spec", model); code == 0 || !strings.Contains(errOut, "want --draft or --prediction") {
		t.Errorf("without drafts: exit %d, %s", code, errOut)
	}
}
