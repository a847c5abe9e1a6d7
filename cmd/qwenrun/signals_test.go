package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTerminateStopsCleanly is TestInterruptStopsCleanly for SIGTERM (what
// a service manager or `timeout` sends): generation stops, the text so far
// and the statistics are printed, and the exit status is 143, as a shell
// reports SIGTERM (SIGINT gives 130).
//
// tiny-a continues "Hello" greedily with one token repeated up to the end
// of its 4096-token context, so generation is still running when the first
// 20 bytes have been read and the signal is sent; reading from a pipe
// needs no polling.
func TestTerminateStopsCleanly(t *testing.T) {
	m := tinyModel(t)
	cmd := exec.Command(bin, m, "-p", "Hello", "--temp", "0")
	var e bytes.Buffer
	cmd.Stderr = &e
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 20)
	if _, err := io.ReadFull(stdout, head); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("reading the first generated text: %v; stderr %q", err, e.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(stdout)
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 143 {
		t.Fatalf("exit %v, want status 143; stderr %q", err, e.String())
	}
	out := string(head) + string(rest)
	// The stream ends with a newline so the statistics start on their own line.
	if !strings.HasSuffix(out, "\n") {
		t.Errorf("stdout does not end with a newline: %q", out)
	}
	stats := e.String()
	if !strings.Contains(stats, "stop: interrupt") || strings.Count(stats, "\n") != 1 {
		t.Fatalf("want one line of statistics with stop: interrupt, got %q", stats)
	}
	g := regexp.MustCompile(`generated (\d+) tokens`).FindStringSubmatch(stats)
	if g == nil {
		t.Fatalf("no generated token count in %q", stats)
	}
	if n, _ := strconv.Atoi(g[1]); n < 1 || n >= 4096 {
		t.Fatalf("statistics report %d generated tokens; want some, stopped before the context end", n)
	}
}

// chatProc is a qwenrun chat running with its stdin kept open.
type chatProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *bytes.Buffer
}

// startChat starts qwenrun with args, sends it one message, and returns
// once wait has read what it needs of stdout. The process is killed at the
// end of the test if it still runs.
func startChat(t *testing.T, wait func(*bufio.Reader) error, args ...string) *chatProc {
	t.Helper()
	p := &chatProc{cmd: exec.Command(bin, args...), stderr: &bytes.Buffer{}}
	p.cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.stdin.Close()
		p.cmd.Process.Kill()
		p.cmd.Wait()
	})
	if _, err := io.WriteString(p.stdin, "hello\n"); err != nil {
		t.Fatal(err)
	}
	p.stdout = bufio.NewReader(stdout)
	if err := wait(p.stdout); err != nil {
		t.Fatalf("reading the answer: %v; stderr %q", err, p.stderr.String())
	}
	return p
}

// readLine waits for one line of the answer: with -n 1, its one token and
// the newline after it; with --json, the turn's object. Either comes once
// the turn is over and the chat waits for the next message.
func readLine(r *bufio.Reader) error { _, err := r.ReadString('\n'); return err }

// finish waits for the process to exit and returns its exit status and
// stderr.
func (p *chatProc) finish(t *testing.T) (code int, stderr string) {
	t.Helper()
	// A chat that goes on after a signal would wait for input for ever:
	// end of input then ends it, with status 0.
	timer := time.AfterFunc(30*time.Second, func() { p.stdin.Close() })
	defer timer.Stop()
	io.Copy(io.Discard, p.stdout)
	err := p.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), p.stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, p.stderr.String()
}

// SIGTERM ends an interactive chat with status 143, during an answer
// (which once stopped only the answer, and the chat read on) as at the
// prompt; SIGINT at the prompt gives 130.
func TestChatTerminate(t *testing.T) {
	m := tinyModel(t)
	// tiny-a answers with one token repeated to the end of the context:
	// the answer is still streaming when 20 bytes have come.
	during := func(r *bufio.Reader) error { _, err := io.ReadFull(r, make([]byte, 20)); return err }
	after := readLine
	for _, tc := range []struct {
		name string
		wait func(*bufio.Reader) error
		args []string
		sig  syscall.Signal
		code int
	}{
		{"SIGTERM during the answer", during, []string{m, "--chat", "--temp", "0"}, syscall.SIGTERM, 143},
		{"SIGTERM at the prompt", after, []string{m, "--chat", "--temp", "0", "-n", "2", "--json"}, syscall.SIGTERM, 143},
		{"SIGINT at the prompt", after, []string{m, "--chat", "--temp", "0", "-n", "2", "--json"}, syscall.SIGINT, 130},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startChat(t, tc.wait, tc.args...)
			if err := p.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			code, stderr := p.finish(t)
			if code != tc.code || strings.Count(stderr, "| stop: ") != 1 {
				t.Fatalf("exit %d, stderr %q; want %d and one statistics line", code, stderr, tc.code)
			}
		})
	}
}

// SIGTERM stops perplexity with status 143.
func TestPerplexityTerminate(t *testing.T) {
	m := tinyModel(t)
	// About a thousand chunks of 64 tokens: far more than are scored
	// before the signal lands.
	cmd := exec.Command(bin, "perplexity", m, "-f", goText(t, 60), "--ctx", "64")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The first progress line comes after ten chunks: the run is under way.
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "chunk 10/") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("first progress line %q, %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, stderr)
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 143 {
		t.Fatalf("exit %v, want status 143", err)
	}
}

// SIGINT and SIGTERM stop embed and rerank with 130 and 143, as they do
// the other commands, not with "context canceled" and status 1.
func TestScoringInterrupt(t *testing.T) {
	emb, rerank := compileBundled(t, "tiny-emb"), compileBundled(t, "tiny-rerank")
	var b strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&b, "line %d: %s\n", i, strings.Repeat("func main() { return nil } ", 8))
	}
	texts := filepath.Join(t.TempDir(), "texts.txt")
	if err := os.WriteFile(texts, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model string
		args  []string
		sig   syscall.Signal
		code  int
	}{
		{emb, []string{"embed", emb, "-f", texts}, syscall.SIGINT, 130},
		{rerank, []string{"rerank", rerank, "-q", "what is Go?", "-f", texts}, syscall.SIGTERM, 143},
	} {
		cmd := exec.Command(bin, tc.args...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Mapped, the model is open and the texts are being embedded.
		maps := fmt.Sprintf("/proc/%d/maps", cmd.Process.Pid)
		for {
			if b, err := os.ReadFile(maps); err != nil || bytes.Contains(b, []byte(tc.model)) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if err := cmd.Process.Signal(tc.sig); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != tc.code || o.Len() != 0 {
			t.Errorf("%v, %v: exit %v, want status %d and no output; stdout %d bytes, stderr %q", tc.args, tc.sig, err, tc.code, o.Len(), e.String())
		}
	}
}
