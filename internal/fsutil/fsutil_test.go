package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// WriteAtomic replaces a file whole and leaves nothing beside it, also
// when it fails; its error names no temporary file.
func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	if err := os.WriteFile(path, []byte("old content"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteAtomic(path, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	st, _ := os.Stat(path)
	if string(b) != "new" || st.Mode().Perm() != 0o644 {
		t.Errorf("content %q, mode %v; want \"new\", 0644", b, st.Mode().Perm())
	}
	if err := WriteAtomic(filepath.Join(dir, "missing", "f.json"), []byte("x"), 0o644); err == nil || err.Error() != "no such file or directory" {
		t.Errorf("into a missing directory: %v", err)
	}
	if err := WriteAtomic(filepath.Join(dir, "sub"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "sub"))
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	if err := WriteAtomic(filepath.Join(dir, "sub"), []byte("x"), 0o644); err == nil {
		t.Errorf("over a directory: no error")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("files left beside: %v", entries)
	}
	// A name the file system takes (up to 255 bytes) is written, though
	// the temporary file's name around it would be longer.
	long := filepath.Join(t.TempDir(), strings.Repeat("é", 100)+strings.Repeat("x", 50))
	if err := WriteAtomic(long, []byte("x"), 0o644); err != nil {
		t.Errorf("a name of %d bytes: %v", len(filepath.Base(long)), err)
	}
}

func TestCheckOutput(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	pipe := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, err string }{
		{pipe, "not a regular file (a named pipe), which the new file would replace"},
		{filepath.Join(dir, "new.f32"), ""},
		{file, ""},
		{dir, "is a directory"},
		{filepath.Join(dir, "no", "x"), "its directory does not exist"},
		{filepath.Join(file, "x"), "its directory does not exist"},
		// The write would fail only after the work.
		{filepath.Join(dir, strings.Repeat("x", 256)), "file name too long"},
	} {
		err := CheckOutput(c.path)
		if c.err == "" && err != nil || c.err != "" && (err == nil || err.Error() != c.err) {
			t.Errorf("%s: %v, want %q", c.path, err, c.err)
		}
	}
}

func TestTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	f, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	// flock's locks belong to open files: a second open is refused in
	// this process as in another.
	_, err = TryLock(path)
	var be *BusyError
	if !errors.Is(err, ErrBusy) || !errors.As(err, &be) || be.PID != strconv.Itoa(os.Getpid()) || be.Path != path {
		t.Fatalf("the second lock: %v", err)
	}
	f.Close()
	f, err = TryLock(path)
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	f.Close()
	if free, err := FreeBytes(path); err != nil || free <= 0 {
		t.Errorf("FreeBytes: %d, %v", free, err)
	}
}
