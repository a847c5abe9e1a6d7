package oci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Pulled says where a pull put the model.
type Pulled struct {
	Ref         string  // REGISTRY/REPO@sha256:... of the manifest
	Manifest    v1.Hash // the manifest's digest
	Blob        v1.Hash // the file's sha256
	Size        int64
	Path        string // the file, in the cache
	Cached      bool   // true if nothing was downloaded
	Annotations map[string]string
}

// Pull brings the model ref (REGISTRY/REPO:TAG or @sha256:..., with or
// without oci://) into the cache and returns its path there. A tag is
// resolved at the registry each time, or, with the registry out of
// reach, taken to the manifest it last named; a digest whose manifest is
// cached needs no registry at all. The file is downloaded only if the cache
// lacks it, resumed from what an interrupted pull left, and checked
// against the layer's digest before it is renamed into place: a file
// that does not match is removed, and the error says so.
func Pull(ctx context.Context, ref string, cache Cache, o Options) (*Pulled, error) {
	r, err := o.parseRef(ref)
	if err != nil {
		return nil, err
	}
	repo := r.Context()
	var raw []byte
	var mdigest v1.Hash
	cached := false // the manifest is in the cache
	if d, ok := r.(name.Digest); ok {
		h, err := v1.NewHash(d.DigestStr())
		if err != nil {
			return nil, fmt.Errorf("%q: %w", ref, err)
		}
		if b, ok := cache.readSmall(h); ok {
			raw, mdigest, cached = b, h, true
		}
	}
	var rt http.RoundTripper
	var unreached error // the registry's failure, the model taken from the cache
	tag, isTag := r.(name.Tag)
	if raw == nil {
		rt, raw, mdigest, err = resolve(ctx, r, &o)
		if err != nil {
			// A registry down or out of reach does not stop a model pulled
			// by tag before from running, as docker run and ollama run take
			// what they have; an answer (not found, denied) is believed.
			b, h, ok := []byte(nil), v1.Hash{}, false
			if isTag && unreachable(err) {
				h, b, ok = cache.tagged(tag)
			}
			if !ok {
				return nil, err
			}
			raw, mdigest, cached, rt, unreached = b, h, true, nil, err
		}
	}
	layer, ann, err := parseManifest(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r, err)
	}
	if unreached != nil {
		if !cache.has(layer.Digest, layer.Size) {
			return nil, unreached
		}
		o.logf("%v\n%s: the registry is out of reach: taking %s, which the tag last named, from the cache", unreached, r, repo.Digest(mdigest.String()))
	}
	if !cached {
		_, cached = cache.readSmall(mdigest)
	}
	// Written only if missing: a cache holding the model, mounted
	// read-only, serves it.
	if !cached {
		if err := cache.writeSmall(mdigest, raw); err != nil {
			return nil, err
		}
	}
	if isTag && unreached == nil {
		if err := cache.tag(tag, mdigest); err != nil {
			return nil, err
		}
	}
	p := &Pulled{Ref: repo.Digest(mdigest.String()).String(), Manifest: mdigest, Blob: layer.Digest, Size: layer.Size,
		Path: cache.Blob(layer.Digest), Cached: true, Annotations: ann}
	if cache.has(layer.Digest, layer.Size) {
		return p, nil
	}
	if rt == nil {
		if rt, err = o.transport(ctx, r, repo.Scope(transport.PullScope)); err != nil {
			return nil, err
		}
	}
	p.Cached, err = download(ctx, rt, repo, layer, cache, &o)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// resolve asks the registry for the manifest r names: the transport it
// made for it, the manifest, and its digest.
func resolve(ctx context.Context, r name.Reference, o *Options) (http.RoundTripper, []byte, v1.Hash, error) {
	repo := r.Context()
	rt, err := o.transport(ctx, r, repo.Scope(transport.PullScope))
	if err != nil {
		return nil, nil, v1.Hash{}, err
	}
	desc, err := remote.Get(r, remote.WithContext(ctx), remote.WithTransport(rt))
	if err != nil {
		return nil, nil, v1.Hash{}, o.explain(r.String(), repo.RegistryStr(), err)
	}
	if desc.MediaType != types.OCIManifestSchema1 {
		return nil, nil, v1.Hash{}, fmt.Errorf("%s: a %s, not a qwenc model (want an OCI image manifest with artifactType %s)", r, desc.MediaType, ArtifactType)
	}
	raw := desc.Manifest
	if len(raw) > maxManifest {
		return nil, nil, v1.Hash{}, fmt.Errorf("%s: a manifest of %d bytes, over the %d a qwenc model's takes", r, len(raw), maxManifest)
	}
	// The digest of the bytes received, not the one the registry states:
	// go-containerregistry checks a digest reference, but a tag's
	// manifest is only what the registry sent.
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, v1.Hash{}, err
	}
	return rt, raw, h, nil
}

// unreachable reports whether err, met resolving a reference, says the
// registry could not be asked, rather than what it answered: no
// connection, no answer in time, or a server error after the retries.
func unreachable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, errPlainHTTP) {
		return false
	}
	var te *transport.Error
	if errors.As(err, &te) {
		return te.StatusCode >= 500
	}
	var ne net.Error
	var ue *url.Error
	return errors.As(err, &ne) || errors.As(err, &ue) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// parseManifest checks that raw is a qwenc model's manifest and returns
// its one layer and its annotations.
func parseManifest(raw []byte) (v1.Descriptor, map[string]string, error) {
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return v1.Descriptor{}, nil, fmt.Errorf("manifest: %w", err)
	}
	switch {
	case m.SchemaVersion != 2:
		return v1.Descriptor{}, nil, fmt.Errorf("manifest: schemaVersion %d, want 2", m.SchemaVersion)
	case m.ArtifactType != ArtifactType && m.Config.MediaType != ArtifactType:
		return v1.Descriptor{}, nil, fmt.Errorf("not a qwenc model: artifactType %q, config %q (want %s)", m.ArtifactType, m.Config.MediaType, ArtifactType)
	case len(m.Layers) != 1:
		return v1.Descriptor{}, nil, fmt.Errorf("manifest: %d layers, a qwenc model has one", len(m.Layers))
	}
	l := m.Layers[0]
	switch {
	case l.MediaType != LayerMediaType:
		return v1.Descriptor{}, nil, fmt.Errorf("manifest: layer media type %q, want %s", l.MediaType, LayerMediaType)
	case l.Digest.Algorithm != "sha256" || len(l.Digest.Hex) != 64:
		return v1.Descriptor{}, nil, fmt.Errorf("manifest: layer digest %q, want sha256", l.Digest)
	case l.Size <= 0:
		return v1.Descriptor{}, nil, fmt.Errorf("manifest: layer size %d", l.Size)
	}
	return l, m.Annotations, nil
}

// download fetches the blob l into the cache: into HEX.partial, locked
// against another process pulling it, continued with an HTTP Range from
// what is there, hashed, and renamed to HEX only if the digest matches.
// It returns true if another process finished the blob meanwhile.
func download(ctx context.Context, rt http.RoundTripper, repo name.Repository, l v1.Descriptor, cache Cache, o *Options) (bool, error) {
	dst := cache.Blob(l.Digest)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return false, fmt.Errorf("cache: %w", err)
	}
	partial := dst + ".partial"
	f, err := lockPartial(ctx, partial, o)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if cache.has(l.Digest, l.Size) {
		// Finished by the pull we waited for: f was made empty after it
		// renamed its own.
		if st, err := os.Stat(partial); err == nil && st.Size() == 0 {
			os.Remove(partial)
		}
		return true, nil
	}
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return false, fmt.Errorf("%s: %w", partial, err)
	}
	if have > l.Size {
		have = 0
	}
	// The digest covers the whole file: what an earlier pull left is
	// hashed again rather than trusted.
	sum := sha256.New()
	if _, err := io.Copy(sum, io.NewSectionReader(f, 0, have)); err != nil {
		return false, fmt.Errorf("%s: %w", partial, err)
	}
	for tries := 0; have < l.Size; {
		before := have
		have, err = fetch(ctx, rt, repo, l, f, sum, have, o)
		if err == nil {
			break
		}
		// A transfer cut off is taken up where it stopped, again and again
		// while each attempt brings bytes, a few times when none does.
		var cut *cutError
		if !errors.As(err, &cut) || ctx.Err() != nil {
			return false, err
		}
		if have > before {
			tries = 0
		}
		if tries++; tries >= retryBackoff.Steps {
			return false, err
		}
		o.logf("%v: resuming", err)
		select {
		case <-ctx.Done():
			return false, context.Cause(ctx)
		case <-time.After(backoff(tries)):
		}
	}
	if got := fmt.Sprintf("%x", sum.Sum(nil)); got != l.Digest.Hex {
		// Removed before the lock is released, so that a pull waiting for
		// it does not take up what is refused.
		os.Remove(partial)
		f.Close()
		return false, fmt.Errorf("%s@%s: the downloaded file's sha256 is %s: refused and removed", repo, l.Digest, got)
	}
	if err := f.Sync(); err != nil {
		return false, fmt.Errorf("%s: %w", partial, err)
	}
	// Read-only: a link made by Place, or a stray write, cannot change a
	// file the cache vouches for.
	if err := f.Chmod(0o444); err != nil {
		return false, fmt.Errorf("%s: %w", partial, err)
	}
	if err := os.Rename(partial, dst); err != nil {
		return false, fmt.Errorf("cache: %w", err)
	}
	o.logf("pulled %s (%d bytes)", l.Digest, l.Size)
	return false, nil
}

// lockPartial opens the partial file and takes its lock. The pull that
// held the lock may have renamed the file into place or removed it
// meanwhile: what was locked is then no longer the partial file, and
// writing to it would be lost, or a later rename would put another
// pull's half-written file in place. So the lock is taken again on the
// file now at that name, until the two are the same.
func lockPartial(ctx context.Context, partial string, o *Options) (*os.File, error) {
	for {
		f, err := os.OpenFile(partial, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
		if err := lockFile(ctx, f, o); err != nil {
			f.Close()
			return nil, err
		}
		held, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("cache: %w", err)
		}
		now, err := os.Stat(partial)
		if err == nil && os.SameFile(held, now) {
			return f, nil
		}
		f.Close()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("cache: %w", err)
		}
	}
}

// fetch appends the blob's bytes from have on to f and to sum, and
// returns how many f holds. An interrupted transfer leaves f with what
// arrived, for the next pull to resume.
func fetch(ctx context.Context, rt http.RoundTripper, repo name.Repository, l v1.Descriptor, f *os.File, sum hash.Hash, have int64, o *Options) (int64, error) {
	// go-containerregistry reads blobs whole; a resumed download needs a
	// Range header, so this one GET is made here, through its
	// authenticated transport (token, scheme, plain-HTTP policy).
	u := url.URL{Scheme: repo.Registry.Scheme(), Host: repo.RegistryStr(),
		Path: "/v2/" + repo.RepositoryStr() + "/blobs/" + l.Digest.String()}
	// A registry that stops sending without closing the connection would
	// hold the pull for good: with nothing received for the stall
	// timeout, waiting for the answer or reading it, the request is cut.
	stall := o.StallTimeout
	if stall <= 0 {
		stall = defaultStall
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(stall, func() { cancel(errStalled) })
	defer timer.Stop()
	stalled := func(err error) error {
		if ctx.Err() == nil && errors.Is(context.Cause(rctx), errStalled) {
			return &cutError{fmt.Errorf("%s@%s: nothing received for %v at %d of %d bytes: %w", repo, l.Digest, stall, have, l.Size, errStalled)}
		}
		return err
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return have, err
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", have, l.Size-1))
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return have, stalled(fmt.Errorf("%s@%s: %w", repo, l.Digest, err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		if !strings.HasPrefix(resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", have)) {
			return have, fmt.Errorf("%s@%s: asked for bytes from %d, got Content-Range %q", repo, l.Digest, have, resp.Header.Get("Content-Range"))
		}
		o.logf("resuming %s at %d of %d bytes", l.Digest, have, l.Size)
	case resp.StatusCode == http.StatusPartialContent:
		// transport.CheckError takes a 206 for success, so it is refused here.
		return have, fmt.Errorf("%s@%s: the registry answered a request for the whole blob with %s", repo, l.Digest, resp.Status)
	case resp.StatusCode == http.StatusOK:
		if have > 0 {
			o.logf("the registry sent all of %s again: starting over", l.Digest)
		}
		if err := f.Truncate(0); err != nil {
			return have, err
		}
		sum.Reset()
		have = 0
		o.logf("downloading %s (%d bytes)", l.Digest, l.Size)
	default:
		return have, o.explain(fmt.Sprintf("%s@%s", repo, l.Digest), repo.RegistryStr(), transport.CheckError(resp, http.StatusOK, http.StatusPartialContent))
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return have, err
	}
	// One byte more than is due, to tell a blob longer than the manifest
	// says from one that ends where it should.
	body := &idleReader{r: resp.Body, timer: timer, stall: stall}
	var w io.Writer = io.MultiWriter(f, sum)
	if o.Progress != nil && l.Size >= progressMin {
		w = io.MultiWriter(w, newProgress(o, l, have))
	}
	n, err := io.Copy(w, io.LimitReader(body, l.Size-have+1))
	have += n
	if err != nil {
		if body.err != nil {
			// The connection's fault, not the disk's.
			return have, stalled(&cutError{fmt.Errorf("%s@%s: interrupted at %d of %d bytes (pull again to resume): %w", repo, l.Digest, have, l.Size, err)})
		}
		return have, fmt.Errorf("%s: %w", f.Name(), err)
	}
	if have < l.Size {
		return have, &cutError{fmt.Errorf("%s@%s: the transfer ended at %d of %d bytes (pull again to resume)", repo, l.Digest, have, l.Size)}
	}
	if have > l.Size {
		os.Remove(f.Name())
		f.Close()
		return have, fmt.Errorf("%s@%s: the registry sent more than the manifest's %d bytes: refused and removed", repo, l.Digest, l.Size)
	}
	return have, nil
}

// progressMin is the smallest download whose progress is told as it
// goes, at each tenth of the file: a bigger one takes long enough for a
// silent pull to look hung.
var progressMin int64 = 64 << 20

// progress tells Options.Progress each tenth of a download as its bytes
// go by.
type progress struct {
	o          *Options
	l          v1.Descriptor
	done, next int64
}

func newProgress(o *Options, l v1.Descriptor, have int64) *progress {
	p := &progress{o: o, l: l, done: have}
	p.next = p.tenth(have) + 1
	return p
}

// tenth is how many tenths of the file n bytes are.
func (p *progress) tenth(n int64) int64 { return n * 10 / p.l.Size }

func (p *progress) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	if t := p.tenth(p.done); t >= p.next && t < 10 {
		p.o.logf("%s: %d%% (%d of %d bytes)", p.l.Digest, t*10, p.done, p.l.Size)
		p.next = t + 1
	}
	return len(b), nil
}

// defaultStall is Options.StallTimeout's default.
const defaultStall = 30 * time.Second

// errStalled is the cause a stalled request is cut with.
var errStalled = errors.New("the registry stopped sending")

// cutError is a transfer that broke off: what arrived is kept, and the
// download goes on from there.
type cutError struct{ err error }

func (e *cutError) Error() string { return e.err.Error() }
func (e *cutError) Unwrap() error { return e.err }

// backoff is the wait before the tries'th resumption.
func backoff(tries int) time.Duration {
	d := retryBackoff.Duration
	for range tries - 1 {
		d = time.Duration(float64(d) * retryBackoff.Factor)
	}
	return d
}

// idleReader reads a response body, putting off the stall timer at each
// read that brings bytes, and keeps the body's read error apart from the
// file's write error.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
	stall time.Duration
	err   error
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.timer.Reset(r.stall)
	}
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}
