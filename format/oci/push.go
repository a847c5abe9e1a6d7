package oci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/arch"
)

// emptyConfig is the image spec 1.1's empty descriptor content: an
// artifact that has no config of its own still points at one, and the
// spec's guidance is this two-byte JSON object with its own media type.
var emptyConfig = []byte("{}")

// Pushed says what a push wrote.
type Pushed struct {
	Ref      string  // REGISTRY/REPO@sha256:... of the manifest
	Manifest v1.Hash // the manifest's digest
	Blob     v1.Hash // the file's sha256, the layer's digest
	Size     int64   // the file's size
}

// Push uploads the .qbin file at path to ref (REGISTRY/REPO:TAG) as a
// qwenc artifact: the file's header is checked and its figures become
// the manifest's annotations, the layer is skipped when the registry has
// its digest already, and the tag is moved last, once every blob is in.
func Push(ctx context.Context, path, ref string, o Options) (*Pushed, error) {
	r, err := o.parseRef(ref)
	if err != nil {
		return nil, err
	}
	if _, ok := r.(name.Tag); !ok {
		return nil, fmt.Errorf("%q: push to a tag (REGISTRY/REPO:TAG); a digest is the registry's to give", ref)
	}
	layer, ann, err := openQbin(path)
	if err != nil {
		return nil, err
	}
	o.logf("%s: sha256:%s, %d bytes", path, layer.digest.Hex, layer.size)
	repo := r.Context()
	rt, err := o.transport(ctx, r, repo.Scope(transport.PushScope))
	if err != nil {
		return nil, err
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(rt)}
	cfg := static.NewLayer(emptyConfig, types.OCIEmptyJSON)
	if err := remote.WriteLayer(repo, cfg, ropts...); err != nil {
		return nil, o.explain(r.String(), repo.RegistryStr(), fmt.Errorf("the empty config blob: %w", err))
	}
	// WriteLayer asks the registry first and uploads only a blob it lacks:
	// pushing one file under several tags sends it once.
	if err := remote.WriteLayer(repo, layer, ropts...); err != nil {
		return nil, o.explain(r.String(), repo.RegistryStr(), fmt.Errorf("uploading %s: %w", path, err))
	}
	raw, err := manifestJSON(layer, ann)
	if err != nil {
		return nil, err
	}
	if err := remote.Put(r, rawManifest(raw), ropts...); err != nil {
		return nil, o.explain(r.String(), repo.RegistryStr(), fmt.Errorf("the manifest: %w", err))
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	return &Pushed{Ref: repo.Digest(h.String()).String(), Manifest: h, Blob: layer.digest, Size: layer.size}, nil
}

// openQbin checks that path is a .qbin file this build reads and hashes
// it: the layer to upload, and the manifest's annotations from its header.
func openQbin(path string) (*fileLayer, map[string]string, error) {
	f, err := format.OpenRegular(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	h, pre, err := format.ReadHeaderPreamble(f, st.Size())
	if err == nil {
		err = arch.Builtin().Validate(h)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	sum := sha256.New()
	n, err := io.Copy(sum, f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if n != st.Size() {
		return nil, nil, fmt.Errorf("%s: changed while it was read (%d bytes, then %d)", path, st.Size(), n)
	}
	d := v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", sum.Sum(nil))}
	rep := format.Report(h)
	ann := map[string]string{
		AnnotationTitle:         filepath.Base(path),
		AnnotationArchitecture:  h.Config.ModelType,
		AnnotationWeightType:    h.WeightType().String(),
		AnnotationParameters:    strconv.FormatUint(rep.Parameters, 10),
		AnnotationContext:       strconv.Itoa(h.Config.MaxContext()),
		AnnotationFormatVersion: strconv.FormatUint(uint64(pre.Version), 10),
	}
	return &fileLayer{path: path, digest: d, size: st.Size()}, ann, nil
}

// manifestJSON is the artifact's image manifest, as the image spec 1.1
// lays out an artifact: artifactType set, the empty config, one layer.
func manifestJSON(l *fileLayer, ann map[string]string) ([]byte, error) {
	cfgDigest, _, err := v1.SHA256(bytes.NewReader(emptyConfig))
	if err != nil {
		return nil, err
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  ArtifactType,
		Config:        v1.Descriptor{MediaType: types.OCIEmptyJSON, Digest: cfgDigest, Size: int64(len(emptyConfig)), Data: emptyConfig},
		Layers: []v1.Descriptor{{MediaType: LayerMediaType, Digest: l.digest, Size: l.size,
			Annotations: map[string]string{AnnotationTitle: ann[AnnotationTitle]}}},
		Annotations: ann,
	}
	return json.Marshal(m)
}

// rawManifest is a manifest's bytes, as remote.Put takes them.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// fileLayer is a .qbin file as a layer: the same bytes compressed or not,
// read from the file at each upload attempt.
type fileLayer struct {
	path   string
	digest v1.Hash
	size   int64
}

func (l *fileLayer) Digest() (v1.Hash, error)             { return l.digest, nil }
func (l *fileLayer) DiffID() (v1.Hash, error)             { return l.digest, nil }
func (l *fileLayer) Size() (int64, error)                 { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error)  { return LayerMediaType, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error)   { return os.Open(l.path) }
func (l *fileLayer) Uncompressed() (io.ReadCloser, error) { return os.Open(l.path) }
