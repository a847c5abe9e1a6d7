package main

import (
	"bytes"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestTerminateStopsCleanly is TestInterruptStopsCleanly for SIGTERM (what
// a service manager or `timeout` sends): generation stops, the text so far
// and the statistics are printed, and the exit status is 130.
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
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want status 130; stderr %q", err, e.String())
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
