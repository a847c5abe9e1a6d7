package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"time"

	"github.com/qwenc/qwenc/qwen"
)

// maxInputs bounds the inputs of one embedding request, as OpenAI does,
// and the documents of a rerank request: what one HTTP request holds (its
// body, its answer) stays bounded. The Go API takes any number.
const maxInputs = 2048

// embedInput is OpenAI's input: a string, a list of strings, a list of
// token ids or a list of lists of them; Ollama's: a string or a list.
type embedInput struct {
	texts  []string
	tokens [][]int32
	one    bool // a string or a list of token ids, not a list of inputs
}

func (*embedInput) want() string {
	return "a string, a list of strings, a list of token ids or a list of lists of them"
}

func (in *embedInput) UnmarshalJSON(b []byte) error {
	// Each shape into its own variable: a failed Unmarshal may have
	// filled part of its target.
	var one string
	var texts []string
	var ids []int32
	var lists [][]int32
	switch {
	case string(b) == "null": // as if absent
		return nil
	case json.Unmarshal(b, &one) == nil:
		in.texts, in.one = []string{one}, true
	case json.Unmarshal(b, &texts) == nil:
		in.texts = texts
	case json.Unmarshal(b, &ids) == nil:
		in.tokens, in.one = [][]int32{ids}, true
	case json.Unmarshal(b, &lists) == nil:
		in.tokens = lists
	default:
		if e := badItem(b); e != nil {
			return e
		}
		return shapeError(b, reflect.TypeFor[embedInput]())
	}
	if n := len(in.texts) + len(in.tokens); n > maxInputs {
		return &fieldError{"input", fmt.Sprintf("%d inputs, at most %d", n, maxInputs)}
	}
	return nil
}

// badItem names the first item of a list input unlike the list's
// first (a string, a token id or a list of them), or nil if b is not a
// list.
func badItem(b []byte) error {
	var items []json.RawMessage
	if json.Unmarshal(b, &items) != nil || len(items) == 0 {
		return nil
	}
	var text string
	var id int32
	var ids []int32
	shapes := []struct {
		dst  any
		want string
	}{{&text, "a string"}, {&id, "a token id"}, {&ids, "a list of token ids"}}
	want := "a string, a token id or a list of token ids"
	for i, item := range items {
		if i == 0 {
			for _, sh := range shapes {
				if json.Unmarshal(item, sh.dst) == nil {
					want = sh.want
					shapes = []struct {
						dst  any
						want string
					}{sh}
					break
				}
			}
			if len(shapes) != 1 {
				return &fieldError{"input[0]", fmt.Sprintf("want %s, got %s", want, kindOf(item))}
			}
			continue
		}
		if json.Unmarshal(item, shapes[0].dst) != nil {
			return &fieldError{fmt.Sprintf("input[%d]", i), fmt.Sprintf("want %s as input[0] is, got %s", want, kindOf(item))}
		}
	}
	return nil
}

// kindOf is the kind of JSON value b is, as shapeError names it.
func kindOf(b []byte) string {
	var tok json.Token
	if v, err := json.NewDecoder(bytes.NewReader(b)).Token(); err == nil {
		tok = v
	}
	return tokenKind(tok)
}

// none: the request has no input at all, or one empty string (Ollama's
// way to load a model).
func (in *embedInput) none() bool {
	return len(in.texts)+len(in.tokens) == 0 || in.one && len(in.texts) == 1 && in.texts[0] == ""
}

// check refuses an input without one (as OpenAI does: an empty text
// has no embedding; its vector would be the appended token's alone),
// or with a token id outside the model's vocabulary (of vocab ids; 0:
// not checked), naming it by its path.
func (in *embedInput) check(vocab int) *apiError {
	if len(in.texts)+len(in.tokens) == 0 {
		return badRequest("input", "input: empty: want at least one input")
	}
	path := func(i int) string {
		if in.one {
			return "input"
		}
		return fmt.Sprintf("input[%d]", i)
	}
	for i, text := range in.texts {
		if text == "" {
			return badRequest(path(i), "%s: an empty string: want text to embed", path(i))
		}
	}
	for i, ids := range in.tokens {
		if len(ids) == 0 {
			return badRequest(path(i), "%s: no tokens", path(i))
		}
		for j, id := range ids {
			if vocab > 0 && (id < 0 || int(id) >= vocab) {
				p := fmt.Sprintf("%s[%d]", path(i), j)
				return badRequest(p, "%s: token id %d outside the vocabulary [0, %d)", p, id, vocab)
			}
		}
	}
	return nil
}

// embed runs an embedding request; the error is in the protocol's shape
// (writeError picks it from the path).
func (s *Server) embed(ctx context.Context, rl *reqLog, t *target, param string, one bool, req qwen.EmbedRequest) (qwen.Embeddings, *apiError) {
	if req.Dimensions > t.info.Hidden {
		return qwen.Embeddings{}, badRequest("dimensions", "dimensions %d: want 1 to %d", req.Dimensions, t.info.Hidden)
	}
	res, err := t.m.Embed(ctx, req)
	if e := scoreError(t, err, param, one); e != nil {
		return res, e
	}
	rl.prompt = res.PromptTokens
	s.metrics.scored.Add(float64(res.PromptTokens))
	return res, nil
}

// scoreError maps an error of Embed or Rerank: the request's fault unless
// the server is busy or closing. An input too long is named by its path:
// param[i] of a list of inputs, param alone when it is one (one).
func scoreError(t *target, err error, param string, one bool) *apiError {
	var tooLong *qwen.PromptTooLongError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, qwen.ErrBusy):
		return &apiError{status: http.StatusServiceUnavailable, msg: err.Error(), code: "server_busy", retryAfter: 1}
	case errors.Is(err, qwen.ErrClosed):
		return &apiError{status: http.StatusServiceUnavailable, msg: "the server is shutting down", code: "shutting_down"}
	case errors.Is(err, qwen.ErrQueryTooLong):
		e := badRequest("query", "query: %v", err)
		e.code = "context_length_exceeded"
		return e
	case errors.As(err, &tooLong):
		if !one {
			param = fmt.Sprintf("%s[%d]", param, tooLong.Index)
		}
		e := badRequest(param, "%s: %v", param, tooLong)
		e.code = "context_length_exceeded" // OpenAI's, as for a chat's prompt
		return e
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &apiError{status: 499, msg: "the client closed the request"}
	case errors.Is(err, qwen.ErrGeneration): // the engine's failure, not the request's
		return &apiError{status: http.StatusInternalServerError, msg: err.Error()}
	case errors.Is(err, qwen.ErrNotEmbeddingModel), errors.Is(err, qwen.ErrEmbeddingModel):
		return badRequest("model", "%s: %v", t.name, err)
	}
	return badRequest(param, "%v", err)
}

// openAIEmbeddings is POST /v1/embeddings.
func (s *Server) openAIEmbeddings(w http.ResponseWriter, r *http.Request, rl *reqLog) *apiError {
	var er struct {
		Model          string     `json:"model"`
		Input          embedInput `json:"input"`
		EncodingFormat string     `json:"encoding_format"`
		Dimensions     *int       `json:"dimensions"`
		User           string     `json:"user"`
	}
	if e := decode(w, r, s.opts.MaxBody, &er); e != nil {
		return e
	}
	// What the model need not be loaded to refuse is refused first: a
	// bad request does not load a model in the resident one's place.
	if er.Input.texts == nil && er.Input.tokens == nil {
		return badRequest("input", "input is required")
	}
	if e := er.Input.check(0); e != nil {
		return e
	}
	if er.EncodingFormat != "" && er.EncodingFormat != "float" && er.EncodingFormat != "base64" {
		return badRequest("encoding_format", "encoding_format %q: want float or base64", er.EncodingFormat)
	}
	req := qwen.EmbedRequest{Inputs: er.Input.texts, Tokens: er.Input.tokens}
	if er.Dimensions != nil {
		if *er.Dimensions < 1 {
			return badRequest("dimensions", "dimensions %d: want 1 or more", *er.Dimensions)
		}
		req.Dimensions = *er.Dimensions
	}
	t, e := s.model(r, rl, er.Model)
	if e != nil {
		return e
	}
	if e := er.Input.check(t.info.Vocab); e != nil {
		return e
	}
	res, e := s.embed(r.Context(), rl, t, "input", er.Input.one, req)
	if e != nil {
		return e
	}
	type item struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	data := make([]item, len(res.Vectors))
	for i, v := range res.Vectors {
		data[i] = item{Object: "embedding", Index: i, Embedding: v}
		if er.EncodingFormat == "base64" {
			data[i].Embedding = base64Floats(v)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list", "data": data, "model": t.name,
		"usage": map[string]int{"prompt_tokens": res.PromptTokens, "total_tokens": res.PromptTokens},
	})
	return nil
}

// base64Floats is OpenAI's base64 encoding of a vector: its float32
// values, little-endian.
func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// ollamaEmbedFields are what Ollama's embedding requests share; a
// keep_alive the server does not honour is reported, as on /api/chat.
type ollamaEmbedFields struct {
	Model     string        `json:"model"`
	Options   ollamaOptions `json:"options"`
	KeepAlive keepAlive     `json:"keep_alive"`
}

// embedContext is an Ollama embedding request's num_ctx: the longest
// input; the sampling options mean nothing to an embedding, as in Ollama.
func embedContext(t *target, f *ollamaEmbedFields, req *qwen.EmbedRequest) *apiError {
	n, e := t.numCtx(f.Options.NumCtx.int())
	req.Context = n
	return e
}

// decodeOllamaEmbed decodes an Ollama embedding request into dst, whose
// shared fields are f.
func (s *Server) decodeOllamaEmbed(w http.ResponseWriter, r *http.Request, rl *reqLog, dst any, f *ollamaEmbedFields) *apiError {
	if e := decode(w, r, s.opts.MaxBody, dst); e != nil {
		return e
	}
	rl.keepAlive(f.KeepAlive)
	return nil
}

// ollamaEmbed is POST /api/embed.
func (s *Server) ollamaEmbed(w http.ResponseWriter, r *http.Request, rl *reqLog) *apiError {
	var er struct {
		ollamaEmbedFields
		Input      embedInput `json:"input"`
		Truncate   *bool      `json:"truncate"`
		Dimensions int        `json:"dimensions"`
	}
	if e := s.decodeOllamaEmbed(w, r, rl, &er, &er.ollamaEmbedFields); e != nil {
		return e
	}
	if er.Input.none() {
		// Ollama's way to load a model: no vectors. s.model refuses a
		// model that does not embed.
		t, e := s.model(r, rl, er.Model)
		if e != nil {
			return e
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"model": t.name, "embeddings": [][]float32{}, "total_duration": 0, "load_duration": 0, "prompt_eval_count": 0,
		})
		return nil
	}
	// What the model need not be loaded to refuse is refused first.
	if er.Input.tokens != nil {
		return badRequest("input", "input: want a string or a list of strings")
	}
	if er.Dimensions < 0 {
		return badRequest("dimensions", "dimensions %d: want 1 or more", er.Dimensions)
	}
	if e := er.Input.check(0); e != nil {
		return e
	}
	t, e := s.model(r, rl, er.Model)
	if e != nil {
		return e
	}
	start := time.Now()
	// Ollama truncates unless told not to.
	req := qwen.EmbedRequest{Inputs: er.Input.texts, Dimensions: er.Dimensions, Truncate: er.Truncate == nil || *er.Truncate}
	if e := embedContext(t, &er.ollamaEmbedFields, &req); e != nil {
		return e
	}
	res, e := s.embed(r.Context(), rl, t, "input", er.Input.one, req)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"model": t.name, "embeddings": res.Vectors,
		"total_duration": time.Since(start).Nanoseconds(), "load_duration": 0, "prompt_eval_count": res.PromptTokens,
	})
	return nil
}

// ollamaEmbeddings is POST /api/embeddings, Ollama's older endpoint: one
// prompt, one vector.
func (s *Server) ollamaEmbeddings(w http.ResponseWriter, r *http.Request, rl *reqLog) *apiError {
	var er struct {
		ollamaEmbedFields
		Prompt string `json:"prompt"`
	}
	if e := s.decodeOllamaEmbed(w, r, rl, &er, &er.ollamaEmbedFields); e != nil {
		return e
	}
	t, e := s.model(r, rl, er.Model)
	if e != nil {
		return e
	}
	if er.Prompt == "" {
		// Ollama's way to load a model: no vector.
		writeJSON(w, http.StatusOK, map[string]any{"embedding": []float32{}})
		return nil
	}
	req := qwen.EmbedRequest{Inputs: []string{er.Prompt}, Truncate: true}
	if e := embedContext(t, &er.ollamaEmbedFields, &req); e != nil {
		return e
	}
	res, e := s.embed(r.Context(), rl, t, "prompt", true, req)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, map[string]any{"embedding": res.Vectors[0]})
	return nil
}

// rerankDoc is a document to rerank: a string, or an object with its
// text, as Jina's and Cohere's (v1) APIs take it.
type rerankDoc string

func (*rerankDoc) want() string { return `a string or an object {"text": a string}` }

func (d *rerankDoc) UnmarshalJSON(b []byte) error {
	var text string
	if json.Unmarshal(b, &text) == nil {
		*d = rerankDoc(text)
		return nil
	}
	var obj struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal(b, &obj) != nil || obj.Text == nil {
		return shapeError(b, reflect.TypeFor[rerankDoc]())
	}
	*d = rerankDoc(*obj.Text)
	return nil
}

// rerank is POST /v1/rerank, /rerank and /v2/rerank, as llama-server,
// vLLM, Jina and Cohere shape it.
func (s *Server) rerank(w http.ResponseWriter, r *http.Request, rl *reqLog) *apiError {
	var rr struct {
		Model           string      `json:"model"`
		Query           *string     `json:"query"`
		Documents       []rerankDoc `json:"documents"`
		TopN            *int        `json:"top_n"`
		ReturnDocuments bool        `json:"return_documents"`
		Instruction     string      `json:"instruction"`
	}
	if e := decode(w, r, s.opts.MaxBody, &rr); e != nil {
		return e
	}
	switch {
	case rr.Query == nil:
		return badRequest("query", "query is required")
	case *rr.Query == "":
		return badRequest("query", "query: empty: want the text to rank the documents by")
	case len(rr.Documents) == 0:
		return badRequest("documents", "documents: want at least one")
	case len(rr.Documents) > maxInputs:
		return badRequest("documents", "%d documents, at most %d", len(rr.Documents), maxInputs)
	case rr.TopN != nil && *rr.TopN < 1:
		return badRequest("top_n", "top_n %d: want 1 or more", *rr.TopN)
	}
	t, e := s.defaultTarget(r, rl, rr.Model) // optional, as llama-server has it
	if e != nil {
		return e
	}
	docs := make([]string, len(rr.Documents))
	for i, d := range rr.Documents {
		docs[i] = string(d)
	}
	res, err := t.m.Rerank(r.Context(), qwen.RerankRequest{Query: *rr.Query, Documents: docs, Instruct: rr.Instruction})
	if e := scoreError(t, err, "documents", false); e != nil {
		return e
	}
	rl.prompt = res.PromptTokens
	s.metrics.scored.Add(float64(res.PromptTokens))
	type doc struct {
		Text string `json:"text"`
	}
	type result struct {
		Index          int     `json:"index"`
		RelevanceScore float64 `json:"relevance_score"`
		Document       *doc    `json:"document,omitempty"`
	}
	n := len(res.Results)
	if rr.TopN != nil {
		n = min(n, *rr.TopN)
	}
	out := make([]result, n)
	for i, x := range res.Results[:n] {
		out[i] = result{Index: x.Index, RelevanceScore: x.Score}
		if rr.ReturnDocuments {
			out[i].Document = &doc{docs[x.Index]}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list", "model": t.name, "results": out,
		"usage": map[string]int{"prompt_tokens": res.PromptTokens, "total_tokens": res.PromptTokens},
	})
	return nil
}
