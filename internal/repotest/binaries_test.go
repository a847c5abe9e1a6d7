package repotest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// executableMagic are the first bytes of the executable formats a Go
// toolchain (or a C compiler) writes: a build product committed by
// mistake, such as a `go build` run at the top of the tree.
var executableMagic = []struct {
	name  string
	magic []byte
}{
	{"ELF", []byte("\x7fELF")},
	{"Mach-O", []byte{0xfe, 0xed, 0xfa, 0xce}},
	{"Mach-O", []byte{0xfe, 0xed, 0xfa, 0xcf}},
	{"Mach-O", []byte{0xce, 0xfa, 0xed, 0xfe}},
	{"Mach-O", []byte{0xcf, 0xfa, 0xed, 0xfe}},
	{"Mach-O universal", []byte{0xca, 0xfe, 0xba, 0xbe}},
	{"PE", []byte("MZ")},
	{"WebAssembly", []byte("\x00asm")},
}

// TestNoTrackedBinaries fails if git tracks an executable binary: one of
// the executable formats above, or a file with the executable bit whose
// content is not text (git's own test: a NUL byte in the first 8000).
// Scripts with the executable bit are text and pass.
func TestNoTrackedBinaries(t *testing.T) {
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git work tree (%v): nothing is tracked to check", err)
	}
	dir := strings.TrimSpace(string(root))
	// -s gives each file's mode, so the executable bit is git's, not the
	// checkout's.
	out, err := exec.Command("git", "-C", dir, "ls-files", "-s", "-z").Output()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, entry := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		// "<mode> <object> <stage>\t<path>"
		meta, path, ok := strings.Cut(entry, "\t")
		if !ok {
			t.Fatalf("git ls-files: unexpected entry %q", entry)
		}
		mode := strings.Fields(meta)[0]
		if mode == "120000" || mode == "160000" { // symbolic link, submodule
			continue
		}
		head, err := readHead(filepath.Join(dir, path), 8000)
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, m := range executableMagic {
			if bytes.HasPrefix(head, m.magic) && (m.name != "PE" || isPE(filepath.Join(dir, path))) {
				t.Errorf("%s is a tracked %s executable: remove it with git rm --cached and ignore it", path, m.name)
			}
		}
		if mode == "100755" && bytes.IndexByte(head, 0) >= 0 {
			t.Errorf("%s is tracked with the executable bit and binary content", path)
		}
	}
	if checked == 0 {
		t.Fatal("git tracks no files here: the check would pass on anything")
	}
}

func readHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	k, err := f.Read(b)
	if k > 0 {
		err = nil
	}
	return b[:k], err
}

// isPE tells a PE executable from a text file that starts with "MZ": the
// DOS header's e_lfanew (offset 0x3c) points at "PE\0\0".
func isPE(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 0x40 {
		return false
	}
	off := int(b[0x3c]) | int(b[0x3d])<<8 | int(b[0x3e])<<16 | int(b[0x3f])<<24
	return off >= 0 && off+4 <= len(b) && string(b[off:off+4]) == "PE\x00\x00"
}
