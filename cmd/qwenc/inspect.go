package main

import (
	"encoding/json"
	"fmt"
	"github.com/qwenc/qwenc/format/arch"
	"github.com/qwenc/qwenc/format/graph"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/format/wtype"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/internal/fsutil"
	"github.com/urfave/cli/v2"
)

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "print a .qbin file's config, sections and memory report, or a GGUF file's metadata and tensors; or one tensor",
		ArgsUsage: "FILE",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object"},
			&cli.StringFlag{Name: "tensor", Usage: "print one tensor's type, shape and values' range: a .qbin's section or a GGUF's tensor `NAME`"},
			&cli.StringFlag{Name: "dequant", Usage: "with --tensor, write its values to `OUT` as little-endian float32, in the order of its elements"},
			&cli.StringFlag{Name: "seq", Usage: "sequence lengths for the KV cache table, comma-separated",
				DefaultText: defaultSeqs + " up to the model's maximum context, and that maximum"},
			&cli.StringFlag{Name: "kv-type", Value: "f16", Usage: "KV cache type for the table: f16 or q8 (qwenrun --kv-type)"},
		},
		Action: func(c *cli.Context) error {
			return toStdout(func(stdout io.Writer) error { return inspectAction(c, stdout) })
		},
	}
}

func inspectAction(c *cli.Context, stdout io.Writer) error {
	if c.NArg() != 1 {
		return cliutil.Usagef(c, "inspect: want one FILE argument, got %d", c.NArg())
	}
	path := c.Args().First()
	if c.IsSet("dequant") && !c.IsSet("tensor") {
		return cliutil.Usagef(c, "inspect: --dequant needs --tensor NAME")
	}
	if err := checkInspectFlags(c, path); err != nil {
		return err
	}
	if c.IsSet("tensor") {
		return inspectTensor(c.Context, stdout, path, c.String("tensor"), c.String("dequant"))
	}
	if isGGUF(path) {
		return inspectGGUF(stdout, path, c.Bool("json"))
	}
	var seqs []int
	if c.IsSet("seq") {
		var err error
		if seqs, err = parseSeqs(c.String("seq")); err != nil {
			return err
		}
	}
	kvType, err := format.ParseKVType(c.String("kv-type"))
	if err != nil {
		return fmt.Errorf("--kv-type: %w", err)
	}
	h, version, err := readHeader(path)
	if err != nil {
		return err
	}
	seqs = kvSeqs(os.Stderr, seqs, h.Config.MaxContext())
	a, err := arch.Builtin().For(h.Config.ModelType)
	if err != nil {
		return err // readHeader validated it
	}
	rep := format.Report(h)
	rep.KV = graph.ReportStates(arch.States(a, &h.Config), seqs, kvType)
	if c.Bool("json") {
		return printJSON(stdout, h, version, rep)
	}
	printText(stdout, h, rep)
	return nil
}

// checkInspectFlags refuses the flags that what is printed would ignore,
// and a --dequant file that could not be written, before any work.
func checkInspectFlags(c *cli.Context, path string) error {
	if c.IsSet("tensor") || isGGUF(path) {
		for _, f := range []string{"seq", "kv-type"} {
			if c.IsSet(f) {
				return cliutil.Usagef(c, "inspect: --%s sizes a .qbin file's KV cache table, which --tensor and a GGUF file's listing do not print", f)
			}
		}
	}
	if c.IsSet("tensor") && c.Bool("json") {
		return cliutil.Usagef(c, "inspect: --json prints the whole file's listing; --tensor prints text")
	}
	if out := c.String("dequant"); out != "" {
		if err := fsutil.CheckOutput(out); err != nil {
			return fmt.Errorf("--dequant %s: %w", out, err)
		}
	}
	return nil
}

// readHeader validates a file's header and directory without mapping it.
func readHeader(path string) (*format.Header, uint32, error) {
	f, err := format.OpenRegular(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	h, pre, err := format.ReadHeaderPreamble(f, st.Size())
	if err == nil {
		err = arch.Builtin().Validate(h)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	return h, pre.Version, nil
}

// defaultSeqs are the lengths of the KV cache table: those of the design
// note's figures, then 32K, a long context.
const defaultSeqs = "5,8,300,1024,32768"

// kvSeqs returns the lengths of the KV cache table: those asked for, with a
// note on w for each beyond the model's maximum context (a KV cache
// qwenrun will never allocate), or without any, the default lengths up to
// that maximum and the maximum itself.
func kvSeqs(w io.Writer, asked []int, maxCtx int) []int {
	for _, n := range asked {
		if n > maxCtx {
			fmt.Fprintf(w, "qwenc: note: --seq %d is beyond the model's maximum context of %d tokens; qwenrun never runs a sequence that long\n", n, maxCtx)
		}
	}
	if asked != nil {
		return asked
	}
	all, _ := parseSeqs(defaultSeqs)
	var seqs []int
	for _, n := range all {
		if n < maxCtx {
			seqs = append(seqs, n)
		}
	}
	return append(seqs, maxCtx)
}

func parseSeqs(s string) ([]int, error) {
	seqs, err := cliutil.Ints(s, 1, "a positive length")
	if err != nil {
		return nil, fmt.Errorf("--seq: %w", err)
	}
	return seqs, nil
}

type jsonSection struct {
	Name   string   `json:"name"`
	Kind   string   `json:"kind"`
	Role   string   `json:"role"`
	DType  string   `json:"dtype"`
	Layout string   `json:"layout"`
	Shape  []uint64 `json:"shape"`
	Offset uint64   `json:"offset"`
	Size   uint64   `json:"size"`
	CRC32C string   `json:"crc32c"`
}

func printJSON(w io.Writer, h *format.Header, version uint32, rep format.MemoryReport) error {
	c := h.Config
	secs := make([]jsonSection, 0, len(h.Sections))
	for _, s := range h.Sections {
		secs = append(secs, jsonSection{s.Name, s.Kind.String(), s.Role, s.DType.String(), s.Layout.String(), s.Shape, s.Offset, s.Size, fmt.Sprintf("%08x", s.CRC)})
	}
	type jsonFeature struct {
		Name     string `json:"name"`
		Required bool   `json:"required"`
		Known    bool   `json:"known"`
	}
	features := []jsonFeature{}
	for _, f := range h.Features() {
		features = append(features, jsonFeature{f.Name, f.Required, format.KnownFeature(f.Name)})
	}
	type jsonKey struct {
		Key   string `json:"key"`
		Type  string `json:"type"`
		Value any    `json:"value"`
		Known bool   `json:"known"`
	}
	var keys []jsonKey
	for _, e := range h.Entries() {
		t, _ := format.TypeOf(e.Value)
		keys = append(keys, jsonKey{e.Key, t.String(), format.JSONValue(e.Value), !unknownKey(h, e.Key)})
	}
	out := map[string]any{
		"format_version": version,
		"config":         configJSON(&c),
		"generation":     h.Generation,
		"chat_family":    h.ChatFamily,
		"features":       features,
		"keys":           keys,
		"sections":       secs,
		"memory":         rep,
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// configJSON is a config under config.json's names.
func configJSON(c *format.Config) map[string]any {
	return map[string]any{
		"model_type": c.ModelType, "hidden_size": c.Hidden, "intermediate_size": c.Intermediate,
		"num_hidden_layers": c.Layers, "num_attention_heads": c.Heads, "num_key_value_heads": c.KVHeads,
		"head_dim": c.HeadDim, "vocab_size": c.Vocab, "tie_word_embeddings": c.TieEmbeddings,
		"max_position_embeddings": c.MaxPositions, "rope_theta": c.RopeTheta, "rms_norm_eps": c.RMSNormEps,
		"qk_norm": c.QKNorm, "qkv_bias": c.QKVBias,
		"num_experts": c.MoE.Experts, "num_experts_per_tok": c.MoE.ExpertsPerToken,
		"moe_intermediate_size": c.MoE.ExpertWidth, "norm_topk_prob": c.MoE.NormTopK,
		"sparse_layers": sparseLayers(c),
		"rope_scaling":  ropeScalingJSON(c), "max_context": c.MaxContext(),
		"embedding": c.Embedding, "append": c.Append,
		"shared_expert_intermediate_size": c.MoE.SharedWidth, "rotary_dims": c.Rotary(),
		"attn_output_gate": c.AttnGate, "mtp_num_hidden_layers": c.MTPLayers,
		"linear_layers": linearLayers(c), "linear_num_key_heads": c.Hybrid.KeyHeads,
		"linear_num_value_heads": c.Hybrid.ValueHeads, "linear_key_head_dim": c.Hybrid.KeyDim,
		"linear_value_head_dim": c.Hybrid.ValueDim, "linear_conv_kernel_dim": c.Hybrid.ConvKernel,
	}
}

// size prints bytes exactly and in both decimal and binary megabytes,
// each labelled, as three table cells: the design note mixes "MB" for
// both.
func size(n uint64) string {
	return fmt.Sprintf("%d B\t%.2f MB\t%.2f MiB", n, float64(n)/1e6, float64(n)/(1<<20))
}

// sizeInText is size for a sentence.
func sizeInText(n uint64) string {
	return fmt.Sprintf("%d B = %.2f MB = %.2f MiB", n, float64(n)/1e6, float64(n)/(1<<20))
}

func printText(w io.Writer, h *format.Header, rep format.MemoryReport) {
	c := h.Config
	tie := "untied head"
	switch {
	case c.Embedding:
		tie = fmt.Sprintf("no head: an embedding model, each input followed by %v", c.Append)
	case c.TieEmbeddings:
		tie = "tied head"
	}
	fmt.Fprintf(w, "model: %s, hidden %d, FFN %d, %d layers, %d heads x %d, %d KV heads, vocab %d, %s\n",
		c.ModelType, c.Hidden, c.Intermediate, c.Layers, c.Heads, c.HeadDim, c.KVHeads, c.Vocab, tie)
	fmt.Fprintf(w, "       rope_theta %g, rms_norm_eps %g, max positions %d, q/k norm %v, q/k/v bias %v\n",
		c.RopeTheta, c.RMSNormEps, c.MaxPositions, c.QKNorm, c.QKVBias)
	if rs := c.RopeScaling; rs.Type != "" {
		fmt.Fprintf(w, "rope scaling: %s, factor %g over an original context of %d; attention factor %.4f; maximum context %d\n",
			rs.Type, rs.Factor, rs.OriginalMax, rs.AttentionFactor, c.MaxContext())
	}
	if hy := c.Hybrid; len(hy.Linear) > 0 {
		fmt.Fprintf(w, "hybrid: Gated DeltaNet layers %v of %d (the others full attention), %d key heads and %d value heads of %d and %d, conv kernel %d\n",
			linearLayers(&c), c.Layers, hy.KeyHeads, hy.ValueHeads, hy.KeyDim, hy.ValueDim, hy.ConvKernel)
	}
	if c.RotaryDims != 0 || c.AttnGate || c.MTPLayers > 0 {
		fmt.Fprintf(w, "attention: RoPE on %d of %d head dimensions, output gate %v; MTP layers %d\n", c.Rotary(), c.HeadDim, c.AttnGate, c.MTPLayers)
	}
	if m := c.MoE; m.Experts > 0 {
		fmt.Fprintf(w, "experts: %d of width %d, %d per token, norm_topk_prob %v; sparse layers %v of %d (the others dense)\n",
			m.Experts, m.ExpertWidth, m.ExpertsPerToken, m.NormTopK, sparseLayers(&c), c.Layers)
		if m.SharedWidth > 0 {
			fmt.Fprintf(w, "shared expert: width %d, gated\n", m.SharedWidth)
		}
	}
	fmt.Fprintf(w, "parameters: %s total, %s active per token\n", count(rep.Parameters), count(rep.ActiveParameters))
	g := h.Generation
	fmt.Fprintf(w, "generation: eos %v, temperature %g, top_k %d, top_p %g, min_p %g, repetition_penalty %g\n",
		g.EOS, g.Temperature, g.TopK, g.TopP, g.MinP, g.RepetitionPenalty)
	fmt.Fprintf(w, "chat template: %s\n", orNone(h.ChatFamily))
	fmt.Fprintf(w, "features: %s\n", featureList(h))

	fmt.Fprintf(w, "\nHeader keys\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "key\ttype\tvalue\n")
	for _, e := range h.Entries() {
		t, _ := format.TypeOf(e.Value)
		note := ""
		if unknownKey(h, e.Key) {
			note = "\t(unknown to this build)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s%s\n", e.Key, t, format.FormatValue(e.Value), note)
	}
	tw.Flush()

	fmt.Fprintf(w, "\nSizes: 1 MB = 10^6 bytes, 1 MiB = 2^20 bytes\n\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "section\tkind\trole\tdtype\tlayout\tshape\toffset (bytes)\tsize\t\t\t\n")
	for _, s := range h.Sections {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%d\t%s\t\n", s.Name, s.Kind, s.Role, s.DType, s.Layout, s.Shape, s.Offset, size(s.Size))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nWeights\n")
	if len(rep.MatrixBytesByDType) > 1 || rep.MatrixBytesByDType["f16"] == 0 {
		var parts []string
		for _, t := range wtype.All() {
			if b, ok := rep.MatrixBytesByDType[t.String()]; ok {
				parts = append(parts, fmt.Sprintf("%s %s", t, sizeInText(b)))
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
	fmt.Fprintf(tw, "component\tsize\t\t\t\n")
	for _, r := range []struct {
		what  string
		bytes uint64
	}{
		{"embeddings (row-major)", rep.EmbeddingsRowMajorBytes},
		{"embeddings (tile-major, LM head)", rep.EmbeddingsTileMajorBytes},
		{"final norm", rep.FinalNormBytes},
		{"matrices of one layer", rep.LayerMatricesBytes},
		{"one layer (with norms)", rep.LayerBytes},
		{fmt.Sprintf("%d layers", c.Layers), rep.LayersBytes},
		{"total", rep.WeightsBytes},
		{readByDecode(&c), rep.DecodeWeightBytes},
	} {
		fmt.Fprintf(tw, "%s\t%s\t\n", r.what, size(r.bytes))
	}
	// qwenrun drafts with the MTP block by default when its guesses are
	// cheap against a step, and its --draft help sends users here for
	// what they read.
	if rep.MTPWeightBytes > 0 {
		fmt.Fprintf(tw, "read by one MTP guess (besides the LM head's rows)\t%s\t\n", size(rep.MTPWeightBytes))
	}
	tw.Flush()

	a := rep.Arena
	fmt.Fprintf(w, "\nActivation arena (planned at compile time)\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "mode\t\tsize\t\t\t\n")
	for _, r := range []struct {
		mode, what string
		bytes      uint64
	}{
		{"decode (1 token)", "arena", a.DecodeBytes},
		{"", "naive sum", a.DecodeNaiveBytes},
		{"", "lower bound (peak live)", a.DecodePeakLiveBytes},
		{fmt.Sprintf("prefill (%d tokens)", a.MaxPrefill), "arena", a.PrefillBytes},
		{"", "naive sum", a.PrefillNaiveBytes},
		{"", "lower bound (peak live)", a.PrefillPeakLiveBytes},
	} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", r.mode, r.what, size(r.bytes))
	}
	tw.Flush()

	kv := rep.KV
	fmt.Fprintf(w, "\nKV cache (%s, in chunks of %d positions: %s per chunk per layer)\n", kv.Type, kv.ChunkTokens, sizeInText(kv.ChunkBytesPerLayer))
	if kv.RecurrentLayers > 0 {
		fmt.Fprintf(w, "recurrent state: %s in %d layers, at any length\n", sizeInText(kv.RecurrentBytes), kv.RecurrentLayers)
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	total := fmt.Sprintf("total (%d layers)", kv.AttentionLayers)
	if kv.RecurrentLayers > 0 {
		total = fmt.Sprintf("total (%d attention, %d recurrent layers)", kv.AttentionLayers, kv.RecurrentLayers)
	}
	fmt.Fprintf(tw, "sequence\tchunks\tper layer\t\t\t%s\t\t\t\n", total)
	for _, s := range kv.BySeq {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t\n", s.Seq, s.Chunks, size(s.PerLayerBytes), size(s.TotalBytes))
	}
	tw.Flush()
}

// featureList prints the features a file lists: required ones by name,
// optional ones and those this build does not know so marked.
func featureList(h *format.Header) string {
	var parts []string
	for _, f := range h.Features() {
		var notes []string
		if !f.Required {
			notes = append(notes, "optional")
		}
		if !format.KnownFeature(f.Name) {
			notes = append(notes, "unknown to this build")
		}
		if len(notes) > 0 {
			parts = append(parts, fmt.Sprintf("%s (%s)", f.Name, strings.Join(notes, ", ")))
		} else {
			parts = append(parts, f.Name)
		}
	}
	if parts == nil {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// unknownKey reports whether the file's key is one this build does not
// know (kept in the header, otherwise ignored).
func unknownKey(h *format.Header, key string) bool {
	return slices.ContainsFunc(h.Unknown, func(e format.Entry) bool { return e.Key == key })
}

// ropeScalingJSON is the RoPE scaling under config.json's names, or nil.
func ropeScalingJSON(c *format.Config) any {
	rs := &c.RopeScaling
	if rs.Type == "" {
		return nil
	}
	j := map[string]any{"rope_type": rs.Type, "factor": rs.Factor, "original_max_position_embeddings": rs.OriginalMax,
		"attention_factor": rs.AttentionFactor}
	if rs.Type == "yarn" {
		j["beta_fast"], j["beta_slow"], j["truncate"] = rs.BetaFast, rs.BetaSlow, rs.Truncate
	}
	return j
}

// linearLayers lists the Gated DeltaNet layers of a hybrid model.
func linearLayers(c *format.Config) []int {
	l := []int{}
	for i, lin := range c.Hybrid.Linear {
		if lin {
			l = append(l, i)
		}
	}
	return l
}

// sparseLayers lists the layers whose MLP is routed experts.
func sparseLayers(c *format.Config) []int {
	l := []int{}
	for i, s := range c.MoE.Sparse {
		if s {
			l = append(l, i)
		}
	}
	return l
}

func readByDecode(c *format.Config) string {
	if c.MoE.Experts > 0 {
		return fmt.Sprintf("read by one decode step (%d of %d experts)", c.MoE.ExpertsPerToken, c.MoE.Experts)
	}
	return "read by one decode step"
}

// count prints a parameter count exactly and in millions or billions.
func count(n uint64) string {
	if n >= 1e9 {
		return fmt.Sprintf("%d (%.2fB)", n, float64(n)/1e9)
	}
	return fmt.Sprintf("%d (%.2fM)", n, float64(n)/1e6)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
