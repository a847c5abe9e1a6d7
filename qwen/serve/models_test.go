package serve

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qwenc/qwenc/qwen"
)

// modelsServer serves tiny-a under its name and gpt-5-codex (its own
// file), claude-sonnet-4-5 (a link to it) and emb (tiny-emb, another
// model), loaded in tiny-a's place when named.
func modelsServer(t *testing.T) *testServer {
	t.Helper()
	link := filepath.Join(t.TempDir(), "link.qbin")
	if err := os.Symlink(tinyPath(t), link); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var opened []*qwen.Model
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range opened {
			m.Close() // the last one again: Close is idempotent
		}
	})
	open := func(path string) (*qwen.Model, error) {
		m, err := qwen.Open(path, qwen.WithThreads(2), qwen.WithParallel(1))
		if err == nil {
			mu.Lock()
			opened = append(opened, m)
			mu.Unlock()
		}
		return m, err
	}
	ts := newTestServer(t, modelOpts{Parallel: 1}, ServerOptions{Open: open, Models: map[string]string{
		"gpt-5-codex": tinyPath(t), "claude-sonnet-4-5": link, "emb": compiledPath(t, "tiny-emb"),
	}})
	t.Cleanup(func() { ts.Close() })
	return ts
}

// TestModelPages: /v1/models as Anthropic's model list pages it (limit,
// after_id, before_id), each model with Anthropic's fields beside
// OpenAI's; without them, every model at once as OpenAI lists them.
func TestModelPages(t *testing.T) {
	ts := modelsServer(t)
	type page struct {
		Data    []modelObject
		HasMore bool    `json:"has_more"`
		FirstID *string `json:"first_id"`
		LastID  *string `json:"last_id"`
	}
	for query, want := range map[string]string{
		"":                                    "tiny-a claude-sonnet-4-5 emb gpt-5-codex",
		"?limit=2":                            "tiny-a claude-sonnet-4-5 more",
		"?limit=2&after_id=claude-sonnet-4-5": "emb gpt-5-codex",
		"?limit=1&after_id=emb":               "gpt-5-codex",
		"?limit=1&before_id=emb":              "claude-sonnet-4-5 more",
		"?after_id=gpt-5-codex":               "",
	} {
		resp, body := ts.get(t, "/v1/models"+query)
		var p page
		unmarshal(t, body, &p)
		var got []string
		for _, m := range p.Data {
			got = append(got, m.ID)
			if m.Type != "model" || m.DisplayName != m.ID || m.Object != "model" {
				t.Errorf("%s: %+v", query, m)
			}
			if at, err := time.Parse(time.RFC3339, m.CreatedAt); err != nil || at.Unix() != m.Created {
				t.Errorf("%s: created_at %q, created %d", query, m.CreatedAt, m.Created)
			}
		}
		if p.HasMore {
			got = append(got, "more")
		}
		if resp.StatusCode != 200 || strings.Join(got, " ") != want {
			t.Errorf("%s: %d %q, want %q", query, resp.StatusCode, got, want)
		}
		if len(p.Data) > 0 && (p.FirstID == nil || *p.FirstID != p.Data[0].ID || p.LastID == nil || *p.LastID != p.Data[len(p.Data)-1].ID) {
			t.Errorf("%s: first_id %v, last_id %v", query, p.FirstID, p.LastID)
		}
	}
	for query, param := range map[string]string{"?limit=0": "limit", "?limit=x": "limit", "?after_id=nope": "after_id",
		"?after_id=emb&before_id=tiny-a": "before_id"} {
		resp, body := ts.get(t, "/v1/models"+query)
		if resp.StatusCode != 400 || !strings.Contains(body, `"param":"`+param+`"`) {
			t.Errorf("%s: %d %s", query, resp.StatusCode, body)
		}
	}
}

// TestModelNames: the names of ServerOptions.Models are listed by
// /v1/models and /api/tags, an alias of the served model's file (or of a
// link to it) answers from the served model under the alias, and another
// model is loaded in its place and back; /api/ps and /api/show tell which.
func TestModelNames(t *testing.T) {
	ts := modelsServer(t)
	var list struct{ Data []modelObject }
	_, body := ts.get(t, "/v1/models")
	unmarshal(t, body, &list)
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	if want := []string{"tiny-a", "claude-sonnet-4-5", "emb", "gpt-5-codex"}; !slices.Equal(ids, want) {
		t.Errorf("/v1/models: %v, want %v", ids, want)
	}
	if resp, body := ts.get(t, "/v1/models/emb"); resp.StatusCode != 200 || !strings.Contains(body, `"id":"emb"`) {
		t.Errorf("/v1/models/emb: %d %s", resp.StatusCode, body)
	}
	var tags struct{ Models []ollamaModelEntry }
	_, body = ts.get(t, "/api/tags")
	unmarshal(t, body, &tags)
	if len(tags.Models) != 4 || tags.Models[2].Name != "emb:latest" || tags.Models[2].Details.Family != "qwen3" || tags.Models[0].Size == 0 {
		t.Errorf("/api/tags: %s", body)
	}

	for _, name := range []string{"gpt-5-codex", "claude-sonnet-4-5", "claude-sonnet-4-5:latest"} {
		resp, body := ts.post(t, "/v1/chat/completions", `{"model":"`+name+`",`+hi+`,"max_tokens":2}`)
		var c chatCompletion
		unmarshal(t, body, &c)
		if resp.StatusCode != 200 || c.Model != strings.TrimSuffix(name, ":latest") {
			t.Errorf("%s: %d %s", name, resp.StatusCode, body)
		}
		if cur := ts.models.resident(); cur.m != ts.m {
			t.Fatalf("%s: the served model's file was loaded again", name)
		}
	}
	resp, body := ts.post(t, "/v1/messages", `{"model":"gpt-4o","max_tokens":2,`+hi+`}`)
	if resp.StatusCode != 404 || !strings.Contains(body, `this server has \"tiny-a\", \"claude-sonnet-4-5\", \"emb\", \"gpt-5-codex\"`) {
		t.Errorf("an unknown name: %d %s", resp.StatusCode, body)
	}

	// Another model: loaded in the served model's place, which is shut down.
	resp, body = ts.post(t, "/v1/embeddings", `{"model":"emb","input":"hello"}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"model":"emb"`) {
		t.Fatalf("emb: %d %s", resp.StatusCode, body)
	}
	if cur := ts.models.resident(); cur.info.Name != "tiny-emb" || !cur.owned {
		t.Fatalf("resident after emb: %+v", cur.info)
	}
	var ps struct{ Models []ollamaModelEntry }
	_, body = ts.get(t, "/api/ps")
	unmarshal(t, body, &ps)
	if len(ps.Models) != 1 || ps.Models[0].Name != "emb:latest" || ps.Models[0].SizeVRAM == nil || *ps.Models[0].SizeVRAM != 0 ||
		ps.Models[0].ContextLength == 0 || ps.Models[0].ExpiresAt == "" {
		t.Errorf("/api/ps with emb loaded: %s", body)
	}
	// /api/show reads a model that is not loaded from its file.
	var show struct {
		Capabilities []string
		ModelInfo    map[string]any `json:"model_info"`
		Template     string
	}
	_, body = ts.post(t, "/api/show", `{"model":"gpt-5-codex"}`)
	unmarshal(t, body, &show)
	if !slices.Equal(show.Capabilities, []string{"completion", "tools", "thinking"}) || show.ModelInfo["qwen3.context_length"] == nil ||
		!strings.Contains(show.Template, ".Tools") {
		t.Errorf("/api/show gpt-5-codex: %s", body)
	}
	_, body = ts.post(t, "/api/show", `{"name":"emb"}`)
	unmarshal(t, body, &show)
	if !slices.Equal(show.Capabilities, []string{"embedding"}) {
		t.Errorf("/api/show emb: %s", body)
	}

	// An unload of a model that is not resident answers at once, without
	// loading it to unload it.
	resp, body = ts.post(t, "/api/generate", `{"model":"tiny-a","keep_alive":0}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"done_reason":"unload"`) || ts.models.resident().info.Name != "tiny-emb" {
		t.Errorf("unload of tiny-a with emb resident: %d %s; resident %s", resp.StatusCode, body, ts.models.resident().info.Name)
	}

	// And back: the served model's file opened again.
	resp, body = ts.post(t, "/api/chat", `{"model":"tiny-a:latest",`+hi+`,"stream":false,"options":{"num_predict":2}}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"model":"tiny-a"`) {
		t.Fatalf("tiny-a again: %d %s", resp.StatusCode, body)
	}
	_, body = ts.get(t, "/api/ps")
	unmarshal(t, body, &ps)
	var names []string
	for _, m := range ps.Models {
		names = append(names, m.Name)
	}
	if want := []string{"tiny-a:latest", "claude-sonnet-4-5:latest", "gpt-5-codex:latest"}; !slices.Equal(names, want) {
		t.Errorf("/api/ps with tiny-a loaded again: %v, want %v", names, want)
	}
}

// TestModelSwapWaits: a request for another model waits for the resident
// one's requests to end, and requests for the resident one that come
// meanwhile wait behind it; one that gives up waiting lets the others go.
func TestModelSwapWaits(t *testing.T) {
	ts := modelsServer(t)
	// A request on tiny-a that holds it until released.
	if _, err := ts.models.acquire(context.Background(), ts.models.files["tiny-a"]); err != nil {
		t.Fatal(err)
	}
	// Released once, here or when the test fails before it does: the
	// server's Close waits for it.
	var release sync.Once
	t.Cleanup(func() { release.Do(ts.models.release) })
	waiting := func(n int) func() bool {
		return func() bool {
			ts.models.mu.Lock()
			defer ts.models.mu.Unlock()
			return ts.models.wanting == n
		}
	}

	// A request that gives up waiting leaves nothing behind.
	gaveUp, giveUp := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		req, _ := http.NewRequestWithContext(gaveUp, "POST", ts.url+"/v1/embeddings", strings.NewReader(`{"model":"emb","input":"x"}`))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- 0
	}()
	waitFor(t, waiting(1))
	giveUp()
	<-done
	waitFor(t, waiting(0))
	if resp, body := ts.post(t, "/v1/chat/completions", `{"model":"gpt-5-codex",`+hi+`,"max_tokens":1}`); resp.StatusCode != 200 {
		t.Fatalf("tiny-a while it is resident and nothing waits: %d %s", resp.StatusCode, body)
	}

	// The order the models are loaded in is the order they were served
	// in: the clients' goroutines may see their answers in either order.
	loaded := recordLoads(ts)
	results := make(chan string, 2)
	go func() {
		resp, body := ts.post(t, "/v1/embeddings", `{"model":"emb","input":"x"}`)
		results <- "emb " + resp.Status + " " + body[:min(len(body), 200)]
	}()
	waitFor(t, waiting(1))
	go func() {
		resp, body := ts.post(t, "/v1/chat/completions", `{"model":"tiny-a",`+hi+`,"max_tokens":1}`)
		results <- "tiny-a " + resp.Status + " " + body[:min(len(body), 200)]
	}()
	// The request for tiny-a waits behind emb's although tiny-a is
	// resident.
	waitFor(t, func() bool {
		ts.models.mu.Lock()
		defer ts.models.mu.Unlock()
		return ts.models.waiting == 2
	})
	release.Do(ts.models.release)
	got := []string{<-results, <-results}
	slices.Sort(got)
	if !strings.HasPrefix(got[0], "emb 200") || !strings.HasPrefix(got[1], "tiny-a 200") {
		t.Errorf("answers: %q", got)
	}
	// tiny-a, resident when its request came, is loaded again after emb:
	// its request waited behind emb's.
	if want := []string{ts.models.files["emb"], ts.models.files["tiny-a"]}; !slices.Equal(loaded(), want) {
		t.Errorf("loaded %q, want %q", loaded(), want)
	}
}

// TestModelDir lists a directory's .qbin files by name.
func TestModelDir(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.qbin", "b.qbin", "notes.txt"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	os.Mkdir(filepath.Join(dir, "c.qbin"), 0o755)
	got, err := ModelDir(dir)
	if err != nil || len(got) != 2 || got["a"] != filepath.Join(dir, "a.qbin") || got["b"] != filepath.Join(dir, "b.qbin") {
		t.Errorf("ModelDir: %v %v", got, err)
	}
	if _, err := ModelDir(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing directory: no error")
	}
}

// TestWrongKindNotLoaded: a request for a model of the wrong kind (chat
// with an embedding model, embeddings with a generation model) is
// refused naming the model, before it is loaded in the resident one's
// place: a bad request does not evict the model others are using.
func TestWrongKindNotLoaded(t *testing.T) {
	ts := modelsServer(t)
	loaded := recordLoads(ts)
	check := func(resident, path, body, want string) {
		t.Helper()
		resp, got := ts.post(t, path, body)
		if resp.StatusCode != 400 || !strings.Contains(got, want) {
			t.Errorf("%s %s: %d %s, want 400 with %s", path, body, resp.StatusCode, got, want)
		}
		if cur := ts.models.resident(); cur == nil || cur.path != ts.models.files[resident] {
			t.Errorf("%s %s: the resident model changed", path, body)
		}
	}
	// tiny-a is resident.
	// A bad request for emb is refused without loading it.
	check("tiny-a", "/v1/embeddings", `{"model":"emb","input":""}`, `"param":"input"`)
	check("tiny-a", "/v1/embeddings", `{"model":"emb","input":"x","encoding_format":"hex"}`, `"param":"encoding_format"`)
	check("tiny-a", "/v1/rerank", `{"model":"emb","query":"","documents":["d"]}`, `"param":"query"`)
	check("tiny-a", "/api/embed", `{"model":"emb","input":["a",""]}`, `{"error":"input[1]: `)
	check("tiny-a", "/api/embed", `{"model":"emb","input":"x","dimensions":-1}`, `{"error":"dimensions -1`)
	check("tiny-a", "/v1/chat/completions", `{"model":"emb",`+hi+`}`, `"param":"model"`)
	check("tiny-a", "/api/generate", `{"model":"emb","prompt":"hi"}`, `emb: this is an embedding model`)
	check("tiny-a", "/api/generate", `{"model":"emb"}`, `emb: this is an embedding model`)
	check("tiny-a", "/v1/rerank", `{"model":"emb","query":"q","documents":["d"]}`, `reranking needs a reranker`)
	if l := loaded(); len(l) != 0 {
		t.Errorf("loaded %q for requests it refuses", l)
	}
	// emb is resident.
	if resp, body := ts.post(t, "/v1/embeddings", `{"model":"emb","input":"x"}`); resp.StatusCode != 200 {
		t.Fatalf("emb: %d %s", resp.StatusCode, body)
	}
	check("emb", "/v1/embeddings", `{"model":"tiny-a","input":"x"}`, `"param":"model"`)
	check("emb", "/api/embed", `{"model":"tiny-a","input":"x"}`, `tiny-a: this model generates text`)
	check("emb", "/api/embeddings", `{"model":"gpt-5-codex"}`, `gpt-5-codex: this model generates text`)
	// Unloading is for any model, as Ollama's (ollama stop).
	for _, path := range []string{"/api/generate", "/api/chat"} {
		if resp, body := ts.post(t, path, `{"model":"emb","keep_alive":0}`); resp.StatusCode != 200 || !strings.Contains(body, `"done_reason":"unload"`) {
			t.Errorf("%s: unloading emb: %d %s", path, resp.StatusCode, body)
		}
	}
	if want := []string{ts.models.files["emb"]}; !slices.Equal(loaded(), want) {
		t.Errorf("loaded %q, want %q", loaded(), want)
	}
}

// recordLoads records the files the server loads from now on, in order;
// the returned function gives them so far.
func recordLoads(ts *testServer) func() []string {
	var mu sync.Mutex
	var loads []string
	ts.models.mu.Lock()
	open := ts.models.open
	ts.models.open = func(path string) (*qwen.Model, error) {
		mu.Lock()
		loads = append(loads, path)
		mu.Unlock()
		return open(path)
	}
	ts.models.mu.Unlock()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(loads)
	}
}
