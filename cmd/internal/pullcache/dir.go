package pullcache

import (
	"fmt"
	"os"
	"path/filepath"
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
