package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// qwenrun serve --alias and --model-dir: requests may name the model by
// an alias, and the models of the directory by their names, each loaded
// in the served model's place with the same flags; /v1/models lists them.
func TestServeAliases(t *testing.T) {
	dir := t.TempDir()
	if err := os.Link(tinyModel(t), filepath.Join(dir, "other.qbin")); err != nil {
		t.Fatal(err)
	}
	_, addr, _ := startServe(t, tinyModel(t), "--addr", "127.0.0.1:0", "--parallel", "1", "--ctx", "512",
		"--model-dir", dir, "--alias", "gpt-5-codex="+tinyModel(t))
	get := func(path, body string) (int, string) {
		t.Helper()
		var resp *http.Response
		var err error
		if body == "" {
			resp, err = http.Get("http://" + addr + path)
		} else {
			resp, err = http.Post("http://"+addr+path, "application/json", strings.NewReader(body))
		}
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if _, body := get("/v1/models", ""); !strings.Contains(body, `"id":"tiny-a"`) || !strings.Contains(body, `"id":"gpt-5-codex"`) ||
		!strings.Contains(body, `"id":"other"`) {
		t.Errorf("/v1/models: %s", body)
	}
	for _, name := range []string{"gpt-5-codex", "tiny-a", "other"} {
		code, body := get("/v1/chat/completions", `{"model":"`+name+`","messages":[{"role":"user","content":"Hi"}],"max_tokens":2}`)
		if code != 200 || !strings.Contains(body, `"model":"`+name+`"`) {
			t.Errorf("%s: %d %s", name, code, body)
		}
	}
	// other was opened with serve's flags: its context is --ctx's.
	if _, body := get("/api/ps", ""); !strings.Contains(body, `"name":"other:latest"`) || !strings.Contains(body, `"context_length":512`) {
		t.Errorf("/api/ps: %s", body)
	}
}
