package modelflags

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/kernels"
	"github.com/qwenc/qwenc/qwen"
	"github.com/urfave/cli/v2"
)

// flags are the flags this package reads, as qwenrun declares them.
func flags() []cli.Flag {
	return append([]cli.Flag{
		&cli.IntFlag{Name: "threads"},
		&cli.StringFlag{Name: "kernels"},
		&cli.StringFlag{Name: "kv-type", Value: "f16"},
		&cli.StringFlag{Name: "log-level", Value: "info"},
		&cli.StringFlag{Name: "log-format", Value: "text"},
		&cli.StringFlag{Name: "draft"},
		&cli.IntFlag{Name: "draft-max"},
		&cli.IntFlag{Name: "draft-min", Value: 1},
		&cli.Float64Flag{Name: "draft-p-min", Value: qwen.DefaultDraftPMin},
	}, StateCacheFlags("", "")...)
}

// The state cache's flags: a bound, a directory with the default or a
// given size of files; a size that is none is refused.
func TestStateCache(t *testing.T) {
	for _, tc := range []struct {
		args []string
		opts int
		err  string
	}{
		{nil, 0, ""},
		{[]string{"--state-cache", "1GiB"}, 1, ""},
		{[]string{"--state-cache-dir", "d"}, 1, ""},
		{[]string{"--state-cache", "0", "--state-cache-dir", "d", "--state-cache-disk", "512MB"}, 2, ""},
		{[]string{"--state-cache-dir", "d", "--state-cache-disk", "0"}, 0, "--state-cache-disk"},
		{[]string{"--state-cache", "lots"}, 0, "--state-cache"},
		{[]string{"--state-cache-disk", "10GiB"}, 0, "--state-cache-disk needs --state-cache-dir DIR"},
	} {
		opts, err := StateCache(parse(t, tc.args...))
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) || tc.err == "" && (err != nil || len(opts) != tc.opts) {
			t.Errorf("%q: %d options, %v; want %d, an error saying %q", tc.args, len(opts), err, tc.opts, tc.err)
		}
	}
}

// parse is the context of a command line of those flags.
func parse(t *testing.T, args ...string) *cli.Context {
	t.Helper()
	var got *cli.Context
	app := &cli.App{Name: "qwenrun", Flags: flags(), Action: func(c *cli.Context) error { got = c; return nil }}
	if err := app.Run(append([]string{"qwenrun"}, args...)); err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return got
}

// The draft flags: ngram, a draft model's file, or both, with their
// defaults; what cannot be drafted is refused in the flags' words.
func TestReadDrafts(t *testing.T) {
	model := filepath.Join(t.TempDir(), "draft.qbin")
	if err := os.WriteFile(model, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want Drafts
	}{
		{nil, Drafts{}},
		{[]string{"--draft", "ngram"}, Drafts{Text: qwen.DefaultDraft, Min: 1, PMin: qwen.DefaultDraftPMin}},
		{[]string{"--draft", model, "--draft-max", "4"}, Drafts{Model: 4, Min: 1, PMin: qwen.DefaultDraftPMin, Path: model}},
		{[]string{"--draft", "ngram," + model, "--draft-p-min", "0"}, Drafts{Text: qwen.DefaultDraft, Model: qwen.DefaultDraftModel, Min: 1, PMin: -1, Path: model}},
		{[]string{"--draft", "mtp"}, Drafts{MTP: qwen.DefaultDraftMTP, Min: 1, PMin: qwen.DefaultDraftPMin}},
		{[]string{"--draft", "ngram,mtp", "--draft-max", "3"}, Drafts{Text: 3, MTP: 3, Min: 1, PMin: qwen.DefaultDraftPMin}},
		{[]string{"--draft", "none"}, Drafts{}},
	} {
		d, err := ReadDrafts(parse(t, tc.args...))
		if err != nil || d != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.args, d, err, tc.want)
		}
	}
	d, _ := ReadDrafts(parse(t))
	if d.AutoMTP(parse(t)); !d.Auto {
		t.Errorf("without --draft, no MTP drafts where they pay")
	}
	if d.AutoMTP(parse(t, "--draft", "none")); d.Auto {
		t.Errorf("--draft none: MTP drafts where they pay")
	}
	var r qwen.Request
	Drafts{Text: 5, Model: 3, MTP: 2, Min: 2, PMin: 0.5}.Apply(&r)
	if r.Draft != 5 || r.DraftModel != 3 || r.DraftMTP != 2 || r.DraftMin != 2 || r.DraftPMin != 0.5 {
		t.Errorf("Apply: %+v", r)
	}
	if len((Drafts{}).Options()) != 0 || len((Drafts{Path: model}).Options()) != 1 || len((Drafts{MTP: 1}).Options()) != 1 || len((Drafts{Auto: true}).Options()) != 1 {
		t.Errorf("Options: a draft model or the MTP block opened without its flag, or not with it")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--draft-max", "4"}, "--draft-max needs --draft ngram, mtp or FILE.qbin"},
		{[]string{"--draft", "none", "--draft-min", "2"}, "--draft-min needs --draft ngram, mtp or FILE.qbin"},
		{[]string{"--draft", "ngram", "--draft-max", "0"}, "--draft-max 0: want 1 or more"},
		{[]string{"--draft", "ngram", "--draft-min", "9", "--draft-max", "4"}, "--draft-min 9: want 1 to --draft-max (4)"},
		{[]string{"--draft", "ngram", "--draft-min", "20"}, "--draft-min 20: want 1 to --draft-max (16)"},
		{[]string{"--draft", "ngram", "--draft-p-min", "1"}, "--draft-p-min 1: want 0 to less than 1"},
		{[]string{"--draft", "ngram,ngram"}, `--draft "ngram,ngram": ngram, mtp and one draft model, each once at most`},
		{[]string{"--draft", "mtp,mtp"}, `--draft "mtp,mtp": ngram, mtp and one draft model, each once at most`},
		{[]string{"--draft", "ngram,mtp", "--draft-p-min", "0.5"}, "--draft-p-min cuts a draft model's guesses; --draft ngram,mtp has no draft model"},
		{[]string{"--draft", "missing.qbin"}, `--draft "missing.qbin": want ngram, mtp or a draft model's .qbin file: stat missing.qbin: no such file or directory`},
	} {
		if _, err := ReadDrafts(parse(t, tc.args...)); err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// The model's flags are checked before it is loaded, their errors naming
// them, and the kernel path comes from --kernels or else $QWEN_KERNELS.
func TestCheck(t *testing.T) {
	t.Setenv(KernelsEnv, "")
	var notes strings.Builder
	if err := Check(parse(t, "--threads", "1", "--kv-type", "q8"), &notes); err != nil || notes.Len() != 0 {
		t.Errorf("good flags: %v, notes %q", err, notes.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--threads", "0"}, "--threads 0: want 1 or more"},
		{[]string{"--kernels", "sse9"}, "--kernels: "},
		{[]string{"--kv-type", "f8"}, "--kv-type: "},
	} {
		if err := Check(parse(t, tc.args...), &notes); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error starting %q", tc.args, err, tc.want)
		}
	}
	many := runtime.GOMAXPROCS(0) + 1
	if err := CheckThreads(&notes, "--threads", many); err != nil || !strings.Contains(notes.String(), "qwenrun: warning: --threads") {
		t.Errorf("%d threads: %v, notes %q; want a warning", many, err, notes.String())
	}
	t.Setenv(KernelsEnv, "generic")
	if p, err := KernelPath(parse(t)); err != nil || p != kernels.Generic {
		t.Errorf("$%s=generic: %v, %v", KernelsEnv, p, err)
	}
	if p, err := KernelPath(parse(t, "--kernels", "auto")); err != nil || p != kernels.Detect() {
		t.Errorf("--kernels auto over $%s: %v, %v", KernelsEnv, p, err)
	}
	t.Setenv(KernelsEnv, "sse9")
	if _, err := KernelPath(parse(t)); err == nil || !strings.HasPrefix(err.Error(), "$"+KernelsEnv+": ") {
		t.Errorf("$%s=sse9: %v, want an error naming the variable", KernelsEnv, err)
	}
}

// A context that cannot be had is said in --ctx's words; --parallel is
// named when there are several conversations.
func TestContextError(t *testing.T) {
	for _, tc := range []struct {
		e    qwen.ContextError
		want string
	}{
		{qwen.ContextError{Context: 0, Max: 4096}, "--ctx 0: want 1 to 4096 tokens (the model's maximum context)"},
		{qwen.ContextError{Context: 4096, Max: 4096, Parallel: 1, Need: 3e9, Available: 2e9},
			"--ctx 4096 needs 3000 MB of sequence state, more than the 2000 MB of memory available; use a smaller --ctx"},
		{qwen.ContextError{Context: 4096, Max: 4096, Parallel: 4, Need: 3e9, Available: 2e9},
			"--ctx 4096 for 4 conversations needs 3000 MB of sequence state, more than the 2000 MB of memory available; use a smaller --ctx or --parallel"},
	} {
		if err := contextError(&tc.e); err.Error() != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, err, tc.want)
		}
	}
	// The default context that does not fit either is qwen's own words:
	// no flag asked for it.
	e := &qwen.ContextError{Max: 4096, Parallel: 1, Need: 3e9, Available: 2e9}
	if err := contextError(e); err != e {
		t.Errorf("the default context: %v, want qwen's error", err)
	}
}

// The log flags: a level and a format, refused in their words.
func TestLogger(t *testing.T) {
	if _, err := Logger(parse(t, "--log-level", "debug", "--log-format", "json"), os.Stderr); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--log-level", "verbose"}, `--log-level "verbose": want debug, info, warn or error`},
		{[]string{"--log-format", "xml"}, `--log-format "xml": want text or json`},
	} {
		if _, err := Logger(parse(t, tc.args...), os.Stderr); err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
}
