package serve

import (
	"bufio"
	"encoding/json"
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
// the running stream got its final chunk. Its stderr is its log, in
// --log-format's records alone, from the address it serves on to its
// stop, and never the key.
func TestCommandSignals(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "qwenrun")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/qwenrun").CombinedOutput(); err != nil {
		t.Fatalf("building qwenrun: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		sig    syscall.Signal
		format string
	}{{syscall.SIGTERM, "text"}, {syscall.SIGINT, "json"}} {
		sig := tc.sig
		cmd := exec.Command(bin, "serve", tinyPath(t), "--addr", "127.0.0.1:0", "--parallel", "1", "--grace", "100ms", "--log-format", tc.format)
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
		var log strings.Builder
		for url == "" && lines.Scan() {
			log.WriteString(lines.Text() + "\n")
			if m := regexp.MustCompile(`serving.*tiny-a.*url[=":]+(http://[^"\s]+)`).FindStringSubmatch(lines.Text()); m != nil {
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
		checkServeLog(t, tc.format, log.String())
	}
}

// checkServeLog checks a server's stderr: records of the format alone,
// the 401 a warning and the 200 info, the last record the stop; the key
// nowhere.
func checkServeLog(t *testing.T, format, log string) {
	t.Helper()
	var wants []string
	switch format {
	case "text":
		wants = []string{
			`level=WARN msg=request method=POST path=/v1/chat/completions status=401 `,
			`level=INFO msg=request method=POST path=/v1/chat/completions status=200 prompt_tokens=`,
			`level=INFO msg="shutting down" grace=100ms`,
		}
		for line := range strings.Lines(log) {
			if !strings.HasPrefix(line, "time=") {
				t.Errorf("a line of stderr that is not a record: %q", line)
			}
		}
		if !strings.HasSuffix(log, " level=INFO msg=stopped\n") {
			t.Errorf("stderr does not end with the stop:\n%s", log)
		}
	case "json":
		wants = []string{
			`"level":"WARN","msg":"request","method":"POST","path":"/v1/chat/completions","status":401,`,
			`"level":"INFO","msg":"request","method":"POST","path":"/v1/chat/completions","status":200,"prompt_tokens":`,
			`"level":"INFO","msg":"shutting down","grace":100000000}`,
		}
		var last map[string]any
		for line := range strings.Lines(log) {
			if err := json.Unmarshal([]byte(line), &last); err != nil {
				t.Errorf("a line of stderr that is not a JSON record: %q", line)
			}
		}
		if last["msg"] != "stopped" {
			t.Errorf("stderr does not end with the stop:\n%s", log)
		}
	}
	for _, w := range wants {
		if !strings.Contains(log, w) {
			t.Errorf("stderr lacks %s:\n%s", w, log)
		}
	}
	if strings.Contains(log, "k3y") {
		t.Errorf("the key is in the log:\n%s", log)
	}
}
