package serve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHTTPSoak is the bounded soak over real HTTP: 200 requests
// from 16 concurrent clients, mixing OpenAI chat (streamed and not),
// completions and Ollama chat, a fifth of them cut off by the client
// mid-answer, against a server with 4 slots and a short queue. Every
// request must end with a complete answer, a clean 503 (retried), or the
// client's own disconnect; afterwards the active-conversations metric is 0,
// the engine is idle, and no goroutine is left behind.
func TestHTTPSoak(t *testing.T) {
	before := runtime.NumGoroutine()
	// Cleanups run last in first out: this one, registered before the
	// server's and the engine's, checks after they have stopped.
	t.Cleanup(func() {
		waitFor(t, func() bool { return runtime.NumGoroutine() <= before })
	})
	ts := newTestServer(t, modelOpts{Parallel: 4, Queue: 4, Chunk: 16}, ServerOptions{})
	const clients, perClient = 16, 13 // 208 requests
	var answered, refused, cut atomic.Int32
	var wg sync.WaitGroup
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 3))
			for r := range perClient {
				body, path, stream := soakRequest(rng, c, r)
				cutAfter := -1
				if rng.IntN(5) == 0 {
					cutAfter = rng.IntN(3)
				}
				for {
					err := soakOne(hc, ts.url+path, body, stream, cutAfter)
					if errors.Is(err, errBusy) {
						refused.Add(1)
						time.Sleep(2 * time.Millisecond)
						continue
					}
					if errors.Is(err, errCut) {
						cut.Add(1)
					} else if err != nil {
						t.Errorf("client %d request %d (%s): %v", c, r, path, err)
					} else {
						answered.Add(1)
					}
					break
				}
			}
		})
	}
	wg.Wait()
	if n := answered.Load() + cut.Load(); n != clients*perClient {
		t.Errorf("%d of %d requests ended", n, clients*perClient)
	}
	waitFor(t, func() bool {
		_, m := ts.get(t, "/metrics")
		st := ts.m.Stats()
		return strings.Contains(m, "qwenrun_active_conversations 0\n") && st.Active == 0 && st.Queued == 0 && st.KVBytes == 0
	})
	hc.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
	t.Logf("%d answered, %d cut off by the client, %d refused with 503 and retried", answered.Load(), cut.Load(), refused.Load())
}

var (
	errBusy = errors.New("503")
	errCut  = errors.New("cut off by the client")
)

// soakRequest picks an endpoint and a small request.
func soakRequest(rng *rand.Rand, c, r int) (body, path string, stream bool) {
	q := fmt.Sprintf("question %d from client %d", r, c)
	n := 1 + rng.IntN(12)
	switch rng.IntN(4) {
	case 0:
		return fmt.Sprintf(`{"model":"tiny-a","messages":[{"role":"user","content":%q}],"max_tokens":%d,"stream":true}`, q, n), "/v1/chat/completions", true
	case 1:
		return fmt.Sprintf(`{"model":"tiny-a","messages":[{"role":"user","content":%q}],"max_tokens":%d,"temperature":0}`, q, n), "/v1/chat/completions", false
	case 2:
		return fmt.Sprintf(`{"model":"tiny-a","prompt":%q,"max_tokens":%d,"stream":true}`, q, n), "/v1/completions", true
	}
	return fmt.Sprintf(`{"model":"tiny-a","messages":[{"role":"user","content":%q}],"options":{"num_predict":%d}}`, q, n), "/api/chat", true
}

// soakOne sends one request and reads the answer to its end, or closes the
// connection after cutAfter lines of a stream. A complete answer ends with
// data: [DONE] (OpenAI streams), "done":true (Ollama) or a JSON object with
// choices.
func soakOne(hc *http.Client, url, body string, stream bool, cutAfter int) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable {
		io.Copy(io.Discard, resp.Body)
		if resp.Header.Get("Retry-After") == "" {
			return errors.New("503 without Retry-After")
		}
		return errBusy
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	if !stream {
		b, err := io.ReadAll(resp.Body)
		if err != nil || !strings.Contains(string(b), `"choices"`) {
			return fmt.Errorf("answer %q: %v", b, err)
		}
		return nil
	}
	sc := bufio.NewScanner(resp.Body)
	lines := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if lines == cutAfter {
			cancel() // the client goes away mid-answer
			return errCut
		}
		lines++
		if line == "data: [DONE]" || strings.Contains(line, `"done":true`) {
			return nil
		}
	}
	return fmt.Errorf("stream ended without its last event after %d lines: %v", lines, sc.Err())
}
