package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The tests here make writes fail for real. Permission bits would not do:
// the tests may run as root, whom they do not stop. So the output goes to a
// small tmpfs (a full disk), to a tmpfs mounted read-only, or the compile
// runs under RLIMIT_FSIZE (a file too large).

// mountTmpfs mounts a tmpfs with the given options on a fresh directory,
// unmounted at the end of the test. Mounting needs CAP_SYS_ADMIN; without
// it the test is skipped and says why.
func mountTmpfs(t *testing.T, flags uintptr, opts string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", flags, opts); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			t.Skipf("cannot mount a tmpfs here (%v): needs root or CAP_SYS_ADMIN", err)
		}
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	// Cleanups run last-in first-out: this one before TempDir's removal.
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// compileFails runs qwenc compile, which must fail with status 1 and one
// line on stderr containing every string of want (the cause, and the
// output's path rather than the temporary file's), and leave outDir empty.
func compileFails(t *testing.T, cmd *exec.Cmd, outDir string, want ...string) {
	t.Helper()
	var e strings.Builder
	cmd.Stderr = &e
	err := cmd.Run()
	stderr := e.String()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want status 1; stderr %q", err, stderr)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "qwenc: ") {
		t.Errorf("stderr %q is not one line of error", stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr %q does not say %q", stderr, w)
		}
	}
	if es, err := os.ReadDir(outDir); err != nil || len(es) != 0 {
		t.Fatalf("the output directory holds %v (%v), want nothing", names(es), err)
	}
}

// TestFullDisk compiles a model of about 10 MB onto a 2 MiB tmpfs.
func TestFullDisk(t *testing.T) {
	m := sizedModel(t, "ten-mb", 10000, 256)
	out := mountTmpfs(t, 0, "size=2m")
	compileFails(t, exec.Command(qwencBin, "compile", "-q", m, "-o", filepath.Join(out, "m.qbin")), out, "no space left on device", filepath.Join(out, "m.qbin"))
}

// TestReadOnlyDirectory compiles into a read-only mount.
func TestReadOnlyDirectory(t *testing.T) {
	m := model(t, "small")
	out := mountTmpfs(t, syscall.MS_RDONLY, "size=1m")
	compileFails(t, exec.Command(qwencBin, "compile", "-q", m, "-o", filepath.Join(out, "m.qbin")), out, "read-only file system", filepath.Join(out, "m.qbin"))
}

// TestFileTooLarge compiles under a 1 MiB RLIMIT_FSIZE, set in the child
// only by prlimit(1). The Go runtime catches SIGXFSZ and, as nothing asks
// for it, drops it, so the write past the limit returns EFBIG instead of
// killing the process.
func TestFileTooLarge(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skipf("prlimit (util-linux) is not installed, so RLIMIT_FSIZE cannot be set for the child alone: %v", err)
	}
	m := sizedModel(t, "ten-mb", 10000, 256)
	out := t.TempDir()
	cmd := exec.Command(prlimit, "--fsize=1048576", qwencBin, "compile", "-q", m, "-o", filepath.Join(out, "m.qbin"))
	compileFails(t, cmd, out, "file too large", filepath.Join(out, "m.qbin"))
}

// TestMissingOutputDirectory names an output in a directory that does not
// exist.
func TestMissingOutputDirectory(t *testing.T) {
	m := model(t, "small")
	base := t.TempDir()
	out := filepath.Join(base, "no", "such")
	compileFails(t, exec.Command(qwencBin, "compile", "-q", m, "-o", filepath.Join(out, "m.qbin")), base, "no such file or directory", filepath.Join(out, "m.qbin"))
}
