package infer

import (
	"fmt"
	"os"
	"testing"
)

// testDir holds the models this package's tests compile, once per test
// binary (compileBundledAs); TestMain removes it at the end. A t.TempDir
// would go with the first test that compiled, while later tests reuse the
// file.
var testDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "qwenrun-infer-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
