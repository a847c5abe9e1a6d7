package pullcache

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/qwenc/qwenc/format/oci"
)

// Dir is $XDG_CACHE_HOME/qwenc, or else the system's user cache
// directory's qwenc (~/.cache/qwenc on Linux, ~/Library/Caches/qwenc on
// macOS). On Linux a relative $XDG_CACHE_HOME is refused
// (os.UserCacheDir's error says so) rather than taken from the working
// directory.
func Dir() (string, error) {
	if d := os.Getenv("XDG_CACHE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "qwenc"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for pulled models (set XDG_CACHE_HOME): %w", err)
	}
	return filepath.Join(d, "qwenc"), nil
}

// Pull downloads ref (REGISTRY/REPO:TAG or REGISTRY/REPO@sha256:DIGEST,
// with or without oci://) into the cache Dir names, as qwenc pull and
// qwenrun's oci:// models do: the first use downloads it, later a tag
// costs one manifest request and a digest none. Credentials are docker
// login's.
func Pull(ctx context.Context, ref string, o oci.Options) (*oci.Pulled, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	return oci.Pull(ctx, ref, oci.Cache{Dir: dir}, o)
}
