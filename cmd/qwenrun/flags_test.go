package main

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/cmd/internal/modelflags"
	"github.com/qwenc/qwenc/kernels"
	"github.com/qwenc/qwenc/runtime/sampling"
	"github.com/urfave/cli/v2"
)

// Values that mean nothing are refused with one line and exit 1. The
// model named for most cases does not exist: they are refused before it
// would be opened.
func TestRefusesMeaninglessValues(t *testing.T) {
	dir := t.TempDir()
	absent := filepath.Join(dir, "never-opened.qbin")
	long := filepath.Join(dir, strings.Repeat("l", 256))
	m := tinyModel(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		// The ranges are the parameter table's, the same over HTTP: top-p 0
		// keeps the most likely token, as OpenAI's top_p 0 does.
		{[]string{absent, "-p", "hi", "--top-p", "-0.1"}, "--top-p -0.1: must be in [0, 1] (1 is off, 0 keeps only the most likely token)"},
		{[]string{absent, "-p", "hi", "--top-p", "1.01"}, "--top-p 1.01: must be in [0, 1] (1 is off, 0 keeps only the most likely token)"},
		{[]string{absent, "-p", "hi", "--top-p", "NaN"}, "--top-p NaN: must be a finite number"},
		{[]string{absent, "-p", "hi", "--min-p", "-0.5"}, "--min-p -0.5: must be in [0, 1] (0 is off)"},
		{[]string{absent, "-p", "hi", "--min-p", "1.5"}, "--min-p 1.5: must be in [0, 1] (0 is off)"},
		{[]string{absent, "-p", "hi", "--temp", "NaN"}, "--temp NaN: must be a finite number"},
		{[]string{absent, "-p", "hi", "--temp", "Inf"}, "--temp +Inf: must be a finite number"},
		{[]string{absent, "-p", "hi", "--temp", "-1"}, "--temp -1: must not be negative (0 is greedy)"},
		{[]string{absent, "-p", "hi", "--temp", "1e39"}, "--temp 1e+39: must be a finite number"},
		{[]string{absent, "-p", "hi", "--repeat-penalty", "0"}, "--repeat-penalty 0: must be above 0 (1 is off)"},
		{[]string{absent, "-p", "hi", "--presence-penalty", "-2.5"}, "--presence-penalty -2.5: must be in [-2, 2] (0 is off)"},
		{[]string{absent, "-p", "hi", "--top-k", "-2"}, "--top-k -2: must be a whole number, -1 or more (0 and -1 are off)"},
		{[]string{absent, "-p", "hi", "-n", "-2"}, "-n -2: want -1 (until the end of sequence or context), 0 (evaluate the prompt only) or a number of tokens"},
		{[]string{absent, "-p", "hi", "--threads", "0"}, "--threads 0: want 1 or more"},
		{[]string{absent, "-p", "hi", "--tokens", "1,2"}, "-p and --tokens both give the prompt; use one"},
		{[]string{absent, "-p", "hi", "-f", "-"}, "-p and -f both give the prompt; use one"},
		{[]string{absent, "-p", "hi", "-f", "-", "--tokens", "1"}, "-p, -f and --tokens all give the prompt; use one"},
		{[]string{absent, "-p", "hi", "--logits", filepath.Join(dir, "no", "l.f32")}, "--logits " + filepath.Join(dir, "no", "l.f32") + ": its directory does not exist"},
		{[]string{absent, "-p", "hi", "--logits", dir}, "--logits " + dir + ": is a directory"},
		// Refused before the work, not after it without a word of which file.
		{[]string{m, "-p", "hi", "-n", "0", "--logits", long}, "--logits " + long + ": file name too long"},
		// A flag of the other mode, chat or raw completion, was ignored.
		{[]string{absent, "-p", "hi", "--system", "Be brief."}, "--system is for --chat; raw completion would ignore it"},
		{[]string{absent, "-p", "hi", "--no-think"}, "--no-think is for --chat; raw completion would ignore it"},
		{[]string{absent, "-p", "hi", "--hide-think"}, "--hide-think is for --chat; raw completion would ignore it"},
		{[]string{absent, "--chat", "-p", "hi", "--logits", filepath.Join(dir, "l.f32")}, "--logits writes a raw completion's prompt logits; it cannot be used with --chat"},
		{[]string{absent, "--chat", "--tokens", "1,2"}, "--tokens gives raw token ids; it cannot be used with --chat"},
		// The range of --ctx is the model's.
		{[]string{m, "-p", "hi", "--ctx", "0"}, "--ctx 0: want 1 to 4096 tokens (the model's maximum context)"},
		{[]string{m, "-p", "hi", "--ctx", "-3"}, "--ctx -3: want 1 to 4096 tokens (the model's maximum context)"},
		{[]string{"perplexity", absent, "-f", "-", "--threads", "0"}, "--threads 0: want 1 or more"},
		{[]string{"perplexity", m, "-f", goText(t, 1), "--ctx", "2"}, "perplexity: --ctx 2: want 4 to 4096 tokens (the model's maximum context)"},
		{[]string{"bench", absent, "--threads", "1,0"}, `--threads: "0" is not a positive number`},
		{[]string{"bench", absent, "--reps", "0"}, "--reps 0: want 1 or more"},
		{[]string{"bench", absent, "--pp", "0"}, "--pp 0: want 1 or more"},
		{[]string{"bench", absent, "--depth", "0,-1"}, `--depth: "-1" is not a number of tokens`},
		{[]string{"bench", absent, "--fill", "zeros"}, `--fill "zeros": want prefill or random`},
		{[]string{"bench-serve", absent, "--streams", "1,x"}, `--streams: "x" is not a positive number`},
		{[]string{"bench-serve", absent, "--pp", "0"}, "--pp 0: want 1 or more"},
		{[]string{"bench-embed", absent, "--inputs", "0"}, "--inputs 0: want 1 or more"},
		{[]string{"bench-embed", absent, "--long", "1"}, "--long 1: want 2 or more"},
		{[]string{"bench-schema", absent, "--tg", "0"}, "--tg 0: want 1 or more"},
		{[]string{"bench-spec", absent, "--draft", "ngram", "--tokens", "1"}, "--tokens 1: want 2 or more"},
		{[]string{"bench", absent, "--kv-type", "f16,q4"}, `--kv-type: KV cache type "q4": want f16 or q8`},
		{[]string{m, "-p", "hi", "--kv-type", "f32"}, `--kv-type: KV cache type "f32": want f16 or q8`},
		{[]string{"perplexity", m, "-f", goText(t, 1), "--kv-type", "int8"}, `--kv-type: KV cache type "int8": want f16 or q8`},
		{[]string{"serve", m, "--kv-type", "Q8"}, `--kv-type: KV cache type "Q8": want f16 or q8`},
		{[]string{"serve", m, "--allow-origin", "example.com"}, `--allow-origin: origin "example.com": want scheme://host[:port] (a * matching any part), or * for every origin`},
	} {
		out, stderr, code := qwenrun(t, "", tc.args...)
		if want := "qwenrun: " + tc.want + "\n"; code != 1 || stderr != want || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1 and %q", tc.args, code, out, stderr, want)
		}
	}
}

// More threads than CPUs run, with a warning: they only wait for each
// other.
func TestThreadsBeyondCPUsWarns(t *testing.T) {
	m := tinyModel(t)
	n := runtime.GOMAXPROCS(0) + 1
	want := fmt.Sprintf("qwenrun: warning: --threads %d is more than the %d CPUs this process may use; the threads will wait for each other (slower, not faster)\n", n, n-1)
	_, stderr, code := qwenrun(t, "", m, "--tokens", "1", "-n", "1", "--threads", fmt.Sprint(n))
	if code != 0 || !strings.HasPrefix(stderr, want) {
		t.Errorf("exit %d, stderr %q; want exit 0 and the warning %q", code, stderr, want)
	}
	_, stderr, _ = qwenrun(t, "", m, "--tokens", "1", "-n", "1", "--threads", fmt.Sprint(n-1))
	if strings.Contains(stderr, "warning") {
		t.Errorf("--threads %d (the CPUs): %q", n-1, stderr)
	}
}

// -n 0 evaluates the prompt and prints nothing on stdout (it printed an
// empty line), unless --json asks for the object.
func TestMaxTokensZeroPrintsNothing(t *testing.T) {
	m := tinyModel(t)
	for _, args := range [][]string{{m, "-p", "Hello", "-n", "0"}, {m, "--chat", "-p", "Hello", "-n", "0"}} {
		out, stderr, code := qwenrun(t, "", args...)
		if code != 0 || out != "" || !strings.Contains(stderr, "stop: length") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 0, nothing on stdout", args, code, out, stderr)
		}
	}
	// An interactive chat too: one turn, nothing on stdout.
	if out, stderr, code := qwenrun(t, "Hello\n", m, "--chat", "-n", "0"); code != 0 || out != "" {
		t.Errorf("interactive -n 0: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if r := runJSON(t, m, "-p", "Hello", "-n", "0"); len(r.GeneratedIDs) != 0 || len(r.PromptIDs) == 0 {
		t.Errorf("-n 0 --json: %+v", r)
	}
}

// bench --depth --json: one object per measurement on stdout, nothing
// else; a depth adds its KV cache to the bytes a decode step reads.
func TestBenchDepthJSON(t *testing.T) {
	m := tinyModel(t)
	out, stderr, code := qwenrun(t, "", "bench", m, "--threads", "1", "--kernels", "auto", "--reps", "1", "--pp", "8", "--tg", "4", "--depth", "0,40", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		rows = append(rows, r)
	}
	if len(rows) != 2 || rows[0]["depth"] != 0.0 || rows[1]["depth"] != 40.0 {
		t.Fatalf("rows %v", rows)
	}
	for _, k := range []string{"prefill_tok_s", "decode_tok_s", "decode_bytes_per_token", "read_bandwidth_gbs"} {
		if v, ok := rows[1][k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v", k, rows[1][k])
		}
	}
	// tiny-a: 2 layers, 2 KV heads of 32, f16 K and V: 512 bytes a position.
	if d := rows[1]["decode_bytes_per_token"].(float64) - rows[0]["decode_bytes_per_token"].(float64); d != 40*512 {
		t.Errorf("40 positions of KV add %v bytes, want %d", d, 40*512)
	}

	// A q8 cache filled with random keys and values: per position, layer
	// and head 2 x 32 int8 and two f32 scales (288 bytes in all); 308
	// positions take two chunks of 256.
	out, stderr, code = qwenrun(t, "", "bench", m, "--threads", "1", "--kernels", "auto", "--reps", "1", "--pp", "8", "--tg", "4",
		"--depth", "300", "--kv-type", "q8", "--fill", "random", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var q map[string]any
	if err := json.Unmarshal([]byte(out), &q); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if d := q["decode_bytes_per_token"].(float64) - rows[0]["decode_bytes_per_token"].(float64); q["kv_type"] != "q8" || d != 300*288 || q["kv_bytes"] != 2*288*256.0 {
		t.Errorf("q8 row %v: want kv_type q8, %d KV bytes per token and %d in the cache", q, 300*288, 2*288*256)
	}
}

// bench-serve measures each stream count in every round and prints one
// row per count in each of its two tables, the first count's multiple 1.
func TestBenchServeTable(t *testing.T) {
	m := tinyModel(t)
	out, stderr, code := qwenrun(t, "", "bench-serve", m, "--streams", "1,2", "--pp", "4", "--tg", "8", "--reps", "2", "--kv-type", "q8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := strings.Count(stderr, "round "); n != 4 {
		t.Errorf("%d measurements on stderr, want 2 rounds x 2 counts:\n%s", n, stderr)
	}
	// The burst table has 8 columns, the back-to-back one 5.
	var burst, loop []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 8 && (f[0] == "1" || f[0] == "2"):
			burst = append(burst, line)
		case len(f) == 5 && (f[0] == "1" || f[0] == "2"):
			loop = append(loop, line)
		}
	}
	if len(burst) != 2 || strings.Fields(burst[0])[2] != "1.00" || len(loop) != 2 || strings.Fields(loop[0])[4] != "1.00" || !strings.Contains(out, "q8 KV cache") {
		t.Errorf("table:\n%s", out)
	}
	if _, stderr, code := qwenrun(t, "", "bench-serve", m, "--reps", "0"); code != 1 || !strings.Contains(stderr, "--reps 0: want 1 or more") {
		t.Errorf("--reps 0: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := qwenrun(t, "", "bench-serve", m, "--requests", "1"); code != 1 || !strings.Contains(stderr, "--requests 1: want 2 or more") {
		t.Errorf("--requests 1: exit %d, stderr %q", code, stderr)
	}
}

// TestSamplingFlagEdges: each sampling flag takes the range of the
// parameter table the Go API and both HTTP protocols take, at its edges;
// past them it is refused with the rule, before the model is opened.
func TestSamplingFlagEdges(t *testing.T) {
	m := tinyModel(t)
	for _, s := range sampling.Settings() {
		edges := map[float64]bool{s.Lo: !s.LoOpen}
		if s.Integer {
			edges[s.Lo-1] = false
		} else {
			edges[s.Lo-0.01] = false
		}
		if !math.IsInf(s.Hi, 1) && !s.Integer {
			edges[s.Hi], edges[s.Hi+0.01] = true, false
		}
		for v, ok := range edges {
			arg := strconv.FormatFloat(v, 'g', -1, 64)
			_, stderr, code := qwenrun(t, "", m, "--tokens", "1", "-n", "1", "--"+s.Flag, arg)
			if ok && code != 0 || !ok && (code != 1 || stderr != "qwenrun: --"+s.Flag+" "+arg+": "+s.Rule()+"\n") {
				t.Errorf("--%s %s: exit %d, %q; want accepted %v", s.Flag, arg, code, stderr, ok)
			}
		}
	}
}

// TestSamplingFlagsApply: every setting of the table has its flag, and
// the flags reach the chat's settings (/show), /set after them; the
// table's order applies repeat-last-n 0 after the penalties it turns off.
func TestSamplingFlagsApply(t *testing.T) {
	m := tinyModel(t)
	app := newApp()
	for _, s := range sampling.Settings() {
		if !slices.ContainsFunc(app.Flags, func(f cli.Flag) bool { return slices.Contains(f.Names(), s.Flag) }) {
			t.Errorf("setting %s: no flag --%s", s.Name, s.Flag)
		}
	}
	for _, tc := range []struct {
		flags []string
		set   string
		want  string
	}{
		{[]string{"--temp", "0.5", "--top-k", "-1", "--top-p", "0", "--min-p", "0.25", "--repeat-penalty", "1.5", "--presence-penalty", "-2",
			"--frequency-penalty", "2", "--repeat-last-n", "-1", "--seed", "3"}, "/set min-p 0.5",
			"temp 0.5, top-k 0, top-p 0, min-p 0.5, repeat-penalty 1.5, presence-penalty -2, frequency-penalty 2, repeat-last-n -1, seed 3"},
		{[]string{"--repeat-last-n", "0", "--repeat-penalty", "1.5", "--frequency-penalty", "1", "--seed", "3"}, "/set repeat-last-n 32",
			"repeat-penalty 1, presence-penalty 0, frequency-penalty 0, repeat-last-n 32, seed 3"},
	} {
		_, stderr, code := qwenrun(t, tc.set+"\n/show\n", append([]string{m, "--chat"}, tc.flags...)...)
		if code != 0 || !strings.Contains(stderr, "sampling  ") || !strings.Contains(stderr, tc.want+"\n") {
			t.Errorf("%q then %s: exit %d, %q; want the settings %q", tc.flags, tc.set, code, stderr, tc.want)
		}
	}
	// repeat-last-n 0, from the flags or /set, keeps the penalties off: a
	// penalty /set later is refused, saying so, until a window is set
	// (a Params' window 0 is the default 64, which would turn them on).
	off := "repeat-penalty 1, presence-penalty 0, frequency-penalty 0, repeat-last-n 0, seed 3\n"
	for _, tc := range []struct {
		flags       []string
		input, want string
	}{
		{[]string{"--repeat-last-n", "0"}, "/set repeat-penalty 1.3\n/show\n", off},
		{nil, "/set repeat-last-n 0\n/set presence-penalty 1\n/show\n", off},
		{nil, "/set repeat-last-n 0\n/set repeat-last-n 16\n/set repeat-penalty 1.3\n/show\n",
			"repeat-penalty 1.3, presence-penalty 0, frequency-penalty 0, repeat-last-n 16, seed 3\n"},
	} {
		_, stderr, code := qwenrun(t, tc.input, append([]string{m, "--chat", "--seed", "3"}, tc.flags...)...)
		refused := strings.Contains(stderr, "the penalties are off (repeat-last-n 0); /set repeat-last-n N to turn them on first")
		if code != 0 || !strings.Contains(stderr, tc.want) || refused != (tc.want == off) {
			t.Errorf("%q, %q: exit %d, %q; want the settings %q", tc.flags, tc.input, code, stderr, tc.want)
		}
	}
}

// TestKernelsEnv: where --kernels is absent $QWEN_KERNELS chooses the
// path, which the command reads and passes on (the packages read no
// environment); an error names where the bad name came from, and
// --kernels wins over the variable.
func TestKernelsEnv(t *testing.T) {
	m := tinyModel(t)
	t.Setenv(modelflags.KernelsEnv, "sse9")
	for _, args := range [][]string{{m, "-p", "hi", "-n", "1"}, {"serve", m}, {"perplexity", m, "-f", m}} {
		_, stderr, code := qwenrun(t, "", args...)
		if want := `qwenrun: $QWEN_KERNELS: kernels: unknown path "sse9"`; code != 1 || !strings.HasPrefix(stderr, want) {
			t.Errorf("$%s=sse9 %q: exit %d, stderr %q; want %q", modelflags.KernelsEnv, args, code, stderr, want)
		}
	}
	if _, stderr, code := qwenrun(t, "", m, "-p", "hi", "-n", "1", "--kernels", "sse8"); code != 1 || !strings.HasPrefix(stderr, `qwenrun: --kernels: kernels: unknown path "sse8"`) {
		t.Errorf("--kernels sse8: exit %d, stderr %q", code, stderr)
	}
	if out, stderr, code := qwenrun(t, "", m, "-p", "hi", "-n", "1", "--kernels", "generic"); code != 0 || out == "" {
		t.Errorf("$%s=sse9 --kernels generic: exit %d, stdout %q, stderr %q", modelflags.KernelsEnv, code, out, stderr)
	}
}

// TestBenchKernels: bench measures what a user gets, this CPU's path
// (kernels.Detect) or $QWEN_KERNELS's, unless --kernels all asks for
// every path this CPU runs, the portable one too.
func TestBenchKernels(t *testing.T) {
	m := tinyModel(t)
	var all []string
	for _, p := range kernels.SupportedPaths() {
		all = append(all, p.String())
	}
	for _, tc := range []struct {
		env   string
		flags []string
		want  []string
	}{
		{"", nil, []string{kernels.Detect().String()}},
		{"generic", nil, []string{"generic"}},
		{"generic", []string{"--kernels", "all"}, all},
	} {
		t.Setenv(modelflags.KernelsEnv, tc.env)
		args := append([]string{"bench", m, "--threads", "1", "--reps", "1", "--pp", "4", "--tg", "2", "--json"}, tc.flags...)
		out, stderr, code := qwenrun(t, "", args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, stderr)
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var r struct{ Kernels string }
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			got = append(got, r.Kernels)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("$%s=%q %q: rows of the paths %q, want %q", modelflags.KernelsEnv, tc.env, tc.flags, got, tc.want)
		}
	}
}
