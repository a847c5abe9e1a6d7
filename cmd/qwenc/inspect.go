package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/urfave/cli/v2"
)

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "print a .qbin file's config, sections and memory report",
		ArgsUsage: "FILE",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object"},
			&cli.StringFlag{Name: "seq", Value: "5,8,300,1024,32768", Usage: "sequence lengths for the KV cache table"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cliutil.Usagef(c, "inspect: want one FILE argument, got %d", c.NArg())
			}
			seqs, err := parseSeqs(c.String("seq"))
			if err != nil {
				return err
			}
			h, err := readHeader(c.Args().First())
			if err != nil {
				return err
			}
			rep := format.Report(h, seqs)
			if c.Bool("json") {
				return printJSON(os.Stdout, h, rep)
			}
			printText(os.Stdout, h, rep)
			return nil
		},
	}
}

// readHeader validates a file's header and directory without mapping it.
func readHeader(path string) (*format.Header, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	h, err := format.ReadHeader(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

func parseSeqs(s string) ([]int, error) {
	var seqs []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--seq: %q is not a positive length", f)
		}
		seqs = append(seqs, n)
	}
	return seqs, nil
}

type jsonSection struct {
	Name   string   `json:"name"`
	DType  string   `json:"dtype"`
	Layout string   `json:"layout"`
	Shape  []uint64 `json:"shape"`
	Offset uint64   `json:"offset"`
	Size   uint64   `json:"size"`
	CRC32C string   `json:"crc32c"`
}

func printJSON(w io.Writer, h *format.Header, rep format.MemoryReport) error {
	c := h.Config
	secs := make([]jsonSection, 0, len(h.Sections))
	for _, s := range h.Sections {
		secs = append(secs, jsonSection{s.Name, s.DType.String(), s.Layout.String(), s.Shape, s.Offset, s.Size, fmt.Sprintf("%08x", s.CRC)})
	}
	out := map[string]any{
		"format_version": format.Version,
		"config": map[string]any{
			"model_type": c.ModelType, "hidden_size": c.Hidden, "intermediate_size": c.Intermediate,
			"num_hidden_layers": c.Layers, "num_attention_heads": c.Heads, "num_key_value_heads": c.KVHeads,
			"head_dim": c.HeadDim, "vocab_size": c.Vocab, "tie_word_embeddings": c.TieEmbeddings,
			"max_position_embeddings": c.MaxPositions, "rope_theta": c.RopeTheta, "rms_norm_eps": c.RMSNormEps,
			"qk_norm": c.QKNorm, "qkv_bias": c.QKVBias,
		},
		"generation":  h.Generation,
		"chat_family": h.ChatFamily,
		"sections":    secs,
		"memory":      rep,
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// size prints bytes exactly and in both decimal and binary units, each
// labelled, because the design note mixes "MB" for both.
func size(n uint64) string {
	return fmt.Sprintf("%d B\t%.2f MB\t%.2f MiB", n, float64(n)/1e6, float64(n)/(1<<20))
}

func printText(w io.Writer, h *format.Header, rep format.MemoryReport) {
	c := h.Config
	tie := "untied head"
	if c.TieEmbeddings {
		tie = "tied head"
	}
	fmt.Fprintf(w, "model: %s, hidden %d, FFN %d, %d layers, %d heads x %d, %d KV heads, vocab %d, %s\n",
		c.ModelType, c.Hidden, c.Intermediate, c.Layers, c.Heads, c.HeadDim, c.KVHeads, c.Vocab, tie)
	fmt.Fprintf(w, "       rope_theta %g, rms_norm_eps %g, max positions %d, q/k norm %v, q/k/v bias %v\n",
		c.RopeTheta, c.RMSNormEps, c.MaxPositions, c.QKNorm, c.QKVBias)
	g := h.Generation
	fmt.Fprintf(w, "generation: eos %v, temperature %g, top_k %d, top_p %g, min_p %g, repetition_penalty %g\n",
		g.EOS, g.Temperature, g.TopK, g.TopP, g.MinP, g.RepetitionPenalty)
	fmt.Fprintf(w, "chat template: %s\n\n", orNone(h.ChatFamily))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "section\tdtype\tlayout\tshape\toffset\tsize\t\n")
	for _, s := range h.Sections {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%d\t%d\t\n", s.Name, s.DType, s.Layout, s.Shape, s.Offset, s.Size)
	}
	tw.Flush()

	fmt.Fprintf(w, "\nMemory (1 MB = 10^6 bytes, 1 MiB = 2^20 bytes)\n\nWeights\n")
	if len(rep.MatrixBytesByDType) > 1 || rep.MatrixBytesByDType["f16"] == 0 {
		var parts []string
		for _, d := range []format.DType{format.F16, format.Q8, format.Q4} {
			if b, ok := rep.MatrixBytesByDType[d.String()]; ok {
				parts = append(parts, fmt.Sprintf("%s %.2f MB", d, float64(b)/1e6))
			}
		}
		fmt.Fprintf(w, "matrices by type: %s\n", strings.Join(parts, ", "))
	}
	if len(rep.KeptF16) > 0 {
		fmt.Fprintf(w, "kept at f16 (columns not a multiple of 32): %s\n", strings.Join(rep.KeptF16, ", "))
	}
	if _, ok := h.Section(format.SecEmbed); !ok {
		fmt.Fprintf(w, "embedding: looked up in the tied LM head (quantized files store it once)\n")
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "component\tbytes\tMB\tMiB\t\n")
	fmt.Fprintf(tw, "embeddings (row-major)\t%s\t\n", size(rep.EmbeddingsRowMajorBytes))
	fmt.Fprintf(tw, "embeddings (tile-major, LM head)\t%s\t\n", size(rep.EmbeddingsTileMajorBytes))
	fmt.Fprintf(tw, "final norm\t%s\t\n", size(rep.FinalNormBytes))
	fmt.Fprintf(tw, "matrices of one layer\t%s\t\n", size(rep.LayerMatricesBytes))
	fmt.Fprintf(tw, "one layer (with norms)\t%s\t\n", size(rep.LayerBytes))
	fmt.Fprintf(tw, "%d layers\t%s\t\n", c.Layers, size(rep.LayersBytes))
	fmt.Fprintf(tw, "total\t%s\t\n", size(rep.WeightsBytes))
	fmt.Fprintf(tw, "read by one decode step\t%s\t\n", size(rep.DecodeWeightBytes))
	tw.Flush()

	a := rep.Arena
	fmt.Fprintf(w, "\nActivation arena (planned at compile time)\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "mode\tarena\t\tnaive sum\t\tlower bound (peak live)\t\t\n")
	fmt.Fprintf(tw, "decode (1 token)\t%d B\t%.1f KiB\t%d B\t%.1f KiB\t%d B\t%.1f KiB\t\n",
		a.DecodeBytes, kib(a.DecodeBytes), a.DecodeNaiveBytes, kib(a.DecodeNaiveBytes), a.DecodePeakLiveBytes, kib(a.DecodePeakLiveBytes))
	fmt.Fprintf(tw, "prefill (%d tokens)\t%d B\t%.1f MiB\t%d B\t%.1f MiB\t%d B\t%.1f MiB\t\n", a.MaxPrefill,
		a.PrefillBytes, mib(a.PrefillBytes), a.PrefillNaiveBytes, mib(a.PrefillNaiveBytes), a.PrefillPeakLiveBytes, mib(a.PrefillPeakLiveBytes))
	tw.Flush()

	kv := rep.KV
	fmt.Fprintf(w, "\nKV cache (f16, chunks of %d positions, %d B = %.0f KiB per chunk per layer)\n", kv.ChunkTokens, kv.ChunkBytesPerLayer, kib(kv.ChunkBytesPerLayer))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "sequence\tchunks\tper layer\t\ttotal (%d layers)\t\t\n", c.Layers)
	for _, s := range kv.BySeq {
		fmt.Fprintf(tw, "%d\t%d\t%d B\t%.2f MiB\t%d B\t%.2f MiB\t\n", s.Seq, s.Chunks, s.PerLayerBytes, mib(s.PerLayerBytes), s.TotalBytes, mib(s.TotalBytes))
	}
	tw.Flush()
}

func kib(n uint64) float64 { return float64(n) / 1024 }
func mib(n uint64) float64 { return float64(n) / (1 << 20) }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
