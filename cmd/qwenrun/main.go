// Command qwenrun runs a compiled .qbin model: raw text completion, a chat
// conversation in the terminal, or a scriptable one-shot answer.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"

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
	for _, c := range []*cli.Command{benchCommand(), benchServeCommand(), benchSchemaCommand(), perplexityCommand(), serveCommand(), embedCommand(), rerankCommand(), benchEmbedCommand(), benchDraftCommand()} {
		if c.Name == args[1] {
			return c
		}
	}
	return nil
}

func newApp() *cli.App {
	return &cli.App{
		Name:            "qwenrun",
		Usage:           "run a compiled Qwen model (.qbin); qwenrun bench MODEL.qbin measures its speed, qwenrun perplexity MODEL.qbin -f TEXT its perplexity, qwenrun serve MODEL.qbin answers OpenAI and Ollama clients over HTTP, qwenrun embed and qwenrun rerank score texts with an embedding model or a reranker",
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
	return []cli.Flag{
		&cli.StringFlag{Name: "prompt", Aliases: []string{"p"}, Usage: "prompt `TEXT` (raw completion; with --chat, one user message)"},
		&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "read the prompt from `PATH` (- for stdin)"},
		&cli.IntFlag{Name: "max-tokens", Aliases: []string{"n"}, Value: -1, Usage: "tokens to generate (-1: until end of sequence or context; 0: only evaluate the prompt)"},
		&cli.Float64Flag{Name: "temp", Usage: "temperature (0: greedy)", DefaultText: model},
		&cli.IntFlag{Name: "top-k", Usage: "keep the K most likely tokens (0 and -1: off)", DefaultText: model},
		&cli.Float64Flag{Name: "top-p", Usage: "nucleus sampling threshold, in [0, 1] (1: off, 0: the most likely token only)", DefaultText: model},
		&cli.Float64Flag{Name: "min-p", Usage: "drop tokens below min-p x the best probability, in [0, 1] (0: off)", DefaultText: model},
		&cli.Float64Flag{Name: "repeat-penalty", Usage: "penalise the last 64 tokens (1: off)", DefaultText: model},
		&cli.Float64Flag{Name: "presence-penalty", Usage: "subtract from tokens present in the last 64, in [-2, 2] (0: off)", DefaultText: model},
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
		draftFlag(), draftMaxFlag(), draftMinFlag(),
		&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the run to `PATH` (for development)"},
		cliutil.VersionFlag(),
	}
}

// draftFlag, draftMaxFlag and draftMinFlag are the drafts of
// speculative decoding, for the default action and serve.
func draftFlag() cli.Flag {
	return &cli.StringFlag{Name: "draft", Usage: "draft tokens to check in each decode step: ngram (from the prompt and the text so far); the text stays the same"}
}

func draftMaxFlag() cli.Flag {
	return &cli.IntFlag{Name: "draft-max", Value: qwen.DefaultDraft, Usage: "the most tokens drafted for one step (the length backs off when drafts miss)"}
}

func draftMinFlag() cli.Flag {
	return &cli.IntFlag{Name: "draft-min", Value: 1, Usage: "the fewest tokens worth drafting"}
}

// draftLimits reads --draft, --draft-max and --draft-min: the Draft and
// DraftMin of a request, 0 and 0 without --draft.
func draftLimits(c *cli.Context) (int, int, error) {
	switch d := c.String("draft"); {
	case d == "":
		if c.IsSet("draft-max") || c.IsSet("draft-min") {
			return 0, 0, errors.New("--draft-max and --draft-min need --draft ngram")
		}
		return 0, 0, nil
	case d != "ngram":
		return 0, 0, fmt.Errorf("--draft %q: want ngram (a draft model is not supported yet)", d)
	case c.Int("draft-max") < 1:
		return 0, 0, fmt.Errorf("--draft-max %d: want 1 or more", c.Int("draft-max"))
	case c.Int("draft-min") < 1 || c.Int("draft-min") > c.Int("draft-max"):
		return 0, 0, fmt.Errorf("--draft-min %d: want 1 to --draft-max (%d)", c.Int("draft-min"), c.Int("draft-max"))
	}
	return c.Int("draft-max"), c.Int("draft-min"), nil
}

// kernelPath reads --kernels, or else $QWEN_KERNELS.
func kernelPath(c *cli.Context) (kernels.Path, error) {
	if c.IsSet("kernels") {
		return kernels.ParsePath(c.String("kernels"))
	}
	return kernels.FromEnv()
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
	return &cli.StringFlag{Name: "kernels", Usage: "kernel path: auto, generic, avx2, avx512, avx512vnni", DefaultText: "$" + kernels.EnvVar + ", or auto"}
}
