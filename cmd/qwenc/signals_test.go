package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/testmodel"
)

// sizedModel writes a random-weight checkpoint with the given vocabulary
// and hidden size; the embedding (vocab x hidden) dominates its size, and
// since the head is tied the compiled file holds it twice.
func sizedModel(t *testing.T, name string, vocab, hidden int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	s := synth.Shape{ModelType: "qwen3", Hidden: hidden, Intermediate: 2 * hidden, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64,
		Vocab: vocab, MaxPositions: 512, Tied: true, DType: "BF16", EOS: synth.MiniEOS}
	if err := synth.WriteMini(dir, s); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pipeGate is a named pipe for a child's output that the test can fill,
// so the child's next write blocks until the test reads: the child is then
// held at a known point without relying on timing. The child writes through
// w (a blocking description of the FIFO); fill opens another, non-blocking
// description (O_NONBLOCK belongs to the open file description, so the
// child's stays blocking).
type pipeGate struct {
	path string
	r    *os.File // the test's read end
	w    *os.File // for the child; close it in the test after Start
}

func newPipeGate(t *testing.T) *pipeGate {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	// Opening the read end non-blocking does not wait for a writer; the
	// write end then opens at once because a reader exists.
	r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return &pipeGate{path: path, r: r, w: w}
}

// fill writes NUL bytes into the pipe until it is full.
func (g *pipeGate) fill(t *testing.T) {
	t.Helper()
	fd, err := syscall.Open(g.path, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	page := make([]byte, 4096)
	// Whole pages first; a write of up to PIPE_BUF bytes is all or
	// nothing, so single bytes then fill the rest of the last page.
	for _, n := range []int{len(page), 1} {
		for {
			_, err := syscall.Write(fd, page[:n])
			if err == syscall.EAGAIN {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestSignalDuringCompileCleansUp interrupts a compile of a checkpoint
// that takes a while (about 100 MB written) with SIGINT and with SIGTERM,
// once its progress output has started, and checks that it exits with 130
// or 143 (as a shell reports the signal) and leaves the output directory
// empty: no output, no temporary file.
//
// The progress lines go to a pipe the test fills after the first line, so
// the compile is held at its next progress line (at most a tenth further)
// until the signal has been sent: however slow or loaded the machine, most
// of the work is still ahead when the signal arrives, and the test needs
// no sleeps.
func TestSignalDuringCompileCleansUp(t *testing.T) {
	m := sizedModel(t, "sizeable", 100000, 256)
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		code int
	}{{"SIGINT", syscall.SIGINT, 130}, {"SIGTERM", syscall.SIGTERM, 143}} {
		t.Run(tc.name, func(t *testing.T) {
			work := t.TempDir()
			gate := newPipeGate(t)
			cmd := exec.Command(qwencBin, "compile", m, "-o", "out.qbin", "--max-prefill", "16")
			cmd.Dir = work
			var stdout bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, gate.w
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			gate.w.Close() // the child holds its own copy; EOF comes when it exits
			br := bufio.NewReader(gate.r)
			first, err := br.ReadString('\n')
			if err != nil || !strings.HasPrefix(first, "writing ") {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("first progress line %q, %v", first, err)
			}
			gate.fill(t)
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			rest, err := io.ReadAll(br)
			if err != nil {
				t.Fatal(err)
			}
			werr := cmd.Wait()
			stderr := first + strings.ReplaceAll(string(rest), "\x00", "")
			if strings.Contains(stderr, "done:") {
				t.Fatalf("the compile finished before the signal arrived:\n%s", stderr)
			}
			ee, ok := werr.(*exec.ExitError)
			if !ok || ee.ExitCode() != tc.code {
				t.Fatalf("exit %v, want status %d; stderr:\n%s", werr, tc.code, stderr)
			}
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, "qwenc: ") || strings.Count(stderr, "qwenc: ") != 1 {
				t.Errorf("stderr does not end in one line of error:\n%s", stderr)
			}
			if es, _ := os.ReadDir(work); len(es) != 0 {
				t.Fatalf("left %v in the output directory", names(es))
			}
		})
	}
}

func names(es []os.DirEntry) []string {
	var s []string
	for _, e := range es {
		s = append(s, e.Name())
	}
	return s
}

// TestSignalDuringKLKeepsOutput interrupts a GGUF compile while it
// measures the KL divergence its new rounding adds: the compiled file is
// already written and stays, and stderr says so rather than that no
// output was written.
func TestSignalDuringKLKeepsOutput(t *testing.T) {
	src := testmodel.GGUF(t, "tiny-a-Q8_0")
	work := t.TempDir()
	gate := newPipeGate(t)
	cmd := exec.Command(qwencBin, "compile", src, "--type", "q4", "-o", "q4.qbin", "--no-sync")
	cmd.Dir = work
	cmd.Stderr = gate.w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	gate.w.Close()
	br := bufio.NewReader(gate.r)
	var stderr strings.Builder
	for line := ""; !strings.HasPrefix(line, "measuring the KL divergence"); {
		var err error
		line, err = br.ReadString('\n')
		stderr.WriteString(line)
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no KL measure began: %v\n%s", err, stderr.String())
		}
	}
	// The measure's result would be the next line: held there, the
	// measure cannot have finished when the signal comes.
	gate.fill(t)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	werr := cmd.Wait()
	stderr.WriteString(strings.ReplaceAll(string(rest), "\x00", ""))
	if strings.Contains(stderr.String(), "KL divergence from the GGUF's own weights:") {
		t.Fatalf("the measure finished before the signal arrived:\n%s", stderr.String())
	}
	if ee, ok := werr.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want status 130; stderr:\n%s", werr, stderr.String())
	}
	if !strings.HasSuffix(stderr.String(), "qwenc: interrupted measuring the KL divergence; q4.qbin is written\n") {
		t.Errorf("stderr does not say the output is written:\n%s", stderr.String())
	}
	if es, _ := os.ReadDir(work); len(es) != 1 || es[0].Name() != "q4.qbin" {
		t.Fatalf("the output directory holds %v, want q4.qbin alone", names(es))
	}
}

// TestSignalStopsReadOnlyCommands: SIGINT stops qwenc inspect --dequant,
// which removes its half-written output, and qwenc verify. Both once
// ran on to the end and exited 0, the signal caught and lost.
func TestSignalStopsReadOnlyCommands(t *testing.T) {
	work := t.TempDir()
	if _, stderr, code := run(t, work, "compile", sizedModel(t, "sizeable", 100000, 256), "-o", "m.qbin", "--no-sync", "-q"); code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	m := filepath.Join(work, "m.qbin")
	t.Run("dequant", func(t *testing.T) {
		out := t.TempDir()
		cmd := exec.Command(qwencBin, "inspect", m, "--tensor", "lm_head", "--dequant", filepath.Join(out, "head.f32"))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The temporary file is there once the values are being written.
		for {
			if tmps, _ := filepath.Glob(filepath.Join(out, ".head.f32.*.tmp")); len(tmps) > 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		werr := cmd.Wait()
		if ee, ok := werr.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
			t.Fatalf("exit %v, want status 130; stdout %q, stderr %q", werr, stdout.String(), stderr.String())
		}
		if es, _ := os.ReadDir(out); len(es) != 0 {
			t.Fatalf("left %v in the output directory", names(es))
		}
	})
	t.Run("verify", func(t *testing.T) {
		// Its one line of output goes to a full pipe: verify is held
		// there, its work done, when the signal comes.
		gate := newPipeGate(t)
		cmd := exec.Command(qwencBin, "verify", m)
		cmd.Stdout = gate.w
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		gate.w.Close()
		gate.fill(t)
		// Mapped, the file is being verified: the command has started,
		// and whatever it does with signals it does by now. A verify
		// already done has unmapped it and waits on the full pipe.
		maps := fmt.Sprintf("/proc/%d/maps", cmd.Process.Pid)
		for start := time.Now(); time.Since(start) < 2*time.Second; time.Sleep(time.Millisecond) {
			if b, err := os.ReadFile(maps); err != nil || bytes.Contains(b, []byte(m)) {
				break
			}
		}
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		rest, err := io.ReadAll(gate.r)
		if err != nil {
			t.Fatal(err)
		}
		werr := cmd.Wait()
		ee, ok := werr.(*exec.ExitError)
		if !ok {
			t.Fatalf("exit %v after SIGINT; stdout %q", werr, strings.ReplaceAll(string(rest), "\x00", ""))
		}
		if ws, _ := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Fatalf("exit %v, want the end SIGINT gives", werr)
		}
	})
}
