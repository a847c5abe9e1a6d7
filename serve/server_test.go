package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/qwenc/qwenc/chat"
	"github.com/qwenc/qwenc/compiler"
	"github.com/qwenc/qwenc/internal/testmodel"
)

// tiny is tiny-a compiled once per test binary: random weights, but
// Qwen's tokenizer and Qwen3's chat template, and fast.
var tiny struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tiny.dir != "" {
		os.RemoveAll(tiny.dir)
	}
	os.Exit(code)
}

func tinyPath(t *testing.T) string {
	t.Helper()
	tiny.once.Do(func() {
		if tiny.dir, tiny.err = os.MkdirTemp("", "serve-test"); tiny.err != nil {
			return
		}
		src := filepath.Join(tiny.dir, "tiny-a")
		tiny.err = testmodel.Materialise(testmodel.Testdata(t, "tiny-a"), testmodel.Testdata(t, "tokenizer", "tokenizer.json.gz"), src)
		if tiny.err != nil {
			return
		}
		tiny.path = filepath.Join(tiny.dir, "tiny-a.qbin")
		_, tiny.err = compiler.Compile(context.Background(), src, compiler.Options{Output: tiny.path, MaxPrefill: 64, NoSync: true})
	})
	if tiny.err != nil {
		t.Fatal(tiny.err)
	}
	return tiny.path
}

// question is a prompt whose greedy answer on tiny-a varies: a Thai
// word, then "\tfont" and "(){\n" repeated.
const question = "What is 2+2?"

// syncBuffer collects the server's log lines.
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

type testServer struct {
	*Server
	e   *Engine
	url string
	log *syncBuffer
}

// newTestServer serves tiny-a over real HTTP on loopback.
func newTestServer(t *testing.T, o Options, so ServerOptions) *testServer {
	t.Helper()
	m := openModel(t, tinyPath(t))
	e := newEngine(t, m, o)
	buf := &syncBuffer{}
	so.Log = buf
	s, err := NewServer(e, so)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return &testServer{Server: s, e: e, url: hs.URL, log: buf}
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
func greedyChat(t *testing.T, ts *testServer, msgs []chat.Message, think bool, n int) (prompt []int32, reasoning, content string) {
	prompt, _, reasoning, content = greedyChatIDs(t, ts, msgs, think, n)
	return prompt, reasoning, content
}

func greedyChatIDs(t *testing.T, ts *testServer, msgs []chat.Message, think bool, n int) (prompt, ids []int32, reasoning, content string) {
	t.Helper()
	m := ts.e.Model()
	prompt, err := chat.Encode(m.Tokenizer, chat.Render(chat.Qwen3, msgs, true, think))
	if err != nil {
		t.Fatal(err)
	}
	sp := chat.NewSplitter(m.Tokenizer, false)
	var r, c strings.Builder
	ids = greedyAlone(t, m, prompt, n)
	for _, id := range ids {
		a, b := sp.Add(id)
		r.WriteString(a)
		c.WriteString(b)
	}
	a, b := sp.Flush()
	return prompt, ids, r.String() + a, c.String() + b
}

func TestHealthMetricsAndLog(t *testing.T) {
	ts := newTestServer(t, Options{}, ServerOptions{})
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
		"qwenrun_prefix_cache_bytes",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if !strings.Contains(metrics, "qwenrun_prompt_tokens_total") {
		t.Errorf("/metrics lacks the prompt tokens")
	}
	log := ts.log.String()
	for _, want := range []string{"GET /health 200", "POST /v1/chat/completions 200 prompt=", "generated=3 ttft=", "POST /v1/chat/completions 404"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
