package qwen_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qwenc/qwenc/internal/testmodel"
	"github.com/qwenc/qwenc/qwen"
)

// TestEmbeddingModelDoesNotGenerate: a generation request to an
// embedding model fails with ErrEmbeddingModel, before any step, and so
// does a conversation with it, at its start rather than at its first
// message.
func TestEmbeddingModelDoesNotGenerate(t *testing.T) {
	m := open(t, "tiny-emb.qbin")
	if _, err := m.NewConversation(""); !errors.Is(err, qwen.ErrEmbeddingModel) {
		t.Errorf("a conversation: %v", err)
	}
	for _, req := range []qwen.Request{
		{Messages: []qwen.Message{{Role: "user", Content: "hi"}}, MaxTokens: 4},
		{Prompt: "hi", MaxTokens: 4},
	} {
		for _, err := range m.Generate(context.Background(), req) {
			if !errors.Is(err, qwen.ErrEmbeddingModel) {
				t.Errorf("%+v: %v", req, err)
			}
			break
		}
	}
}

// TestEmbedReference: texts embedded together through the engine are the
// float64 reference's vectors (f16: cosine 0.9999), their tokens the
// reference's (the post-processor's <|endoftext|> appended, special-token
// text kept as text); each alone is what it is in the batch; token inputs
// that already end with <|endoftext|> get it once; dimensions keep the
// first values, renormalised.
func TestEmbedReference(t *testing.T) {
	m := open(t, "tiny-emb.qbin", qwen.WithParallel(2))
	cases := testmodel.ReadCases[testmodel.EmbedCase](t, filepath.Join(qwen.Testdata(), "tiny-emb", "expected", "embeddings.json"))
	var texts []string
	var tokens [][]int32
	want := 0
	for _, c := range cases {
		texts = append(texts, c.Text)
		tokens = append(tokens, c.IDs)
		want += len(c.IDs)
	}
	ctx := context.Background()
	got, err := m.Embed(ctx, qwen.EmbedRequest{Inputs: texts})
	if err != nil {
		t.Fatal(err)
	}
	if got.PromptTokens != want {
		t.Errorf("prompt tokens %d, the reference's %d", got.PromptTokens, want)
	}
	byTokens, err := m.Embed(ctx, qwen.EmbedRequest{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	if byTokens.PromptTokens != want {
		t.Errorf("token inputs ending in <|endoftext|>: %d tokens, want %d", byTokens.PromptTokens, want)
	}
	for i, c := range cases {
		if cos := testmodel.Cosine(got.Vectors[i], c.Embedding); cos < 0.9999 {
			t.Errorf("%q: cosine %.6f", c.Text, cos)
		}
		if cos := testmodel.Cosine(byTokens.Vectors[i], c.Embedding); cos < 0.9999 {
			t.Errorf("%q as tokens: cosine %.6f", c.Text, cos)
		}
		alone, err := m.Embed(ctx, qwen.EmbedRequest{Inputs: texts[i : i+1]})
		if err != nil {
			t.Fatal(err)
		}
		for j, v := range alone.Vectors[0] {
			if math.Abs(float64(v-got.Vectors[i][j])) > 1e-5 {
				t.Fatalf("%q: value %d alone %g, together %g", c.Text, j, v, got.Vectors[i][j])
			}
		}
		const d = 16
		short, err := m.Embed(ctx, qwen.EmbedRequest{Inputs: texts[i : i+1], Dimensions: d})
		if err != nil {
			t.Fatal(err)
		}
		if cos := testmodel.Cosine(short.Vectors[0], c.Embedding[:d]); len(short.Vectors[0]) != d || cos < 0.9999 {
			t.Errorf("%q to %d dimensions: %d values, cosine %.6f", c.Text, d, len(short.Vectors[0]), cos)
		}
	}
	// A text that ends with "<|endoftext|>" gets the token once: the same
	// tokens and vector as without it, a query in instruction form too.
	for _, instruct := range []string{"", "Given a web search query, retrieve relevant passages that answer the query"} {
		plain, err := m.Embed(ctx, qwen.EmbedRequest{Inputs: texts[:1], Instruct: instruct})
		if err != nil {
			t.Fatal(err)
		}
		ended, err := m.Embed(ctx, qwen.EmbedRequest{Inputs: []string{texts[0] + "<|endoftext|>"}, Instruct: instruct})
		if err != nil {
			t.Fatal(err)
		}
		if ended.PromptTokens != plain.PromptTokens {
			t.Errorf("instruct %q: %q ending in <|endoftext|>: %d tokens, without it %d", instruct, texts[0], ended.PromptTokens, plain.PromptTokens)
		}
		for j, v := range ended.Vectors[0] {
			if math.Abs(float64(v-plain.Vectors[0][j])) > 1e-5 {
				t.Fatalf("instruct %q: %q ending in <|endoftext|>: value %d %g, without it %g", instruct, texts[0], j, v, plain.Vectors[0][j])
			}
		}
	}
	// The instruction form of a query is the reference's second case.
	q, err := m.Embed(ctx, qwen.EmbedRequest{Inputs: []string{"What is the capital of China?"}, Instruct: "Given a web search query, retrieve relevant passages that answer the query"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cases[1].Text, "Instruct: ") || testmodel.Cosine(q.Vectors[0], cases[1].Embedding) < 0.9999 {
		t.Errorf("the query in instruction form: cosine %.6f with %q", testmodel.Cosine(q.Vectors[0], cases[1].Embedding), cases[1].Text)
	}
}

// TestRerankReference: Qwen3-Reranker's prompt, token for token the
// reference's (its model card's: the system line, <Instruct>, <Query> and
// <Document> as plain text, an empty think block), and its scores within
// 0.005 of the float64 reference's, the documents in order of score.
func TestRerankReference(t *testing.T) {
	m := open(t, "tiny-rerank.qbin")
	ctx := context.Background()
	for _, c := range testmodel.ReadCases[testmodel.RerankCase](t, filepath.Join(qwen.Testdata(), "tiny-rerank", "expected", "rerank.json")) {
		req := qwen.RerankRequest{Query: c.Query, Documents: []string{c.Document}}
		if c.Instruction != nil {
			req.Instruct = *c.Instruction
		}
		prompts, err := m.RerankPrompts(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := prompts[0]; !slices.Equal(got, c.IDs) {
			n := min(len(got), len(c.IDs))
			first := n
			for i := range n {
				if got[i] != c.IDs[i] {
					first = i
					break
				}
			}
			t.Errorf("%s: %d prompt tokens, the reference's %d, first different at %d:\n%v\n%v", c.Name, len(got), len(c.IDs), first, got, c.IDs)
		}
		r, err := m.Rerank(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if r.PromptTokens != len(c.IDs) {
			t.Errorf("%s: %d prompt tokens, the reference's %d", c.Name, r.PromptTokens, len(c.IDs))
		}
		if d := math.Abs(r.Results[0].Score - c.Score); d > 0.005 {
			t.Errorf("%s: score %.5f, the reference's %.5f", c.Name, r.Results[0].Score, c.Score)
		}
	}
	docs := []string{"Gravity is a force.", "The capital of China is Beijing.", "", "Beijing is in China."}
	r, err := m.Rerank(ctx, qwen.RerankRequest{Query: "What is the capital of China?", Documents: docs})
	if err != nil {
		t.Fatal(err)
	}
	for i, res := range r.Results {
		alone, err := m.Rerank(ctx, qwen.RerankRequest{Query: "What is the capital of China?", Documents: docs[res.Index : res.Index+1]})
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(alone.Results[0].Score-res.Score) > 1e-5 {
			t.Errorf("document %d: alone %g, together %g", res.Index, alone.Results[0].Score, res.Score)
		}
		if i > 0 && res.Score > r.Results[i-1].Score {
			t.Errorf("results out of order: %+v", r.Results)
		}
	}
}

// TestEmbedRefusals: what an embedding request cannot be is refused with
// a clear error.
func TestEmbedRefusals(t *testing.T) {
	emb, gen := open(t, "tiny-emb.qbin", qwen.WithContext(64)), open(t, "tiny-rerank.qbin")
	ctx := context.Background()
	long := strings.Repeat("word ", 100)
	for _, tc := range []struct {
		m    *qwen.Model
		req  qwen.EmbedRequest
		want string
	}{
		{gen, qwen.EmbedRequest{Inputs: []string{"x"}}, "this model generates text: embeddings need an embedding model"},
		{emb, qwen.EmbedRequest{}, "the request has no input"},
		{emb, qwen.EmbedRequest{Inputs: []string{"x"}, Tokens: [][]int32{{1}}}, "both Inputs and Tokens"},
		{emb, qwen.EmbedRequest{Inputs: []string{"x"}, Dimensions: 65}, "dimensions 65: want 1 to 64"},
		{emb, qwen.EmbedRequest{Inputs: []string{"x", ""}}, "input 1: an empty text has no embedding"},
		{emb, qwen.EmbedRequest{Tokens: [][]int32{{5}, {}}}, "input 1: no tokens"},
		{emb, qwen.EmbedRequest{Inputs: []string{"x", long}}, "input 1: the prompt has 102 tokens, more than the context of 64"},
	} {
		_, err := tc.m.Embed(ctx, tc.req)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.req, err, tc.want)
		}
	}
	var tooLong *qwen.PromptTooLongError
	if _, err := emb.Embed(ctx, qwen.EmbedRequest{Inputs: []string{"x", long}}); !errors.As(err, &tooLong) || tooLong.Index != 1 {
		t.Errorf("the long input: %v", err)
	}
	cut, err := emb.Embed(ctx, qwen.EmbedRequest{Inputs: []string{long}, Truncate: true})
	if err != nil || cut.PromptTokens != 64 {
		t.Errorf("truncated: %d tokens, %v", cut.PromptTokens, err)
	}
	// As a generation request, a reranking one says what an embedding
	// model is with ErrEmbeddingModel, which a caller can test for.
	if _, err := emb.Rerank(ctx, qwen.RerankRequest{Query: "q", Documents: []string{"d"}}); !errors.Is(err, qwen.ErrEmbeddingModel) {
		t.Errorf("an embedding model reranked: %v", err)
	}
	if _, err := gen.Rerank(ctx, qwen.RerankRequest{Documents: []string{"d"}}); err == nil || !strings.Contains(err.Error(), "the query is empty") {
		t.Errorf("an empty query: %v", err)
	}
	// A document too long for the context: refused, or its end cut with
	// the prompt's end kept.
	rr := open(t, "tiny-rerank.qbin", qwen.WithContext(128))
	docs := []string{"short", long + long}
	if _, err := rr.Rerank(ctx, qwen.RerankRequest{Query: "q", Documents: docs}); !errors.As(err, &tooLong) || tooLong.Index != 1 {
		t.Errorf("a long document: %v", err)
	}
	// A query that leaves no room for a document is the query's fault,
	// cut or not: cutting would cut the query and every document.
	for _, truncate := range []bool{false, true} {
		if _, err := rr.Rerank(ctx, qwen.RerankRequest{Query: long + long, Documents: docs[:1], Truncate: truncate}); !errors.Is(err, qwen.ErrQueryTooLong) {
			t.Errorf("a long query, truncate %v: %v", truncate, err)
		}
	}
	r, err := rr.Rerank(ctx, qwen.RerankRequest{Query: "q", Documents: docs, Truncate: true})
	if err != nil || len(r.Results) != 2 {
		t.Fatalf("truncated: %+v, %v", r, err)
	}
	alone, err := rr.Rerank(ctx, qwen.RerankRequest{Query: "q", Documents: docs[:1]})
	if err != nil || r.PromptTokens != alone.PromptTokens+128 {
		t.Errorf("truncated: %d prompt tokens, want %d + 128 (%v)", r.PromptTokens, alone.PromptTokens, err)
	}
}

// TestEmbedMany: more inputs than the engine queues at once
// (engine.MaxQueuedScoring) are embedded in one call, and reranked in
// one; each vector is the input's alone, in order.
func TestEmbedMany(t *testing.T) {
	const n = 4100
	m := open(t, "tiny-emb.qbin")
	texts := make([]string, n)
	for i := range texts {
		texts[i] = strconv.Itoa(i)
	}
	ctx := context.Background()
	start := time.Now()
	all, err := m.Embed(ctx, qwen.EmbedRequest{Inputs: texts})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d inputs, %d tokens: %v", n, all.PromptTokens, time.Since(start))
	if len(all.Vectors) != n {
		t.Fatalf("%d vectors for %d inputs", len(all.Vectors), n)
	}
	for _, i := range []int{0, 1, 2047, 4096, n - 1} {
		alone, err := m.Embed(ctx, qwen.EmbedRequest{Inputs: texts[i : i+1]})
		if err != nil {
			t.Fatal(err)
		}
		for j, v := range alone.Vectors[0] {
			if math.Abs(float64(v-all.Vectors[i][j])) > 1e-5 {
				t.Fatalf("input %d: value %d alone %g, of %d %g", i, j, v, n, all.Vectors[i][j])
			}
		}
	}
	rr := open(t, "tiny-rerank.qbin")
	start = time.Now()
	r, err := rr.Rerank(ctx, qwen.RerankRequest{Query: "a number", Documents: texts})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d documents reranked, %d tokens: %v", n, r.PromptTokens, time.Since(start))
	seen := make([]bool, n)
	for _, res := range r.Results {
		seen[res.Index] = true
	}
	if len(r.Results) != n || slices.Contains(seen, false) {
		t.Errorf("%d results for %d documents", len(r.Results), n)
	}
}

// TestEmbedConcurrent: Embed calls from several goroutines at once each
// get the vectors their inputs have alone (the engine's test shows that
// such requests share steps).
func TestEmbedConcurrent(t *testing.T) {
	m := open(t, "tiny-emb.qbin")
	ctx := context.Background()
	const clients = 4
	inputs := func(c int) []string {
		var texts []string
		for i := range 8 {
			texts = append(texts, strings.Repeat("word ", c+i)+strconv.Itoa(c))
		}
		return texts
	}
	want := make([][][]float32, clients)
	for c := range clients {
		for _, text := range inputs(c) {
			alone, err := m.Embed(ctx, qwen.EmbedRequest{Inputs: []string{text}})
			if err != nil {
				t.Fatal(err)
			}
			want[c] = append(want[c], alone.Vectors[0])
		}
	}
	before := m.Stats()
	got := make([]qwen.Embeddings, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if got[c], err = m.Embed(ctx, qwen.EmbedRequest{Inputs: inputs(c)}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	after := m.Stats()
	t.Logf("%d inputs of %d clients prefilled in %d steps", after.Prefilled-before.Prefilled, clients, after.PrefillSteps-before.PrefillSteps)
	for c := range clients {
		if len(got[c].Vectors) != len(want[c]) {
			t.Fatalf("client %d: %d vectors, want %d", c, len(got[c].Vectors), len(want[c]))
		}
		for i, v := range got[c].Vectors {
			for j := range v {
				if math.Abs(float64(v[j]-want[c][i][j])) > 1e-5 {
					t.Fatalf("client %d, input %d: value %d %g, alone %g", c, i, j, v[j], want[c][i][j])
				}
			}
		}
	}
}

// TestEmbedCancelled: Embed and Rerank cut short by their context return
// its error, the cause it was cancelled with, as Generate does.
func TestEmbedCancelled(t *testing.T) {
	if qwen.RaceEnabled {
		t.Skip("the race pass compiles no embedding model")
	}
	emb, rr := open(t, "tiny-emb.qbin"), open(t, "tiny-rerank.qbin")
	cause := errors.New("the client left")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	if _, err := emb.Embed(ctx, qwen.EmbedRequest{Inputs: []string{"one", "two"}}); !errors.Is(err, cause) {
		t.Errorf("embed: %v, want %v", err, cause)
	}
	if _, err := rr.Rerank(ctx, qwen.RerankRequest{Query: "q", Documents: []string{"one", "two"}}); !errors.Is(err, cause) {
		t.Errorf("rerank: %v, want %v", err, cause)
	}
}
