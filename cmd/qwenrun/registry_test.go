package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/qwenc/qwenc/format/oci"
)

// qwenrun serve oci://... pulls the model into the cache and serves it;
// qwenrun health says 0 while it answers /health and 1 once it is gone:
// the container image's entrypoint and HEALTHCHECK.
func TestServeFromRegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/models/tiny-a:f16"
	pushed, err := oci.Push(context.Background(), tinyModel(t), ref, oci.Options{Keychain: authn.NewMultiKeychain()})
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials of this machine's

	cmd, addr, seen := startServe(t, "oci://"+ref, "--addr", "127.0.0.1:0", "--parallel", "1")
	if !strings.Contains(seen, "pulled "+pushed.Blob.String()) {
		t.Errorf("serve did not say it pulled the model:\n%s", seen)
	}
	cached := filepath.Join(cache, "qwenc", "blobs", "sha256", pushed.Blob.Hex)
	if got, want := readFile(t, cached), readFile(t, tinyModel(t)); !bytes.Equal(got, want) {
		t.Errorf("%s differs from the model pushed", cached)
	}

	if out, errOut, code := qwenrun(t, "", "health", "--addr", addr); code != 0 || out != "" || errOut != "" {
		t.Errorf("health while serving: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Named by the repository, not by the cached file's digest.
	resp, err := http.Get("http://" + addr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	models, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(models), `"id":"tiny-a"`) {
		t.Errorf("/v1/models: %s; want the model named tiny-a", models)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	_, errOut, code := qwenrun(t, "", "health", "--addr", addr, "--timeout", "2s")
	if code != 1 || !strings.HasPrefix(errOut, "qwenrun: health: ") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("health after the server stopped: exit %d, stderr %q; want 1 and one line", code, errOut)
	}

	// A server that answers, but not 200: unhealthy.
	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "draining", http.StatusServiceUnavailable)
	}))
	defer sick.Close()
	_, errOut, code = qwenrun(t, "", "health", "--addr", strings.TrimPrefix(sick.URL, "http://"))
	if code != 1 || !strings.Contains(errOut, "503 Service Unavailable") {
		t.Errorf("health of a server answering 503: exit %d, stderr %q", code, errOut)
	}
}

// qwenrun oci://... runs from the cache once pulled; a reference the
// registry lacks is one line naming it, exit 1.
func TestRunFromRegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	pushed, err := oci.Push(context.Background(), tinyModel(t), host+"/models/tiny-a:f16", oci.Options{Keychain: authn.NewMultiKeychain()})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	want, _, code := qwenrun(t, "", tinyModel(t), "-p", "func main", "-n", "4", "--temp", "0")
	if code != 0 {
		t.Fatalf("qwenrun FILE: exit %d", code)
	}
	for _, ref := range []string{"oci://" + host + "/models/tiny-a:f16", "oci://" + pushed.Ref} {
		start := time.Now()
		out, errOut, code := qwenrun(t, "", ref, "-p", "func main", "-n", "4", "--temp", "0")
		if code != 0 || out != want {
			t.Errorf("qwenrun %s: exit %d, stdout %q, stderr %q; want %q as from the file", ref, code, out, errOut, want)
		}
		t.Logf("%s: %v", ref, time.Since(start))
	}
	_, errOut, code := qwenrun(t, "", "oci://"+host+"/models/absent:f16", "-p", "x")
	if code != 1 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "models/absent:f16") {
		t.Errorf("an absent model: exit %d, stderr %q", code, errOut)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startServe runs qwenrun serve with args and returns once it says where
// it listens: the process, its address and what it said until then. The
// test's end kills it.
func startServe(t *testing.T, args ...string) (*exec.Cmd, string, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var addr, seen string
	lines := bufio.NewScanner(stderr)
	serving := regexp.MustCompile(`msg=serving .*url=http://(\S+) `)
	for addr == "" && lines.Scan() {
		seen += lines.Text() + "\n"
		if m := serving.FindStringSubmatch(lines.Text()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatalf("qwenrun serve never said where it listens:\n%s", seen)
	}
	go io.Copy(io.Discard, stderr)
	return cmd, addr, seen
}

// Every command that takes an oci:// MODEL takes --insecure with it:
// embed and rerank pull as run and serve do.
func TestInsecureWhereverOCI(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	ref := "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/models/absent:f16"
	for _, args := range [][]string{
		{"embed", "--insecure", ref, "hello"},
		{"rerank", "--insecure", ref, "-q", "which", "hello"},
	} {
		_, errOut, code := qwenrun(t, "", args...)
		if code != 1 || !strings.Contains(errOut, "models/absent:f16: not found") {
			t.Errorf("qwenrun %q: exit %d, stderr %q; want the pull's not found", args, code, errOut)
		}
	}
}
