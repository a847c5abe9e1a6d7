package repotest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// qwenrunMaxLines bounds cmd/qwenrun's code, its tests left out: the
// command declares its flags, maps them onto the options of the public
// API (package qwen and its front ends) and runs the terminal's side of
// things, and nothing else. What else it would grow goes into a library
// package with tests of its own, where other programs can use it too.
const qwenrunMaxLines = 1400

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(gomod)))
}

// TestQwenrunIsThin fails when cmd/qwenrun's Go files, tests left out,
// hold more than qwenrunMaxLines lines, counted as wc -l counts them.
func TestQwenrunIsThin(t *testing.T) {
	dir := filepath.Join(moduleRoot(t), "cmd", "qwenrun")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	total, counted := 0, 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := bytes.Count(b, []byte("\n"))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			n++ // a last line without its end is a line too
		}
		total += n
		counted++
	}
	if counted < 5 {
		t.Fatalf("only %d files in %s: not the command's directory?", counted, dir)
	}
	if total > qwenrunMaxLines {
		t.Errorf("cmd/qwenrun holds %d lines of Go besides its tests, more than %d: move what is not flags, "+
			"their mapping onto options or the terminal's side into a library package, with tests of its own", total, qwenrunMaxLines)
	}
}
