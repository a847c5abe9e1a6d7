package mem

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestProcField(t *testing.T) {
	p := filepath.Join(t.TempDir(), "status")
	os.WriteFile(p, []byte("Name:\tx\nRssAnon:\t  1234 kB\nVmRSS:\t9 kB\n"), 0o644)
	if n, ok := procField(p, "RssAnon:"); !ok || n != 1234*1024 {
		t.Errorf("RssAnon: %d, %v", n, ok)
	}
	if _, ok := procField(p, "MemAvailable:"); ok {
		t.Error("a field the file lacks was found")
	}
	if _, ok := procField(filepath.Join(t.TempDir(), "none"), "RssAnon:"); ok {
		t.Error("a missing file gave a value")
	}
	if runtime.GOOS == "linux" {
		if n, ok := Available(); !ok || n <= 0 {
			t.Errorf("Available: %d, %v", n, ok)
		}
		if n, ok := Private(); !ok || n <= 0 {
			t.Errorf("Private: %d, %v", n, ok)
		}
	}
}
