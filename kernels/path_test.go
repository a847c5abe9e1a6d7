package kernels

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDetectFallsBack runs this test binary again with AVX-512 (then
// AVX-VNNI, then AVX2) switched off through GODEBUG, which golang.org/x/sys/cpu honours,
// and checks that Detect picks the next path down.
func TestDetectFallsBack(t *testing.T) {
	if env := os.Getenv("QWEN_DETECT_CHILD"); env != "" {
		if got := Detect().String(); got != env {
			t.Fatalf("Detect() = %s under GODEBUG=%s, want %s", got, os.Getenv("GODEBUG"), env)
		}
		return
	}
	if !AVX512.Supported() {
		t.Skip("this CPU has no AVX-512: nothing to switch off")
	}
	avx2Best := "avx2"
	if AVXVNNI.Supported() {
		avx2Best = "avxvnni"
	}
	for _, c := range []struct{ godebug, want string }{
		{"cpu.avx512vnni=off", "avx512"},
		{"cpu.avx512f=off", avx2Best},
		{"cpu.avx512f=off,cpu.avxvnni=off", "avx2"},
		{"cpu.avx512f=off,cpu.avx2=off", "generic"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDetectFallsBack$", "-test.count=1")
		cmd.Env = append(os.Environ(), "GODEBUG="+c.godebug, "QWEN_DETECT_CHILD="+c.want)
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "PASS") {
			t.Errorf("GODEBUG=%s: %v\n%s", c.godebug, err, out)
		}
	}
}

func TestParsePath(t *testing.T) {
	for _, name := range []string{"", "auto", "generic"} {
		if _, err := ParsePath(name); err != nil {
			t.Errorf("ParsePath(%q): %v", name, err)
		}
	}
	if _, err := ParsePath("sse9"); err == nil {
		t.Error("an unknown path was accepted")
	}
	for _, p := range []Path{AVX2, AVXVNNI, AVX512, AVX512VNNI} {
		if _, err := ParsePath(p.String()); (err == nil) != p.Supported() {
			t.Errorf("ParsePath(%s): err %v, supported %v", p, err, p.Supported())
		}
	}
}

// The zero Path is Auto, which resolves to what Detect picks, so a zero
// Options anywhere runs the fastest kernels.
func TestZeroPathIsAuto(t *testing.T) {
	var p Path
	if p != Auto || p.String() != "auto" || !p.Supported() || p.Resolve() != Detect() {
		t.Errorf("zero Path %s (supported %v) resolves to %s; want auto, resolving to %s", p, p.Supported(), p.Resolve(), Detect())
	}
	for _, q := range SupportedPaths() {
		if q == Auto || q.Resolve() != q {
			t.Errorf("%s in SupportedPaths resolves to %s", q, q.Resolve())
		}
	}
}
