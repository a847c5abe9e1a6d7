package serve

import (
	"bufio"
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/qwenc/qwenc/runtime/sampling"
)

// openAIError is OpenAI's error shape, pointers to tell null from "".
type openAIError struct {
	Error *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

const hi = `"messages":[{"role":"user","content":"Hi"}]`

func TestBadRequests(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	for _, c := range []struct {
		body, param, msg string
	}{
		{`{"model":"tiny-a",` + hi, "", "malformed JSON"},
		{`{"model":"tiny-a",` + hi + `} {}`, "", "more data after the JSON object"},
		{``, "", "the request body is empty"},
		{`[1,2]`, "", "want an object"},
		{`{"model":"tiny-a","messages":"Hi"}`, "messages", "messages: want an array, got string"},
		{`{"model":"tiny-a",` + hi + `,"temperature":"hot"}`, "temperature", "temperature: want a number, got string"},
		{`{"model":"tiny-a",` + hi + `,"max_tokens":1.5}`, "max_tokens", "want an integer"},
		{`{"model":"tiny-a",` + hi + `,"stream":"yes"}`, "stream", "want true or false"},
		{`{"model":"tiny-a",` + hi + `,"stop":7}`, "stop", "stop: want a string or a list of strings"},
		{`{"model":"tiny-a",` + hi + `,"stop":["a",7]}`, "stop[1]", "stop[1]: want a string, got number"},
		{`{"model":"tiny-a",` + hi + `,"user":42}`, "user", "user: want a string, got number"},
		{`{"model":"tiny-a",` + hi + `,"stream_options":{"include_usage":true}}`, "stream_options", "stream_options needs stream: true"},
		{`{"model":"tiny-a","messages":[{"role":"user","content":[{"type":"text","text":"Hi"},{"type":"image_url"}]}]}`, "messages[0].content[1]", `a content part of type "image_url": this model has no vision`},
		{`{"model":"tiny-a"}`, "messages", "messages must be a non-empty list"},
		{`{"model":"tiny-a","messages":[]}`, "messages", "messages must be a non-empty list"},
		{`{"model":"tiny-a","messages":[{"role":"robot","content":"Hi"}]}`, "messages[0].role", `unknown role "robot"`},
		{`{"model":"tiny-a","messages":[{"role":"function","content":"42"}]}`, "messages[0].role", `unknown role "function"`},
		{`{` + hi + `}`, "model", "you must provide a model parameter"},
		{`{"model":"tiny-a",` + hi + `,"n":2}`, "n", "n must be 1"},
		{`{"model":"tiny-a",` + hi + `,"temperature":-1}`, "temperature", "outside"},
		{`{"model":"tiny-a",` + hi + `,"top_p":1.5}`, "top_p", "outside"},
		{`{"model":"tiny-a",` + hi + `,"max_tokens":0}`, "max_tokens", "at least 1"},
		{`{"model":"tiny-a",` + hi + `,"top_logprobs":3}`, "top_logprobs", "needs logprobs"},
		{`{"model":"tiny-a",` + hi + `,"logprobs":true,"top_logprobs":21}`, "top_logprobs", "outside"},
		{`{"model":"tiny-a",` + hi + `,"max_tokens":1,"modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"}}`, "modalities[1]", `"audio": this model writes text only`},
		{`{"model":"tiny-a",` + hi + `,"max_tokens":1,"audio":{"voice":"alloy","format":"wav"}}`, "audio", "this model writes text only"},
		{`{"model":"tiny-a",` + hi + `,"max_tokens":1,"functions":[{"name":"f","parameters":{"type":"object"}}]}`, "functions", "functions is not supported: give them as tools"},
		{`{"model":"tiny-a",` + hi + `,"max_tokens":1,"function_call":{"name":"f"}}`, "function_call", "function_call is not supported: name a tool in tool_choice"},
		{`{"model":"tiny-a",` + hi + `,"max_tokens":1,"web_search_options":{}}`, "web_search_options", "web_search_options: this server does not search the web"},
		{`{"model":"tiny-a","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hel"}],"max_tokens":1,"continue_final_message":true,"add_generation_prompt":false}`,
			"continue_final_message", "continue_final_message is not supported"},
		{`{"model":"tiny-a",` + hi + `,"max_tokens":1,"add_generation_prompt":false}`, "add_generation_prompt", "add_generation_prompt false is not supported"},
	} {
		wantBadRequest(t, ts, "/v1/chat/completions", c.body, c.param, c.msg)
	}
	// Unknown fields are ignored, as OpenAI does, and so is a request for
	// text alone.
	resp, body := ts.post(t, "/v1/chat/completions", `{"model":"tiny-a",`+hi+`,"max_tokens":1,"frobnicate":{"x":[1]},"user":"me","modalities":["text"],"audio":null,"functions":[],"function_call":"auto","web_search_options":null,"continue_final_message":false,"add_generation_prompt":true}`)
	if resp.StatusCode != 200 {
		t.Errorf("unknown fields: %d %s", resp.StatusCode, body)
	}
	// Ollama's shape under /api/.
	for _, c := range []struct{ body, msg string }{
		{`{"model":`, "malformed JSON"},
		{`{"model":"tiny-a","messages":[{"role":"user","content":1}]}`, "messages[0].content: want a string, got number"},
		{`{"model":"tiny-a","messages":[{"role":"robot","content":"Hi"}]}`, `unknown role "robot"`},
		{`{"model":"tiny-a",` + hi + `,"think":"maybe"}`, "think: want true, false"},
		{`{"model":"tiny-a",` + hi + `,"options":{"top_k":-3}}`, "top_k -3 is less than -1"},
		{`{` + hi + `}`, "model is required"},
	} {
		resp, body := ts.post(t, "/api/chat", c.body)
		var e struct{ Error string }
		unmarshal(t, body, &e)
		if resp.StatusCode != 400 || !strings.Contains(e.Error, c.msg) {
			t.Errorf("/api/chat %s: %d %s; want 400, %q", c.body, resp.StatusCode, body, c.msg)
		}
	}
}

// TestCompletionBadRequests: a completion prompt the model cannot take is
// refused naming prompt, as the chat endpoint names messages, and a
// parameter it cannot honour naming it.
func TestCompletionBadRequests(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	vocab := itoa(ts.m.Info().Vocab)
	for _, c := range []struct{ prompt, param, msg string }{
		{`""`, "prompt", "the prompt is empty"},
		{`[[]]`, "prompt", "the prompt is empty"},
		{`[1,` + vocab + `]`, "prompt[1]", "token id " + vocab + " is outside the vocabulary [0, " + vocab + ")"},
		{`[[-1]]`, "prompt[0][0]", "token id -1 is outside the vocabulary"},
	} {
		wantBadRequest(t, ts, "/v1/completions", `{"model":"tiny-a","prompt":`+c.prompt+`}`, c.param, c.msg)
	}
	// Fill in the middle would answer another question than the one
	// asked were suffix dropped; empty, it asks for nothing.
	wantBadRequest(t, ts, "/v1/completions", `{"model":"tiny-a","prompt":"func f(","suffix":") {}"}`, "suffix", "suffix is not supported")
	wantBadRequest(t, ts, "/v1/completions", `{"model":"tiny-a","prompt":"Hi","user":{"id":1}}`, "user", "user: want a string, got object")
	wantBadRequest(t, ts, "/v1/completions", `{"model":"tiny-a","prompt":"Hi","stream":false,"stream_options":{"include_usage":true}}`, "stream_options", "stream_options needs stream: true")
	for _, suffix := range []string{`""`, `null`} {
		if resp, out := ts.post(t, "/v1/completions", `{"model":"tiny-a","prompt":"Hi","max_tokens":1,"suffix":`+suffix+`}`); resp.StatusCode != 200 {
			t.Errorf("suffix %s: %d %s", suffix, resp.StatusCode, out)
		}
	}
}

// wantBadRequest posts body to path and wants a 400 in OpenAI's shape,
// with param and a message with msg.
func wantBadRequest(t *testing.T, ts *testServer, path, body, param, msg string) {
	t.Helper()
	resp, out := ts.post(t, path, body)
	var e openAIError
	unmarshal(t, out, &e)
	got := ""
	if e.Error != nil && e.Error.Param != nil {
		got = *e.Error.Param
	}
	if resp.StatusCode != 400 || e.Error == nil || e.Error.Type != "invalid_request_error" || got != param ||
		!strings.Contains(e.Error.Message, msg) {
		t.Errorf("%s %s: %d %s; want 400, param %q, %q", path, body, resp.StatusCode, out, param, msg)
	}
}

func TestBodyLimit(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{MaxBody: 1024})
	long := `{"model":"tiny-a","messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`
	for _, path := range []string{"/v1/chat/completions", "/v1/completions", "/api/chat", "/api/generate", "/v1/messages"} {
		if resp, body := ts.post(t, path, long); resp.StatusCode != 413 || !strings.Contains(body, "larger than 1024 bytes") {
			t.Errorf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
	// Anthropic's endpoints, streamed or not, in Anthropic's shape.
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		resp, body := ts.post(t, path, strings.Replace(long, "{", `{"stream":true,"max_tokens":4,`, 1))
		var e anthropicErrorJSON
		unmarshal(t, body, &e)
		if resp.StatusCode != 413 || e.Type != "error" || e.Error == nil || e.Error.Type != "request_too_large" || !strings.Contains(e.Error.Message, "larger than 1024 bytes") {
			t.Errorf("%s: %d %s; want 413, request_too_large", path, resp.StatusCode, body)
		}
	}
}

func TestPromptLongerThanContext(t *testing.T) {
	ts := newTestServer(t, modelOpts{Ctx: 64}, ServerOptions{})
	long := strings.Repeat("word ", 100)
	prompt, _, _ := greedyChat(t, ts, userMessage(long), true, 0)
	want := "the prompt has " + itoa(len(prompt)) + " tokens, more than the context of 64"
	for _, path := range []string{"/v1/chat/completions", "/api/chat"} {
		resp, body := ts.post(t, path, `{"model":"tiny-a","messages":[{"role":"user","content":"`+long+`"}]}`)
		if resp.StatusCode != 400 || !strings.Contains(body, want) {
			t.Errorf("%s: %d %s; want 400, %q", path, resp.StatusCode, body, want)
		}
	}
	// OpenAI's clients (and the agents and proxies over them) tell this
	// error from the others by its code, to shorten the conversation.
	for path, c := range map[string]struct{ body, param string }{
		"/v1/chat/completions": {`{"model":"tiny-a","messages":[{"role":"user","content":"` + long + `"}]}`, "messages"},
		"/v1/completions":      {`{"model":"tiny-a","prompt":"` + long + `"}`, "prompt"},
	} {
		resp, body := ts.post(t, path, c.body)
		var e openAIError
		unmarshal(t, body, &e)
		if resp.StatusCode != 400 || e.Error == nil || e.Error.Param == nil || *e.Error.Param != c.param ||
			e.Error.Code == nil || *e.Error.Code != "context_length_exceeded" {
			t.Errorf("%s: %d %s; want 400, param %q, code context_length_exceeded", path, resp.StatusCode, body, c.param)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// startLong starts a streaming chat that goes on until cancelled and
// returns once its first chunk arrived.
func startLong(t *testing.T, ts *testServer, ctx context.Context) *bufio.Reader {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", ts.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"tiny-a",`+hi+`,"stream":true,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	return bufio.NewReader(resp.Body)
}

// busyServer is a server of one slot and a queue of one, pinging every 5
// ms, whose slot a long stream holds until stopLong or the test's end.
func busyServer(t *testing.T) (ts *testServer, stopLong func()) {
	ts = newTestServer(t, modelOpts{Parallel: 1, Queue: 1}, ServerOptions{ping: 5 * time.Millisecond})
	long, stopLong := context.WithCancel(context.Background())
	t.Cleanup(stopLong)
	startLong(t, ts, long)
	waitFor(t, func() bool { return ts.m.Stats().Active == 1 })
	return ts, stopLong
}

// TestOpenAIStreamsWaiting: a chat or completion stream waiting for a
// slot sends SSE comments, which OpenAI's clients skip, as the Responses
// and Anthropic streams ping: proxies drop a connection silent for a
// minute, and a queue or a long prefill on a CPU takes that.
func TestOpenAIStreamsWaiting(t *testing.T) {
	ts, _ := busyServer(t)
	for path, body := range map[string]string{
		"/v1/chat/completions": `{"model":"tiny-a",` + hi + `,"max_tokens":1,"stream":true}`,
		"/v1/completions":      `{"model":"tiny-a","prompt":"Hi","max_tokens":1,"stream":true}`,
	} {
		ctx, leave := context.WithTimeout(context.Background(), time.Minute)
		req, err := http.NewRequestWithContext(ctx, "POST", ts.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(resp.Body)
		for pings := 0; pings < 3; {
			line, err := r.ReadString('\n')
			switch {
			case err != nil:
				t.Fatalf("%s: %v before three pings", path, err)
			case line == ": keepalive\n":
				pings++
			case line != "\n" && !strings.Contains(line, `"role":"assistant"`):
				t.Fatalf("%s waiting for a slot: %q", path, line)
			}
		}
		leave()
		resp.Body.Close()
		waitFor(t, func() bool { return ts.m.Stats().Queued == 0 })
	}
}

// TestQueueFull: beyond the running and the queued requests, 503 with
// Retry-After; the refused request leaves the others alone.
func TestQueueFull(t *testing.T) {
	ts := newTestServer(t, modelOpts{Parallel: 1, Queue: 1}, ServerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startLong(t, ts, ctx)
	waitFor(t, func() bool { return ts.m.Stats().Active == 1 })
	var wg sync.WaitGroup
	wg.Go(func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.url+"/v1/chat/completions", strings.NewReader(`{"model":"tiny-a",`+hi+`}`))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	waitFor(t, func() bool { return ts.m.Stats().Queued == 1 })
	for _, path := range []string{"/v1/chat/completions", "/api/chat"} {
		resp, body := ts.post(t, path, `{"model":"tiny-a",`+hi+`}`)
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(body, "queue is full") {
			t.Errorf("%s: %d, Retry-After %q, %s", path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		if r := ts.log.logged(t, request("POST", path, 503, "WARN")); r == nil || !strings.Contains(r["error"].(string), "queue is full") {
			t.Errorf("%s: the refusal's record is %v", path, r)
		}
	}
	cancel()
	wg.Wait()
	waitFor(t, func() bool { st := ts.m.Stats(); return st.Active == 0 && st.Queued == 0 })
}

// TestClientDisconnect: a client that leaves mid-stream frees its slot
// within a step, is logged as 499, and the server goes on serving.
func TestClientDisconnect(t *testing.T) {
	ts := newTestServer(t, modelOpts{Parallel: 1}, ServerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	r := startLong(t, ts, ctx)
	for range 4 {
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	waitFor(t, func() bool { return ts.m.Stats().Active == 0 })
	resp, body := ts.post(t, "/v1/chat/completions", `{"model":"tiny-a",`+hi+`,"max_tokens":2}`)
	if resp.StatusCode != 200 {
		t.Fatalf("after a disconnect: %d %s", resp.StatusCode, body)
	}
	waitFor(t, func() bool { return ts.log.logged(t, request("POST", "/v1/chat/completions", 499, "INFO")) != nil })
	if _, m := ts.get(t, "/metrics"); !strings.Contains(m, `qwenrun_requests_total{endpoint="/v1/chat/completions",status="499"} 1`) {
		t.Errorf("the metrics do not count the 499")
	}
}

func TestAPIKey(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{APIKey: "s3cret"})
	for _, auth := range []string{"", "Bearer wrong", "Bearer s3cret2", "s3cret", "Basic s3cret"} {
		resp, body := ts.post(t, "/v1/chat/completions", `{"model":"tiny-a",`+hi+`,"max_tokens":1}`, "Authorization", auth)
		var e openAIError
		unmarshal(t, body, &e)
		if resp.StatusCode != 401 || e.Error == nil || e.Error.Code == nil || *e.Error.Code != "invalid_api_key" ||
			resp.Header.Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("Authorization %q: %d %s", auth, resp.StatusCode, body)
		}
	}
	if resp, body := ts.get(t, "/api/tags"); resp.StatusCode != 401 || !strings.HasPrefix(body, `{"error":"a valid API key`) {
		t.Errorf("/api/tags without the key: %d %s", resp.StatusCode, body)
	}
	if resp, _ := ts.get(t, "/health"); resp.StatusCode != 200 {
		t.Errorf("/health without the key: %d", resp.StatusCode)
	}
	// Ollama's clients probe / and know no key.
	if resp, body := ts.get(t, "/"); resp.StatusCode != 200 || body != "Ollama is running" {
		t.Errorf("/ without the key: %d %s", resp.StatusCode, body)
	}
	if resp, _ := ts.get(t, "/nothing"); resp.StatusCode != 401 {
		t.Errorf("another path without the key: %d", resp.StatusCode)
	}
	if ts.log.logged(t, request("GET", "/api/tags", 401, "WARN")) == nil {
		t.Errorf("no warning of the refusal:\n%s", ts.log)
	}
	// The scheme is case-insensitive (RFC 9110, 11.1): curl users and
	// some clients write "bearer".
	for _, auth := range []string{"bearer s3cret", "BEARER s3cret", "Bearer  s3cret"} {
		if resp, body := ts.post(t, "/v1/chat/completions", `{"model":"tiny-a",`+hi+`,"max_tokens":1}`, "Authorization", auth); resp.StatusCode != 200 {
			t.Errorf("Authorization %q: %d %s", auth, resp.StatusCode, body)
		}
	}
	c := ts.client(option.WithAPIKey("s3cret"))
	if _, err := c.Chat.Completions.New(context.Background(), chatParams(1)); err != nil {
		t.Errorf("with the key: %v", err)
	}
	c = ts.client()
	var apiErr *openai.Error
	if _, err := c.Models.List(context.Background()); err == nil || !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Errorf("the client without the key: %v", err)
	}
}

// TestSamplingRanges: every endpoint that generates takes each sampling
// parameter it has over the range of the one table the command line and
// the Go API use, at its edges, and refuses what is past them naming the
// field.
func TestSamplingRanges(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	// The parameter's name in each protocol, OpenAI's, Ollama's and
	// Anthropic's; "" where it has none.
	names := map[string][3]string{
		"temperature": {"temperature", "temperature", "temperature"}, "top_k": {"top_k", "top_k", "top_k"},
		"top_p": {"top_p", "top_p", "top_p"}, "min_p": {"min_p", "min_p", ""}, "repeat_penalty": {"repetition_penalty", "repeat_penalty", ""},
		"presence_penalty": {"presence_penalty", "presence_penalty", ""}, "frequency_penalty": {"frequency_penalty", "frequency_penalty", ""},
		"repeat_last_n": {"", "repeat_last_n", ""},
	}
	// Each endpoint's request with one parameter set, and the error it
	// gives past the edge: OpenAI's names the field as its param, the
	// others say the field and the value.
	endpoints := []struct {
		path     string
		protocol int
		body     func(field, v string) string
		refused  func(field, v string) string
	}{
		{"/v1/chat/completions", 0, func(f, v string) string { return `{"model":"tiny-a",` + hi + `,"max_tokens":1,"` + f + `":` + v + `}` },
			func(f, v string) string { return `"param":"` + f + `"` }},
		{"/v1/completions", 0, func(f, v string) string {
			return `{"model":"tiny-a","prompt":"Hi","max_tokens":1,"` + f + `":` + v + `}`
		},
			func(f, v string) string { return `"param":"` + f + `"` }},
		{"/api/chat", 1, func(f, v string) string {
			return `{"model":"tiny-a",` + hi + `,"stream":false,"options":{"num_predict":1,"` + f + `":` + v + `}}`
		}, func(f, v string) string { return f + " " + v }},
		{"/api/generate", 1, func(f, v string) string {
			return `{"model":"tiny-a","prompt":"Hi","stream":false,"options":{"num_predict":1,"` + f + `":` + v + `}}`
		}, func(f, v string) string { return f + " " + v }},
		{"/v1/messages", 2, func(f, v string) string { return `{"model":"tiny-a",` + hi + `,"max_tokens":1,"` + f + `":` + v + `}` },
			func(f, v string) string { return `"type":"invalid_request_error","message":"` + f + " " + v }},
	}
	tried := map[string]int{}
	for _, s := range sampling.Settings() {
		n, ok := names[s.Name]
		if !ok {
			t.Fatalf("setting %s has no field in the protocols' table here", s.Name)
		}
		edgesTo := func(hi float64) map[string]bool {
			edges := map[string]bool{strconv.FormatFloat(s.Lo, 'g', -1, 64): !s.LoOpen}
			if s.Integer {
				edges[strconv.FormatFloat(s.Lo-1, 'g', -1, 64)] = false
			} else {
				edges[strconv.FormatFloat(s.Lo-0.01, 'g', -1, 64)] = false
			}
			if !math.IsInf(hi, 1) && !s.Integer {
				edges[strconv.FormatFloat(hi, 'g', -1, 64)] = true
				edges[strconv.FormatFloat(hi+0.01, 'g', -1, 64)] = false
			}
			return edges
		}
		for _, ep := range endpoints {
			field := n[ep.protocol]
			if field == "" {
				continue
			}
			edges := edgesTo(s.Hi)
			if ep.protocol == 2 && field == "temperature" {
				edges = edgesTo(1) // Anthropic's temperature stops at 1
			}
			tried[ep.path]++
			for v, want := range edges {
				resp, body := ts.post(t, ep.path, ep.body(field, v))
				if (resp.StatusCode == 200) != want || !want && !strings.Contains(body, ep.refused(field, v)) {
					t.Errorf("%s %s %s: %d %s; want accepted %v", ep.path, field, v, resp.StatusCode, body, want)
				}
			}
		}
	}
	for _, ep := range endpoints {
		if tried[ep.path] == 0 {
			t.Errorf("%s: no setting tried", ep.path)
		}
	}
}

// TestSeedMinusOneIsRandom: seed -1 is Ollama's default and llama-server's
// "random", which clients such as SillyTavern send for a fresh answer each
// time; taken as a fixed seed, every regeneration gave the same text. Any
// other seed still repeats its answer.
func TestSeedMinusOneIsRandom(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{})
	endpoints := []struct {
		path string
		body func(seed string) string
		text func(body string) string
	}{
		{"/v1/completions", func(seed string) string {
			return `{"model":"tiny-a","prompt":"Hi","max_tokens":8,"temperature":5,"seed":` + seed + `}`
		}, func(body string) string {
			var r struct{ Choices []struct{ Text string } }
			unmarshal(t, body, &r)
			return r.Choices[0].Text
		}},
		{"/api/generate", func(seed string) string {
			return `{"model":"tiny-a","prompt":"Hi","raw":true,"stream":false,"options":{"num_predict":8,"temperature":5,"seed":` + seed + `}}`
		}, func(body string) string {
			var r struct{ Response string }
			unmarshal(t, body, &r)
			return r.Response
		}},
	}
	for _, ep := range endpoints {
		answers := map[string][]string{}
		for _, seed := range []string{"-1", "-1", "-1", "5", "5"} {
			resp, body := ts.post(t, ep.path, ep.body(seed))
			if resp.StatusCode != 200 {
				t.Fatalf("%s seed %s: %d %s", ep.path, seed, resp.StatusCode, body)
			}
			answers[seed] = append(answers[seed], ep.text(body))
		}
		// Eight tokens at temperature 5 over tiny-a's top 20: three draws
		// agree by chance with a probability far below 1e-9.
		if a := answers["-1"]; a[0] == a[1] && a[1] == a[2] {
			t.Errorf("%s: seed -1 gave %q three times: a fixed seed, not a random one", ep.path, a[0])
		}
		if a := answers["5"]; a[0] != a[1] {
			t.Errorf("%s: seed 5 gave %q, then %q", ep.path, a[0], a[1])
		}
	}
}

// CheckHealth: nil while the server answers /health, the status when it
// answers otherwise, an error when nothing answers.
func TestCheckHealth(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{APIKey: "s3cret"})
	if err := CheckHealth(strings.TrimPrefix(ts.url, "http://"), 2*time.Second); err != nil {
		t.Errorf("a serving server: %v", err)
	}
	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }))
	addr := strings.TrimPrefix(sick.URL, "http://")
	if err := CheckHealth(addr, 2*time.Second); err == nil || err.Error() != sick.URL+"/health answered 503 Service Unavailable" {
		t.Errorf("a 503: %v", err)
	}
	sick.Close()
	if err := CheckHealth(addr, 2*time.Second); err == nil {
		t.Errorf("nothing listening: no error")
	}
}
