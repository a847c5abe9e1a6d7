package oci

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// A tag whose repository climbs out with .. elements (which
// go-containerregistry lets through: it checks characters only) is not
// recorded anywhere, in the cache or out of it.
func TestTagRecordStaysInCache(t *testing.T) {
	root := t.TempDir()
	c := Cache{Dir: filepath.Join(root, "a", "b", "cache")}
	h := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	for _, ref := range []string{"localhost:5000/x/../../../../../escaped:t", "../escaped:t", "localhost:5000/models/ok:t"} {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if err := c.tag(tag, h); err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
	}
	err := filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && !strings.HasPrefix(path, filepath.Join(c.Dir, "tags")+string(filepath.Separator)) {
			t.Errorf("a tag recorded at %s, outside %s/tags", path, c.Dir)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "tags", "localhost:5000", "models", "ok", "t")); err != nil {
		t.Errorf("the ordinary tag is not recorded: %v", err)
	}
}
