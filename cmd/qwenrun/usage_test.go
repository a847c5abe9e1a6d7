package main

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/kernels"
)

// A command line that cannot run prints its error and where the help is,
// on stderr, and nothing on stdout (the help once went to stdout, with the
// error twice).
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "never-opened.qbin")
	for _, tc := range []struct {
		args      []string
		msg, help string
	}{
		{[]string{"--nonsense"}, "flag provided but not defined: -nonsense", "qwenrun"},
		{[]string{m, "--nonsense"}, "flag provided but not defined: -nonsense", "qwenrun"},
		{nil, "want one MODEL.qbin argument, got 0", "qwenrun"},
		{[]string{m, m}, "want one MODEL.qbin argument, got 2", "qwenrun"},
		{[]string{m, "-p"}, "flag needs an argument: -p", "qwenrun"},
		{[]string{"--temp", "warm", m}, `invalid value "warm" for flag -temp: parse error`, "qwenrun"},
		{[]string{"bench"}, "bench: want one or more MODEL.qbin arguments", "qwenrun bench"},
		{[]string{"bench", m, "--bogus"}, "flag provided but not defined: -bogus", "qwenrun bench"},
		{[]string{"perplexity", m}, "perplexity: give the text to score with -f PATH", "qwenrun perplexity"},
		{[]string{"perplexity", "-f", m}, "perplexity: want one MODEL.qbin argument, got 0", "qwenrun perplexity"},
		{[]string{"serve", m, "--alias", "gpt-5"}, `--alias "gpt-5": want NAME=FILE`, "qwenrun serve"},
		{[]string{"serve", m, "--alias", "=" + m}, `--alias "=` + m + `": want NAME=FILE`, "qwenrun serve"},
		{[]string{"serve", m, "--alias", "gpt-5=" + m + ".none"}, `--alias "gpt-5=` + m + `.none": ` + m + `.none is not a .qbin file`, "qwenrun serve"},
		{[]string{"serve", m, "--alias", "gpt-5=" + dir}, `--alias "gpt-5=` + dir + `": ` + dir + ` is not a .qbin file`, "qwenrun serve"},
		{[]string{"serve", m, "--state-cache", "4X"}, `--state-cache: "4X" is not a size (bytes, or a number with K, M, G, T or KiB, MiB, GiB, TiB)`, "qwenrun serve"},
		{[]string{"serve", m, "--alias", "never-opened=" + dir}, `--alias "never-opened=` + dir + `": "never-opened" is MODEL's own name`, "qwenrun serve"},
		{[]string{"serve", m, "--alias", "a=" + bin, "--alias", "a=" + bin}, `--alias "a=` + bin + `": the name "a" is given twice`, "qwenrun serve"},
		// Every subcommand, not only bench and perplexity: the others
		// printed their whole help on stdout and no pointer to it.
		{[]string{"serve", m, "--queue", "0"}, "--queue 0: want 1 or more (without the flag, 4 x --parallel)", "qwenrun serve"},
		{[]string{"serve", m, "--grace", "-1s"}, "--grace -1s: want 0 or more", "qwenrun serve"},
		{[]string{"serve", m, "--parallel", "many"}, `invalid value "many" for flag -parallel: parse error`, "qwenrun serve"},
		{[]string{"embed", m, "--dimensions", "x"}, `invalid value "x" for flag -dimensions: parse error`, "qwenrun embed"},
		{[]string{"rerank", m, "--bogus"}, "flag provided but not defined: -bogus", "qwenrun rerank"},
		{[]string{"health", "--timeout", "soon"}, `invalid value "soon" for flag -timeout: parse error`, "qwenrun health"},
		{[]string{"bench-serve", m, "--bogus"}, "flag provided but not defined: -bogus", "qwenrun bench-serve"},
		{[]string{"embed"}, "embed: want MODEL.qbin", "qwenrun embed"},
		{[]string{"bench-spec"}, "bench-spec: want one MODEL.qbin argument, got 0", "qwenrun bench-spec"},
	} {
		out, stderr, code := qwenrun(t, "", tc.args...)
		want := "qwenrun: " + tc.msg + "\nRun '" + tc.help + " --help' for usage.\n"
		if code != 1 || stderr != want || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1, nothing on stdout and %q", tc.args, code, out, stderr, want)
		}
	}
}

// --help goes to stdout and gives each default once, as it really is: a
// default that comes from the model or the machine is said in words, not
// as the flag's zero value.
func TestHelpDefaults(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{
			"(default: -1)",
			"--temp value                  temperature (0: greedy) (default: the model's generation_config)\n",
			"--top-p value                 nucleus sampling threshold, in [0, 1] (1: off, 0: the most likely token only) (default: the model's generation_config)\n",
			"(default: random)\n",
			"(default: the model's maximum, lowered to what memory holds)\n",
			fmt.Sprintf("(default: %d, the CPUs this process may use)\n", runtime.GOMAXPROCS(0)),
			"(default: $QWEN_KERNELS, or auto)\n",
		}},
		{[]string{"perplexity", "--help"}, []string{"(default: 512)", fmt.Sprintf("(default: %d, the CPUs this process may use)\n", runtime.GOMAXPROCS(0))}},
		{[]string{"bench", "--help"}, []string{`(default: "1,2")`}},
		// As ollama help: the same text as --help.
		{[]string{"help"}, []string{"(default: -1)", "USAGE:"}},
		{[]string{"serve", "--help"}, []string{"--log-level LEVEL", `debug (request bodies too), info, warn or error (default: "info")`, "--log-format FORMAT", `text (key=value) or json, one a line (default: "text")`}},
	} {
		out, stderr, code := qwenrun(t, "", tc.args...)
		if code != 0 || stderr != "" {
			t.Fatalf("%q: exit %d, stderr %q", tc.args, code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%q does not say %q:\n%s", tc.args, w, out)
			}
		}
		checkDefaultsOnce(t, out)
	}
}

// checkDefaultsOnce fails on a help line that states a default twice, or
// gives 0 as the default of a flag whose default comes from elsewhere.
func checkDefaultsOnce(t *testing.T, help string) {
	t.Helper()
	for _, line := range strings.Split(help, "\n") {
		if n := strings.Count(strings.ToLower(line), "default"); n > 1 {
			t.Errorf("a default stated %d times: %q", n, line)
		}
		for _, name := range []string{"--temp ", "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--presence-penalty", "--seed", "--ctx", "--threads"} {
			if strings.HasPrefix(strings.TrimSpace(line), name) && strings.Contains(line, "(default: 0)") {
				t.Errorf("the real default is not 0: %q", line)
			}
		}
	}
}

// --version needs no model: the version (the module's, as this build sets
// none), the commit, Go and the kernel path this CPU gets.
func TestVersion(t *testing.T) {
	out, stderr, code := qwenrun(t, "", "--version")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "qwenrun ") || !strings.HasPrefix(lines[1], "commit   ") ||
		!strings.HasPrefix(lines[2], "go       "+runtime.Version()+" ") || !strings.HasPrefix(lines[3], "kernels  "+kernels.Detect().String()+" ") {
		t.Fatalf("--version printed %q", out)
	}
}
