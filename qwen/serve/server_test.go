package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/qwenc/qwenc/compiler"
	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/tokenizer"
	"github.com/qwenc/qwenc/internal/testmodel"
	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/runtime/sampling"
)

// tiny is tiny-a compiled once per test binary: random weights, but
// Qwen's tokenizer and Qwen3's chat template, and fast.
// bundled holds the bundled models compiled for the test binary, in one
// temporary directory.
var bundled struct {
	mu    sync.Mutex
	dir   string
	paths map[string]string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bundled.dir != "" {
		os.RemoveAll(bundled.dir)
	}
	os.Exit(code)
}

// compiledPath compiles a bundled model once (f16, prefill batch 64).
func compiledPath(t *testing.T, name string) string {
	t.Helper()
	return compiledVariant(t, name, name, nil)
}

// compiledVariant compiles the bundled model src once as name, edit (if
// not nil) changing its files first. The files Materialise links are to
// be replaced, not written through.
func compiledVariant(t *testing.T, name, from string, edit func(dir string)) string {
	t.Helper()
	bundled.mu.Lock()
	defer bundled.mu.Unlock()
	if p, ok := bundled.paths[name]; ok {
		return p
	}
	if bundled.dir == "" {
		dir, err := os.MkdirTemp("", "serve-test")
		if err != nil {
			t.Fatal(err)
		}
		bundled.dir, bundled.paths = dir, map[string]string{}
	}
	src := filepath.Join(bundled.dir, name)
	if err := testmodel.Materialise(testmodel.Testdata(t, from), testmodel.Testdata(t, "tokenizer", "tokenizer.json.gz"), src); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(src)
	}
	p := filepath.Join(bundled.dir, name+".qbin")
	if _, err := compiler.Compile(context.Background(), src, compiler.Options{Output: p, MaxPrefill: 64, NoSync: true}); err != nil {
		t.Fatal(err)
	}
	bundled.paths[name] = p
	return p
}

func tinyPath(t *testing.T) string { return compiledPath(t, "tiny-a") }

// question is a prompt whose greedy answer on tiny-a varies: a Thai
// word, then "\tfont" and "(){\n" repeated.
const question = "What is 2+2?"

// syncBuffer collects the server's log: JSON records, one a line.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// records decodes the records logged so far.
func (b *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for line := range strings.Lines(b.String()) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("a log line that is not a JSON record: %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// logged returns the first record with every attribute of want, or nil.
// Values compare as printed: a JSON number decodes as a float64.
func (b *syncBuffer) logged(t *testing.T, want map[string]any) map[string]any {
	t.Helper()
	for _, r := range b.records(t) {
		match := true
		for k, v := range want {
			if got, ok := r[k]; !ok || fmt.Sprint(got) != fmt.Sprint(v) {
				match = false
				break
			}
		}
		if match {
			return r
		}
	}
	return nil
}

// request is an access record's attributes, for logged.
func request(method, path string, status int, level string) map[string]any {
	return map[string]any{"msg": "request", "method": method, "path": path, "status": status, "level": level}
}

type testServer struct {
	*Server
	m     *qwen.Model // the served model
	alone *qwen.Model // the same file, one conversation at a time and no cache: what the model answers alone
	url   string
	log   *syncBuffer
}

// modelOpts are the served model's options the tests vary.
type modelOpts struct {
	Parallel, Queue, Ctx, Chunk int
	Draft                       string // a draft model's path
	// NoCache keeps no finished request's state: a prompt is computed
	// whole, and Ollama's prompt_eval_count, the tokens computed, is its
	// length.
	NoCache bool
	// CacheDir keeps no state in memory, but in files in CacheDir.
	CacheDir string
}

// openModel opens tiny-a with the engine's options.
func openModel(t *testing.T, o modelOpts) *qwen.Model {
	t.Helper()
	opts := []qwen.Option{qwen.WithThreads(2)}
	if o.Parallel > 0 {
		opts = append(opts, qwen.WithParallel(o.Parallel))
	}
	if o.Queue > 0 {
		opts = append(opts, qwen.WithQueue(o.Queue))
	}
	if o.Ctx > 0 {
		opts = append(opts, qwen.WithContext(o.Ctx))
	}
	if o.Chunk > 0 {
		opts = append(opts, qwen.WithPrefillChunk(o.Chunk))
	}
	if o.Draft != "" {
		opts = append(opts, qwen.WithDraftModel(o.Draft))
	}
	if o.NoCache {
		opts = append(opts, qwen.WithStateCache(0))
	}
	if o.CacheDir != "" {
		opts = append(opts, qwen.WithStateCache(1), qwen.WithStateCacheDir(o.CacheDir, 1<<30))
	}
	m, err := qwen.Open(tinyPath(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// newTestServer serves tiny-a over real HTTP on loopback.
func newTestServer(t *testing.T, o modelOpts, so ServerOptions) *testServer {
	t.Helper()
	m := openModel(t, o)
	buf := &syncBuffer{}
	if so.Log == nil {
		so.Log = slog.New(slog.NewJSONHandler(buf, nil))
	}
	s := NewServer(m, so)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return &testServer{Server: s, m: m, alone: openModel(t, modelOpts{Parallel: 1}), url: hs.URL, log: buf}
}

// target is the served model as a request that names it has it.
func (ts *testServer) target() *target {
	return &target{m: ts.m, info: ts.m.Info(), name: ts.Name()}
}

func (ts *testServer) client(opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(ts.url + "/v1/"),
		option.WithAPIKey("unused"), option.WithMaxRetries(0)}, opts...)...)
}

// post sends a JSON body and returns the response, its body read.
func (ts *testServer) post(t *testing.T, path, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("POST", ts.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, req)
}

func (ts *testServer) get(t *testing.T, path string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", ts.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// sseEvents splits a Server-Sent Events body into its data payloads.
func sseEvents(t *testing.T, body string) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				t.Fatalf("not an SSE data line: %q", line)
			}
			out = append(out, data)
		}
	}
	return out
}

func unmarshal(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%v in %q", err, s)
	}
}

// greedyChat is what tiny-a answers msgs greedily, alone: n tokens of
// reasoning and content text.
func greedyChat(t *testing.T, ts *testServer, msgs []qwen.Message, think bool, n int) (prompt []int32, reasoning, content string) {
	prompt, _, reasoning, content = greedyChatIDs(t, ts, msgs, think, n)
	return prompt, reasoning, content
}

func greedyChatIDs(t *testing.T, ts *testServer, msgs []qwen.Message, think bool, n int) (prompt, ids []int32, reasoning, content string) {
	t.Helper()
	return greedyAlone(t, ts, qwen.Request{Messages: msgs, NoThinking: !think, MaxTokens: n, PromptOnly: n == 0})
}

// greedyAlone is what tiny-a generates for req greedily, alone.
func greedyAlone(t *testing.T, ts *testServer, req qwen.Request) (prompt, ids []int32, reasoning, content string) {
	t.Helper()
	req.Sampling = &sampling.Params{}
	st, err := ts.alone.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var r, c strings.Builder
	for d, err := range st.Deltas() {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.IDs...)
		r.WriteString(d.Reasoning)
		c.WriteString(d.Content)
	}
	return st.Prompt(), ids, r.String(), c.String()
}

// waitFor waits up to a minute for ok.
func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestHealthMetricsAndLog(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	if resp, body := ts.get(t, "/health"); resp.StatusCode != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatalf("/health: %d %s", resp.StatusCode, body)
	}
	resp, body := ts.post(t, "/v1/chat/completions", `{"model":"tiny-a","messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"temperature":0}`)
	if resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, body)
	}
	ts.post(t, "/v1/chat/completions", `{"model":"nope","messages":[]}`)
	_, metrics := ts.get(t, "/metrics")
	for _, want := range []string{
		`qwenrun_requests_total{endpoint="/v1/chat/completions",status="200"} 1`,
		`qwenrun_requests_total{endpoint="/v1/chat/completions",status="404"} 1`,
		`qwenrun_requests_total{endpoint="/health",status="200"} 1`,
		"qwenrun_generated_tokens_total 3",
		"qwenrun_active_conversations 0",
		"qwenrun_queued_requests 0",
		"qwenrun_kv_cache_bytes 0",
		"qwenrun_time_to_first_token_seconds_count 1",
		"qwenrun_inter_token_latency_seconds_count 2",
		"qwenrun_decode_steps_total 2", // the first token is the prompt's step's
		"qwenrun_decoded_conversations_total 2",
		"qwenrun_prefix_cache_bytes",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if !strings.Contains(metrics, "qwenrun_prompt_tokens_total") {
		t.Errorf("/metrics lacks the prompt tokens")
	}
	for _, want := range []map[string]any{
		request("GET", "/health", 200, "INFO"),
		request("POST", "/v1/chat/completions", 404, "INFO"),
	} {
		if ts.log.logged(t, want) == nil {
			t.Errorf("the log lacks %v:\n%s", want, ts.log)
		}
	}
	chat := ts.log.logged(t, request("POST", "/v1/chat/completions", 200, "INFO"))
	if chat == nil || chat["generated_tokens"] != 3.0 || chat["prompt_tokens"] == nil || chat["cached_tokens"] == nil ||
		chat["ttft"] == nil || chat["duration"] == nil || chat["error"] != nil {
		t.Errorf("the chat's record is %v:\n%s", chat, ts.log)
	}
	if r := ts.log.logged(t, request("POST", "/v1/chat/completions", 404, "INFO")); r == nil || !strings.Contains(fmt.Sprint(r["error"]), "nope") {
		t.Errorf("the 404's record does not say why: %v", r)
	}
	if ts.log.logged(t, map[string]any{"msg": "request body"}) != nil {
		t.Errorf("request bodies logged at info:\n%s", ts.log)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// tinyTokenizer is tiny-a's tokenizer, Qwen's, from the compiled file.
func tinyTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	f, err := format.Open(tinyPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := f.Bytes(format.SecTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(bytes.Clone(b))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// smallBuffers gives every accepted connection a small send buffer, so
// that a client which stops reading blocks the server's writes soon.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestStalledStreamFreesSlot: a client that stops reading a stream, its
// connection left open, is taken as gone once a write has waited the
// stall out: its generation stops, its request ends (a 499 in the log,
// where the handler used to block for good), and the one slot answers
// the next request.
func TestStalledStreamFreesSlot(t *testing.T) {
	m := openModel(t, modelOpts{Parallel: 1})
	buf := &syncBuffer{}
	s := NewServer(m, ServerOptions{stall: 300 * time.Millisecond, Log: slog.New(slog.NewJSONHandler(buf, nil))})
	hs := httptest.NewUnstartedServer(s.Handler())
	hs.Listener = smallBuffers{hs.Listener}
	hs.Start()
	t.Cleanup(hs.Close)

	stuck, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	stuck.(*net.TCPConn).SetReadBuffer(4096)
	const most = 1500
	body := fmt.Sprintf(`{"model":"tiny-a","stream":true,"max_tokens":%d,"ignore_eos":true,"messages":[{"role":"user","content":"Count."}]}`, most)
	fmt.Fprintf(stuck, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// Read the head and a little of the stream, so the generation runs,
	// then nothing more.
	if _, err := io.ReadFull(stuck, make([]byte, 256)); err != nil {
		t.Fatal(err)
	}
	var gone map[string]any
	for deadline := time.Now().Add(60 * time.Second); gone == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled stream's request has not ended; log:\n%s", buf)
		}
		gone = buf.logged(t, request("POST", "/v1/chat/completions", 499, "INFO"))
	}
	if n := gone["generated_tokens"].(float64); n >= most {
		t.Errorf("the stalled stream generated all its %v tokens", n)
	}

	resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"tiny-a","max_tokens":2,"messages":[{"role":"user","content":"Hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("the next request: %d %s", resp.StatusCode, out)
	}
}
