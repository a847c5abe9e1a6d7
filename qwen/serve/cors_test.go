package serve

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCORS: a browser page of an allowed origin (this machine's, an
// app's, the server's own, one of AllowOrigins or a pattern of them) has
// its preflight answered without the key and its responses marked as its
// own; a page of any other origin is refused, preflight and request, and
// the refusal logged; a client that sends no Origin is not concerned.
func TestCORS(t *testing.T) {
	ts := newTestServer(t, modelOpts{}, ServerOptions{APIKey: "k", AllowOrigins: []string{"https://*.example.com", "https://chat.test:8443"}})
	host := strings.TrimPrefix(ts.url, "http://")
	send := func(method, path, origin string, header ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, ts.url+path, strings.NewReader(`{"model":"tiny-a","max_tokens":1,"messages":[{"role":"user","content":"Hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, _ := do(t, req)
		return resp
	}
	for _, origin := range []string{"http://localhost:5173", "http://127.0.0.1", "https://[::1]:3000", "vscode-webview://abc123", "tauri://localhost",
		"http://" + host, "https://chat.example.com", "https://chat.test:8443"} {
		resp := send("OPTIONS", "/v1/chat/completions", origin, "Access-Control-Request-Method", "POST",
			"Access-Control-Request-Headers", "authorization, content-type, x-stainless-os")
		h := resp.Header
		if resp.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != origin || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
			h.Get("Access-Control-Allow-Headers") != "authorization, content-type, x-stainless-os" {
			t.Errorf("preflight from %s: %d %v", origin, resp.StatusCode, h)
		}
		resp = send("POST", "/v1/chat/completions", origin, "Authorization", "Bearer k")
		if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != origin || resp.Header.Get("Vary") != "Origin" {
			t.Errorf("request from %s: %d %v", origin, resp.StatusCode, resp.Header)
		}
	}
	for _, origin := range []string{"https://evil.test", "http://localhost.evil.test", "https://example.com", "https://chat.test", "null"} {
		resp := send("OPTIONS", "/v1/chat/completions", origin, "Access-Control-Request-Method", "POST")
		if resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight from %s: %d %v", origin, resp.StatusCode, resp.Header)
		}
		req, _ := http.NewRequest("POST", ts.url+"/v1/chat/completions", strings.NewReader(`{}`))
		req.Header.Set("Origin", origin)
		req.Header.Set("Authorization", "Bearer k")
		resp, body := do(t, req)
		if resp.StatusCode != 403 || !strings.Contains(body, "--allow-origin") || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("request from %s: %d %s", origin, resp.StatusCode, body)
		}
	}
	if ts.log.logged(t, request("POST", "/v1/chat/completions", 403, "WARN")) == nil {
		t.Errorf("no warning of the refusal:\n%s", ts.log)
	}
	if resp := send("POST", "/v1/chat/completions", "", "Authorization", "Bearer k"); resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("without Origin: %d %v", resp.StatusCode, resp.Header)
	}

	// A page of a name the server is reached by is not the server's own:
	// DNS rebinding points a foreign name at this machine, the browser
	// sending that name as Host and in Origin.
	rebound := "rebind.evil.test:" + host[strings.LastIndex(host, ":")+1:]
	req, _ := http.NewRequest("POST", ts.url+"/v1/chat/completions", strings.NewReader(`{"model":"tiny-a","max_tokens":1,"messages":[{"role":"user","content":"Hi"}]}`))
	req.Host = rebound
	req.Header.Set("Origin", "http://"+rebound)
	req.Header.Set("Authorization", "Bearer k")
	if resp, body := do(t, req); resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("DNS rebinding, Host %s: %d %s", rebound, resp.StatusCode, body)
	}

	every := newTestServer(t, modelOpts{}, ServerOptions{AllowOrigins: []string{"*"}})
	req, _ = http.NewRequest("GET", every.url+"/v1/models", nil)
	req.Header.Set("Origin", "https://anything.test")
	if resp, body := do(t, req); resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "https://anything.test" {
		t.Errorf("* allows every origin: %d %s %v", resp.StatusCode, body, resp.Header)
	}
}

func TestCheckOrigins(t *testing.T) {
	for _, ok := range []string{"*", "https://*.example.com", "http://localhost:*", "app://*", "https://a.test:8443"} {
		if err := CheckOrigins([]string{"https://a.test", ok}); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "example.com", "https://", "https://a.test/path", "://a.test", "*://a.test"} {
		if err := CheckOrigins([]string{"https://a.test", bad}); err == nil {
			t.Errorf("%q taken", bad)
		}
	}
}

// TestMatchOrigin: a * of a pattern takes any run of characters but
// "/"; and a long Origin against a pattern of several stars is matched in
// about its length, not its length to the power of the stars (a header
// of 100 KB against https://*.*.example.com took seconds of a core).
func TestMatchOrigin(t *testing.T) {
	for _, c := range []struct {
		pattern, origin string
		want            bool
	}{
		{"https://a.test", "https://a.test", true},
		{"https://a.test", "https://a.test:1", false},
		{"https://*.example.com", "https://chat.example.com", true},
		{"https://*.example.com", "https://a.b.example.com", true},
		{"https://*.example.com", "https://example.com", false},
		{"https://*.example.com", "https://evil.test/.example.com", false},
		{"https://*.*.example.com", "https://a.b.example.com", true},
		{"https://*.*.example.com", "https://a.example.com", false},
		{"http://192.168.*.*:*", "http://192.168.1.20:8080", true},
		{"http://192.168.*.*:*", "http://192.168.1:8080", false},
		{"http://localhost:*", "http://localhost:5173", true},
		{"http://localhost:*", "http://localhost", false},
		{"http://[::1]:*", "http://[::1]:3000", true},
		{"app://*", "app://x", true},
		{"app://*", "app://x/y", false},
		{"*a*a", "aaa", true},
		{"a*b*c", "abbc", true},
		{"a*b*c", "acb", false},
	} {
		if got := matchOrigin(c.pattern, c.origin); got != c.want {
			t.Errorf("%s against %s: %v", c.origin, c.pattern, got)
		}
	}
	long := "https://" + strings.Repeat(".", 100_000)
	start := time.Now()
	if matchOrigin("https://*.*.example.com", long) {
		t.Error("a run of dots matched")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("an Origin of 100 KB matched in %v", took)
	}
}
