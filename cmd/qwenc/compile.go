package main

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/qwenc/qwenc/compiler"
	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/wtype"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/runtime/infer"
	"github.com/qwenc/qwenc/runtime/perplexity"
	"github.com/urfave/cli/v2"
)

func compileCommand() *cli.Command {
	return &cli.Command{
		Name:      "compile",
		Usage:     "compile a Hugging Face checkpoint (directory, .safetensors or .safetensors.index.json), a GGUF file, or ollama:NAME[:TAG]",
		ArgsUsage: "MODEL",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "o", Aliases: []string{"output"}, Usage: "output `FILE`", DefaultText: "the model directory's or GGUF file's name + .qbin, in the current directory"},
			&cli.StringFlag{Name: "type", Usage: "weight type: f16, q8 (8.5 bits per weight) or q4 (4.625 bits, with the LM head and some value and down projections at q6, an untied embedding at q8)",
				DefaultText: "f16; for a GGUF, each matrix the closest type to its own"},
			&cli.IntFlag{Name: "max-prefill", Value: 512, Usage: "tokens per prefill step; sizes the prefill arena"},
			&cli.StringFlag{Name: "rope-scaling", Usage: "RoPE scaling over config.json's: `SPEC` none, linear:FACTOR or yarn:FACTOR[:ORIGINAL_CONTEXT] (Qwen3's model cards: yarn:4:32768)"},
			&cli.BoolFlag{Name: "no-kl", Usage: "for a GGUF whose weights are quantized again, skip measuring the KL divergence this adds"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress, summary or KL divergence on stderr (notes of what was left out, and errors, still print)"},
			&cli.BoolFlag{Name: "no-sync", Usage: "skip the fsync before the final rename (faster; not crash-safe)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cliutil.Usagef(c, "compile: want one MODEL argument, got %d", c.NArg())
			}
			var wt format.DType
			if c.IsSet("type") {
				var err error
				if wt, err = weightType(c.String("type")); err != nil {
					return err
				}
			}
			model := c.Args().First()
			if err := checkNotInput(model, c.String("o")); err != nil {
				return err
			}
			opts := compiler.Options{Output: c.String("o"), MaxPrefill: c.Int("max-prefill"), NoSync: c.Bool("no-sync"), Type: wt, RopeScaling: c.String("rope-scaling")}
			if strings.HasPrefix(model, compiler.OllamaPrefix) {
				store, err := ollamaStore()
				if err != nil {
					return err
				}
				opts.OllamaModels = store
			}
			quiet := c.Bool("quiet")
			if !quiet {
				opts.Progress = os.Stderr
			}
			res, err := compiler.Compile(c.Context, model, opts)
			if err != nil {
				return err
			}
			for _, n := range res.Notes {
				fmt.Fprintf(os.Stderr, "qwenc: note: %s\n", n)
			}
			if quiet {
				return nil
			}
			fmt.Fprintf(os.Stderr, "wrote %s (%d bytes)\n", res.Output, res.Bytes)
			if printConversions(os.Stderr, res.Converted) && !c.Bool("no-kl") {
				if err := measureKL(c.Context, os.Stderr, model, res, opts); err != nil {
					if c.Context.Err() != nil {
						// main says of an interrupt that nothing was
						// written, which here is wrong: the file is whole.
						fmt.Fprintf(os.Stderr, "qwenc: interrupted measuring the KL divergence; %s is written\n", res.Output)
						return context.Cause(c.Context)
					}
					// The compiled file is written and good: only the
					// measure of it is missing, which is said.
					fmt.Fprintf(os.Stderr, "qwenc: note: the KL divergence is not measured: %v (--no-kl skips it)\n", err)
				}
			}
			return nil
		},
	}
}

// checkNotInput refuses an output that names a file the compile reads:
// the finished .qbin is renamed over it, and a typo in -o would replace a
// downloaded checkpoint or GGUF with no word. The compile reads MODEL, or
// the .safetensors, .json and .gguf files beside it (shards, split
// parts, the tokenizer and config).
func checkNotInput(model, output string) error {
	if output == "" || strings.HasPrefix(model, compiler.OllamaPrefix) {
		return nil
	}
	out, err := os.Stat(output)
	if err != nil {
		return nil // a new file, or an error the compile reports
	}
	in, err := os.Stat(model)
	if err != nil {
		return nil
	}
	if os.SameFile(in, out) {
		return fmt.Errorf("-o %s is MODEL itself: the compile would replace its own input", output)
	}
	dir := model
	if !in.IsDir() {
		dir = filepath.Dir(model)
	}
	srcDir, err1 := os.Stat(dir)
	outDir, err2 := os.Stat(filepath.Dir(output))
	if err1 != nil || err2 != nil || !os.SameFile(srcDir, outDir) {
		return nil
	}
	switch filepath.Ext(output) {
	case ".safetensors", ".json", ".gguf":
		return fmt.Errorf("-o %s is a file of the checkpoint MODEL: the compile would replace its own input", output)
	}
	return nil
}

// weightType parses --type.
func weightType(s string) (format.DType, error) {
	if t, ok := wtype.Parse(s); ok && t.FileType() {
		return format.DType(t), nil
	}
	return 0, fmt.Errorf("compile: unknown --type %q (want %s)", s, wtype.FileTypeNames())
}

// ollamaStore is Ollama's store directory: $OLLAMA_MODELS, as Ollama
// reads it, else ~/.ollama/models.
func ollamaStore() (string, error) {
	if d := os.Getenv("OLLAMA_MODELS"); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("Ollama's store: no OLLAMA_MODELS and no home directory: %w", err)
	}
	return filepath.Join(home, ".ollama", "models"), nil
}

// printConversions says how a GGUF's matrices carried over: those kept
// exactly, by their types, and those converted with the largest change
// of a weight. It reports whether any was quantized again.
func printConversions(w io.Writer, cs []compiler.Conversion) (requantized bool) {
	if len(cs) == 0 {
		return false
	}
	exact, changed := map[string]int{}, map[string]int{}
	var worst *compiler.Conversion
	for i := range cs {
		c := &cs[i]
		pair := fmt.Sprintf("%s to %s", c.From, c.To)
		if c.Exact {
			exact[pair]++
			continue
		}
		changed[pair]++
		requantized = requantized || c.To.Quantized()
		if worst == nil || c.MaxAbsErr > worst.MaxAbsErr {
			worst = c
		}
	}
	list := func(m map[string]int) string {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
		}
		return strings.Join(parts, ", ")
	}
	if len(exact) > 0 {
		fmt.Fprintf(w, "GGUF weights kept exactly: %s\n", list(exact))
	}
	if worst != nil {
		fmt.Fprintf(w, "GGUF weights converted: %s; largest change of a weight %.3g (%s, from %s)\n", list(changed), worst.MaxAbsErr, worst.Section, worst.Tensor)
	}
	said := map[string]bool{}
	for _, pair := range slices.Sorted(maps.Keys(changed)) {
		if from, to, _ := strings.Cut(pair, " to "); to != "q8" && !said[from] && slices.Contains([]string{"q8_0", "q4_0", "q5_0", "iq4_nl"}, from) {
			said[from] = true
			fmt.Fprintf(w, "(%s is kept exactly by --type q8: its blocks are q8's, at 8.5 bits a weight)\n", from)
		}
	}
	return requantized
}

// klText is the short text the KL divergence is measured on.
//
//go:embed kltext.txt
var klText string

// measureKL compiles the same GGUF with its weights as ggml decodes them
// (f16), next to the output, and prints the KL divergence of the
// compiled file's logits from that reference's over klText, then
// removes the reference.
func measureKL(ctx context.Context, w io.Writer, model string, res *compiler.Result, opts compiler.Options) error {
	ref := filepath.Join(filepath.Dir(res.Output), "."+filepath.Base(res.Output)+".f16-reference")
	defer os.Remove(ref)
	opts.Output, opts.Type, opts.Progress, opts.NoSync = ref, format.F16, nil, true
	fmt.Fprintf(w, "measuring the KL divergence from the GGUF's own weights (in f16, %s) on a short text...\n", refSize(res.Header))
	if _, err := compiler.Compile(ctx, model, opts); err != nil {
		return fmt.Errorf("its f16 reference: %w", err)
	}
	r, tokens, err := perplexity.Measure(ctx, res.Output, ref, klText, infer.Options{}, perplexity.Options{Ctx: 128})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "KL divergence from the GGUF's own weights: %.5f ± %.5f over %d of %d tokens, top-1 agreement %.1f%%\n",
		*r.KLMean, *r.KLStderr, r.TokensScored, tokens, 100**r.Top1Agree)
	return nil
}

// refSize says how large the f16 reference is.
func refSize(h *format.Header) string {
	var n uint64
	for _, s := range h.Sections {
		if s.Kind.Matrix() {
			e := uint64(1)
			for _, d := range s.Shape {
				e *= d
			}
			n += 2 * e
		}
	}
	if n >= 1e9 {
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	}
	return fmt.Sprintf("%.0f MB", float64(n)/1e6)
}
