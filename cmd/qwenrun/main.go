package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"

	"github.com/qwenc/qwenc/cmd/internal/modelflags"
	"github.com/qwenc/qwenc/internal/cliutil"
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
	for _, c := range []*cli.Command{benchCommand(), benchServeCommand(), benchSchemaCommand(), perplexityCommand(), serveCommand(), embedCommand(), rerankCommand(), benchEmbedCommand(), benchDraftCommand(), benchSpecCommand(), benchAgentCommand(), healthCommand()} {
		if c.Name == args[1] {
			// Without the hook the flag library prints the whole help on
			// stdout, where it passes for output, and no pointer to it.
			c.OnUsageError = cliutil.OnUsageError
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
		&cli.BoolFlag{Name: "no-think", Usage: "Qwen3, Qwen3.5: answer without thinking (the template's empty think block)"},
		&cli.StringFlag{Name: "json-schema", Usage: "hold the answer to the JSON Schema in `PATH` (with thinking, the answer after it)"},
		&cli.BoolFlag{Name: "json-object", Usage: "hold the answer to a JSON object"},
		&cli.BoolFlag{Name: "hide-think", Usage: "do not show the thinking text"},
		&cli.BoolFlag{Name: "verbose", Usage: "with --chat: the statistics after every reply, and at the end on a terminal"},
		&cli.StringFlag{Name: "tokens", Usage: "the prompt as comma-separated token ids (no tokenizer)"},
		&cli.StringFlag{Name: "logits", Usage: "write the last prompt position's logits to `PATH` (little-endian float32)"},
		&cli.BoolFlag{Name: "json", Usage: "print one JSON object at the end instead of streaming (interactive --chat: one per turn)"},
		&cli.BoolFlag{Name: "verify", Usage: "recompute every section's checksum before running (reads the whole file)"},
		&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the run to `PATH` (for development)"},
		modelflags.InsecureFlag(),
		cliutil.VersionFlag(),
	}, append(draftFlags(), logFlags()...)...)
}

// draftFlags are the drafts of speculative decoding, for the default
// action and serve.
func draftFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "draft", Usage: "draft tokens to check in each decode step: ngram (from the prompt and the text so far), " +
			"mtp (the model's own multi-token-prediction head, Qwen3.5's), a draft model's FILE.qbin (same vocabulary, smaller: its greedy guesses), " +
			"or several: ngram,mtp; none: no drafts. The text stays the same. Without it, a model's MTP block drafts where it pays (qwenc inspect shows its cost)"},
		&cli.IntFlag{Name: "draft-max", Usage: "the most tokens drafted for one step (the text's back off when they miss)", DefaultText: "16 from the text, 2 from the MTP head, 8 from a draft model"},
		&cli.IntFlag{Name: "draft-min", Value: 1, Usage: "the fewest tokens worth drafting"},
		&cli.Float64Flag{Name: "draft-p-min", Value: qwen.DefaultDraftPMin, Usage: "a draft model stops guessing at a token it gives a lower probability"},
	}
}

// logFlags are --log-level and --log-format, which every command that
// runs the engine takes: its records, and a server's, go to stderr;
// stdout keeps the model's output alone.
func logFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "log records of `LEVEL` and above to stderr: debug (request bodies too), info, warn or error"},
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "write the log records as `FORMAT`: text (key=value) or json, one a line"},
	}
}

// kvTypeFlag is --kv-type, which every command that runs the model takes.
func kvTypeFlag() cli.Flag {
	return &cli.StringFlag{Name: "kv-type", Value: "f16", Usage: "KV cache type: f16, or q8 (int8 with a scale per position and head: half the memory)"}
}

// threadsFlag and kernelsFlag are every model-running command's.
func threadsFlag() cli.Flag {
	return &cli.IntFlag{Name: "threads", Aliases: []string{"t"}, Usage: "worker threads",
		DefaultText: fmt.Sprintf("%d, the CPUs this process may use", runtime.GOMAXPROCS(0))}
}

func kernelsFlag() cli.Flag {
	return &cli.StringFlag{Name: "kernels", Usage: "kernel path: auto, generic, avx2, avxvnni, avx512, avx512vnni", DefaultText: "$" + modelflags.KernelsEnv + ", or auto"}
}
