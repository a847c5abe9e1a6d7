package oci_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/opencontainers/image-spec/schema"
	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/arch"
	"github.com/qwenc/qwenc/format/oci"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
	"golang.org/x/sys/unix"
)

// testRegistry is go-containerregistry's registry, in memory, behind a
// handler that records every request and may tamper with some.
type testRegistry struct {
	srv  *httptest.Server
	host string // 127.0.0.1:PORT

	mu     sync.Mutex
	log    []string // "METHOD PATH RANGE"
	tamper func(w http.ResponseWriter, r *http.Request) http.ResponseWriter
	// gate, if set, may answer a request itself, returning true.
	gate func(w http.ResponseWriter, r *http.Request) bool
}

func newRegistry(t *testing.T) *testRegistry {
	t.Helper()
	reg := &testRegistry{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	reg.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reg.mu.Lock()
		reg.log = append(reg.log, r.Method+" "+r.URL.Path+" "+r.Header.Get("Range"))
		tamper, gate := reg.tamper, reg.gate
		reg.mu.Unlock()
		if gate != nil && gate(w, r) {
			return
		}
		if tamper != nil {
			w = tamper(w, r)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(reg.srv.Close)
	reg.host = strings.TrimPrefix(reg.srv.URL, "http://")
	return reg
}

// requests returns the requests since the last call whose line contains s.
func (reg *testRegistry) requests(s string) []string {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	var out []string
	for _, l := range reg.log {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	reg.log = nil
	return out
}

func (reg *testRegistry) setTamper(f func(w http.ResponseWriter, r *http.Request) http.ResponseWriter) {
	reg.mu.Lock()
	reg.tamper = f
	reg.mu.Unlock()
}

// pushedModel starts a registry and pushes a tiny model of type typ to
// it, as REGISTRY/models/tiny:TYPE.
func pushedModel(t *testing.T, typ format.DType) (reg *testRegistry, file, ref string, pushed *oci.Pushed) {
	t.Helper()
	reg = newRegistry(t)
	file = tinyModel(t, typ)
	ref = reg.host + "/models/tiny:" + typ.String()
	pushed, err := oci.Push(context.Background(), file, ref, opts())
	if err != nil {
		t.Fatal(err)
	}
	return reg, file, ref, pushed
}

// onBlobGet has the registry's answers to GETs of blob written through
// the ResponseWriter wrap returns.
func (reg *testRegistry) onBlobGet(blob v1.Hash, wrap func(http.ResponseWriter) http.ResponseWriter) {
	reg.setTamper(func(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+blob.String()) {
			return wrap(w)
		}
		return w
	})
}

// opts keep the tests off the machine's docker login.
func opts() oci.Options { return oci.Options{Keychain: authn.NewMultiKeychain()} }

// tinyModel compiles a random-weight model of a few hundred KB.
func tinyModel(t *testing.T, typ format.DType) string { return tinyModelOf(t, "qwen3", typ) }

// tinyModelOf compiles a small model of the architecture: qwen3, or the
// hybrid qwen3_5 (DeltaNet layers with an MTP block).
func tinyModelOf(t *testing.T, modelType string, typ format.DType) string {
	t.Helper()
	s := synth.Shape{ModelType: "qwen3", Hidden: 64, Intermediate: 128, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 32,
		Vocab: 270, MaxPositions: 96, Tied: true, DType: "BF16", Seed: 5, EOS: synth.MiniEOS}
	if modelType == "qwen3_5" {
		s.ModelType, s.Layers = modelType, 4
		s.Qwen35 = synth.Qwen35{FullAttentionInterval: 4, LinearKeyHeads: 2, LinearValueHeads: 4, LinearKeyHeadDim: 16, LinearValueHeadDim: 16,
			ConvKernel: 4, PartialRotaryFactor: 0.25, MTPLayers: 1}
	}
	return synthtest.CompileAs(t, s, 8, typ)
}

func sha256Hex(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

func sameFile(t *testing.T, got, want string) {
	t.Helper()
	a, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("%s (%d bytes) differs from %s (%d bytes)", got, len(a), want, len(b))
	}
}

// rawManifest fetches a manifest as a client asking for OCI would.
func rawManifest(t *testing.T, reg *testRegistry, repo, ref string) ([]byte, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, reg.srv.URL+"/v2/"+repo+"/manifests/"+ref, nil)
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET manifest: %v %s %s", err, resp.Status, b)
	}
	return b, resp.Header.Get("Content-Type")
}

// A pushed file comes back byte for byte, under a manifest that the
// image spec's schema accepts and that follows its guidance for
// artifacts: artifactType ours, the empty config, one layer that is the
// file, and the header's figures as annotations.
func TestPushPullRoundTrip(t *testing.T) {
	reg := newRegistry(t)
	for _, c := range []struct {
		arch string
		typ  format.DType
	}{{"qwen3", format.F16}, {"qwen3", format.Q4}, {"qwen3_5", format.Q8}} {
		typ := c.typ
		t.Run(c.arch+"-"+typ.String(), func(t *testing.T) {
			file := tinyModelOf(t, c.arch, typ)
			st, _ := os.Stat(file)
			ref := reg.host + "/models/tiny:" + c.arch + "-" + typ.String()
			pushed, err := oci.Push(context.Background(), file, ref, opts())
			if err != nil {
				t.Fatal(err)
			}
			if pushed.Blob.Hex != sha256Hex(t, file) || pushed.Size != st.Size() {
				t.Errorf("pushed blob %s (%d bytes), the file is sha256:%s (%d bytes)", pushed.Blob, pushed.Size, sha256Hex(t, file), st.Size())
			}

			raw, ctype := rawManifest(t, reg, "models/tiny", c.arch+"-"+typ.String())
			if ctype != "application/vnd.oci.image.manifest.v1+json" {
				t.Errorf("manifest Content-Type %q", ctype)
			}
			if got := fmt.Sprintf("sha256:%x", sha256.Sum256(raw)); got != pushed.Manifest.String() {
				t.Errorf("the tag's manifest is %s, Push said %s", got, pushed.Manifest)
			}
			if err := schema.ValidatorMediaTypeManifest.Validate(bytes.NewReader(raw)); err != nil {
				t.Errorf("the image spec's schema refuses the manifest: %v\n%s", err, raw)
			}
			checkArtifactManifest(t, raw, file, c.arch, typ)

			cache := oci.Cache{Dir: t.TempDir()}
			pulled, err := oci.Pull(context.Background(), "oci://"+ref, cache, opts())
			if err != nil {
				t.Fatal(err)
			}
			if pulled.Cached || pulled.Blob != pushed.Blob || pulled.Manifest != pushed.Manifest || pulled.Ref != pushed.Ref {
				t.Errorf("pulled %+v after pushing %+v", pulled, pushed)
			}
			if want := filepath.Join(cache.Dir, "blobs", "sha256", pushed.Blob.Hex); pulled.Path != want {
				t.Errorf("pulled to %s, want %s", pulled.Path, want)
			}
			sameFile(t, pulled.Path, file)
			out := filepath.Join(t.TempDir(), "model.qbin")
			if err := oci.Place(pulled.Path, out); err != nil {
				t.Fatal(err)
			}
			sameFile(t, out, file)
			if f, err := format.Open(out); err != nil {
				t.Fatal(err)
			} else if err := f.Verify(); err != nil {
				t.Fatal(err)
			} else {
				f.Close()
			}
		})
	}
}

// checkArtifactManifest holds raw to the image spec 1.1's rules for an
// artifact, field by field (the schema leaves most of them open).
func checkArtifactManifest(t *testing.T, raw []byte, file, modelType string, typ format.DType) {
	t.Helper()
	type desc struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Data        []byte            `json:"data"`
		Annotations map[string]string `json:"annotations"`
	}
	var m struct {
		SchemaVersion int               `json:"schemaVersion"`
		MediaType     string            `json:"mediaType"`
		ArtifactType  string            `json:"artifactType"`
		Config        desc              `json:"config"`
		Layers        []desc            `json:"layers"`
		Annotations   map[string]string `json:"annotations"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("manifest: %v\n%s", err, raw)
	}
	if m.SchemaVersion != 2 || m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.ArtifactType != oci.ArtifactType {
		t.Errorf("schemaVersion %d, mediaType %q, artifactType %q", m.SchemaVersion, m.MediaType, m.ArtifactType)
	}
	// The empty descriptor of image-spec 1.1: "{}" and its digest.
	const emptyDigest = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
	if c := m.Config; c.MediaType != "application/vnd.oci.empty.v1+json" || c.Digest != emptyDigest || c.Size != 2 || (c.Data != nil && string(c.Data) != "{}") {
		t.Errorf("config %+v, want the empty descriptor", c)
	}
	if len(m.Layers) != 1 {
		t.Fatalf("%d layers, want 1", len(m.Layers))
	}
	st, _ := os.Stat(file)
	if l := m.Layers[0]; l.MediaType != oci.LayerMediaType || l.Digest != "sha256:"+sha256Hex(t, file) || l.Size != st.Size() ||
		l.Annotations[oci.AnnotationTitle] != filepath.Base(file) {
		t.Errorf("layer %+v, want the file itself", l)
	}
	f, err := format.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := arch.Builtin().Validate(f.Header); err != nil {
		t.Fatal(err)
	}
	rep := format.Report(f.Header)
	for k, want := range map[string]string{
		oci.AnnotationTitle:         filepath.Base(file),
		oci.AnnotationArchitecture:  modelType,
		oci.AnnotationWeightType:    typ.String(),
		oci.AnnotationParameters:    strconv.FormatUint(rep.Parameters, 10),
		oci.AnnotationContext:       "96",
		oci.AnnotationFormatVersion: strconv.Itoa(format.Version),
	} {
		if got := m.Annotations[k]; got != want {
			t.Errorf("annotation %s = %q, want %q", k, got, want)
		}
	}
}

// A second pull of a tag asks the registry for the manifest only; of a
// digest, asks it nothing.
func TestSecondPullFromCache(t *testing.T) {
	reg, file, ref, pushed := pushedModel(t, format.Q8)
	cache := oci.Cache{Dir: t.TempDir()}
	start := time.Now()
	if _, err := oci.Pull(context.Background(), ref, cache, opts()); err != nil {
		t.Fatal(err)
	}
	t.Logf("first pull of %d bytes: %v", pushed.Size, time.Since(start))
	blobGets := "GET /v2/models/tiny/blobs/" + pushed.Blob.String()
	if n := len(reg.requests(blobGets)); n != 1 {
		t.Fatalf("the first pull fetched the blob %d times, want 1", n)
	}
	start = time.Now()
	p, err := oci.Pull(context.Background(), ref, cache, opts())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second pull by tag: %v", time.Since(start))
	if got := reg.requests("/blobs/"); !p.Cached || len(got) != 0 {
		t.Errorf("second pull by tag: cached %v, blob requests %q; want none", p.Cached, got)
	}
	p, err = oci.Pull(context.Background(), pushed.Ref, cache, opts())
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.requests(""); !p.Cached || len(got) != 0 {
		t.Errorf("pull by digest: cached %v, requests %q; want none", p.Cached, got)
	}
	sameFile(t, p.Path, file)
}

// A blob whose bytes do not match its digest is refused, and nothing of
// it stays in the cache: the next pull starts afresh.
func TestCorruptBlobRefused(t *testing.T) {
	reg, file, ref, pushed := pushedModel(t, format.F16)
	reg.onBlobGet(pushed.Blob, func(w http.ResponseWriter) http.ResponseWriter { return &flipper{ResponseWriter: w, at: 5000} })
	cache := oci.Cache{Dir: t.TempDir()}
	_, err := oci.Pull(context.Background(), ref, cache, opts())
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("pull of a corrupted blob: %v, want it refused", err)
	}
	entries, _ := os.ReadDir(filepath.Join(cache.Dir, "blobs", "sha256"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), pushed.Blob.Hex) {
			t.Errorf("%s left in the cache", e.Name())
		}
	}
	reg.setTamper(nil)
	p, err := oci.Pull(context.Background(), ref, cache, opts())
	if err != nil {
		t.Fatal(err)
	}
	sameFile(t, p.Path, file)
}

// flipper inverts one byte of a response body.
type flipper struct {
	http.ResponseWriter
	at, n int
}

func (f *flipper) Write(b []byte) (int, error) {
	if i := f.at - f.n; i >= 0 && i < len(b) {
		b = bytes.Clone(b)
		b[i] ^= 0xff
	}
	f.n += len(b)
	return f.ResponseWriter.Write(b)
}

// A pull cut off mid-file, its resumptions bringing nothing more, leaves
// what arrived; the next one asks only for the rest, with a Range from
// the partial file's length, and the result is the file.
func TestInterruptedPullResumes(t *testing.T) {
	defer oci.FastRetries()()
	reg, file, ref, pushed := pushedModel(t, format.F16)
	const cut = 20000
	if pushed.Size < 2*cut {
		t.Fatalf("the test model has %d bytes: too small to cut at %d", pushed.Size, cut)
	}
	var once sync.Once
	reg.onBlobGet(pushed.Blob, func(w http.ResponseWriter) http.ResponseWriter {
		c := &cutter{ResponseWriter: w}
		once.Do(func() { c.left = cut })
		return c
	})
	cache := oci.Cache{Dir: t.TempDir()}
	_, err := oci.Pull(context.Background(), ref, cache, opts())
	if err == nil || !strings.Contains(err.Error(), "resume") {
		t.Fatalf("a pull cut at %d bytes: %v, want an error that says it can resume", cut, err)
	}
	partial := filepath.Join(cache.Dir, "blobs", "sha256", pushed.Blob.Hex+".partial")
	st, err := os.Stat(partial)
	if err != nil || st.Size() == 0 || st.Size() > cut {
		t.Fatalf("after the cut: %v, want a partial file of 1 to %d bytes", err, cut)
	}
	reg.setTamper(nil)
	reg.requests("")
	p, err := oci.Pull(context.Background(), ref, cache, opts())
	if err != nil {
		t.Fatal(err)
	}
	got := reg.requests("GET /v2/models/tiny/blobs/")
	want := fmt.Sprintf("GET /v2/models/tiny/blobs/%s bytes=%d-%d", pushed.Blob, st.Size(), pushed.Size-1)
	if len(got) != 1 || got[0] != want {
		t.Errorf("the resumed pull asked %q, want [%q]", got, want)
	}
	sameFile(t, p.Path, file)
	if _, err := os.Stat(partial); !os.IsNotExist(err) {
		t.Errorf("the partial file is still there: %v", err)
	}
}

// cutter sends left bytes of a body, then drops the connection.
type cutter struct {
	http.ResponseWriter
	left int
}

func (c *cutter) Write(b []byte) (int, error) {
	if len(b) >= c.left {
		c.ResponseWriter.Write(b[:c.left])
		c.ResponseWriter.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // net/http closes the connection
	}
	c.left -= len(b)
	return c.ResponseWriter.Write(b)
}

// Plain HTTP goes to this machine only, unless Insecure: a registry at a
// private address (where go-containerregistry would fall back to HTTP)
// is refused without one request reaching it.
func TestPlainHTTPOnlyLocal(t *testing.T) {
	reg, file, _, _ := pushedModel(t, format.Q8)
	reg.requests("")
	// Every connection goes to the test registry, whatever the address.
	dialer := &net.Dialer{}
	o := opts()
	o.Transport = &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dialer.DialContext(ctx, network, reg.host)
	}}
	ref := "10.11.12.13:5000/models/tiny:q8"
	_, err := oci.Pull(context.Background(), ref, oci.Cache{Dir: t.TempDir()}, o)
	if err == nil || !strings.Contains(err.Error(), "plain HTTP refused") {
		t.Errorf("pull over plain HTTP from a private address: %v, want it refused", err)
	}
	if got := reg.requests(""); len(got) != 0 {
		t.Errorf("the refused pull reached the registry: %q", got)
	}
	o.Insecure = true
	p, err := oci.Pull(context.Background(), ref, oci.Cache{Dir: t.TempDir()}, o)
	if err != nil {
		t.Fatalf("with Insecure: %v", err)
	}
	sameFile(t, p.Path, file)
}

// What is not a .qbin file is not pushed, and what is not a qwenc model
// is not pulled; each error names the file or the reference.
func TestRefusals(t *testing.T) {
	reg := newRegistry(t)
	bad := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(bad, []byte("not a model"), 0o644)
	if _, err := oci.Push(context.Background(), bad, reg.host+"/m:x", opts()); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("push of a text file: %v, want an error naming it", err)
	}
	file := tinyModel(t, format.F16)
	if _, err := oci.Push(context.Background(), file, reg.host+"/m@sha256:"+strings.Repeat("0", 64), opts()); err == nil || !strings.Contains(err.Error(), "push to a tag") {
		t.Errorf("push to a digest: %v", err)
	}
	if got := reg.requests(""); len(got) != 0 {
		t.Errorf("refused pushes reached the registry: %q", got)
	}
	// An ordinary container image under a tag.
	img, err := random.Image(100, 1)
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(reg.host + "/images/app:1")
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	if _, err := oci.Pull(context.Background(), tag.String(), oci.Cache{Dir: t.TempDir()}, opts()); err == nil || !strings.Contains(err.Error(), "not a qwenc model") {
		t.Errorf("pull of a container image: %v, want not a qwenc model", err)
	}
	if _, err := oci.Pull(context.Background(), "oci://Not A Reference", oci.Cache{Dir: t.TempDir()}, opts()); err == nil || !strings.Contains(err.Error(), "not a registry reference") {
		t.Errorf("pull of a malformed reference: %v", err)
	}
}

// A digest that names a large file of the cache rather than a manifest
// (the model's own sha256, given by mistake) is not read into memory to
// be hashed as a manifest: the pull asks the registry, which knows no
// such manifest, and says so.
func TestPullByFileDigestReadsNoFile(t *testing.T) {
	reg, _, _, _ := pushedModel(t, format.Q8)
	cache := oci.Cache{Dir: t.TempDir()}
	const big = 256 << 20
	h := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	blob := cache.Blob(h)
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(blob)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: the disk holds none of it, a read of it all allocates it.
	if err := errors.Join(f.Truncate(big), f.Close()); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = oci.Pull(context.Background(), reg.host+"/models/tiny@"+h.String(), cache, opts())
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("pull of a digest no manifest has: no error")
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > big/4 {
		t.Errorf("pull by the digest of a %d-byte cached file allocated %d bytes", big, n)
	}
}

// A pull that waits for another one's lock on the partial file, which
// that pull then refuses and removes, downloads the file itself: it does
// not go on with the removed file the other pull left behind.
func TestPullAfterAnotherPullRefusedItsDownload(t *testing.T) {
	_, file, ref, pushed := pushedModel(t, format.F16)
	cache := oci.Cache{Dir: t.TempDir()}
	partial := cache.Blob(pushed.Blob) + ".partial"
	if err := os.MkdirAll(filepath.Dir(partial), 0o755); err != nil {
		t.Fatal(err)
	}
	// The other pull: the whole file received, but damaged.
	other, err := os.OpenFile(partial, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := unix.Flock(int(other.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Write(bytes.Repeat([]byte{0xee}, int(pushed.Size))); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{})
	o := opts()
	o.Progress = &signalOn{text: "waiting for another pull", c: waiting}
	done := make(chan error, 1)
	var p *oci.Pulled
	go func() {
		var err error
		p, err = oci.Pull(context.Background(), ref, cache, o)
		done <- err
	}()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("the pull did not wait for the other's lock: %v", err)
	}
	// The other pull refuses what it received, as download does.
	if err := os.Remove(partial); err != nil {
		t.Fatal(err)
	}
	other.Close()
	if err := <-done; err != nil {
		t.Fatalf("the waiting pull: %v", err)
	}
	sameFile(t, p.Path, file)
}

// signalOn closes c the first time a write holds text.
type signalOn struct {
	text string
	c    chan struct{}
	once sync.Once
}

func (s *signalOn) Write(b []byte) (int, error) {
	if strings.Contains(string(b), s.text) {
		s.once.Do(func() { close(s.c) })
	}
	return len(b), nil
}

// Placing a pulled file where an earlier pull placed it (qwenc pull -o
// run again) leaves the file and nothing else in its directory.
func TestPlaceAgain(t *testing.T) {
	dir := t.TempDir()
	blob := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(blob, []byte("a model"), 0o444); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "model.qbin")
	for range 2 {
		if err := oci.Place(blob, out); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != "model.qbin" {
		t.Errorf("after placing the file twice the directory holds %q, want only model.qbin", names)
	}
	sameFile(t, out, blob)
}

// A registry that answers a request for the whole blob with 206 Partial
// Content is refused with an error that says so, and the partial file
// keeps nothing of the answer.
func TestUnaskedPartialContentRefused(t *testing.T) {
	reg, _, ref, pushed := pushedModel(t, format.F16)
	reg.onBlobGet(pushed.Blob, func(w http.ResponseWriter) http.ResponseWriter {
		return &statusAs{ResponseWriter: w, code: http.StatusPartialContent}
	})
	cache := oci.Cache{Dir: t.TempDir()}
	_, err := oci.Pull(context.Background(), ref, cache, opts())
	if err == nil || !strings.Contains(err.Error(), "206") || strings.Contains(err.Error(), "%!") {
		t.Errorf("a 206 answer to a request without a Range: %v, want an error naming the status", err)
	}
	if st, err := os.Stat(cache.Blob(pushed.Blob) + ".partial"); err == nil && st.Size() != 0 {
		t.Errorf("the partial file holds %d bytes of the refused answer", st.Size())
	}
}

// statusAs sends code in place of a 200.
type statusAs struct {
	http.ResponseWriter
	code int
}

func (s *statusAs) WriteHeader(code int) {
	if code == http.StatusOK {
		code = s.code
	}
	s.ResponseWriter.WriteHeader(code)
}

// A registry that answers 429 Too Many Requests or a 5xx now and then
// (a rate limit, a restarting backend behind a load balancer) costs a
// pull a retry, not the pull: the ping, the manifest and the blob each
// fail once here, and the pull succeeds.
func TestPullRetriesTransientStatus(t *testing.T) {
	defer oci.FastRetries()()
	reg, file, ref, pushed := pushedModel(t, format.Q8)
	var mu sync.Mutex
	failed := map[string]bool{}
	reg.setTamper(func(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
		var key string
		var code int
		switch {
		case r.URL.Path == "/v2/":
			key, code = "ping", http.StatusBadGateway
		case strings.Contains(r.URL.Path, "/manifests/"):
			key, code = "manifest", http.StatusServiceUnavailable
		case strings.HasSuffix(r.URL.Path, "/blobs/"+pushed.Blob.String()):
			key, code = "blob", http.StatusTooManyRequests
		default:
			return w
		}
		mu.Lock()
		defer mu.Unlock()
		if failed[key] {
			return w
		}
		failed[key] = true
		return &failWith{ResponseWriter: w, code: code}
	})
	p, err := oci.Pull(context.Background(), ref, oci.Cache{Dir: t.TempDir()}, opts())
	if err != nil {
		t.Fatalf("a pull through one 502, one 503 and one 429: %v", err)
	}
	sameFile(t, p.Path, file)
	if len(failed) != 3 {
		t.Errorf("the registry failed %v, want the ping, the manifest and the blob", failed)
	}
}

// failWith answers with code and a registry's error body, whatever the
// handler would have said.
type failWith struct {
	http.ResponseWriter
	code    int
	written bool
}

func (f *failWith) WriteHeader(int) {
	if f.written {
		return
	}
	f.written = true
	f.ResponseWriter.Header().Set("Content-Type", "application/json")
	f.ResponseWriter.Header().Del("Content-Length")
	f.ResponseWriter.WriteHeader(f.code)
	code := map[int]string{http.StatusForbidden: "DENIED", http.StatusTooManyRequests: "TOOMANYREQUESTS"}[f.code]
	if code == "" {
		code = "UNAVAILABLE"
	}
	fmt.Fprintf(f.ResponseWriter, `{"errors":[{"code":%q,"message":"answered %d"}]}`, code, f.code)
}

func (f *failWith) Write(b []byte) (int, error) {
	f.WriteHeader(0)
	return len(b), nil
}

// A download cut off mid-way is resumed by the same pull, with a Range
// from what arrived, as docker pull and ollama pull do: a connection
// that drops once does not fail a pull of gigabytes.
func TestCutDownloadResumedByTheSamePull(t *testing.T) {
	defer oci.FastRetries()()
	reg, file, ref, pushed := pushedModel(t, format.F16)
	const cut = 20000
	var once sync.Once
	reg.onBlobGet(pushed.Blob, func(w http.ResponseWriter) http.ResponseWriter {
		var c http.ResponseWriter = w
		once.Do(func() { c = &cutter{ResponseWriter: w, left: cut} })
		return c
	})
	reg.requests("")
	p, err := oci.Pull(context.Background(), ref, oci.Cache{Dir: t.TempDir()}, opts())
	if err != nil {
		t.Fatalf("a pull whose download is cut once: %v", err)
	}
	sameFile(t, p.Path, file)
	got := reg.requests("GET /v2/models/tiny/blobs/")
	if len(got) != 2 || !strings.HasSuffix(got[0], pushed.Blob.String()+" ") || !strings.Contains(got[1], " bytes=") ||
		strings.Contains(got[1], " bytes=0-") {
		t.Errorf("the pull asked %q, want the whole blob then the rest of it", got)
	}
}

// A registry that stops sending mid-download without closing the
// connection does not hang the pull: past Options.StallTimeout with no
// byte, the request is cut and resumed.
func TestStalledDownloadResumed(t *testing.T) {
	defer oci.FastRetries()()
	reg, file, ref, pushed := pushedModel(t, format.F16)
	var once sync.Once
	release := make(chan struct{})
	defer close(release)
	reg.setTamper(func(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/blobs/"+pushed.Blob.String()) {
			return w
		}
		var s http.ResponseWriter = w
		once.Do(func() { s = &staller{ResponseWriter: w, left: 20000, done: r.Context().Done(), release: release} })
		return s
	})
	o := opts()
	o.StallTimeout = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := oci.Pull(ctx, ref, oci.Cache{Dir: t.TempDir()}, o)
	if err != nil {
		t.Fatalf("a pull whose download stalls once: %v", err)
	}
	sameFile(t, p.Path, file)
}

// staller sends left bytes of a body, then nothing until the request or
// the test ends.
type staller struct {
	http.ResponseWriter
	left          int
	done, release <-chan struct{}
}

func (s *staller) Write(b []byte) (int, error) {
	if len(b) >= s.left {
		s.ResponseWriter.Write(b[:s.left])
		s.ResponseWriter.(http.Flusher).Flush()
		select {
		case <-s.done:
		case <-s.release:
		}
		panic(http.ErrAbortHandler)
	}
	s.left -= len(b)
	return s.ResponseWriter.Write(b)
}

// A pull of a model the cache holds writes nothing there: a cache
// mounted read-only (a volume filled once, shared by the pods) serves a
// pull by digest, which asks the registry nothing, and one by tag.
func TestCachedPullWritesNothing(t *testing.T) {
	_, file, ref, pushed := pushedModel(t, format.Q8)
	cache := oci.Cache{Dir: t.TempDir()}
	if _, err := oci.Pull(context.Background(), ref, cache, opts()); err != nil {
		t.Fatal(err)
	}
	manifest := cache.Blob(pushed.Manifest)
	before, err := os.Stat(manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{pushed.Ref, ref} {
		p, err := oci.Pull(context.Background(), r, cache, opts())
		if err != nil {
			t.Fatal(err)
		}
		sameFile(t, p.Path, file)
		if after, err := os.Stat(manifest); err != nil || !os.SameFile(before, after) {
			t.Errorf("a pull of %s from the cache wrote the manifest again (%v)", r, err)
		}
	}
}

// requireToken has reg ask for a bearer token, as Docker Hub, GHCR and
// Harbor do: /v2/ answers 401 with a WWW-Authenticate challenge naming
// the token server, which gives the token to alice:secret only.
func (reg *testRegistry) requireToken() {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.gate = func(w http.ResponseWriter, r *http.Request) bool {
		unauthorized := func(msg string) bool {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"errors":[{"code":"UNAUTHORIZED","message":%q}]}`, msg)
			return true
		}
		if r.URL.Path == "/token" {
			if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "secret" {
				return unauthorized("incorrect username or password")
			}
			fmt.Fprint(w, `{"token":"t0k3n"}`)
			return true
		}
		if r.Header.Get("Authorization") != "Bearer t0k3n" {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="http://%s/token",service="test"`, reg.host))
			return unauthorized("authentication required")
		}
		return false
	}
}

// basicKeychain gives every registry the one user and password.
type basicKeychain struct{ user, password string }

func (k basicKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	return &authn.Basic{Username: k.user, Password: k.password}, nil
}

// A registry's refusals come back as errors that name the reference and
// say what to do: log in when no credentials were sent, log in again
// when they were refused, nothing found, a rate limit or a failing
// registry after the retries; docker login's config file is read.
func TestRegistryErrorsExplained(t *testing.T) {
	defer oci.FastRetries()()
	reg, file, ref, pushed := pushedModel(t, format.Q8)
	reg.requireToken()
	check := func(what string, err error, want ...string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", what)
			return
		}
		t.Logf("%s: %v", what, err)
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to say %q", what, err, w)
			}
		}
	}
	pull := func(o oci.Options, ref string) error {
		_, err := oci.Pull(context.Background(), ref, oci.Cache{Dir: t.TempDir()}, o)
		return err
	}
	check("an anonymous pull", pull(opts(), ref), ref+": ", "no credentials", "docker login "+reg.host)
	_, err := oci.Push(context.Background(), file, reg.host+"/models/other:x", opts())
	check("an anonymous push", err, reg.host+"/models/other:x: ", "no credentials", "docker login "+reg.host)
	o := opts()
	o.Keychain = basicKeychain{"alice", "wrong"}
	check("a pull with a wrong password", pull(o, ref), ref+": ", "refused", "docker login "+reg.host)

	// docker login's config file.
	dir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte("alice:secret"))
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.host, auth)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dir)
	p, err := oci.Pull(context.Background(), ref, oci.Cache{Dir: t.TempDir()}, oci.Options{})
	if err != nil {
		t.Fatalf("a pull with docker login's credentials: %v", err)
	}
	sameFile(t, p.Path, file)

	missing := reg.host + "/models/tiny:nope"
	check("a pull of a missing tag", pull(oci.Options{}, missing), missing+": ", "not found")
	for code, want := range map[int]string{
		http.StatusForbidden:          "denied",
		http.StatusTooManyRequests:    "rate limit",
		http.StatusServiceUnavailable: "503",
	} {
		reg.setTamper(func(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
			if strings.Contains(r.URL.Path, "/manifests/") {
				return &failWith{ResponseWriter: w, code: code}
			}
			return w
		})
		check(fmt.Sprintf("a pull answered %d", code), pull(oci.Options{}, pushed.Ref), pushed.Ref+": ", want)
	}
}

// A model pulled by tag runs again while its registry cannot be reached
// (a laptop offline, a pod restarting during the registry's outage), as
// docker run and ollama run take what they have: the pull takes the
// manifest the tag last resolved to, and says so. A registry that
// answers that the tag is not there, or that access is denied, is
// believed.
func TestTagPullWhileRegistryDown(t *testing.T) {
	defer oci.FastRetries()()
	reg, file, ref, pushed := pushedModel(t, format.Q8)
	cache := oci.Cache{Dir: t.TempDir()}
	if _, err := oci.Pull(context.Background(), ref, cache, opts()); err != nil {
		t.Fatal(err)
	}
	for _, code := range []int{http.StatusNotFound, http.StatusForbidden} {
		reg.setTamper(func(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
			if strings.Contains(r.URL.Path, "/manifests/") {
				return &failWith{ResponseWriter: w, code: code}
			}
			return w
		})
		if _, err := oci.Pull(context.Background(), ref, cache, opts()); err == nil {
			t.Errorf("the registry answered %d for the tag, and the pull took the cached model", code)
		}
	}
	pullDown := func(what string) {
		t.Helper()
		var progress strings.Builder
		o := opts()
		o.Progress = &progress
		p, err := oci.Pull(context.Background(), ref, cache, o)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !p.Cached || p.Manifest != pushed.Manifest || p.Ref != pushed.Ref {
			t.Errorf("%s: pulled %+v, want the cached %s", what, p, pushed.Ref)
		}
		sameFile(t, p.Path, file)
		if !strings.Contains(progress.String(), pushed.Ref) {
			t.Errorf("%s: the progress says %q, nothing of the cached %s", what, progress.String(), pushed.Ref)
		}
	}
	reg.setTamper(func(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
		return &failWith{ResponseWriter: w, code: http.StatusServiceUnavailable}
	})
	pullDown("a registry answering 503")
	reg.srv.Close()
	pullDown("a registry gone")
	// A tag never pulled has nothing to fall back to.
	if _, err := oci.Pull(context.Background(), reg.host+"/models/tiny:other", cache, opts()); err == nil {
		t.Errorf("a tag never pulled, its registry gone: no error")
	}
}

// Plain HTTP is spoken to every loopback address, as the docs say, not
// only to those go-containerregistry itself falls back for (127.0.0.1,
// localhost:PORT): a registry on 127.0.0.2 takes a push and a pull
// without --insecure.
func TestPlainHTTPOtherLoopback(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 to listen on: %v", err)
	}
	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	defer srv.Close()
	file := tinyModel(t, format.Q8)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/models/tiny:q8"
	if _, err := oci.Push(context.Background(), file, ref, opts()); err != nil {
		t.Fatalf("push to %s: %v", ref, err)
	}
	p, err := oci.Pull(context.Background(), ref, oci.Cache{Dir: t.TempDir()}, opts())
	if err != nil {
		t.Fatalf("pull from %s: %v", ref, err)
	}
	sameFile(t, p.Path, file)
}

// The cache lists what it holds, under the tags that last named it, and
// a model is removed from it by tag or by digest: the file goes once no
// tag or manifest left names it.
func TestCacheListRemove(t *testing.T) {
	reg, _, ref, pushed := pushedModel(t, format.Q8)
	other := tinyModel(t, format.F16)
	otherPushed, err := oci.Push(context.Background(), other, reg.host+"/models/other:f16", opts())
	if err != nil {
		t.Fatal(err)
	}
	alias := reg.host + "/models/alias:latest"
	if _, err := oci.Push(context.Background(), other, alias, opts()); err != nil {
		t.Fatal(err)
	}
	cache := oci.Cache{Dir: t.TempDir()}
	for _, r := range []string{ref, otherPushed.Ref, alias} {
		if _, err := oci.Pull(context.Background(), r, cache, opts()); err != nil {
			t.Fatal(err)
		}
	}
	list := func() map[string]oci.Model {
		t.Helper()
		models, err := cache.List()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]oci.Model{}
		for _, x := range models {
			m[x.Manifest.String()] = x
		}
		return m
	}
	got := list()
	if m := got[pushed.Manifest.String()]; len(got) != 2 || !m.Complete || m.Blob != pushed.Blob || m.Size != pushed.Size ||
		strings.Join(m.Tags, ",") != ref || m.Annotations[oci.AnnotationWeightType] != "q8" {
		t.Fatalf("the cache lists %+v; want %s under %s, and the other model", got, pushed.Ref, ref)
	}
	if m := got[otherPushed.Manifest.String()]; strings.Join(m.Tags, ",") != alias {
		t.Errorf("the other model is listed under %q, want %q (pulled by digest, then by that tag)", m.Tags, alias)
	}

	// By tag: the manifest and file go with the only tag naming them.
	if err := cache.Remove(ref); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cache.Blob(pushed.Blob)); !os.IsNotExist(err) {
		t.Errorf("after removing %s its file is still there (%v)", ref, err)
	}
	if err := cache.Remove(ref); err == nil || !strings.Contains(err.Error(), "not in the cache") {
		t.Errorf("removing %s again: %v, want not in the cache", ref, err)
	}
	// By digest: the tags that name it go too.
	if err := cache.Remove(otherPushed.Ref); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 0 {
		t.Errorf("after removing both the cache lists %+v", got)
	}
	if _, err := os.Stat(cache.Blob(otherPushed.Blob)); !os.IsNotExist(err) {
		t.Errorf("after removing %s its file is still there (%v)", otherPushed.Ref, err)
	}
}

// A registry that takes a connection and never answers does not hold a
// pull for good: a request for the manifest is given up past
// Options.StallTimeout with no answer (after its retries), and the error
// says so.
func TestSilentRegistryTimesOut(t *testing.T) {
	defer oci.FastRetries()()
	reg, _, ref, _ := pushedModel(t, format.Q8)
	release := make(chan struct{})
	defer close(release)
	reg.setTamper(func(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
		if strings.Contains(r.URL.Path, "/manifests/") {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
		return w
	})
	o := opts()
	o.StallTimeout = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err := oci.Pull(ctx, ref, oci.Cache{Dir: t.TempDir()}, o)
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "no answer") {
		t.Errorf("a pull from a registry that does not answer: %v after %v, want it to say no answer came", err, time.Since(start))
	}
	t.Logf("after %v: %v", time.Since(start), err)
}

// A model whose download was left half-way is listed as incomplete, and
// removing it takes the partial file too, unless a pull is at it.
func TestCacheRemoveIncomplete(t *testing.T) {
	defer oci.FastRetries()()
	reg, _, ref, pushed := pushedModel(t, format.F16)
	reg.onBlobGet(pushed.Blob, func(w http.ResponseWriter) http.ResponseWriter { return &cutter{ResponseWriter: w} })
	cache := oci.Cache{Dir: t.TempDir()}
	if _, err := oci.Pull(context.Background(), ref, cache, opts()); err == nil {
		t.Fatal("a pull whose every transfer is cut succeeded")
	}
	partial := cache.Blob(pushed.Blob) + ".partial"
	if err := os.WriteFile(partial, []byte("half a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	models, err := cache.List()
	if err != nil || len(models) != 1 || models[0].Complete {
		t.Fatalf("the cache lists %+v, %v; want the one model, incomplete", models, err)
	}
	// A pull at it holds the partial file's lock.
	f, err := os.Open(partial)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if err := cache.Remove(pushed.Ref); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(partial); err != nil {
		t.Errorf("the partial file a pull holds was removed: %v", err)
	}
	f.Close()
	// Pulled again (the manifest only: every transfer is still cut), then
	// removed with no pull at it.
	oci.Pull(context.Background(), ref, cache, opts())
	if err := cache.Remove(ref); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(partial); !os.IsNotExist(err) {
		t.Errorf("the partial file of a removed model is still there: %v", err)
	}
}

// A big download tells its progress at each tenth of the file, a pull
// of gigabytes not looking hung; a small one says nothing of it.
func TestDownloadProgress(t *testing.T) {
	_, _, ref, pushed := pushedModel(t, format.F16)
	pull := func() string {
		var b strings.Builder
		o := opts()
		o.Progress = &b
		if _, err := oci.Pull(context.Background(), ref, oci.Cache{Dir: t.TempDir()}, o); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if got := pull(); strings.Contains(got, "%") {
		t.Errorf("a pull of %d bytes told its progress:\n%s", pushed.Size, got)
	}
	defer oci.ProgressFrom(0)()
	got := pull()
	steps := regexp.MustCompile(`(\d+)% \((\d+) of (\d+) bytes\)`).FindAllStringSubmatch(got, -1)
	last := 0
	for _, s := range steps {
		pct, _ := strconv.Atoi(s[1])
		if pct <= last || pct >= 100 || s[3] != strconv.FormatInt(pushed.Size, 10) {
			t.Errorf("progress line %q after %d%%", s[0], last)
		}
		last = pct
	}
	if len(steps) < 5 {
		t.Errorf("a pull of %d bytes told %d steps of its progress, want most tenths:\n%s", pushed.Size, len(steps), got)
	}
}
