package main

import (
	"cmp"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/kernels"
	"github.com/qwenc/qwenc/qwen"
	"github.com/urfave/cli/v2"
)

// version is set at link time: go build -ldflags "-X main.version=v1.2.3".
// Empty, --version gives the module's version.
var version string

func main() {
	app := newApp()
	// The first argument decides whose flags are reordered: a subcommand's
	// or the default action's.
	head, rest, flags, cmd := os.Args[:1], os.Args[1:], app.Flags, app.Name
	if sub := subcommand(os.Args); sub != nil {
		app.Commands = []*cli.Command{sub}
		head, rest, flags, cmd = os.Args[:2], os.Args[2:], sub.Flags, app.Name+" "+sub.Name
	}
	args, err := cliutil.FlagsFirst(rest, flags)
	if err != nil {
		err = &cliutil.UsageError{Cmd: cmd, Err: err}
	} else {
		err = app.Run(append(slices.Clone(head), args...))
	}
	os.Exit(cliutil.ExitStatus(os.Stderr, "qwenrun", err))
}

// subcommand returns the subcommand args name, if any. The default
// action takes the model as its first argument, so the subcommands are
// added only when one is named.
func subcommand(args []string) *cli.Command {
	if len(args) < 2 {
		return nil
	}
	for _, c := range []*cli.Command{benchCommand(), benchServeCommand(), benchSchemaCommand(), perplexityCommand(), serveCommand(), embedCommand(), rerankCommand(), benchEmbedCommand(), benchDraftCommand(), benchSpecCommand(), healthCommand()} {
		if c.Name == args[1] {
			return c
		}
	}
	return nil
}

func newApp() *cli.App {
	return &cli.App{
		Name:            "qwenrun",
		Usage:           "run a compiled Qwen model (.qbin); qwenrun bench MODEL.qbin measures its speed, qwenrun perplexity MODEL.qbin -f TEXT its perplexity, qwenrun serve MODEL.qbin answers OpenAI, Ollama and Anthropic clients over HTTP, qwenrun embed and qwenrun rerank score texts with an embedding model or a reranker. MODEL may be oci://REGISTRY/REPO:TAG (or @sha256:DIGEST), pulled into the cache on first use",
		ArgsUsage:       "MODEL.qbin",
		HideHelpCommand: true,
		Flags:           flags(),
		Action:          run,
		OnUsageError:    cliutil.OnUsageError,
		ExitErrHandler:  func(*cli.Context, error) {}, // main prints the error
	}
}

// flags are the default action's. A default that depends on the model or
// the machine is given as DefaultText: the flag library would print the
// zero Value as the default.
func flags() []cli.Flag {
	const model = "the model's generation_config"
	return append([]cli.Flag{
		&cli.StringFlag{Name: "prompt", Aliases: []string{"p"}, Usage: "prompt `TEXT` (raw completion; with --chat, one user message)"},
		&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "read the prompt from `PATH` (- for stdin)"},
		&cli.IntFlag{Name: "max-tokens", Aliases: []string{"n"}, Value: -1, Usage: "tokens to generate (-1: until end of sequence or context; 0: only evaluate the prompt)"},
		&cli.Float64Flag{Name: "temp", Usage: "temperature (0: greedy)", DefaultText: model},
		&cli.IntFlag{Name: "top-k", Usage: "keep the K most likely tokens (0 and -1: off)", DefaultText: model},
		&cli.Float64Flag{Name: "top-p", Usage: "nucleus sampling threshold, in [0, 1] (1: off, 0: the most likely token only)", DefaultText: model},
		&cli.Float64Flag{Name: "min-p", Usage: "drop tokens below min-p x the best probability, in [0, 1] (0: off)", DefaultText: model},
		&cli.Float64Flag{Name: "repeat-penalty", Usage: "penalise the tokens of the last --repeat-last-n (1: off)", DefaultText: model},
		&cli.Float64Flag{Name: "presence-penalty", Usage: "subtract from tokens present in the last --repeat-last-n, in [-2, 2] (0: off)", DefaultText: model},
		&cli.Float64Flag{Name: "frequency-penalty", Usage: "subtract this times their count from tokens in the last --repeat-last-n, in [-2, 2] (0: off)", DefaultText: model},
		&cli.IntFlag{Name: "repeat-last-n", Usage: "the tokens the penalties look back on (-1: the whole context, 0: penalties off)", DefaultText: "64"},
		&cli.Uint64Flag{Name: "seed", Usage: "random seed for sampling", DefaultText: "random"},
		&cli.IntFlag{Name: "ctx", Usage: "context length in tokens", DefaultText: "the model's maximum, lowered to what memory holds"},
		kvTypeFlag(),
		threadsFlag(),
		kernelsFlag(),
		&cli.BoolFlag{Name: "chat", Aliases: []string{"i"}, Usage: "chat: interactive, or one answer with -p"},
		&cli.StringFlag{Name: "system", Usage: "system message for --chat"},
		&cli.BoolFlag{Name: "no-think", Usage: "Qwen3: answer without a thinking block"},
		&cli.StringFlag{Name: "json-schema", Usage: "hold the answer to the JSON Schema in `PATH` (with thinking, the answer after it)"},
		&cli.BoolFlag{Name: "json-object", Usage: "hold the answer to a JSON object"},
		&cli.BoolFlag{Name: "hide-think", Usage: "do not show the thinking text"},
		&cli.BoolFlag{Name: "verbose", Usage: "with --chat: the statistics after every reply, and at the end on a terminal"},
		&cli.StringFlag{Name: "tokens", Usage: "the prompt as comma-separated token ids (no tokenizer)"},
		&cli.StringFlag{Name: "logits", Usage: "write the last prompt position's logits to `PATH` (little-endian float32)"},
		&cli.BoolFlag{Name: "json", Usage: "print one JSON object at the end instead of streaming (interactive --chat: one per turn)"},
		&cli.BoolFlag{Name: "verify", Usage: "recompute every section's checksum before running (reads the whole file)"},
		&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the run to `PATH` (for development)"},
		insecureFlag(),
		cliutil.VersionFlag(),
	}, append(draftFlags(), logFlags()...)...)
}

// draftFlags are the drafts of speculative decoding, for the default
// action and serve.
func draftFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "draft", Usage: "draft tokens to check in each decode step: ngram (from the prompt and the text so far), " +
			"a draft model's FILE.qbin (same vocabulary, smaller: its greedy guesses), or both: ngram,FILE.qbin. The text stays the same"},
		&cli.IntFlag{Name: "draft-max", Usage: "the most tokens drafted for one step (the text's back off when they miss)", DefaultText: "16 from the text, 8 from a draft model"},
		&cli.IntFlag{Name: "draft-min", Value: 1, Usage: "the fewest tokens worth drafting"},
		&cli.Float64Flag{Name: "draft-p-min", Value: qwen.DefaultDraftPMin, Usage: "a draft model stops guessing at a token it gives a lower probability"},
	}
}

// drafting is what --draft and its flags ask of every request.
type drafting struct {
	text, model, min int // Request's Draft, DraftModel and DraftMin
	pMin             float64
	path             string // the draft model's file, or ""
}

func (d drafting) apply(r *qwen.Request) {
	r.Draft, r.DraftModel, r.DraftMin, r.DraftPMin = d.text, d.model, d.min, d.pMin
}

// options opens the draft model with the model.
func (d drafting) options() []qwen.Option {
	if d.path == "" {
		return nil
	}
	return []qwen.Option{qwen.WithDraftModel(d.path)}
}

// draftFlagValues reads --draft and its flags.
func draftFlagValues(c *cli.Context) (drafting, error) {
	var d drafting
	if c.String("draft") == "" {
		for _, f := range []string{"draft-max", "draft-min", "draft-p-min"} {
			if c.IsSet(f) {
				return d, fmt.Errorf("--%s needs --draft ngram or --draft FILE.qbin", f)
			}
		}
		return d, nil
	}
	n, m, p := c.Int("draft-max"), c.Int("draft-min"), c.Float64("draft-p-min")
	switch {
	case c.IsSet("draft-max") && n < 1:
		return d, fmt.Errorf("--draft-max %d: want 1 or more", n)
	case m < 1 || (n > 0 && m > n):
		return d, fmt.Errorf("--draft-min %d: want 1 to --draft-max (%d)", m, n)
	case p < 0 || p >= 1:
		return d, fmt.Errorf("--draft-p-min %g: want 0 to less than 1", p)
	}
	kinds := strings.Split(c.String("draft"), ",")
	d.min, d.pMin = m, p
	if p == 0 {
		d.pMin = -1 // qwen's 0 is its default: here 0 means every guess
	}
	for _, k := range kinds {
		switch {
		case k == "ngram" && d.text > 0, k != "ngram" && d.path != "":
			return d, fmt.Errorf("--draft %q: ngram and one draft model at most", c.String("draft"))
		case k == "ngram":
			d.text = cmp.Or(n, qwen.DefaultDraft)
			continue
		}
		if _, err := os.Stat(k); err != nil {
			return d, fmt.Errorf("--draft %q: want ngram or a draft model's .qbin file: %w", k, err)
		}
		d.path, d.model = k, cmp.Or(n, qwen.DefaultDraftModel)
	}
	if m > max(d.text, d.model) {
		return d, fmt.Errorf("--draft-min %d: want 1 to --draft-max (%d)", m, max(d.text, d.model))
	}
	return d, nil
}

// kernelsEnv names the environment variable that forces a kernel path
// ("generic", "avx2", "avx512", "avx512vnni") where --kernels is absent;
// empty or "auto" is the fastest. The packages below read no environment:
// the command reads it and passes the path on.
const kernelsEnv = "QWEN_KERNELS"

// kernelsName is --kernels, or else $QWEN_KERNELS, and where it came
// from, for the errors.
func kernelsName(c *cli.Context) (name, from string) {
	if c.IsSet("kernels") {
		return c.String("kernels"), "--kernels"
	}
	return os.Getenv(kernelsEnv), "$" + kernelsEnv
}

// kernelPath reads --kernels, or else $QWEN_KERNELS.
func kernelPath(c *cli.Context) (kernels.Path, error) {
	name, from := kernelsName(c)
	p, err := kernels.ParsePath(name)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", from, err)
	}
	return p, nil
}

// kvTypeFlag is --kv-type, which every command that runs the model takes.
func kvTypeFlag() cli.Flag {
	return &cli.StringFlag{Name: "kv-type", Value: "f16", Usage: "KV cache type: f16, or q8 (int8 with a scale per position and head: half the memory)"}
}

// kvType reads --kv-type.
func kvType(c *cli.Context) (format.KVType, error) {
	t, err := format.ParseKVType(c.String("kv-type"))
	if err != nil {
		return 0, fmt.Errorf("--kv-type: %w", err)
	}
	return t, nil
}

// threadsFlag and kernelsFlag are every model-running command's.
func threadsFlag() cli.Flag {
	return &cli.IntFlag{Name: "threads", Aliases: []string{"t"}, Usage: "worker threads",
		DefaultText: fmt.Sprintf("%d, the CPUs this process may use", runtime.GOMAXPROCS(0))}
}

func kernelsFlag() cli.Flag {
	return &cli.StringFlag{Name: "kernels", Usage: "kernel path: auto, generic, avx2, avx512, avx512vnni", DefaultText: "$" + kernelsEnv + ", or auto"}
}
