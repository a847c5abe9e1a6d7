package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/qwenc/qwenc/internal/fsutil"
)

// Cache is where pulls land: Dir/blobs/sha256/HEX, as an OCI image
// layout keeps its blobs, the model files and the manifests that name
// them side by side. A file there has been checked against its digest;
// anything still downloading is HEX.partial. Dir is the caller's
// choice, not looked up here (qwenc and qwenrun take
// $XDG_CACHE_HOME/qwenc).
type Cache struct {
	Dir string
}

// Blob is the path of the blob with digest h.
func (c Cache) Blob(h v1.Hash) string {
	return filepath.Join(c.Dir, "blobs", h.Algorithm, h.Hex)
}

// has reports whether the blob h of size bytes is in the cache.
func (c Cache) has(h v1.Hash, size int64) bool {
	st, err := os.Stat(c.Blob(h))
	return err == nil && st.Mode().IsRegular() && st.Size() == size
}

// maxManifest bounds a manifest read from the cache or the registry: a
// qwenc model's is a few KB, and a model file sits beside the manifests
// under the same kind of name.
const maxManifest = 4 << 20

// readSmall reads a cached manifest and checks it against its digest: a
// manifest is small, so it is checked at every read, where a model file
// was checked once, before it was renamed into place. A file over
// maxManifest is not a manifest (a model's digest given by mistake) and
// is not read.
func (c Cache) readSmall(h v1.Hash) ([]byte, bool) {
	f, err := os.Open(c.Blob(h))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
	if err != nil || len(b) > maxManifest {
		return nil, false
	}
	got, _, err := v1.SHA256(bytes.NewReader(b))
	return b, err == nil && got == h
}

// writeSmall stores a manifest whose digest is h, through a temporary
// file renamed into place.
func (c Cache) writeSmall(h v1.Hash, b []byte) error {
	dst := c.Blob(h)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	if err := fsutil.WriteAtomic(dst, b, 0o444); err != nil {
		return fmt.Errorf("cache: %s: %w", dst, err)
	}
	return nil
}

// tagFile is where the cache keeps the digest the tag last resolved to:
// Dir/tags/REGISTRY/REPO/TAG; false for a name that would not stay under
// Dir/tags (go-containerregistry checks a repository's characters, not
// its path elements).
func (c Cache) tagFile(t name.Tag) (string, bool) {
	elems := append(append([]string{t.RegistryStr()}, strings.Split(t.RepositoryStr(), "/")...), t.TagStr())
	for _, e := range elems {
		if e == "" || e == "." || e == ".." || strings.ContainsAny(e, `/\`) {
			return "", false
		}
	}
	return filepath.Join(append([]string{c.Dir, "tags"}, elems...)...), true
}

// tag records that t names the manifest h, for a pull while the
// registry is out of reach; unchanged, it writes nothing.
func (c Cache) tag(t name.Tag, h v1.Hash) error {
	path, ok := c.tagFile(t)
	if !ok {
		return nil
	}
	line := []byte(h.String() + "\n")
	if b, err := os.ReadFile(path); err == nil && bytes.Equal(b, line) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	if err := fsutil.WriteAtomic(path, line, 0o644); err != nil {
		return fmt.Errorf("cache: %s: %w", path, err)
	}
	return nil
}

// tagged is the manifest t last named, if the cache holds it.
func (c Cache) tagged(t name.Tag) (v1.Hash, []byte, bool) {
	path, ok := c.tagFile(t)
	if !ok {
		return v1.Hash{}, nil, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return v1.Hash{}, nil, false
	}
	h, err := v1.NewHash(strings.TrimSpace(string(b)))
	if err != nil {
		return v1.Hash{}, nil, false
	}
	raw, ok := c.readSmall(h)
	return h, raw, ok
}

// lockFile takes f's exclusive lock, waiting while another process holds
// it (two servers starting on one machine pull one blob once), until ctx
// ends.
func lockFile(ctx context.Context, f *os.File, o *Options) error {
	waited := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("%s: lock: %w", f.Name(), err)
		}
		if !waited {
			o.logf("waiting for another pull of %s", filepath.Base(f.Name()))
			waited = true
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Place puts a pulled file at out: a hard link to the cached blob where
// one can be made (no second copy on disk; the blob is read-only, so the
// link is too), else a copy. Either way through a temporary name in
// out's directory, renamed at the end, so out is never half-written.
func Place(blob, out string) error {
	tmp, err := fsutil.CreateTemp(out)
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	tmp.Close()
	os.Remove(tmpName)
	if err := os.Link(blob, tmpName); err != nil {
		if err := copyFile(blob, tmpName); err != nil {
			os.Remove(tmpName)
			return err
		}
	}
	err = os.Rename(tmpName, out)
	// A rename onto another link of the same file (out placed by an
	// earlier pull) succeeds without removing the old name.
	os.Remove(tmpName)
	return err
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
