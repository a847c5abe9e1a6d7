package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/qwenc/qwenc/compiler"
	"github.com/qwenc/qwenc/internal/testmodel"
)

// What make test-agents records of each real client (testdata/agents,
// whose README says how), and the replay of those records against the
// server: the requests the clients sent, kept so that a change that
// breaks one shows without the network or the clients.

// exchange is a request a client sent, and the status it was answered.
type exchange struct {
	Method string            `json:"method"`
	Path   string            `json:"path"` // with the query
	Header map[string]string `json:"header"`
	Body   json.RawMessage   `json:"body,omitempty"` // JSON, or a JSON string of what was not
	Status int               `json:"status"`
}

// clientLog is one client's exchanges, in order.
type clientLog struct {
	Client    string     `json:"client"`
	Exchanges []exchange `json:"exchanges"`
}

// secretHeader is a header that may carry a credential: left out of the
// records.
func secretHeader(name string) bool {
	n := strings.ToLower(name)
	return n == "authorization" || n == "cookie" || n == "proxy-authorization" ||
		strings.Contains(n, "key") || strings.Contains(n, "token") || strings.Contains(n, "secret")
}

// recorder is a reverse proxy in front of a server that keeps each
// request as an exchange; scrub replaces what varies from run to run
// (temporary directories) in what it keeps.
type recorder struct {
	mu    sync.Mutex
	log   []exchange
	next  http.Handler
	scrub *strings.Replacer
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	ex := exchange{Method: r.Method, Path: rc.scrub.Replace(r.URL.RequestURI()), Header: map[string]string{}}
	for name, vs := range r.Header {
		if !secretHeader(name) {
			ex.Header[strings.ToLower(name)] = rc.scrub.Replace(strings.Join(vs, ", "))
		}
	}
	if len(body) > 0 {
		text := rc.scrub.Replace(string(body))
		if json.Valid([]byte(text)) {
			ex.Body = json.RawMessage(text)
		} else {
			ex.Body, _ = json.Marshal(text)
		}
	}
	// Kept in the order the requests came, its status once answered.
	rc.mu.Lock()
	i := len(rc.log)
	rc.log = append(rc.log, ex)
	rc.mu.Unlock()
	sw := &statusWriter{ResponseWriter: w}
	rc.next.ServeHTTP(sw, r)
	rc.mu.Lock()
	rc.log[i].Status = statusOr200(sw.status)
	rc.mu.Unlock()
}

func statusOr200(s int) int {
	if s == 0 {
		return http.StatusOK
	}
	return s
}

func (rc *recorder) exchanges() []exchange {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.log)
}

// readClientLogs reads the records testdata/agents/requests holds.
func readClientLogs(t *testing.T) []clientLog {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "agents", "requests", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no records of the agents' requests in testdata/agents/requests: %v", err)
	}
	var logs []clientLog
	for _, f := range files {
		var l clientLog
		readFile(t, f, &l)
		if l.Client == "" || len(l.Exchanges) == 0 {
			t.Fatalf("%s: no client or no exchanges", f)
		}
		logs = append(logs, l)
	}
	return logs
}

// demoLong is the bundled demo model compiled for a 32K context, as
// make test-agents serves it (the coding agents' prompts are 7,000 to
// 14,000 tokens).
func demoLong(t *testing.T) string { return demoLongOf(t, "qwen3-go-demo") }

// demoLongOf is the bundled model name compiled so, in a file named as
// make test-agents's (the name the recorded requests give).
func demoLongOf(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, name)
	if err := testmodel.Materialise(testmodel.Testdata(t, name), testmodel.Testdata(t, "tokenizer", "tokenizer.json.gz"), src); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "qwen3-go-demo.qbin")
	if _, err := compiler.Compile(context.Background(), src, compiler.Options{Output: p, MaxPrefill: 512, NoSync: true, RopeScaling: agentsRopeScaling}); err != nil {
		t.Fatal(err)
	}
	return p
}

// agentsRopeScaling stretches the demo model's 2,048 positions to 32,768,
// as the Makefile's test-agents compiles it.
const agentsRopeScaling = "yarn:16:2048"

// replayTokens bounds the answers of a replay: the shapes are what is
// checked, and a structured answer completes within it.
const replayTokens = 64

// replayBody is a recorded body with its answer bounded to replayTokens.
func replayBody(path string, body json.RawMessage) (json.RawMessage, error) {
	var m map[string]any
	if len(body) == 0 || json.Unmarshal(body, &m) != nil || m == nil {
		return body, nil
	}
	bound := func(obj map[string]any, field string) {
		if v, ok := obj[field].(float64); !ok || v > replayTokens {
			obj[field] = replayTokens
		}
	}
	switch {
	case strings.HasPrefix(path, "/v1/chat/completions"):
		if _, ok := m["max_completion_tokens"]; ok {
			bound(m, "max_completion_tokens")
		} else {
			bound(m, "max_tokens")
		}
	case strings.HasPrefix(path, "/v1/responses"):
		bound(m, "max_output_tokens")
	case strings.HasPrefix(path, "/v1/messages") && !strings.HasPrefix(path, "/v1/messages/count_tokens"):
		bound(m, "max_tokens")
		if th, ok := m["thinking"].(map[string]any); ok {
			if b, ok := th["budget_tokens"].(float64); ok && b >= replayTokens {
				th["budget_tokens"] = replayTokens / 2
			}
		}
	case path == "/api/chat" || path == "/api/generate":
		opts, _ := m["options"].(map[string]any)
		if opts == nil {
			opts = map[string]any{}
			m["options"] = opts
		}
		bound(opts, "num_predict")
	}
	return json.Marshal(m)
}

// answerShape checks that an answer is what its protocol's clients
// parse: the object of its endpoint, or a stream that ends as the
// endpoint's streams end.
func answerShape(path string, resp *http.Response, body string) error {
	ct := resp.Header.Get("Content-Type")
	p, _, _ := strings.Cut(path, "?")
	switch {
	case strings.HasPrefix(ct, "text/event-stream"):
		var events, data []string
		for line := range strings.Lines(body) {
			line = strings.TrimRight(line, "\r\n")
			if e, ok := strings.CutPrefix(line, "event: "); ok {
				events = append(events, e)
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				data = append(data, d)
			}
		}
		if len(data) == 0 {
			return fmt.Errorf("an event stream without data")
		}
		for _, d := range data {
			if d != "[DONE]" && !json.Valid([]byte(d)) {
				return fmt.Errorf("an event's data is not JSON: %q", d)
			}
		}
		last := data[len(data)-1]
		switch {
		case p == "/v1/chat/completions" && last != "[DONE]":
			return fmt.Errorf("the stream ends with %q, not [DONE]", last)
		case p == "/v1/responses" && !slices.Contains([]string{"response.completed", "response.incomplete"}, events[len(events)-1]):
			return fmt.Errorf("the stream ends with %s", events[len(events)-1])
		case p == "/v1/messages" && events[len(events)-1] != "message_stop":
			return fmt.Errorf("the stream ends with %s", events[len(events)-1])
		}
	case strings.HasPrefix(ct, "application/x-ndjson"):
		sc := bufio.NewScanner(strings.NewReader(body))
		sc.Buffer(nil, 1<<24)
		var last struct {
			Done   bool
			Status string // a pull's
		}
		for sc.Scan() {
			if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
				return fmt.Errorf("a line that is not JSON: %q", sc.Text())
			}
		}
		if !last.Done && (p != "/api/pull" || last.Status != "success") {
			return fmt.Errorf("the stream ends without done")
		}
	case strings.HasPrefix(ct, "application/json"):
		var obj struct {
			Object, Type string
			Done         *bool
		}
		if err := json.Unmarshal([]byte(body), &obj); err != nil {
			return fmt.Errorf("not JSON: %v", err)
		}
		want := map[string]string{"/v1/chat/completions": "chat.completion", "/v1/responses": "response", "/v1/messages": "message"}[p]
		switch {
		case want != "" && obj.Object != want && obj.Type != want:
			return fmt.Errorf("object %q, type %q: want %s", obj.Object, obj.Type, want)
		case (p == "/api/chat" || p == "/api/generate") && (obj.Done == nil || !*obj.Done):
			return fmt.Errorf("an Ollama answer not done")
		}
	default:
		return fmt.Errorf("content type %q", ct)
	}
	return nil
}

// TestAgentRequests replays what the real clients sent (make test-agents
// records it: Claude Code, Codex, qwen-code, opencode, the OpenAI,
// Anthropic, Ollama, Agents, AI SDK and LangChain packages) against the
// demo model compiled for a 32K context, each answer bounded to a few
// tokens: each is answered with the status it had, in its protocol's
// shape.
func TestAgentRequests(t *testing.T) { replayAgents(t, demoLong(t)) }

// TestAgentRequestsQwen35 replays them against Qwen3.5's demo model,
// whose template differs (one system message, first; calls in XML; the
// thinking prompt opened): each is answered as on Qwen3.
func TestAgentRequestsQwen35(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the agents' prompts on a second model")
	}
	replayAgents(t, demoLongOf(t, "qwen35-go-demo"))
}

// replayAgents replays the recorded requests against the model at path,
// served under the name the clients gave.
func replayAgents(t *testing.T, path string) {
	logs := readClientLogs(t)
	ts, _ := serveFile(t, path)
	for _, l := range logs {
		t.Run(l.Client, func(t *testing.T) {
			for i, ex := range l.Exchanges {
				body, err := replayBody(ex.Path, ex.Body)
				if err != nil {
					t.Fatal(err)
				}
				req, err := http.NewRequest(ex.Method, ts.url+ex.Path, bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				for name, v := range ex.Header {
					switch name {
					case "content-length", "host", "accept-encoding", "connection":
					default:
						req.Header.Set(name, v)
					}
				}
				resp, out := do(t, req)
				what := fmt.Sprintf("%s exchange %d: %s %s", l.Client, i, ex.Method, ex.Path)
				if resp.StatusCode != ex.Status {
					t.Errorf("%s: %d, recorded %d: %.500s", what, resp.StatusCode, ex.Status, out)
					continue
				}
				if ex.Status < 300 {
					if err := answerShape(ex.Path, resp, out); err != nil {
						t.Errorf("%s: %v: %.500s", what, err, out)
					}
				}
			}
		})
	}
}

// writeClientLog writes a client's exchanges where path says.
func writeClientLog(path string, l clientLog) error {
	b, err := json.MarshalIndent(l, "", " ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
