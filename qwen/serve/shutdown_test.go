package serve

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/qwenc/qwenc/qwen"
)

// TestServeShutdown: when Serve's context ends, new connections are
// refused and running streams end within the grace period with a final
// chunk, in OpenAI's and Ollama's protocols, with an overloaded error in
// Anthropic's; Serve then returns without an error.
func TestServeShutdown(t *testing.T) {
	m := openModel(t, modelOpts{Parallel: 3})
	s := NewServer(m, ServerOptions{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln, 200*time.Millisecond) }()

	open := func(path, body string) *bufio.Reader {
		resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		r := bufio.NewReader(resp.Body)
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		return r
	}
	oa := open("/v1/chat/completions", `{"model":"tiny-a",`+hi+`,"stream":true}`)
	ol := open("/api/chat", `{"model":"tiny-a",`+hi+`}`)
	an := open("/v1/messages", `{"model":"tiny-a","max_tokens":100000,"stream":true,`+hi+`}`)
	waitFor(t, func() bool { return m.Stats().Active == 3 })
	stop()
	rest, err := io.ReadAll(oa)
	if err != nil {
		t.Fatal(err)
	}
	events := sseEvents(t, string(rest))
	if n := len(events); n < 2 || events[n-1] != "[DONE]" || !strings.Contains(events[n-2], `"finish_reason":"length"`) {
		t.Errorf("the OpenAI stream ends with %q", events[max(0, n-2):])
	}
	rest, err = io.ReadAll(ol)
	if err != nil {
		t.Fatal(err)
	}
	lines := ollamaLines(t, string(rest))
	if last := lines[len(lines)-1]; !last.Done || last.DoneReason != "length" || last.EvalCount == nil {
		t.Errorf("the Ollama stream ends with %+v", last)
	}
	if rest, err = io.ReadAll(an); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(rest), "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"the server is shutting down\"}}\n\n") {
		t.Errorf("the Anthropic stream ends with %q", rest[max(0, len(rest)-200):])
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Serve did not return")
	}
	if _, err := http.Get(url + "/health"); err == nil {
		t.Error("a request after the shutdown was answered")
	}
	if _, err := m.Start(context.Background(), qwen.Request{Tokens: []int32{1}}); !errors.Is(err, qwen.ErrClosed) {
		t.Errorf("the engine after Serve: %v", err)
	}
}
