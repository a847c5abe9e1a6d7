package repotest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format/chat"
)

const chatPkg = module + "/format/chat"

// historicFormats are names that identified chat formats in package chat
// (the Family constants) or would, were a format exported again.
var historicFormats = []string{"ChatML", "Qwen2", "Qwen25", "Qwen3", "Qwen35", "Qwen36"}

// TestNoChatFormatAbove: code outside format/chat asks the model's chat
// format what it does (Thinking, CallSyntax, Render...) and never tells
// formats apart itself: it names no format value of package chat, and
// compares no format name ("qwen3") with a chat template's. A new format
// is then a new file in format/chat, with no branch to add above it.
func TestNoChatFormatAbove(t *testing.T) {
	values := formatValues(t)
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}} {{join .IgnoredGoFiles \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	files := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if f[0] == chatPkg {
			continue
		}
		for _, name := range strings.Fields(f[2]) {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			path := filepath.Join(f[1], name)
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files++
			for _, problem := range formatChecks(fset, file, chat.Names(), values) {
				t.Errorf("%s", problem)
			}
		}
	}
	if files < 100 {
		t.Fatalf("only %d files checked", files)
	}
}

// formatValues are the names of package chat's format values: its
// package-level variables of type *Format, and the historic names.
func formatValues(t *testing.T) []string {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}\t{{join .GoFiles \" \"}}", chatPkg).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dir, files, _ := strings.Cut(strings.TrimSpace(string(out)), "\t")
	names := slices.Clone(historicFormats)
	found := 0
	for _, name := range strings.Fields(files) {
		file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				if isFormatType(vs.Type) || slices.ContainsFunc(vs.Values, isFormatLit) {
					for _, n := range vs.Names {
						names = append(names, n.Name)
						found++
					}
				}
			}
		}
	}
	if found < 4 {
		t.Fatalf("found %d format values in %s; the test no longer knows how they are made", found, chatPkg)
	}
	return names
}

func isFormatType(e ast.Expr) bool {
	s, ok := e.(*ast.StarExpr)
	if !ok {
		return false
	}
	id, ok := s.X.(*ast.Ident)
	return ok && id.Name == "Format"
}

func isFormatLit(e ast.Expr) bool {
	u, ok := e.(*ast.UnaryExpr)
	if !ok || u.Op != token.AND {
		return false
	}
	c, ok := u.X.(*ast.CompositeLit)
	if !ok {
		return false
	}
	id, ok := c.Type.(*ast.Ident)
	return ok && id.Name == "Format"
}

// aboutChat matches the text of an expression that holds a chat format
// or its name.
var aboutChat = regexp.MustCompile(`(?i)chat|famil|templ|tmpl|format`)

// formatChecks finds where a file tells chat formats apart: a use of one
// of package chat's format values, and a comparison (==, !=, a switch's
// case, strings.EqualFold) of a format's name with an expression about
// chat formats.
func formatChecks(fset *token.FileSet, file *ast.File, names, values []string) []string {
	var chatNames []string // what the file imports package chat as
	for _, imp := range file.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == chatPkg {
			name := "chat"
			if imp.Name != nil {
				name = imp.Name.Name
			}
			chatNames = append(chatNames, name)
		}
	}
	var problems []string
	report := func(n ast.Node, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s: %s", fset.Position(n.Pos()), fmt.Sprintf(format, args...)))
	}
	isName := func(e ast.Expr) (string, bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(lit.Value)
		return s, err == nil && slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, s) })
	}
	about := func(e ast.Expr) bool {
		if c, ok := e.(*ast.CallExpr); ok {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Name" || sel.Sel.Name == "String") {
				return true
			}
		}
		return aboutChat.MatchString(exprText(e))
	}
	compared := func(n ast.Node, a, b ast.Expr) {
		for _, p := range [][2]ast.Expr{{a, b}, {b, a}} {
			if name, ok := isName(p[0]); ok && about(p[1]) {
				report(n, "%s compared with the chat format %q: ask the format instead", exprText(p[1]), name)
			}
		}
	}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && slices.Contains(chatNames, x.Name) && slices.Contains(values, n.Sel.Name) {
				report(n, "%s.%s names a chat format: ask the model's format instead", x.Name, n.Sel.Name)
			}
		case *ast.BinaryExpr:
			if n.Op == token.EQL || n.Op == token.NEQ {
				compared(n, n.X, n.Y)
			}
		case *ast.SwitchStmt:
			if n.Tag == nil {
				break
			}
			for _, s := range n.Body.List {
				for _, e := range s.(*ast.CaseClause).List {
					compared(e, n.Tag, e)
				}
			}
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "EqualFold" && len(n.Args) == 2 {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "strings" {
					compared(n, n.Args[0], n.Args[1])
				}
			}
		}
		return true
	})
	return problems
}

// exprText is an expression's selectors and names, enough to tell what
// it is about.
func exprText(e ast.Expr) string {
	var b strings.Builder
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			b.WriteString(id.Name + ".")
		}
		return true
	})
	return strings.TrimSuffix(b.String(), ".")
}

// TestFormatChecks: the check finds what it is for, and lets pass what
// it is not.
func TestFormatChecks(t *testing.T) {
	names := []string{"qwen3.5", "qwen3", "chatml"}
	values := []string{"Qwen3", "qwen35"}
	for _, c := range []struct {
		src  string
		want int
	}{
		{`if f == chat.Qwen3 {}`, 1},
		{`x := chat.Qwen3; _ = x`, 1},
		{`if c.family() != qc.Qwen3 {}`, 1},
		{`if s.info.ChatTemplate == "qwen3" {}`, 1},
		{`if "Qwen3.5" != h.ChatFamily {}`, 1},
		{`switch m.format.Name() { case "chatml", "qwen3": }`, 2},
		{`switch info.ChatTemplate { case "qwen3": }`, 1},
		{`_ = strings.EqualFold(name, "qwen3") && chatTemplate != ""`, 0},
		{`_ = strings.EqualFold(tmpl, "qwen3")`, 1},
		{`if cfg.ModelType == "qwen3" {}`, 0},
		{`switch c.ModelType { case "qwen3": }`, 0},
		{`if _, ok := f.Thinking(); ok {}`, 0},
		{`if s.Arguments != chat.JSONArguments {}`, 0},
		{`if info.ChatTemplate == "" {}`, 0},
	} {
		src := "package p\nimport (\n\"strings\"\n\"github.com/qwenc/qwenc/format/chat\"\nqc \"github.com/qwenc/qwenc/format/chat\"\n)\nvar _ = strings.EqualFold\nvar _ = qc.Names\nfunc f() {\n" + c.src + "\n}\n"
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, "p.go", src, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		if got := formatChecks(fset, file, names, values); len(got) != c.want {
			t.Errorf("%s: %d problems %q, want %d", c.src, len(got), got, c.want)
		}
	}
}
