package repotest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The documentation is README.md and docs/*.md. These tests hold it to
// the code: every command-line flag it names exists in the --help of the
// command it is named for, its Go is the Go of package qwen's examples,
// and its links lead somewhere.

// docFiles are the documentation's pages, relative to the module root.
func docFiles(t *testing.T, root string) []string {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("%d pages in docs/: not the repository's root?", len(files))
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	for i, f := range files {
		files[i], _ = filepath.Rel(root, f)
	}
	return files
}

// ourCommands are the commands the repository builds, by the name the
// documentation gives them (bin/qwenrun is qwenrun).
var ourCommands = []string{"qwenc", "qwenrun", "qwengen"}

// A flagMention is a flag the documentation names: where, and for which
// command ("qwenrun", "qwenrun serve", "qwenc compile"; "" when nothing
// around it names one, and then any of the commands may have it).
type flagMention struct {
	file string
	line int
	cmd  string
	flag string // as written: -p, --top-p
}

func (m flagMention) String() string {
	cmd := m.cmd
	if cmd == "" {
		cmd = "any command"
	}
	return fmt.Sprintf("%s:%d: %s (%s)", m.file, m.line, m.flag, cmd)
}

// flagRE finds a flag in a command line: a dash or two and a letter, at
// the start or after a space, a bracket, a parenthesis, a comma or a bar
// (qwenc inspect FILE [--json], --temp, --top-k).
var flagRE = regexp.MustCompile(`(?:^|[\s\[(,|])(--?[A-Za-z][A-Za-z0-9-]*)`)

// quotedRE is a quoted argument, whose text is no flag.
var quotedRE = regexp.MustCompile(`"[^"]*"|'[^']*'`)

// envRE is an environment assignment before a command.
var envRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// flagsIn returns the flags of a command line's arguments.
func flagsIn(args string) []string {
	var flags []string
	for _, m := range flagRE.FindAllStringSubmatch(quotedRE.ReplaceAllString(args, `""`), -1) {
		flags = append(flags, m[1])
	}
	return flags
}

// A docParser reads one page's flag mentions. subcommand says whether a
// word after a command is one of its subcommands.
type docParser struct {
	file       string
	subcommand func(cmd, word string) bool
	mentions   []flagMention

	page, section, block string // the command each names, the nearest first
	table                string // a flag table's command, for its rows
}

// command reads a command line in words (bin/ dropped, the environment
// skipped): the command it names, with its subcommand, and the rest; ok
// false when it names none of ours. A container run of the qwenrun image
// is qwenrun serve, the image's entrypoint.
func (p *docParser) command(words []string) (cmd string, rest []string, ok bool) {
	for len(words) > 0 && envRE.MatchString(words[0]) {
		words = words[1:]
	}
	if len(words) >= 2 && (words[0] == "docker" || words[0] == "podman") && words[1] == "run" {
		if i := slices.Index(words, "qwenrun"); i > 0 {
			return "qwenrun serve", words[i+1:], true
		}
		return "", nil, false
	}
	if len(words) == 0 || !slices.Contains(ourCommands, strings.TrimPrefix(words[0], "bin/")) {
		return "", nil, false
	}
	cmd, rest = strings.TrimPrefix(words[0], "bin/"), words[1:]
	if len(rest) > 0 && p.subcommand(cmd, rest[0]) {
		cmd, rest = cmd+" "+rest[0], rest[1:]
	}
	return cmd, rest, true
}

func (p *docParser) add(line int, cmd string, flags []string) {
	for _, f := range flags {
		p.mentions = append(p.mentions, flagMention{p.file, line, cmd, f})
	}
}

// context is the command a bare flag is named for: the nearest that the
// text around it names.
func (p *docParser) context() string {
	for _, c := range []string{p.block, p.table, p.section, p.page} {
		if c != "" {
			return c
		}
	}
	return ""
}

// shellLine reads a line of a code block: each command of it (split at
// pipes and ;, && and ||), its comment's flags counted as its own.
func (p *docParser) shellLine(n int, line string) {
	code, comment, _ := strings.Cut(line, " #")
	for _, seg := range regexp.MustCompile(`\s(?:\||;|&&|\|\|)\s`).Split(code, -1) {
		cmd, rest, ok := p.command(strings.Fields(quotedRE.ReplaceAllString(seg, `""`)))
		if !ok {
			continue
		}
		p.block = cmd
		p.add(n, cmd, flagsIn(strings.Join(rest, " ")))
	}
	if comment != "" && p.block != "" {
		p.add(n, p.block, flagsIn(comment))
	}
}

// spanRE is an inline code span.
var spanRE = regexp.MustCompile("`([^`]+)`")

// prose reads a block of text, lines first..: its code spans in order,
// a span broken across lines too. A span that is a command line names
// its command for the spans after it in the block; a span that begins
// with a flag is a bare flag, named for the nearest command around it;
// any other span (another program's command line, JSON, a path) is not
// ours.
func (p *docParser) prose(first int, text string) {
	for _, m := range spanRE.FindAllStringSubmatchIndex(text, -1) {
		n := first + strings.Count(text[:m[0]], "\n")
		span := strings.ReplaceAll(text[m[2]:m[3]], `\|`, "|")
		words := strings.Fields(span)
		if len(words) == 0 {
			continue
		}
		if cmd, rest, ok := p.command(words); ok {
			p.block = cmd
			p.add(n, cmd, flagsIn(strings.Join(rest, " ")))
			continue
		}
		if flagRE.MatchString(words[0]) && strings.HasPrefix(words[0], "-") {
			p.add(n, p.context(), flagsIn(strings.Join(words, " ")))
		}
	}
}

// flagTableRE is the header of a flag table: | `qwenrun serve` flag | ... |
var flagTableRE = regexp.MustCompile("^\\|\\s*`([^`]+)` flag\\s*\\|")

// headingCommand is the command a heading names in a code span, if any.
func (p *docParser) headingCommand(line string) string {
	for _, m := range spanRE.FindAllStringSubmatch(line, -1) {
		if cmd, _, ok := p.command(strings.Fields(m[1])); ok {
			return cmd
		}
	}
	return ""
}

// parse reads a page. Blocks are separated by blank lines; a table row is
// a block of its own; a heading starts a section, and the page's title
// names its command for the whole page when it names one.
func (p *docParser) parse(text string) {
	fence := false
	var para []string // the lines of the block of text being read
	first := 0
	flush := func() {
		if len(para) > 0 {
			p.prose(first, strings.Join(para, "\n"))
			para = nil
		}
	}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		trimmed := strings.TrimSpace(line)
		isText := !fence && trimmed != "" && !strings.HasPrefix(trimmed, "```") && !strings.HasPrefix(line, "#") &&
			!strings.HasPrefix(line, "    ") && !strings.HasPrefix(line, "\t") && !strings.HasPrefix(trimmed, "|")
		// A list item is a block of its own.
		item := isText && (strings.HasPrefix(trimmed, "- ") || strings.HasPrefix(trimmed, "* "))
		if !isText || item {
			flush()
		}
		if item {
			p.block = ""
		}
		switch {
		case strings.HasPrefix(trimmed, "```"):
			fence = !fence
			p.block = ""
		case fence:
			// Fenced blocks hold Go and JSON here, not command lines:
			// their Go is TestReadmeGoExample's.
		case trimmed == "":
			p.block, p.table = "", ""
		case strings.HasPrefix(line, "#"):
			cmd := p.headingCommand(line)
			if strings.HasPrefix(line, "# ") {
				p.page = cmd
			}
			p.section, p.block = cmd, ""
		case strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t"):
			p.shellLine(n, trimmed)
		case strings.HasPrefix(trimmed, "|"):
			if m := flagTableRE.FindStringSubmatch(trimmed); m != nil {
				cmd, _, ok := p.command(strings.Fields(m[1]))
				if !ok {
					p.mentions = append(p.mentions, flagMention{p.file, n, "?", "table of " + m[1]})
				}
				p.table = cmd
				continue
			}
			p.block = ""
			p.prose(n, trimmed)
		default:
			if len(para) == 0 {
				first = n
			}
			para = append(para, line)
		}
	}
	flush()
}

// helpFlags builds the commands and reads the flags each one's --help
// lists, and which words are a command's subcommands.
type helpFlags struct {
	t    *testing.T
	bin  string
	help map[string]map[string]bool // command -> flag names, dashes dropped
}

func buildCommands(t *testing.T, root string) *helpFlags {
	bin := t.TempDir()
	args := []string{"build", "-o", bin + string(filepath.Separator)}
	for _, c := range ourCommands {
		args = append(args, "./cmd/"+c)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return &helpFlags{t: t, bin: bin, help: map[string]map[string]bool{}}
}

// optionRE is a line of a help's options: its flag column, before the
// gap that starts the usage (urfave/cli), or the flag itself (package
// flag, qwengen's).
var optionRE = regexp.MustCompile(`^\s+(-{1,2}[A-Za-z].*?)(?:\s{2,}|$)`)

// flags returns the flags cmd's --help lists, or nil if it gives no help.
func (h *helpFlags) flags(cmd string) map[string]bool {
	if f, ok := h.help[cmd]; ok {
		return f
	}
	words := strings.Fields(cmd)
	c := exec.Command(filepath.Join(h.bin, words[0]), append(words[1:], "--help")...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	text := out.String()
	var flags map[string]bool
	// A word that is no subcommand is the model's path to qwenrun, whose
	// help is then its own; qwenc refuses it.
	sub := len(words) == 1 || strings.Contains(text, "\n   "+cmd+" - ") || strings.HasPrefix(text, "Usage: "+cmd)
	if err == nil && sub {
		flags = map[string]bool{}
		for _, line := range strings.Split(text, "\n") {
			m := optionRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			for _, f := range regexp.MustCompile(`-{1,2}[A-Za-z][A-Za-z0-9-]*`).FindAllString(m[1], -1) {
				flags[strings.TrimLeft(f, "-")] = true
			}
		}
		if len(flags) == 0 {
			h.t.Errorf("%s --help lists no flags:\n%s", cmd, text)
		}
	}
	h.help[cmd] = flags
	return flags
}

// subcommand reports whether word is one of cmd's subcommands: a word
// whose --help is a subcommand's.
func (h *helpFlags) subcommand(cmd, word string) bool {
	if !regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(word) || cmd == "qwengen" {
		return false
	}
	return h.flags(cmd+" "+word) != nil
}

// has reports whether cmd takes flag ("" any command the documentation
// names: the union).
func (h *helpFlags) has(cmd, flag string) bool {
	name := strings.TrimLeft(flag, "-")
	if cmd != "" {
		return h.flags(cmd)[name]
	}
	for _, c := range h.known() {
		if h.flags(c)[name] {
			return true
		}
	}
	return false
}

// known are the commands whose help has been read.
func (h *helpFlags) known() []string {
	var cs []string
	for c, f := range h.help {
		if f != nil {
			cs = append(cs, c)
		}
	}
	slices.Sort(cs)
	return cs
}

// readMentions reads every page's flag mentions.
func readMentions(t *testing.T, root string, sub func(cmd, word string) bool) []flagMention {
	var all []flagMention
	for _, f := range docFiles(t, root) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		p := &docParser{file: f, subcommand: sub}
		p.parse(string(b))
		all = append(all, p.mentions...)
	}
	return all
}

// TestDocsFlagsExist fails when README.md or a page of docs/ names a flag
// that the command it names it for does not list in its --help: a flag
// misspelled, removed, or named for the wrong command. A flag is named
// for the command of the command line it is on (bin/qwenrun serve M
// --parallel 8, in a code block or a code span), of the flag table it is
// in (| `qwenc compile` flag |), or else of the nearest command the text
// around it names: in its paragraph, its section's heading, its page's
// title. A flag nothing names a command for must be some command's.
func TestDocsFlagsExist(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the commands")
	}
	root := moduleRoot(t)
	h := buildCommands(t, root)
	for _, c := range ourCommands {
		if h.flags(c) == nil {
			t.Fatalf("%s --help failed", c)
		}
	}
	mentions := readMentions(t, root, h.subcommand)
	if len(mentions) < 200 {
		t.Fatalf("only %d flags named in the documentation: is the parser reading it?", len(mentions))
	}
	for _, m := range mentions {
		if m.cmd == "?" {
			t.Errorf("%s:%d: a flag table of %s, which is none of our commands", m.file, m.line, m.flag)
			continue
		}
		if m.cmd != "" && h.flags(m.cmd) == nil {
			t.Errorf("%s: %s gives no help", m, m.cmd)
			continue
		}
		if !h.has(m.cmd, m.flag) {
			where := "its --help"
			if m.cmd == "" {
				where = "the --help of any of " + strings.Join(h.known(), ", ")
			}
			t.Errorf("%s: not in %s", m, where)
		}
	}
}

// TestDocParser checks how flags are told apart and given their command,
// on a page made for it: a flag table, command lines in code blocks and
// spans, a comment's flags, bare flags by paragraph, section and title,
// and the spans that are other programs'.
func TestDocParser(t *testing.T) {
	page := strings.Join([]string{
		"# Running: `qwenrun`", // 1
		"",                     // 2
		"    bin/qwenrun serve M.qbin --parallel 8   # --draft-max 4", // 3
		"    echo x | bin/qwenrun M.qbin -f - --json",                 // 4
		"    docker run -p 8080:8080 -v a:b qwenrun M.qbin --queue 2", // 5
		"",                                   // 6
		"| `qwenc compile` flag | meaning |", // 7
		"|---|---|",                          // 8
		"| `-o, --output FILE` | as `--type f16\\|q8` |", // 9
		"", // 10
		"Then `--top-p 0.5` and `qwenc inspect FILE [--seq N]` and `--json`, not `llama-bench -d` nor `GOFLAGS=-x`.", // 11
		"## Bench: `qwenrun bench`",                      // 12
		"The `--depth` and `go test -bench X` and `-1`.", // 13
		"A span `qwenc inspect M",                        // 14
		"--kv-type q8` across lines, then `--seq`.",      // 15
		"- an item with `--reps`",                        // 16
	}, "\n")
	subs := map[string]bool{"qwenrun serve": true, "qwenc compile": true, "qwenc inspect": true, "qwenrun bench": true}
	p := &docParser{file: "page.md", subcommand: func(cmd, word string) bool { return subs[cmd+" "+word] }}
	p.parse(page)
	want := []flagMention{
		{"page.md", 3, "qwenrun serve", "--parallel"},
		{"page.md", 3, "qwenrun serve", "--draft-max"},
		{"page.md", 4, "qwenrun", "-f"},
		{"page.md", 4, "qwenrun", "--json"},
		{"page.md", 5, "qwenrun serve", "--queue"},
		{"page.md", 9, "qwenc compile", "-o"},
		{"page.md", 9, "qwenc compile", "--output"},
		{"page.md", 9, "qwenc compile", "--type"},
		{"page.md", 11, "qwenrun", "--top-p"},
		{"page.md", 11, "qwenc inspect", "--seq"},
		{"page.md", 11, "qwenc inspect", "--json"},
		{"page.md", 13, "qwenrun bench", "--depth"},
		{"page.md", 14, "qwenc inspect", "--kv-type"},
		{"page.md", 15, "qwenc inspect", "--seq"},
		{"page.md", 16, "qwenrun bench", "--reps"},
	}
	if !slices.Equal(p.mentions, want) {
		t.Errorf("got\n%v\nwant\n%v", p.mentions, want)
	}
}

// goExamples returns the bodies of the Example functions in dir's test
// files, by name: the statements as a page shows them (one tab less), an
// Output comment and what follows left out.
func goExamples(t *testing.T, dir string) map[string]string {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, f, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Example") {
				continue
			}
			bodies[fn.Name.Name] = funcBody(fset, src, fn)
		}
	}
	return bodies
}

// funcBody is fn's body as text, one tab less, without its Output
// comment and what follows.
func funcBody(fset *token.FileSet, src []byte, fn *ast.FuncDecl) string {
	body := string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
	var lines []string
	for _, l := range strings.Split(strings.Trim(body, "\n"), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "// Output:") || strings.HasPrefix(strings.TrimSpace(l), "// Unordered output:") {
			break
		}
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

// goBlocks returns the fenced Go blocks of a page, with their lines.
func goBlocks(text string) (blocks []string, lines []int) {
	var cur []string
	in := false
	for i, l := range strings.Split(text, "\n") {
		switch {
		case !in && strings.TrimSpace(l) == "```go":
			in, cur = true, nil
			lines = append(lines, i+1)
		case in && strings.TrimSpace(l) == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, l)
		}
	}
	return blocks, lines
}

// TestReadmeGoExample fails when a page's Go is not the Go of one of
// package qwen's examples (which go vet and go test compile, and run when
// they have an Output): a fragment must be an example's body, and a whole
// program's main must be, and the program must build against the
// module. README.md must have its Go example.
func TestReadmeGoExample(t *testing.T) {
	root := moduleRoot(t)
	examples := goExamples(t, filepath.Join(root, "qwen"))
	if len(examples) < 3 {
		t.Fatalf("%d examples in qwen/: not the package's directory?", len(examples))
	}
	byBody := map[string]string{}
	for name, body := range examples {
		byBody[body] = name
	}
	readme := 0
	for _, f := range docFiles(t, root) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		blocks, lines := goBlocks(string(b))
		if f == "README.md" {
			readme = len(blocks)
		}
		for i, block := range blocks {
			body := strings.Trim(block, "\n")
			if strings.HasPrefix(body, "package main") {
				buildProgram(t, root, fmt.Sprintf("%s:%d", f, lines[i]), block)
				fset := token.NewFileSet()
				file, err := parser.ParseFile(fset, "main.go", block, 0)
				if err != nil {
					t.Errorf("%s:%d: %v", f, lines[i], err)
					continue
				}
				for _, d := range file.Decls {
					if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "main" {
						body = funcBody(fset, []byte(block), fn)
					}
				}
			}
			if _, ok := byBody[body]; !ok {
				t.Errorf("%s:%d: this Go is no example of package qwen (qwen/*_test.go): make it one, so that it compiles, or copy the example's body:\n%s", f, lines[i], body)
			}
		}
	}
	if readme == 0 {
		t.Error("README.md has no Go example")
	}
}

// buildProgram builds a page's Go program inside the module, as if it
// were a main package there (go build -overlay: nothing is written in the
// tree).
func buildProgram(t *testing.T, root, where, src string) {
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(root, "internal", "repotest", "docprogram")
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(pkg, "main.go"): file}})
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-overlay", ov, "-o", os.DevNull, "./internal/repotest/docprogram")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s: the program does not build: %v\n%s", where, err, out)
	}
}

// linkRE is a Markdown link's target (images too).
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// anchors are the ids GitHub gives a page's headings: lower case, the
// punctuation dropped but for hyphens and underscores, spaces as hyphens,
// a repeated one numbered.
func anchors(text string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			ids[fmt.Sprintf("%s-%d", id, n)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

// TestDocsLinks fails when a link of README.md or docs/ leads nowhere: a
// file or directory of the repository that is not there, or a heading
// that a page does not have.
func TestDocsLinks(t *testing.T) {
	root := moduleRoot(t)
	checked := 0
	for _, f := range docFiles(t, root) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		fence := false
		for i, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fence = !fence
			}
			if fence || strings.HasPrefix(line, "    ") {
				continue
			}
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				dest := filepath.Join(root, filepath.Dir(f), path)
				if path == "" {
					dest = filepath.Join(root, f)
				}
				checked++
				st, err := os.Stat(dest)
				if err != nil {
					t.Errorf("%s:%d: link %s: %v", f, i+1, target, err)
					continue
				}
				if anchor == "" {
					continue
				}
				if st.IsDir() || !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: link %s: an anchor in a file that is not Markdown", f, i+1, target)
					continue
				}
				page, err := os.ReadFile(dest)
				if err != nil {
					t.Fatal(err)
				}
				if !anchors(string(page))[anchor] {
					t.Errorf("%s:%d: link %s: %s has no heading #%s", f, i+1, target, path, anchor)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d links checked: is the parser reading the pages?", checked)
	}
}
