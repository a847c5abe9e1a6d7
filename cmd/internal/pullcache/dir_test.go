package pullcache

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Dir: an absolute $XDG_CACHE_HOME is taken, else ~/.cache; a relative
// one is refused, and with neither it nor $HOME the error says what to
// set.
func TestDir(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the fallback is the system's: ~/.cache on Linux")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, c := range []struct{ xdg, want string }{
		{"/var/cache/x", "/var/cache/x/qwenc"},
		{"", filepath.Join(home, ".cache", "qwenc")},
	} {
		t.Setenv("XDG_CACHE_HOME", c.xdg)
		if got, err := Dir(); err != nil || got != c.want {
			t.Errorf("$XDG_CACHE_HOME=%q: %q, %v; want %q", c.xdg, got, err, c.want)
		}
	}
	t.Setenv("XDG_CACHE_HOME", "relative/cache")
	if _, err := Dir(); err == nil || !strings.Contains(err.Error(), "relative") {
		t.Errorf("a relative $XDG_CACHE_HOME: %v, want it refused", err)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	if _, err := Dir(); err == nil || !strings.Contains(err.Error(), "set XDG_CACHE_HOME") {
		t.Errorf("no $XDG_CACHE_HOME nor $HOME: %v, want an error naming XDG_CACHE_HOME", err)
	}
}
