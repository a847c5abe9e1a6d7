package serve

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCommandSignals runs `qwenrun serve` itself: the key comes from
// $QWEN_API_KEY, and SIGINT or SIGTERM stop it with exit status 0 after
// the running stream got its final chunk.
func TestCommandSignals(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "qwenrun")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/qwenrun").CombinedOutput(); err != nil {
		t.Fatalf("building qwenrun: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(bin, "serve", tinyPath(t), "--addr", "127.0.0.1:0", "--parallel", "1", "--grace", "100ms")
		cmd.Env = append(os.Environ(), "QWEN_API_KEY=k3y")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stderr)
		var url string
		for url == "" && lines.Scan() {
			if m := regexp.MustCompile(`serving tiny-a on (http://\S+)`).FindStringSubmatch(lines.Text()); m != nil {
				url = m[1]
			}
		}
		if url == "" {
			cmd.Process.Kill()
			t.Fatalf("no address on stderr: %v", cmd.Wait())
		}
		body := `{"model":"tiny-a",` + hi + `,"stream":true}`
		if resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body)); err != nil || resp.StatusCode != 401 {
			t.Errorf("without the key: %v, %v", resp, err)
		}
		req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer k3y")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			cmd.Process.Kill()
			t.Fatalf("with the key: %v, %v", resp, err)
		}
		r := bufio.NewReader(resp.Body)
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		cmd.Process.Signal(sig)
		rest, _ := io.ReadAll(r)
		resp.Body.Close()
		events := sseEvents(t, string(rest))
		if n := len(events); n < 2 || events[n-1] != "[DONE]" || !strings.Contains(events[n-2], `"finish_reason":"length"`) {
			t.Errorf("%v: the stream ends with %q", sig, events[max(0, len(events)-2):])
		}
		var log strings.Builder
		for lines.Scan() {
			log.WriteString(lines.Text() + "\n")
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%v: exit %v; stderr %s", sig, err, log.String())
			}
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			t.Fatalf("%v: still running", sig)
		}
		if !strings.Contains(log.String(), "POST /v1/chat/completions 200") || !strings.HasSuffix(log.String(), "qwenrun: stopped\n") {
			t.Errorf("%v: stderr %s", sig, log.String())
		}
	}
}
