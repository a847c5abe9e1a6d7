package main

import (
	"runtime"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/kernels"
)

// A command line that cannot run prints its error and where the help is,
// on stderr, and nothing on stdout (the help once went to stdout, with the
// error twice).
func TestUsageErrors(t *testing.T) {
	work := t.TempDir()
	for _, tc := range []struct {
		args      []string
		msg, help string
	}{
		{[]string{"--bogus"}, "flag provided but not defined: -bogus", "qwenc"},
		{[]string{"frobnicate"}, `unknown command "frobnicate" (want compile, inspect, verify, push or pull)`, "qwenc"},
		{[]string{"compile"}, "compile: want one MODEL argument, got 0", "qwenc compile"},
		{[]string{"compile", "a", "b"}, "compile: want one MODEL argument, got 2", "qwenc compile"},
		{[]string{"compile", "model", "--bogus"}, "flag provided but not defined: -bogus", "qwenc compile"},
		{[]string{"compile", "model", "--max-prefill", "lots"}, `invalid value "lots" for flag -max-prefill: parse error`, "qwenc compile"},
		{[]string{"inspect"}, "inspect: want one FILE argument, got 0", "qwenc inspect"},
		{[]string{"verify", "a", "b"}, "verify: want one FILE argument, got 2", "qwenc verify"},
		{[]string{"push", "a.qbin"}, "push: want two arguments, FILE and REGISTRY/REPO:TAG; got 1", "qwenc push"},
		{[]string{"pull"}, "pull: want one REGISTRY/REPO:TAG argument, got 0", "qwenc pull"},
		{[]string{"pull", "localhost:5000/m:q8", "--bogus"}, "flag provided but not defined: -bogus", "qwenc pull"},
	} {
		out, stderr, code := run(t, work, tc.args...)
		want := "qwenc: " + tc.msg + "\nRun '" + tc.help + " --help' for usage.\n"
		if code != 1 || stderr != want || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1, nothing on stdout and %q", tc.args, code, out, stderr, want)
		}
	}
	// No command at all asks for the help, which is output.
	if out, stderr, code := run(t, work); code != 0 || stderr != "" || out == "" {
		t.Errorf("no arguments: exit %d, stdout %q, stderr %q; want the help on stdout", code, out, stderr)
	}
}

// --help goes to stdout and states each default once.
func TestHelpDefaults(t *testing.T) {
	out, stderr, code := run(t, t.TempDir(), "compile", "--help")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, w := range []string{"output FILE (default: the model directory's or GGUF file's name + .qbin, in the current directory)\n",
		"(default: f16; for a GGUF, each matrix the closest type to its own)\n", "(default: 512)",
		// the compiler's q4 mix (weightType); the help once said the
		// head was q8, as it was before q6
		"q4 (4.625 bits, with the LM head and some value and down projections at q6, an untied embedding at q8)"} {
		if !strings.Contains(out, w) {
			t.Errorf("compile --help does not say %q:\n%s", w, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if n := strings.Count(strings.ToLower(line), "default"); n > 1 {
			t.Errorf("a default stated %d times: %q", n, line)
		}
	}
}

// --version names the version set at link time, the commit (unknown in
// a build without version control information), Go and the kernel path.
func TestVersion(t *testing.T) {
	out, stderr, code := run(t, t.TempDir(), "--version")
	want := "qwenc " + testVersion + "\n"
	if code != 0 || stderr != "" || !strings.HasPrefix(out, want) {
		t.Fatalf("exit %d, stderr %q, stdout %q; want it to start with %q", code, stderr, out, want)
	}
	for _, w := range []string{"\ncommit   ", "\ngo       " + runtime.Version() + " ", "\nkernels  " + kernels.Detect().String() + " "} {
		if !strings.Contains(out, w) {
			t.Errorf("--version does not say %q: %q", w, out)
		}
	}
}
