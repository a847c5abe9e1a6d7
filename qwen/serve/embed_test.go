package serve

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/internal/testmodel"
	"github.com/qwenc/qwenc/qwen"
)

// serveBundled serves a bundled model over loopback HTTP.
func serveBundled(t *testing.T, name string) (*testServer, *qwen.Model) {
	t.Helper()
	return serveFile(t, compiledPath(t, name))
}

// serveFile serves a compiled model over real HTTP on loopback.
func serveFile(t *testing.T, path string) (*testServer, *qwen.Model) {
	t.Helper()
	m, err := qwen.Open(path, qwen.WithThreads(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	s := NewServer(m, ServerOptions{})
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return &testServer{Server: s, m: m, url: hs.URL}, m
}

// TestEmbeddingEndpoints: /v1/embeddings (float and base64, dimensions,
// token ids), /api/embed and /api/embeddings give the Go API's vectors,
// which are the reference's.
func TestEmbeddingEndpoints(t *testing.T) {
	ts, m := serveBundled(t, "tiny-emb")
	cases := testmodel.ReadCases[testmodel.EmbedCase](t, testmodel.Testdata(t, "tiny-emb", "expected", "embeddings.json"))
	a, b := cases[0], cases[2]
	want, err := m.Embed(context.Background(), qwen.EmbedRequest{Inputs: []string{a.Text, b.Text}})
	if err != nil {
		t.Fatal(err)
	}
	same := func(what string, got []float32, i int) {
		t.Helper()
		if len(got) != len(want.Vectors[i]) {
			t.Fatalf("%s: %d values, want %d", what, len(got), len(want.Vectors[i]))
		}
		for j := range got {
			if math.Abs(float64(got[j]-want.Vectors[i][j])) > 1e-6 {
				t.Fatalf("%s: value %d is %g, the Go API's %g", what, j, got[j], want.Vectors[i][j])
			}
		}
	}
	var oa struct {
		Object string
		Data   []struct {
			Object    string
			Index     int
			Embedding []float32
		}
		Model string
		Usage struct{ PromptTokens, TotalTokens int } `json:"usage"`
	}
	resp, body := ts.post(t, "/v1/embeddings", `{"model": "tiny-emb", "input": [`+jsonString(a.Text)+`, `+jsonString(b.Text)+`]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	unmarshal(t, body, &oa)
	if oa.Object != "list" || len(oa.Data) != 2 || oa.Data[1].Index != 1 || oa.Data[0].Object != "embedding" || oa.Model != "tiny-emb" {
		t.Fatalf("%s", body)
	}
	if !strings.Contains(body, `"prompt_tokens":`+itoa(len(a.IDs)+len(b.IDs))) {
		t.Errorf("usage: %s", body)
	}
	same("float", oa.Data[0].Embedding, 0)
	same("float", oa.Data[1].Embedding, 1)

	var b64 struct{ Data []struct{ Embedding string } }
	resp, body = ts.post(t, "/v1/embeddings", `{"model": "tiny-emb", "input": `+jsonString(a.Text)+`, "encoding_format": "base64"}`)
	unmarshal(t, body, &b64)
	raw, err := base64.StdEncoding.DecodeString(b64.Data[0].Embedding)
	if err != nil || len(raw) != 4*64 {
		t.Fatalf("%d %s: %v", resp.StatusCode, body, err)
	}
	dec := make([]float32, 64)
	for i := range dec {
		dec[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	same("base64", dec, 0)

	resp, body = ts.post(t, "/v1/embeddings", `{"model": "tiny-emb", "input": [`+ids(a.IDs)+`], "dimensions": 8}`)
	unmarshal(t, body, &oa)
	if resp.StatusCode != 200 || len(oa.Data) != 1 || len(oa.Data[0].Embedding) != 8 || testmodel.Cosine(oa.Data[0].Embedding, a.Embedding[:8]) < 0.9999 {
		t.Fatalf("token ids, 8 dimensions: %d %s", resp.StatusCode, body)
	}

	var ol struct {
		Model           string
		Embeddings      [][]float32
		PromptEvalCount int `json:"prompt_eval_count"`
	}
	resp, body = ts.post(t, "/api/embed", `{"model": "tiny-emb", "input": [`+jsonString(a.Text)+`, `+jsonString(b.Text)+`]}`)
	unmarshal(t, body, &ol)
	if resp.StatusCode != 200 || len(ol.Embeddings) != 2 || ol.PromptEvalCount != len(a.IDs)+len(b.IDs) {
		t.Fatalf("/api/embed: %d %s", resp.StatusCode, body)
	}
	same("/api/embed", ol.Embeddings[1], 1)
	var old struct{ Embedding []float32 }
	resp, body = ts.post(t, "/api/embeddings", `{"model": "tiny-emb", "prompt": `+jsonString(a.Text)+`}`)
	unmarshal(t, body, &old)
	if resp.StatusCode != 200 {
		t.Fatalf("/api/embeddings: %d %s", resp.StatusCode, body)
	}
	same("/api/embeddings", old.Embedding, 0)
	_, metrics := ts.get(t, "/metrics")
	if !strings.Contains(metrics, "qwenrun_scored_tokens_total ") || strings.Contains(metrics, "qwenrun_scored_tokens_total 0\n") {
		t.Errorf("the scored tokens are not counted")
	}
}

// TestRerankEndpoint: /v1/rerank and /rerank sort by score, keep top_n,
// return the documents when asked, and give the Go API's scores.
func TestRerankEndpoint(t *testing.T) {
	ts, m := serveBundled(t, "tiny-rerank")
	docs := []string{"Gravity is a force.", "The capital of China is Beijing.", "Beijing is in China.", ""}
	want, err := m.Rerank(context.Background(), qwen.RerankRequest{Query: "What is the capital of China?", Documents: docs})
	if err != nil {
		t.Fatal(err)
	}
	// /v2/rerank: Cohere's v2 client's, which vLLM serves too.
	for _, path := range []string{"/v1/rerank", "/rerank", "/v2/rerank"} {
		var rr struct {
			Results []struct {
				Index          int
				RelevanceScore float64 `json:"relevance_score"`
				Document       *struct{ Text string }
			}
		}
		resp, body := ts.post(t, path, `{"query": "What is the capital of China?", "documents": ["Gravity is a force.", "The capital of China is Beijing.", "Beijing is in China.", ""], "top_n": 3, "return_documents": true}`)
		unmarshal(t, body, &rr)
		if resp.StatusCode != 200 || len(rr.Results) != 3 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		for i, r := range rr.Results {
			w := want.Results[i]
			if r.Index != w.Index || math.Abs(r.RelevanceScore-w.Score) > 1e-9 || r.Document == nil || r.Document.Text != docs[r.Index] {
				t.Errorf("%s: result %d %+v, want %+v", path, i, r, w)
			}
		}
	}
	// Documents as Jina and Cohere (v1) also take them: objects with their text.
	var rr struct {
		Results []struct {
			Index          int
			RelevanceScore float64 `json:"relevance_score"`
			Document       *struct{ Text string }
		}
	}
	resp, body := ts.post(t, "/rerank", `{"model": "tiny-rerank", "query": "What is the capital of China?", "documents": [{"text": "Gravity is a force."}, "The capital of China is Beijing.", {"text": "Beijing is in China."}, {"text": ""}], "return_documents": true}`)
	unmarshal(t, body, &rr)
	if resp.StatusCode != 200 || len(rr.Results) != len(docs) {
		t.Fatalf("documents as objects: %d %s", resp.StatusCode, body)
	}
	for i, r := range rr.Results {
		if w := want.Results[i]; r.Index != w.Index || math.Abs(r.RelevanceScore-w.Score) > 1e-9 || r.Document == nil || r.Document.Text != docs[r.Index] {
			t.Errorf("documents as objects: result %d %+v, want %+v", i, r, w)
		}
	}
	resp, body = ts.post(t, "/v1/rerank", `{"query": "q", "documents": ["a"]}`)
	if resp.StatusCode != 200 || strings.Contains(body, `"document"`) {
		t.Errorf("without return_documents: %d %s", resp.StatusCode, body)
	}
}

// TestEmbeddingRefusals: the wrong kind of model, or a bad field, is a
// 400 naming it.
func TestEmbeddingRefusals(t *testing.T) {
	emb, _ := serveBundled(t, "tiny-emb")
	gen, _ := serveBundled(t, "tiny-rerank")
	tooMany := "[" + strings.TrimSuffix(strings.Repeat(`"x",`, 2049), ",") + "]"
	for _, tc := range []struct {
		ts         *testServer
		path, body string
		want       string
	}{
		{gen, "/v1/embeddings", `{"model": "tiny-rerank", "input": "x"}`, `"param":"model"`},
		{gen, "/api/embed", `{"model": "tiny-rerank", "input": "x"}`, `embeddings need an embedding model`},
		{emb, "/v1/chat/completions", `{"model": "tiny-emb", "messages": [{"role": "user", "content": "hi"}]}`, `this is an embedding model: it embeds text and does not generate`},
		{emb, "/api/generate", `{"model": "tiny-emb", "prompt": "hi"}`, `does not generate`},
		{emb, "/v1/rerank", `{"query": "q", "documents": ["d"]}`, `reranking needs a reranker`},
		{emb, "/v1/rerank", `{"query": "q", "documents": ["d"]}`, `"param":"model"`},
		{emb, "/v1/chat/completions", `{"model": "tiny-emb", "messages": [{"role": "user", "content": "hi"}]}`, `"param":"model"`},
		{emb, "/v1/completions", `{"model": "tiny-emb", "prompt": "hi"}`, `"param":"model"`},
		{emb, "/v1/responses", `{"model": "tiny-emb", "input": "hi"}`, `"param":"model"`},
		{emb, "/v1/embeddings", `{"model": "tiny-emb", "input": []}`, `input: empty`},
		{emb, "/v1/embeddings", `{"model": "tiny-emb", "input": {"a": 1}}`, `"param":"input"`},
		{emb, "/v1/embeddings", `{"model": "tiny-emb", "input": "x", "encoding_format": "hex"}`, `encoding_format \"hex\"`},
		{emb, "/v1/embeddings", `{"model": "tiny-emb", "input": "x", "dimensions": 65}`, `dimensions 65: want 1 to 64`},
		{emb, "/v1/embeddings", `{"model": "tiny-emb", "input": ` + tooMany + `}`, `input: 2049 inputs, at most 2048`},
		{emb, "/api/embed", `{"model": "tiny-emb", "input": ` + tooMany + `}`, `input: 2049 inputs, at most 2048`},
		{gen, "/v1/rerank", `{"query": "q", "documents": ` + tooMany + `}`, `2049 documents, at most 2048`},
		{emb, "/api/embed", `{"model": "tiny-emb", "input": "x", "truncate": false}`, ``},
		{emb, "/api/embed", `{"model": "tiny-emb", "input": "one two three four five six", "truncate": false, "options": {"num_ctx": 4}}`, `"error":"input: the prompt has 7 tokens, more than the context of 4`},
		{emb, "/api/embed", `{"model": "tiny-emb", "input": "one two three four five six", "options": {"num_ctx": 4, "temperature": 0.5}}`, ``},
		{emb, "/api/embed", `{"model": "tiny-emb", "input": "x", "options": {"num_ctx": "big"}}`, `"error":"options.num_ctx: want an integer`},
		{gen, "/v1/rerank", `{"documents": ["d"]}`, `query is required`},
		{gen, "/v1/rerank", `{"query": "", "documents": ["d"]}`, `"param":"query"`},
		{gen, "/v1/rerank", `{"query": "q", "documents": ["d"], "top_n": 0}`, `top_n 0`},
		{gen, "/v1/rerank", `{"query": "q", "documents": ["d", {"txt": "d"}]}`, `"param":"documents[1]"`},
		{gen, "/v1/rerank", `{"query": "q", "documents": [{"text": 1}]}`, `"param":"documents[0]"`},
	} {
		resp, body := tc.ts.post(t, tc.path, tc.body)
		if tc.want == "" {
			if resp.StatusCode != 200 {
				t.Errorf("%s %s: %d %s", tc.path, tc.body, resp.StatusCode, body)
			}
			continue
		}
		if resp.StatusCode != 400 || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s: %d %s, want 400 with %s", tc.path, tc.body, resp.StatusCode, body, tc.want)
		}
	}
}

func ids(v []int32) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, id := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(itoa(int(id)))
	}
	b.WriteByte(']')
	return b.String()
}

// TestEmbedEmptyInput: an empty text has no embedding: OpenAI's endpoint
// refuses it (as OpenAI does), naming where it is; Ollama's answer an
// empty input as Ollama does, by loading the model and embedding nothing.
func TestEmbedEmptyInput(t *testing.T) {
	ts, _ := serveBundled(t, "tiny-emb")
	gen, _ := serveBundled(t, "tiny-rerank")
	for _, path := range []string{"/api/embed", "/api/embeddings"} {
		if resp, body := gen.post(t, path, `{"model": "tiny-rerank"}`); resp.StatusCode != 400 || !strings.Contains(body, "tiny-rerank: this model generates text") {
			t.Errorf("%s without input to a generation model: %d %s", path, resp.StatusCode, body)
		}
	}
	for _, tc := range []struct {
		path, body string
		status     int
		want       string
	}{
		{"/v1/embeddings", `{"model": "tiny-emb", "input": ""}`, 400, `"param":"input"`},
		{"/v1/embeddings", `{"model": "tiny-emb", "input": ["a", ""]}`, 400, `"param":"input[1]"`},
		{"/v1/embeddings", `{"model": "tiny-emb", "input": []}`, 400, `"param":"input"`},
		{"/v1/embeddings", `{"model": "tiny-emb", "input": [[1], []]}`, 400, `"param":"input[1]"`},
		{"/v1/embeddings", `{"model": "tiny-emb"}`, 400, `"param":"input"`},
		{"/v1/embeddings", `{"model": "tiny-emb", "input": null}`, 400, `"message":"input is required"`},
		{"/v1/embeddings", `{"model": "tiny-emb", "input": ["a", 1]}`, 400, `"message":"input[1]: want a string as input[0] is, got number"`},
		{"/v1/embeddings", `{"model": "tiny-emb", "input": [[1], [2, "x"]]}`, 400, `"param":"input[1]"`},
		{"/v1/embeddings", `{"model": "tiny-emb", "input": [1.5]}`, 400, `"param":"input[0]"`},
		{"/api/embed", `{"model": "tiny-emb", "input": ["a", {"text": "b"}]}`, 400, `{"error":"input[1]: want a string`},
		{"/v1/embeddings", `{"model": "tiny-emb", "input": [5, -1]}`, 400, `"param":"input[1]"`},
		{"/v1/embeddings", `{"model": "tiny-emb", "input": [[5], [5, 151669]]}`, 400, `"param":"input[1][1]"`},
		{"/api/embed", `{"model": "tiny-emb", "input": null}`, 200, `"embeddings":[]`},
		{"/api/embed", `{"model": "tiny-emb", "input": ["a", ""]}`, 400, `{"error":"input[1]: `},
		{"/api/embed", `{"model": "tiny-emb", "input": ""}`, 200, `"embeddings":[]`},
		{"/api/embed", `{"model": "tiny-emb", "input": []}`, 200, `"embeddings":[]`},
		{"/api/embed", `{"model": "tiny-emb"}`, 200, `"embeddings":[]`},
		{"/api/embeddings", `{"model": "tiny-emb", "prompt": ""}`, 200, `{"embedding":[]}`},
	} {
		resp, body := ts.post(t, tc.path, tc.body)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s: %d %s, want %d with %s", tc.path, tc.body, resp.StatusCode, body, tc.status, tc.want)
		}
	}
}

// serveSmall serves the bundled model name with a context of ctx tokens.
func serveSmall(t *testing.T, name string, ctx int) *testServer {
	t.Helper()
	m, err := qwen.Open(compiledPath(t, name), qwen.WithThreads(2), qwen.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	hs := httptest.NewServer(NewServer(m, ServerOptions{}).Handler())
	t.Cleanup(hs.Close)
	return &testServer{Server: nil, m: m, url: hs.URL}
}

// TestScoreErrorPaths: a refusal of the model's names the field at
// fault: the input or document too long by its index, dimensions as
// dimensions.
func TestScoreErrorPaths(t *testing.T) {
	emb := serveSmall(t, "tiny-emb", 16)
	rr := serveSmall(t, "tiny-rerank", 256)
	long := jsonString(strings.Repeat("word ", 40))
	longDoc := jsonString(strings.Repeat("word ", 400))
	for _, tc := range []struct {
		ts         *testServer
		path, body string
		want       []string
	}{
		{emb, "/v1/embeddings", `{"model": "tiny-emb", "input": ["a", ` + long + `]}`, []string{`"param":"input[1]"`, `"message":"input[1]: the prompt has`, `"code":"context_length_exceeded"`}},
		{emb, "/v1/embeddings", `{"model": "tiny-emb", "input": ` + long + `}`, []string{`"param":"input"`, `"message":"input: the prompt has`}},
		{emb, "/v1/embeddings", `{"model": "tiny-emb", "input": "a", "dimensions": 65}`, []string{`"param":"dimensions"`, `dimensions 65: want 1 to 64`}},
		{emb, "/api/embed", `{"model": "tiny-emb", "input": ["a", ` + long + `], "truncate": false}`, []string{`{"error":"input[1]: the prompt has`}},
		{emb, "/api/embed", `{"model": "tiny-emb", "input": "a", "dimensions": 65}`, []string{`{"error":"dimensions 65: want 1 to 64`}},
		{rr, "/v1/rerank", `{"query": ` + longDoc + `, "documents": ["a", "b"]}`, []string{`"param":"query"`, `"message":"query: `, `"code":"context_length_exceeded"`}},
		{rr, "/v1/rerank", `{"query": "q", "documents": ["a", ` + longDoc + `]}`, []string{`"param":"documents[1]"`, `"message":"documents[1]: the prompt has`, `"code":"context_length_exceeded"`}},
	} {
		resp, body := tc.ts.post(t, tc.path, tc.body)
		for _, w := range tc.want {
			if resp.StatusCode != 400 || !strings.Contains(body, w) {
				t.Errorf("%s %.80s: %d %s, want 400 with %s", tc.path, tc.body, resp.StatusCode, body, w)
			}
		}
	}
}

// TestScoreErrorStatus: the engine failing to run an input is the
// server's fault, a 500, not the request's.
func TestScoreErrorStatus(t *testing.T) {
	e := scoreError(&target{name: "tiny-emb"}, fmt.Errorf("%w: the kernel failed", qwen.ErrGeneration), "input", false)
	if e == nil || e.status != 500 || e.param != "" {
		t.Errorf("a failed generation: %+v, want a 500 naming no field", e)
	}
	e = scoreError(&target{name: "tiny-emb"}, errors.New("input 1: an empty text has no embedding"), "input", false)
	if e == nil || e.status != 400 {
		t.Errorf("a refused request: %+v, want a 400", e)
	}
}
