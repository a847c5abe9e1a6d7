package serve

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// localOrigins are the browser origins always allowed, as Ollama allows
// them by default: pages served from this machine, and the apps that
// embed a browser (Electron, Tauri, VS Code's webviews).
var localOrigins = []string{
	"http://localhost", "https://localhost", "http://localhost:*", "https://localhost:*",
	"http://127.0.0.1", "https://127.0.0.1", "http://127.0.0.1:*", "https://127.0.0.1:*",
	"http://[::1]", "https://[::1]", "http://[::1]:*", "https://[::1]:*",
	"http://0.0.0.0", "https://0.0.0.0", "http://0.0.0.0:*", "https://0.0.0.0:*",
	"app://*", "file://*", "tauri://*", "vscode-webview://*", "vscode-file://*",
}

// CheckOrigins reports the first of patterns that cannot be one of
// ServerOptions.AllowOrigins: each "*", or an origin (scheme://host[:port])
// in which * stands for any run of characters but "/".
func CheckOrigins(patterns []string) error {
	for _, p := range patterns {
		if err := checkOrigin(p); err != nil {
			return err
		}
	}
	return nil
}

func checkOrigin(pattern string) error {
	if pattern == "*" {
		return nil
	}
	scheme, rest, ok := strings.Cut(pattern, "://")
	if !ok || scheme == "" || rest == "" || strings.Contains(rest, "/") || strings.Contains(scheme, "*") {
		return fmt.Errorf("origin %q: want scheme://host[:port] (a * matching any part), or * for every origin", pattern)
	}
	return nil
}

// matchOrigin reports whether origin matches pattern, whose every *
// stands for a run of characters but "/", the rest for itself. Each part
// between stars is matched where it first can be, which leaves the most
// to the parts after it: time about the length of origin, however many
// stars (the Origin header is the client's, up to a megabyte).
func matchOrigin(pattern, origin string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == origin
	}
	origin, ok := strings.CutPrefix(origin, parts[0])
	if !ok {
		return false
	}
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(origin, p)
		if i < 0 || strings.Contains(origin[:i], "/") {
			return false
		}
		origin = origin[i+len(p):]
	}
	rest, ok := strings.CutSuffix(origin, last)
	return ok && !strings.Contains(rest, "/")
}

// originAllowed reports whether a browser page of origin may call the
// server: a local origin, one of AllowOrigins, or the server's own
// (host, the request's Host) when host is an IP address: a name may be
// a foreign page's, pointed at this machine (DNS rebinding), which the
// browser sends as Host and in Origin alike.
func (s *Server) originAllowed(origin, host string) bool {
	if u, err := url.Parse(origin); err == nil && u.Host != "" && u.Host == host {
		if _, err := netip.ParseAddr(u.Hostname()); err == nil {
			return true
		}
	}
	for _, list := range [][]string{localOrigins, s.opts.AllowOrigins} {
		for _, p := range list {
			if p == "*" || matchOrigin(p, origin) {
				return true
			}
		}
	}
	return false
}

// cors answers browsers' preflight requests and marks the responses to
// allowed origins as theirs to read. A request from another origin is
// refused by handle (originRefused): a browser would send a simple
// request whatever the answer, so the server must not run it.
func (s *Server) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || !s.originAllowed(origin, r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			// A preflight carries no credentials: it is answered before
			// the key check.
			h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
			if asked := r.Header.Get("Access-Control-Request-Headers"); asked != "" {
				h.Set("Access-Control-Allow-Headers", asked)
			}
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		// Clients read the rate and retry headers, and ours.
		h.Set("Access-Control-Expose-Headers", "*")
		next.ServeHTTP(w, r)
	})
}

// originRefused is the answer to a request from a browser page whose
// origin is not allowed, or nil.
func (s *Server) originRefused(r *http.Request) *apiError {
	origin := r.Header.Get("Origin")
	if origin == "" || s.originAllowed(origin, r.Host) {
		return nil
	}
	return &apiError{status: http.StatusForbidden, msg: fmt.Sprintf("a page of origin %q may not call this server: qwenrun serve --allow-origin %q lets it", origin, origin)}
}
