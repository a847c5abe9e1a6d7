package repotest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// environ are the functions that read the process's environment, or
// change it under every other reader, by import path: the reads in
// disguise too (os.UserCacheDir is $XDG_CACHE_HOME or $HOME).
var environ = map[string][]string{
	"os":                    {"Getenv", "LookupEnv", "Environ", "ExpandEnv", "UserHomeDir", "UserCacheDir", "UserConfigDir", "Setenv", "Unsetenv", "Clearenv"},
	"syscall":               {"Getenv", "Environ", "Setenv", "Unsetenv", "Clearenv"},
	"golang.org/x/sys/unix": {"Getenv", "Environ", "Setenv", "Unsetenv", "Clearenv"},
}

// envExempt are the trees whose code may read the environment: the
// commands, which pass what they read to the library as options; the
// kernel generators, deployment files and development tools, which no
// binary links.
var envExempt = []string{"cmd", "kernels/_gen", "deploy", "internal/tools", "testdata"}

// envUses lists where f uses a function of environ, as "file:line:
// pkg.Func". An import by another name is followed; a call is not needed
// (a function value passed on reads the environment as well).
func envUses(fset *token.FileSet, f *ast.File) []string {
	local := map[string]string{} // the name a file gives a package -> its path
	for _, imp := range f.Imports {
		path := strings.Trim(imp.Path.Value, `"`)
		if _, ok := environ[path]; !ok {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		local[name] = path
	}
	var uses []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		// A package's name resolves to no object in its file: a local
		// variable that shadows it does.
		if x, ok := sel.X.(*ast.Ident); ok && x.Obj == nil {
			if path, ok := local[x.Name]; ok && slices.Contains(environ[path], sel.Sel.Name) {
				uses = append(uses, fset.Position(sel.Pos()).String()+": "+path+"."+sel.Sel.Name)
			}
		}
		return true
	})
	return uses
}

// TestLibraryReadsNoEnvironment: no Go file outside the commands (tests
// aside) reads the environment. A library that does is configured behind
// its caller's back: its behaviour changes with a variable no option
// names, and two callers in one process cannot choose differently. The
// commands read the variables (QWEN_KERNELS, XDG_CACHE_HOME) and pass
// options. Every file is parsed, whatever its build constraints.
func TestLibraryReadsNoEnvironment(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || slices.Contains(envExempt, rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		checked++
		for _, u := range envUses(fset, f) {
			t.Errorf("%s: library code reads the environment; read it in cmd/ and pass an option", strings.TrimPrefix(u, root+"/"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d files checked", checked)
	}
}

// TestEnvUses: the check finds a read through a renamed import and a
// function value, and not a local variable that shadows the package nor
// another package's function of the same name.
func TestEnvUses(t *testing.T) {
	src := `package p

import (
	"os"
	sys "syscall"
	"strings"
)

func f() {
	_ = os.Getenv("A")
	get := os.LookupEnv
	_, _ = get("B")
	_, _ = sys.Getenv("C")
	_ = strings.Fields("Getenv")
	dir, _ := os.UserCacheDir()
	_ = dir
}

func g(os struct{ Getenv string }) string { return os.Getenv }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := envUses(fset, f)
	want := []string{"p.go:10:6: os.Getenv", "p.go:11:9: os.LookupEnv", "p.go:13:9: syscall.Getenv", "p.go:15:12: os.UserCacheDir"}
	if !slices.Equal(got, want) {
		t.Errorf("envUses: %q, want %q", got, want)
	}
}
