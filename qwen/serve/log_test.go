package serve

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLogBodies: at debug the server logs each authorized request's
// body, as JSON in a JSON record, and the handler still reads it whole;
// a body over MaxBody is logged up to it and refused as ever. No record
// holds the key, and an unauthorized request's body is not logged.
func TestLogBodies(t *testing.T) {
	buf := &syncBuffer{}
	ts := newTestServer(t, modelOpts{}, ServerOptions{APIKey: "s3cret", MaxBody: 200,
		Log: slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	body := `{"model":"tiny-a","messages":[{"role":"user","content":"Hi"}],"max_tokens":2}`
	if resp, got := ts.post(t, "/v1/chat/completions", body, "Authorization", "Bearer s3cret"); resp.StatusCode != 200 {
		t.Fatalf("with the body logged: %d %s", resp.StatusCode, got)
	}
	r := buf.logged(t, map[string]any{"level": "DEBUG", "msg": "request body", "method": "POST", "path": "/v1/chat/completions"})
	if got, _ := r["body"].(map[string]any); got == nil || got["model"] != "tiny-a" || got["max_tokens"] != 2.0 || r["truncated"] != nil {
		t.Errorf("the body's record: %v", r)
	}

	unauthorized := `{"model":"tiny-a","messages":[{"role":"user","content":"not to be logged"}]}`
	if resp, got := ts.post(t, "/v1/chat/completions", unauthorized, "Authorization", "Bearer wrong"); resp.StatusCode != 401 {
		t.Fatalf("a wrong key: %d %s", resp.StatusCode, got)
	}
	large := `{"model":"tiny-a","messages":[{"role":"user","content":"` + strings.Repeat("x", 300) + `"}]}`
	if resp, got := ts.post(t, "/v1/chat/completions", large, "X-Api-Key", "s3cret"); resp.StatusCode != 413 {
		t.Fatalf("a body over MaxBody: %d %s", resp.StatusCode, got)
	}
	r = buf.logged(t, map[string]any{"msg": "request body", "truncated": true})
	if got, _ := r["body"].(string); got != large[:200] {
		t.Errorf("the large body's record: %v; want its first 200 bytes as a string", r)
	}
	if r := buf.logged(t, request("POST", "/v1/chat/completions", 413, "INFO")); r == nil || !strings.Contains(r["error"].(string), "larger than 200 bytes") {
		t.Errorf("the 413's record: %v", r)
	}
	if log := buf.String(); strings.Contains(log, "s3cret") || strings.Contains(log, "not to be logged") {
		t.Errorf("the key or an unauthorized body is in the log:\n%s", log)
	}
}

// TestAccessLevel: a server's failures are errors, refusals for want of
// capacity or of a key warnings, everything else info.
func TestAccessLevel(t *testing.T) {
	for _, c := range []struct {
		status int
		failed bool
		want   slog.Level
	}{
		{200, false, slog.LevelInfo},
		{200, true, slog.LevelError}, // failed after the answer began
		{400, false, slog.LevelInfo},
		{401, false, slog.LevelWarn},
		{404, false, slog.LevelInfo},
		{413, false, slog.LevelInfo},
		{499, false, slog.LevelInfo},
		{500, false, slog.LevelError},
		{503, false, slog.LevelWarn},
	} {
		if got := accessLevel(c.status, c.failed); got != c.want {
			t.Errorf("status %d, failed %v: %v, want %v", c.status, c.failed, got, c.want)
		}
	}
}

// flakyListener fails its first Accept with a temporary error, which
// net/http logs and retries.
type flakyListener struct {
	net.Listener
	failed bool
}

type temporaryError struct{}

func (temporaryError) Error() string   { return "too many open files (a test's)" }
func (temporaryError) Timeout() bool   { return false }
func (temporaryError) Temporary() bool { return true }

func (l *flakyListener) Accept() (net.Conn, error) {
	if !l.failed {
		l.failed = true
		return nil, temporaryError{}
	}
	return l.Listener.Accept()
}

// TestServeErrorLog: net/http's own errors are error records of the
// server's log, and the shutdown is said at info.
func TestServeErrorLog(t *testing.T) {
	buf := &syncBuffer{}
	s := NewServer(openModel(t, modelOpts{}), ServerOptions{Log: slog.New(slog.NewJSONHandler(buf, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, &flakyListener{Listener: ln}, 100*time.Millisecond) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	stop()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	r := buf.logged(t, map[string]any{"level": "ERROR"})
	if msg, _ := r["msg"].(string); !strings.Contains(msg, "Accept error: too many open files (a test's)") {
		t.Errorf("the accept error's record: %v\n%s", r, buf)
	}
	if buf.logged(t, map[string]any{"level": "INFO", "msg": "shutting down", "grace": float64(100 * time.Millisecond)}) == nil {
		t.Errorf("no record of the shutdown:\n%s", buf)
	}
}
