package repotest

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/qwenc/qwenc"

// layers is what each package of the module may import from the module,
// bottom up: a package may import those listed on its line and nothing
// else of the module. "format/..." is every package under format/ (not
// format itself). A package missing from the table fails the test, so a
// new package takes a line here, and with it a place in the order.
//
// The order: the weight types and the kernels at the bottom; the file and
// the model description (format/...) on them; the compiler and the runtime
// (runtime/...) beside each other on that, neither importing the other; the
// public Go API (qwen) on the runtime, its front ends (qwen/serve,
// qwen/bench) on it; the commands (cmd/...) on top.
var layers = []struct {
	pkg string
	may []string
}{
	{"format/wtype", nil},
	{"kernels", []string{"format/wtype"}},
	{"format", []string{"format/wtype"}},
	{"format/tokenizer", nil},
	{"format/ggml", nil},
	{"format/gguf", []string{"format/ggml"}},
	{"format/graph", []string{"format", "format/wtype", "kernels"}},
	{"format/arch", []string{"format", "format/graph", "format/wtype"}},
	{"format/chat", []string{"format/tokenizer"}},
	{"format/oci", []string{"format", "format/arch", "internal/fsutil"}},
	{"compiler", []string{"format", "format/...", "kernels", "internal/fsutil"}},
	{"runtime/sampling", []string{"format"}},
	{"runtime/grammar", []string{"format/chat", "format/tokenizer"}},
	{"runtime/infer", []string{"format", "format/arch", "format/graph", "format/tokenizer", "format/wtype", "kernels"}},
	{"runtime/engine", []string{"format", "format/chat", "kernels", "runtime/infer", "runtime/sampling", "internal/fsutil"}},
	{"runtime/perplexity", []string{"format", "kernels", "runtime/infer"}},
	{"qwen", []string{"format", "format/arch", "format/chat", "format/tokenizer", "kernels", "runtime/...", "internal/fsutil", "internal/mem"}},
	{"qwen/serve", []string{"qwen", "format/chat", "runtime/sampling"}},
	{"qwen/bench", []string{"qwen", "format", "format/...", "kernels", "runtime/...", "internal/cliutil", "internal/mem"}},
	{"qwen/agentbench", []string{"qwen"}},
	{"cmd/internal/report", []string{"qwen", "internal/fsutil", "internal/mem"}},
	{"cmd/internal/pullcache", []string{"format/oci"}},
	{"cmd/internal/modelflags", []string{"qwen", "cmd/internal/pullcache", "format", "format/oci", "kernels", "runtime/sampling", "internal/cliutil"}},
	{"cmd/internal/terminal", []string{"qwen", "cmd/internal/report", "format/chat", "runtime/sampling", "internal/cliutil", "internal/fsutil"}},
	{"cmd/qwenc", []string{"compiler", "format", "format/...", "kernels", "runtime/infer", "runtime/perplexity", "cmd/internal/pullcache", "internal/cliutil", "internal/fsutil"}},
	{"cmd/qwenrun", []string{"qwen", "qwen/...", "cmd/internal/report", "cmd/internal/modelflags", "cmd/internal/terminal", "format", "format/...", "kernels", "runtime/...", "internal/cliutil", "internal/fsutil"}},
	{"cmd/qwengen", []string{"internal/synth"}},
	// Helpers of the commands and the tests: leaves, or tools on them.
	// The roofs runtime, cmd and internal are packages of documentation
	// alone (doc.go).
	{"runtime", nil},
	{"cmd", nil},
	{"internal", nil},
	{"internal/fsutil", nil},
	{"internal/mem", nil},
	{"internal/cliutil", []string{"kernels"}},
	{"internal/reference", nil},
	{"internal/reference/cmd/gentiny", []string{"internal/reference", "internal/synth"}},
	{"internal/repotest", nil},
	{"internal/schemagen", nil},
	{"internal/synth", nil},
	{"internal/synthtest", []string{"compiler", "format", "internal/synth"}},
	{"internal/testmodel", nil},
	{"internal/testarch", []string{"compiler", "format", "format/arch", "format/graph", "internal/synth"}},
	{"internal/tools/benchcompile", []string{"internal/synth"}},
}

// testHelpers are what any package's tests may import besides its own
// layer: the tests of the runtime compile the models they run, so they
// may reach the compiler and the test models, but the packages
// themselves (what a binary links) may not.
var testHelpers = []string{"compiler", "internal/reference", "internal/schemagen", "internal/synth", "internal/synthtest", "internal/testarch", "internal/testmodel"}

// allows reports whether pattern p ("a/b", or "a/..." for what is under
// a/) covers package pkg.
func allows(p, pkg string) bool {
	if dir, ok := strings.CutSuffix(p, "/..."); ok {
		return strings.HasPrefix(pkg, dir+"/")
	}
	return p == pkg
}

// TestImportsPointDown fails on an import that the layers table does not
// allow: an arrow that runs back up (the runtime importing the compiler,
// a package below the public API importing it), or between packages the
// table keeps apart. It also holds the rules the table encodes, stated
// once more on their own so that a careless edit of the table cannot
// drop them.
func TestImportsPointDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-f",
		"{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .TestImports \" \"}} {{join .XTestImports \" \"}}",
		module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	table := map[string][]string{}
	for _, l := range layers {
		table[l.pkg] = l.may
	}
	own := func(list string) []string {
		var ps []string
		for _, p := range strings.Fields(list) {
			if rel, ok := strings.CutPrefix(p, module+"/"); ok {
				ps = append(ps, rel)
			}
		}
		return ps
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		pkg, ok := strings.CutPrefix(f[0], module+"/")
		if !ok {
			t.Errorf("%s: a package at the module's root; the public API is qwen/", f[0])
			continue
		}
		may, listed := table[pkg]
		if !listed {
			t.Errorf("%s is not in the layers table: give it a line, and so a place in the order", pkg)
			continue
		}
		checked++
		for _, imp := range own(f[1]) {
			if !slices.ContainsFunc(may, func(p string) bool { return allows(p, imp) }) {
				t.Errorf("%s imports %s: the layers table does not allow it", pkg, imp)
			}
			if err := ruleBroken(pkg, imp); err != "" {
				t.Errorf("%s imports %s: %s", pkg, imp, err)
			}
		}
		for _, imp := range own(f[2]) {
			if imp == pkg || slices.Contains(testHelpers, imp) || slices.ContainsFunc(may, func(p string) bool { return allows(p, imp) }) {
				continue
			}
			// A test may use what its package may, and what sits below
			// its own layer; never the commands or the public API from
			// below.
			if err := ruleBroken(pkg, imp); err != "" {
				t.Errorf("%s's tests import %s: %s", pkg, imp, err)
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d packages checked", checked)
	}
}

// ruleBroken names the layering rule that an import of imp by pkg breaks,
// or returns "".
func ruleBroken(pkg, imp string) string {
	top := func(p string) string { return strings.Split(p, "/")[0] }
	switch {
	case (top(pkg) == "kernels" || top(pkg) == "format") && (top(imp) == "runtime" || top(imp) == "compiler" || top(imp) == "qwen"):
		return "kernels/ and format/ import neither the runtime, the compiler nor the public API"
	case top(pkg) == "runtime" && top(imp) == "compiler":
		return "the runtime never imports the compiler"
	case top(imp) == "cmd" && top(pkg) != "cmd":
		return "nothing imports cmd/ from below"
	case top(imp) == "qwen" && top(pkg) != "qwen" && top(pkg) != "cmd":
		return "nothing below the public API imports it"
	case imp == "qwen" || strings.HasPrefix(imp, "qwen/"):
		if path.Dir(pkg) == "qwen" || pkg == "qwen" || top(pkg) == "cmd" {
			return ""
		}
		return "only the public API's front ends and the commands import it"
	}
	return ""
}

// TestEveryPackageHasDocGo: each package says what it owns in a doc.go
// whose comment is the package's documentation, so a reader finds it in
// the same place in every folder.
func TestEveryPackageHasDocGo(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{.Doc}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		src, err := os.ReadFile(filepath.Join(f[1], "doc.go"))
		switch {
		case err != nil:
			t.Errorf("%s: no doc.go (%v)", f[0], err)
		case f[2] == "" || !strings.Contains(string(src), "// Package ") && !strings.Contains(string(src), "// Command "):
			t.Errorf("%s: doc.go does not hold the package's documentation", f[0])
		}
	}
}
