package serve

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestStateCacheDir: with no room in memory and a directory for the
// state cache, the same chat again starts from the state read back from
// disk, and /metrics counts it.
func TestStateCacheDir(t *testing.T) {
	ts := newTestServer(t, modelOpts{Parallel: 1, CacheDir: t.TempDir()}, ServerOptions{})
	// A prompt of more than a KV chunk (256 tokens): a file is read back
	// only where it saves at least that much.
	body := `{"model":"tiny-a","messages":[{"role":"user","content":"` + strings.Repeat("Tell me about Go. ", 80) + `"}],"max_tokens":3,"temperature":0}`
	cached := func() int {
		t.Helper()
		resp, out := ts.post(t, "/v1/chat/completions", body)
		if resp.StatusCode != 200 {
			t.Fatalf("chat: %d %s", resp.StatusCode, out)
		}
		var r struct {
			Usage struct {
				PromptTokens        int `json:"prompt_tokens"`
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r.Usage.PromptTokensDetails.CachedTokens
	}
	if n := cached(); n != 0 {
		t.Fatalf("the first request: %d cached tokens", n)
	}
	// The write to disk follows the answer.
	for deadline := time.Now().Add(time.Minute); ts.m.Stats().DiskWrites == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("nothing written to disk within a minute")
		}
	}
	if n := cached(); n == 0 {
		t.Error("the same chat again: no cached tokens")
	}
	_, metrics := ts.get(t, "/metrics")
	for _, want := range []string{"qwenrun_prefix_cache_disk_hits_total 1", "qwenrun_prefix_cache_disk_writes_total", "qwenrun_prefix_cache_disk_evictions_total 0", "qwenrun_prefix_cache_disk_errors_total 0", "qwenrun_prefix_cache_disk_bytes", "qwenrun_prefix_cache_disk_bound_bytes"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
