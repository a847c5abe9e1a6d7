package serve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/qwenc/qwenc/qwen"
)

// DefaultMaxBody bounds a request body: a long conversation is well
// under it, and a client cannot make the server buffer without limit.
const DefaultMaxBody = 8 << 20

// ServerOptions configure a Server.
type ServerOptions struct {
	// Name is the model's name in both protocols (default: the .qbin
	// file's base name without its extension, qwen.Info's Name).
	Name string
	// APIKey, when set, must come with every request but /health and
	// GET / (Ollama's probe, which says only that a server runs), as
	// "Authorization: Bearer KEY" or, as Anthropic's clients send it,
	// "x-api-key: KEY".
	APIKey string
	// Log receives a record of each request at info (an error, a
	// refusal for want of capacity or of a key, higher), the net/http
	// server's errors, and at debug the request bodies; nil discards
	// them. No record holds a header, so none holds the API key.
	Log *slog.Logger
	// MaxBody bounds a request body in bytes (default DefaultMaxBody).
	MaxBody int64
	// Draft, DraftModel, DraftMTP, DraftMin and DraftPMin are every
	// generation's drafts (qwen.Request's) where it asks for none; 0:
	// none, but a request with OpenAI's prediction drafts it
	// (qwen.DefaultDraft).
	Draft, DraftModel, DraftMTP, DraftMin int
	DraftPMin                             float64
	// Models are further names a request may give, each naming a .qbin
	// file (an alias of the served model's own, or another model's; see
	// ModelDir): /v1/models and /api/tags list them. One model is
	// resident at a time: a request for another waits for the requests
	// of the resident one to end, which is then shut down (the served
	// model, which stays the caller's to close, is only shut down), and
	// the other opened with Open. A name the served model has is its.
	Models map[string]string
	// Open loads a model of Models; nil: the served model's file alone
	// can be named.
	Open func(path string) (*qwen.Model, error)
	// AllowOrigins are the origins of browser pages that may call the
	// server besides the local ones (localhost, 127.0.0.1, [::1] and
	// 0.0.0.0 on any port, and app://, file://, tauri:// and VS Code's
	// webviews, as Ollama allows by default) and the server's own, by IP
	// address (a name may be a foreign page's, by DNS rebinding): each
	// scheme://host[:port] with * for any run of characters (see
	// CheckOrigins), or * for every origin. A request with an Origin not
	// allowed is refused (403); clients that are not browsers send none.
	AllowOrigins []string
	// ping is how long an Anthropic stream may stay silent before a ping
	// event (default defaultPing); tests shorten it.
	ping time.Duration
	// stall is how long a streamed write may wait for the client to
	// read before the client is taken as gone (default defaultStall);
	// tests shorten it.
	stall time.Duration
}

// defaultPing keeps a silent stream well inside the idle timeouts of
// proxies (nginx's proxy_read_timeout is 60 s) while a request waits for
// a slot or its prompt is prefilled.
const defaultPing = 10 * time.Second

// defaultStall frees the slot of a client that stopped reading a stream
// without closing it; a client that reads at all, however slowly, takes
// a chunk well within it.
const defaultStall = 2 * time.Minute

// Server answers the OpenAI, Ollama and Anthropic protocols: each an
// adapter over the same qwen.Model, which batches every request into its
// steps.
type Server struct {
	models    *models
	responses *responseStore
	opts      ServerOptions
	keyHash   [sha256.Size]byte
	metrics   *metrics
	log       *slog.Logger
}

// NewServer serves m, and the models of o.Models. Serve shuts the
// resident model's engine down when it returns; m stays the caller's to
// close, and Close closes the models the server opened.
func NewServer(m *qwen.Model, o ServerOptions) *Server {
	if o.Name == "" {
		o.Name = m.Info().Name
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.ping <= 0 {
		o.ping = defaultPing
	}
	if o.stall <= 0 {
		o.stall = defaultStall
	}
	ms := newModels(m, o.Name, o)
	s := &Server{models: ms, responses: newResponseStore(), opts: o, metrics: newMetrics(ms), log: o.Log}
	// Hashing both sides gives ConstantTimeCompare equal lengths, so not
	// even the key's length leaks through timing.
	s.keyHash = sha256.Sum256([]byte(o.APIKey))
	return s
}

// Name is the served model's name in requests and responses.
func (s *Server) Name() string { return s.opts.Name }

// Close closes the model the server opened in place of the served one,
// if one is resident, and refuses further requests.
func (s *Server) Close() error { return s.models.close() }

// handlerFunc answers a request; an error it returns, which it must not
// have started answering, is written in the protocol's error shape.
type handlerFunc func(w http.ResponseWriter, r *http.Request, rl *reqLog) *apiError

// Handler routes every endpoint.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.handle(mux, "POST /v1/chat/completions", s.chatCompletions)
	s.handle(mux, "POST /v1/completions", s.completions)
	s.handle(mux, "POST /v1/responses", s.createResponse)
	s.handle(mux, "GET /v1/responses/{id}", s.getResponse)
	s.handle(mux, "DELETE /v1/responses/{id}", s.deleteResponse)
	s.handle(mux, "POST /v1/responses/{id}/cancel", s.cancelResponse)
	s.handle(mux, "GET /v1/responses/{id}/input_items", s.listInputItems)
	s.handle(mux, "POST /apply-template", s.applyTemplate)
	s.handle(mux, "POST /v1/embeddings", s.openAIEmbeddings)
	s.handle(mux, "POST /v1/rerank", s.rerank)
	s.handle(mux, "POST /rerank", s.rerank)
	s.handle(mux, "POST /v2/rerank", s.rerank) // Cohere's v2 client's, as vLLM serves it
	s.handle(mux, "GET /v1/models", s.listModels)
	s.handle(mux, "GET /v1/models/{model}", s.getModel)
	s.handle(mux, "POST /v1/messages", s.messages)
	s.handle(mux, "POST /v1/messages/count_tokens", s.countTokens)
	s.handle(mux, "POST /api/chat", s.ollamaChat)
	s.handle(mux, "POST /api/generate", s.ollamaGenerate)
	s.handle(mux, "POST /api/embed", s.ollamaEmbed)
	s.handle(mux, "POST /api/embeddings", s.ollamaEmbeddings)
	s.handle(mux, "GET /api/tags", s.ollamaTags)
	s.handle(mux, "GET /api/version", s.ollamaVersion)
	s.handle(mux, "POST /api/show", s.ollamaShow)
	s.handle(mux, "GET /api/ps", s.ollamaPS)
	s.handle(mux, "POST /api/pull", s.ollamaPull)
	s.handle(mux, "GET /health", s.health)
	s.handle(mux, "GET /metrics", s.metrics.serve)
	s.handle(mux, "GET /{$}", s.root)
	s.handle(mux, "/", s.notFound)
	return s.cors(mux)
}

// handle registers h behind the key check, the request log and the
// request metrics.
func (s *Server) handle(mux *http.ServeMux, pattern string, h handlerFunc) {
	// The endpoint label: the pattern's path; "other" for the fallback.
	endpoint := "other"
	if pattern != "/" {
		_, path, _ := strings.Cut(pattern, " ")
		endpoint = strings.TrimSuffix(path, "{$}")
	}
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		rl := &reqLog{start: time.Now(), header: sw.Header()}
		err := s.originRefused(r)
		switch {
		case err != nil:
		case endpoint != "/health" && endpoint != "/" && !s.authorized(r):
			sw.Header().Set("WWW-Authenticate", "Bearer")
			err = &apiError{status: http.StatusUnauthorized, msg: "a valid API key is required: Authorization: Bearer KEY, or x-api-key: KEY",
				code: "invalid_api_key"}
		default:
			s.logBody(r)
			err = h(sw, r, rl)
		}
		if rl.release != nil {
			rl.release()
		}
		if err != nil {
			writeError(sw, r, err)
		}
		s.done(r, sw, rl, endpoint, err)
	})
}

// logBody logs r's body at debug, and puts back what it read for the
// handler. A body over MaxBody is logged up to it; the handler refuses
// it as ever.
func (s *Server) logBody(r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || !s.log.Enabled(r.Context(), slog.LevelDebug) {
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, s.opts.MaxBody+1))
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), r.Body))
	if err != nil {
		return // the handler reads the error again
	}
	attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path)}
	if int64(len(b)) > s.opts.MaxBody {
		b = b[:s.opts.MaxBody]
		attrs = append(attrs, slog.Bool("truncated", true))
	}
	// A JSON body stays JSON in a JSON record, not a string to decode.
	var body any = string(b)
	if json.Valid(b) {
		body = json.RawMessage(b)
	}
	s.log.LogAttrs(r.Context(), slog.LevelDebug, "request body", append(attrs, slog.Any("body", body))...)
}

func (s *Server) authorized(r *http.Request) bool {
	if s.opts.APIKey == "" {
		return true
	}
	// OpenAI's clients send the key as a bearer token, Anthropic's as
	// x-api-key (Claude Code either, by which variable it is given).
	// The scheme is case-insensitive, and one or more spaces follow it
	// (RFC 9110, 11.1 and 11.4).
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && s.isKey(strings.TrimLeft(token, " ")) || s.isKey(r.Header.Get("X-Api-Key"))
}

func (s *Server) isKey(token string) bool {
	h := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(h[:], s.keyHash[:]) == 1
}

// reqLog is what the log line and the metrics say of a request.
type reqLog struct {
	start         time.Time
	prompt        int
	cached        int
	generated     int
	ttft          time.Duration // 0: no token
	clientGone    bool
	hasGeneration bool
	// failed is why a generation failed after its answer began, which
	// the status does not say.
	failed  error
	release func() // lets the model the request named go, if it holds one
	// relaxed are the schema keywords the grammar held to less, each
	// where the request has it and why; header is the response's, which
	// names them too.
	relaxed []string
	header  http.Header
	// keepAliveIgnored is Ollama's keep_alive as asked, when the server
	// did not honour it.
	keepAliveIgnored string
}

// done logs the request and counts it. A client that left before the
// end of its answer is logged and counted as 499, nginx's convention.
func (s *Server) done(r *http.Request, sw *statusWriter, rl *reqLog, endpoint string, e *apiError) {
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	if rl.clientGone {
		status = 499
	}
	s.metrics.requests.WithLabelValues(endpoint, strconv.Itoa(status)).Inc()
	attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status)}
	if rl.hasGeneration {
		attrs = append(attrs, slog.Int("prompt_tokens", rl.prompt), slog.Int("cached_tokens", rl.cached), slog.Int("generated_tokens", rl.generated))
		if rl.ttft > 0 {
			attrs = append(attrs, slog.Duration("ttft", rl.ttft.Round(time.Microsecond)))
		}
	} else if rl.prompt > 0 { // an embedding or a rerank
		attrs = append(attrs, slog.Int("prompt_tokens", rl.prompt))
	}
	if len(rl.relaxed) > 0 {
		attrs = append(attrs, slog.Any("schema_relaxed", rl.relaxed))
	}
	if rl.keepAliveIgnored != "" {
		attrs = append(attrs, slog.String("keep_alive_ignored", rl.keepAliveIgnored))
	}
	attrs = append(attrs, slog.Duration("duration", time.Since(rl.start).Round(time.Microsecond)))
	failed := rl.failed != nil && !rl.clientGone
	switch {
	case e != nil:
		attrs = append(attrs, slog.String("error", e.msg))
	case failed:
		attrs = append(attrs, slog.String("error", rl.failed.Error()))
	}
	s.log.LogAttrs(r.Context(), accessLevel(status, failed), "request", attrs...)
}

// accessLevel is a request record's level: the server's own failure is
// an error; a refusal for want of capacity (503), of a key (401) or of
// an allowed origin (403) a warning, which an operator watches for
// overload or probing; the rest, a client's mistakes and clients that
// left (499), info.
func accessLevel(status int, failed bool) slog.Level {
	switch {
	case failed || status >= 500 && status != http.StatusServiceUnavailable:
		return slog.LevelError
	case status == http.StatusServiceUnavailable || status == http.StatusUnauthorized || status == http.StatusForbidden:
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// statusWriter remembers the status; http.ResponseController reaches
// the connection's Flush through Unwrap.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) health(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "model": s.opts.Name})
	return nil
}

func (s *Server) root(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	// Ollama's words exactly, without a newline: clients that probe /
	// to find an Ollama server may compare the text.
	io.WriteString(w, "Ollama is running")
	return nil
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	return &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)}
}

// Serve answers on ln until ctx ends, then shuts down: it stops
// accepting connections, lets running generations go on for grace, ends
// the others with a final chunk, and returns once every response is
// complete and the engine has stopped.
func (s *Server) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	// net/http's own errors (a handler's panic, a failed accept) are
	// errors of the server's log.
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelError)}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	var err error
	select {
	case err = <-served:
		err = fmt.Errorf("serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
		s.log.Info("shutting down", "grace", grace)
	}
	engineCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { s.models.shutdown(engineCtx) })
	// Handlers return once the engine ends their generations, by the end
	// of the grace period; the margin is for writing the final chunks.
	httpCtx, cancelHTTP := context.WithTimeout(context.Background(), grace+5*time.Second)
	defer cancelHTTP()
	if shutErr := hs.Shutdown(httpCtx); shutErr != nil {
		hs.Close()
		err = errors.Join(err, fmt.Errorf("shutting down: %w", shutErr))
	}
	wg.Wait()
	return err
}

// CheckHealth asks the server at addr (HOST:PORT) for GET /health, and
// fails unless it answers 200 OK within timeout: a container's
// HEALTHCHECK, where a distroless image has no curl to ask with.
func CheckHealth(addr string, timeout time.Duration) error {
	u := "http://" + addr + "/health"
	resp, err := (&http.Client{Timeout: timeout}).Get(u)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", u, resp.Status)
	}
	return nil
}
