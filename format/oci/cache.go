package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
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

// Model is a model the cache holds: a manifest, and its file.
type Model struct {
	Manifest    v1.Hash
	Tags        []string // REGISTRY/REPO:TAG, each tag that last named it when pulled
	Blob        v1.Hash  // the file's digest
	Size        int64
	Complete    bool // the file is all there (not absent, nor still downloading)
	Annotations map[string]string
}

// List returns the models the cache holds, ordered by their first tag
// (untagged ones, pulled by digest only, first).
func (c Cache) List() ([]Model, error) {
	byDigest := map[v1.Hash]*Model{}
	dir := filepath.Join(c.Dir, "blobs", "sha256")
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("cache: %w", err)
	}
	for _, e := range entries {
		h := v1.Hash{Algorithm: "sha256", Hex: e.Name()}
		if len(h.Hex) != 64 || !e.Type().IsRegular() {
			continue
		}
		if info, err := e.Info(); err != nil || info.Size() > maxManifest {
			continue
		}
		raw, ok := c.readSmall(h)
		if !ok {
			continue
		}
		l, ann, err := parseManifest(raw)
		if err != nil {
			continue // a small model file, or another manifest
		}
		byDigest[h] = &Model{Manifest: h, Blob: l.Digest, Size: l.Size, Complete: c.has(l.Digest, l.Size), Annotations: ann}
	}
	tags, err := c.tags()
	if err != nil {
		return nil, err
	}
	for _, t := range tags {
		if m := byDigest[t.digest]; m != nil {
			m.Tags = append(m.Tags, t.ref)
		}
	}
	out := make([]Model, 0, len(byDigest))
	for _, m := range byDigest {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := strings.Join(out[i].Tags, ","), strings.Join(out[j].Tags, ",")
		if a != b {
			return a < b
		}
		return out[i].Manifest.Hex < out[j].Manifest.Hex
	})
	return out, nil
}

// tagRecord is a tag the cache records, and the manifest it named.
type tagRecord struct {
	ref    string // REGISTRY/REPO:TAG
	path   string
	digest v1.Hash
}

// tags reads every tag record, ordered by name.
func (c Cache) tags() ([]tagRecord, error) {
	root := filepath.Join(c.Dir, "tags")
	var out []tagRecord
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path == root {
			return fs.SkipAll
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		elems := strings.Split(filepath.ToSlash(rel), "/")
		if len(elems) < 3 {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		h, err := v1.NewHash(strings.TrimSpace(string(b)))
		if err != nil {
			return nil
		}
		ref := elems[0] + "/" + strings.Join(elems[1:len(elems)-1], "/") + ":" + elems[len(elems)-1]
		out = append(out, tagRecord{ref: ref, path: path, digest: h})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	return out, nil
}

// Remove takes the model ref (REGISTRY/REPO:TAG or REGISTRY/REPO@sha256:...,
// with or without oci://) out of the cache. By tag, the tag's record
// goes, and the manifest with it unless another tag names it; by digest,
// the manifest goes, and every tag naming it. A file goes once no
// manifest left names it; a placed copy (qwenc pull -o) stays.
func (c Cache) Remove(ref string) error {
	r, err := name.ParseReference(strings.TrimPrefix(ref, Scheme))
	if err != nil {
		return fmt.Errorf("%q: not a registry reference: %w", ref, err)
	}
	tags, err := c.tags()
	if err != nil {
		return err
	}
	var h v1.Hash
	switch r := r.(type) {
	case name.Tag:
		path, ok := c.tagFile(r)
		if !ok {
			return fmt.Errorf("%s: not in the cache", r)
		}
		var found bool
		for _, t := range tags {
			if t.path == path {
				h, found = t.digest, true
			}
		}
		if !found {
			return fmt.Errorf("%s: not in the cache", r)
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("cache: %w", err)
		}
		for _, t := range tags {
			if t.path != path && t.digest == h {
				return nil // the manifest stays, under its other tag
			}
		}
	case name.Digest:
		if h, err = v1.NewHash(r.DigestStr()); err != nil {
			return fmt.Errorf("%q: %w", ref, err)
		}
		if _, ok := c.readSmall(h); !ok {
			return fmt.Errorf("%s: not in the cache", r)
		}
		for _, t := range tags {
			if t.digest == h {
				if err := os.Remove(t.path); err != nil {
					return fmt.Errorf("cache: %w", err)
				}
			}
		}
	}
	raw, ok := c.readSmall(h)
	if !ok {
		return nil
	}
	if err := os.Remove(c.Blob(h)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cache: %w", err)
	}
	l, _, err := parseManifest(raw)
	if err != nil {
		return nil
	}
	models, err := c.List()
	if err != nil {
		return err
	}
	for _, m := range models {
		if m.Blob == l.Digest {
			return nil // another manifest names the same file
		}
	}
	if err := os.Remove(c.Blob(l.Digest)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cache: %w", err)
	}
	return c.removePartial(l.Digest)
}

// removePartial removes what a pull of the blob h left half-way, unless
// a pull holds it now.
func (c Cache) removePartial(h v1.Hash) error {
	partial := c.Blob(h) + ".partial"
	f, err := os.Open(partial)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil // a pull at it
	}
	held, err1 := f.Stat()
	now, err2 := os.Stat(partial)
	if err1 == nil && err2 == nil && os.SameFile(held, now) {
		if err := os.Remove(partial); err != nil {
			return fmt.Errorf("cache: %w", err)
		}
	}
	return nil
}
