package serve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/qwenc/qwenc/qwen"
)

// ModelDir lists the .qbin files of dir by name (the base name without
// .qbin), for ServerOptions.Models: a server of a directory of models.
func ModelDir(dir string) (map[string]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".qbin" {
			continue
		}
		out[strings.TrimSuffix(e.Name(), ".qbin")] = filepath.Join(dir, e.Name())
	}
	return out, nil
}

// target is the model a request names, resident until the request ends:
// name is the name the server gives it (the request's without
// Ollama's ":latest").
type target struct {
	m    *qwen.Model
	info qwen.Info
	name string
}

// models are the names a request may give and the files they name; one
// model is resident at a time. A request for another waits until the
// resident one's requests have ended, then it is shut down and the other
// opened: as Ollama does with one model loaded, so that memory holds one
// model's weights and KV caches, not several. Requests that name the
// resident model while another waits wait too, so that one is not
// starved.
type models struct {
	first string            // the served model's name
	files map[string]string // name -> file (canonical), the served model's among them
	open  func(path string) (*qwen.Model, error)

	mu      sync.Mutex
	cur     *resident
	users   int    // requests holding cur
	want    string // the file requests wait for, "" if none
	wanting int    // the requests waiting for want
	waiting int    // the requests waiting, for want or behind it
	loading bool
	closed  bool
	changed chan struct{} // closed and replaced when the state changes
}

// resident is the model loaded; owned when the server opened it (the
// served model is the caller's, which the server only shuts down).
type resident struct {
	m     *qwen.Model
	info  qwen.Info
	path  string // canonical
	owned bool
}

func newModels(m *qwen.Model, name string, o ServerOptions) *models {
	info := m.Info()
	path := canonical(info.Path)
	ms := &models{first: name, files: map[string]string{name: path}, open: o.Open,
		cur: &resident{m: m, info: info, path: path}, changed: make(chan struct{})}
	for n, f := range o.Models {
		if n != name && n != "" {
			ms.files[n] = canonical(f)
		}
	}
	return ms
}

// canonical is a file's absolute path, its links followed: two names of
// one file are one model.
func canonical(path string) string {
	if p, err := filepath.Abs(path); err == nil {
		path = p
	}
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	return path
}

// names are the model names in the order they are listed: the served
// model's first, then the others by name.
func (ms *models) names() []string {
	var rest []string
	for n := range ms.files {
		if n != ms.first {
			rest = append(rest, n)
		}
	}
	slices.Sort(rest)
	return append([]string{ms.first}, rest...)
}

// lookup is the name a request's model resolves to, Ollama's default tag
// ":latest" taken off, and its file.
func (ms *models) lookup(name string) (string, string, bool) {
	for _, n := range []string{name, strings.TrimSuffix(name, ":latest")} {
		if f, ok := ms.files[n]; ok {
			return n, f, true
		}
	}
	return "", "", false
}

// info describes a model by name: the resident one's Info, or what its
// file says.
func (ms *models) info(name string) (qwen.Info, error) {
	f := ms.files[name]
	if cur := ms.resident(); cur != nil && cur.path == f {
		return cur.info, nil
	}
	return qwen.Inspect(f)
}

// resident is the model loaded now, nil if none is.
func (ms *models) resident() *resident {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.cur
}

// errNoLoad is a request for a model other than the resident one on a
// server that cannot load another.
var errNoLoad = errors.New("the server cannot load another model")

// acquire makes the model in file resident and holds it until release:
// it waits for the requests of another resident model to end, and for
// ctx.
func (ms *models) acquire(ctx context.Context, file string) (*resident, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	waiting := false
	leave := func() {
		if waiting {
			waiting = false
			if ms.wanting--; ms.wanting == 0 {
				ms.want = ""
				ms.notify()
			}
		}
	}
	defer leave()
	for {
		switch {
		case ms.closed:
			return nil, qwen.ErrClosed
		case ms.cur != nil && ms.cur.path == file && (ms.want == "" || ms.want == file):
			ms.users++
			return ms.cur, nil
		case ms.open == nil:
			return nil, errNoLoad
		case ms.want == "":
			ms.want = file
		}
		if ms.want == file {
			if !waiting {
				waiting = true
				ms.wanting++
			}
			if ms.users == 0 && !ms.loading {
				if err := ms.swap(file); err != nil {
					return nil, err
				}
				continue
			}
		}
		changed := ms.changed
		ms.waiting++
		ms.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
		}
		ms.mu.Lock()
		ms.waiting--
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
	}
}

// swap shuts the resident model down and opens file, with ms.mu held
// but released meanwhile: loading keeps other requests waiting.
func (ms *models) swap(file string) error {
	ms.loading = true
	old := ms.cur
	ms.cur = nil
	ms.mu.Unlock()
	if old != nil {
		old.m.Shutdown(context.Background()) // no request holds it: nothing to wait for
		if old.owned {
			old.m.Close()
		} else {
			old.m.ClearCache()
		}
	}
	m, err := ms.open(file)
	ms.mu.Lock()
	ms.loading = false
	if err == nil {
		ms.cur = &resident{m: m, info: m.Info(), path: file, owned: true}
	}
	ms.notify()
	if err != nil {
		return fmt.Errorf("loading %s: %w", file, err)
	}
	return nil
}

func (ms *models) release() {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ms.users--
	if ms.users == 0 {
		ms.notify()
	}
}

func (ms *models) notify() {
	close(ms.changed)
	ms.changed = make(chan struct{})
}

// shutdown stops the resident model's engine, as Model.Shutdown, and
// refuses further requests.
func (ms *models) shutdown(ctx context.Context) {
	ms.mu.Lock()
	ms.closed = true
	cur := ms.cur
	ms.notify()
	ms.mu.Unlock()
	if cur != nil {
		cur.m.Shutdown(ctx)
	}
}

// close closes the model the server opened, if one is resident.
func (ms *models) close() error {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ms.closed = true
	if ms.cur == nil || !ms.cur.owned {
		return nil
	}
	err := ms.cur.m.Close()
	ms.cur = nil
	return err
}

// model makes the model a request names resident for the request, which
// the handler's end releases; its errors are Ollama's under /api/ and
// OpenAI's elsewhere. A model that cannot answer the endpoint (an
// embedding model asked to generate, or the reverse) is refused first.
func (s *Server) model(r *http.Request, rl *reqLog, name string) (*target, *apiError) {
	return s.modelOf(r, rl, name, true)
}

// anyModel is model for a request any model answers.
func (s *Server) anyModel(r *http.Request, rl *reqLog, name string) (*target, *apiError) {
	return s.modelOf(r, rl, name, false)
}

func (s *Server) modelOf(r *http.Request, rl *reqLog, name string, checkKind bool) (*target, *apiError) {
	ollama := strings.HasPrefix(r.URL.Path, "/api/")
	if name == "" {
		if ollama {
			return nil, badRequest("model", "model is required")
		}
		return nil, badRequest("model", "you must provide a model parameter")
	}
	n, file, ok := s.models.lookup(name)
	if !ok {
		return nil, s.unknownModel(r, name)
	}
	if checkKind {
		if e := s.wrongKind(r, n); e != nil {
			return nil, e
		}
	}
	res, err := s.models.acquire(r.Context(), file)
	switch {
	case errors.Is(err, qwen.ErrClosed):
		return nil, &apiError{status: http.StatusServiceUnavailable, msg: "the server is shutting down", code: "shutting_down"}
	case err != nil && r.Context().Err() != nil:
		rl.clientGone = true
		return nil, &apiError{status: 499, msg: "the client left while the model was loading"}
	case err != nil:
		return nil, &apiError{status: http.StatusInternalServerError, param: "model", msg: fmt.Sprintf("model %q: %v", n, err)}
	}
	rl.release = s.models.release
	return &target{m: res.m, info: res.info, name: n}, nil
}

// embeddingEndpoints need an embedding model; generationEndpoints a
// model that generates (a reranker is one).
var (
	embeddingEndpoints  = []string{"/v1/embeddings", "/api/embed", "/api/embeddings"}
	generationEndpoints = []string{"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages",
		"/api/chat", "/api/generate", "/v1/rerank", "/rerank", "/v2/rerank"}
)

// wrongKind refuses a request for a model that cannot answer it, before
// the model is made resident: a bad request does not evict the model
// the others are using. A file that cannot be read is left for acquire
// to report.
func (s *Server) wrongKind(r *http.Request, name string) *apiError {
	embedding, generation := slices.Contains(embeddingEndpoints, r.URL.Path), slices.Contains(generationEndpoints, r.URL.Path)
	if !embedding && !generation {
		return nil
	}
	info, err := s.models.info(name)
	switch {
	case err != nil || info.Embedding == embedding:
		return nil
	case embedding:
		return badRequest("model", "%s: %v", name, qwen.ErrNotEmbeddingModel)
	case strings.HasSuffix(r.URL.Path, "/rerank"):
		return badRequest("model", "%s: reranking needs a reranker (Qwen3-Reranker): %v", name, qwen.ErrEmbeddingModel)
	}
	return badRequest("model", "%s: %v", name, qwen.ErrEmbeddingModel)
}

// unknownModel is the 404 of a name the server does not have, in the
// words of the protocol (Ollama's under /api/).
func (s *Server) unknownModel(r *http.Request, name string) *apiError {
	have := strings.Join(quoted(s.models.names()), ", ")
	msg := fmt.Sprintf("the model %q does not exist: this server has %s", name, have)
	if strings.HasPrefix(r.URL.Path, "/api/") {
		msg = fmt.Sprintf("model %q not found: this server has %s", name, have)
	}
	return &apiError{status: http.StatusNotFound, param: "model", code: "model_not_found", msg: msg}
}

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}

// defaultTarget is the model of a request that may leave its model out
// (/apply-template): the served one.
func (s *Server) defaultTarget(r *http.Request, rl *reqLog, name string) (*target, *apiError) {
	return s.model(r, rl, cmp.Or(name, s.models.first))
}

// modelObject is a model as OpenAI's and Anthropic's model lists give
// it, both at once: the fields of one are extra to the other's clients.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// Anthropic's.
	Type        string `json:"type"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

// modelObject is the model object for a name: created is when its file
// was written.
func (s *Server) modelObject(name string) modelObject {
	var created time.Time
	if st, err := os.Stat(s.models.files[name]); err == nil {
		created = st.ModTime().UTC().Truncate(time.Second)
	}
	return modelObject{ID: name, Object: "model", Created: created.Unix(), OwnedBy: "qwenrun",
		Type: "model", DisplayName: name, CreatedAt: created.Format(time.RFC3339)}
}

// listModels lists the models as OpenAI does (all of them) and as
// Anthropic does, a page at a time when the client asks for one (limit,
// after_id, before_id; has_more, first_id, last_id), as its SDK's
// auto-paging iterator does.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	names := s.models.names()
	q := r.URL.Query()
	limit := len(names)
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return badRequest("limit", "limit %q: want 1 to 1000", v)
		}
		limit = n
	}
	from, to := 0, len(names)
	for _, p := range []struct {
		param string
		at    *int
		off   int
	}{{"after_id", &from, 1}, {"before_id", &to, 0}} {
		id := q.Get(p.param)
		if id == "" {
			continue
		}
		i := slices.Index(names, id)
		if i < 0 {
			return badRequest(p.param, "%s %q: no such model", p.param, id)
		}
		*p.at = i + p.off
	}
	if from > to {
		return badRequest("before_id", "before_id comes before after_id")
	}
	page := names[from:to]
	more := len(page) > limit
	if more && q.Has("before_id") && !q.Has("after_id") {
		page = page[len(page)-limit:] // the page just before before_id
	} else if more {
		page = page[:limit]
	}
	data := make([]modelObject, 0, len(page))
	for _, n := range page {
		data = append(data, s.modelObject(n))
	}
	var first, last *string
	if len(page) > 0 {
		first, last = &page[0], &page[len(page)-1]
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "has_more": more, "first_id": first, "last_id": last})
	return nil
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request, _ *reqLog) *apiError {
	n, _, ok := s.models.lookup(r.PathValue("model"))
	if !ok {
		return s.unknownModel(r, r.PathValue("model"))
	}
	writeJSON(w, http.StatusOK, s.modelObject(n))
	return nil
}
