package main

import (
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
)

// qwenc push and qwenc pull against a registry in this process: the
// digest reference on stdout, the file back byte for byte at -o and in
// the cache, and one-line errors for what cannot be done.
func TestPushPull(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials of this machine's
	work := t.TempDir()
	file := synthtest.Compile(t, synth.Shape{ModelType: "qwen3", Hidden: 32, Intermediate: 64, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 16,
		Vocab: 270, MaxPositions: 64, Tied: true, DType: "BF16", Seed: 3, EOS: synth.MiniEOS}, 4)
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}

	out, stderr, code := run(t, work, "push", "-q", file, host+"/models/tiny:f16")
	if code != 0 || stderr != "" || !strings.HasPrefix(out, host+"/models/tiny@sha256:") {
		t.Fatalf("push: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	digestRef := strings.TrimSpace(out)

	dst := filepath.Join(work, "pulled.qbin")
	out, stderr, code = run(t, work, "pull", host+"/models/tiny:f16", "-o", dst)
	if code != 0 || out != dst+"\n" || !strings.Contains(stderr, "pulled sha256:") {
		t.Fatalf("pull -o: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, want) {
		t.Fatalf("pull -o wrote %d bytes that differ from the %d pushed", len(got), len(want))
	}
	// By digest, from the cache: the path there, and nothing downloaded.
	out, stderr, code = run(t, work, "pull", "oci://"+digestRef)
	path := strings.TrimSpace(out)
	if code != 0 || stderr != "" || !strings.HasPrefix(path, filepath.Join(cache, "qwenc", "blobs", "sha256")+"/") {
		t.Fatalf("pull by digest: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, want) {
		t.Fatalf("the cached file differs from the one pushed")
	}

	// What a script reads, the reference or the path, lost to a full
	// disk: exit 1, not 0.
	if full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0); err == nil {
		for _, args := range [][]string{{"push", "-q", file, host + "/models/tiny:f16"}, {"pull", "-q", host + "/models/tiny:f16"}} {
			cmd := exec.Command(qwencBin, args...)
			var e bytes.Buffer
			cmd.Stdout, cmd.Stderr = full, &e
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(e.String(), "no space left on device") {
				t.Errorf("%q to /dev/full: exit %v, stderr %q; want exit 1 and the write error", args, err, e.String())
			}
		}
		full.Close()
	}

	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"push", filepath.Join(work, "absent.qbin"), host + "/models/tiny:f16"}, "absent.qbin: no such file"},
		{[]string{"pull", host + "/models/tiny:absent"}, "models/tiny:absent"},
		{[]string{"pull", "not a reference"}, "not a registry reference"},
	} {
		out, stderr, code := run(t, work, tc.args...)
		if code != 1 || out != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "qwenc: ") || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1 and one line saying %q", tc.args, code, out, stderr, tc.msg)
		}
	}
}

// qwenc cache ls lists a pulled model under its tag, and qwenc cache rm
// takes it out: the file goes, the list is empty.
func TestCacheLsRm(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	work := t.TempDir()
	file := synthtest.Compile(t, synth.Shape{ModelType: "qwen3", Hidden: 32, Intermediate: 64, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 16,
		Vocab: 270, MaxPositions: 64, Tied: true, DType: "BF16", Seed: 3, EOS: synth.MiniEOS}, 4)
	ref := host + "/models/tiny:f16"
	if out, stderr, code := run(t, work, "push", "-q", file, ref); code != 0 {
		t.Fatalf("push: exit %d, %q %q", code, out, stderr)
	}
	out, stderr, code := run(t, work, "pull", "-q", ref)
	if code != 0 {
		t.Fatalf("pull: exit %d, %q", code, stderr)
	}
	path := strings.TrimSpace(out)
	out, stderr, code = run(t, work, "cache", "ls")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], ref+" ") ||
		!strings.Contains(lines[1], "sha256:") {
		t.Fatalf("cache ls: exit %d, stdout %q, stderr %q; want a header and %s", code, out, stderr, ref)
	}
	if out, stderr, code = run(t, work, "cache", "rm", ref); code != 0 || out != "" || stderr != "" {
		t.Fatalf("cache rm: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("after cache rm the file %s is still there: %v", path, err)
	}
	if out, _, code = run(t, work, "cache", "ls"); code != 0 || strings.Count(out, "\n") != 1 {
		t.Errorf("cache ls after rm: exit %d, %q; want the header only", code, out)
	}
	if _, stderr, code = run(t, work, "cache", "rm", ref); code != 1 || !strings.Contains(stderr, "not in the cache") {
		t.Errorf("cache rm of what is gone: exit %d, stderr %q", code, stderr)
	}
}
