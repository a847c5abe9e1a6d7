package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/internal/synth"
	"github.com/qwenc/qwenc/internal/synthtest"
	"github.com/qwenc/qwenc/internal/testmodel"
)

// compiledShape writes a checkpoint of shape s as work/name and compiles
// it into work/name.qbin.
func compiledShape(t *testing.T, work, name string, s synth.Shape) string {
	t.Helper()
	dir := filepath.Join(work, name)
	if err := synth.WriteMini(dir, s); err != nil {
		t.Fatal(err)
	}
	out := dir + ".qbin"
	if _, stderr, code := run(t, work, "compile", "-q", dir, "-o", out, "--max-prefill", "32"); code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	return out
}

// compiled compiles the small test model (maximum context 512) into work.
func compiled(t *testing.T, work string) string {
	t.Helper()
	out := filepath.Join(work, "m.qbin")
	if _, stderr, code := run(t, work, "compile", "-q", model(t, "small-model"), "-o", out, "--max-prefill", "32"); code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	return out
}

// Every size inspect prints is in bytes, MB and MiB, each labelled and
// each agreeing with the bytes, as the README says (the arena was in KiB
// and MiB, the KV cache in MiB, the matrices by type in MB alone).
func TestInspectUnits(t *testing.T) {
	work := t.TempDir()
	out, stderr, code := run(t, work, "inspect", compiled(t, work))
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if strings.Contains(out, "KiB") || strings.Contains(out, "GB") {
		t.Errorf("a unit other than B, MB and MiB:\n%s", out)
	}
	triple := regexp.MustCompile(`(\d+) B(?: +| = )(\d+\.\d\d) MB(?: +| = )(\d+\.\d\d) MiB`)
	found := triple.FindAllStringSubmatch(out, -1)
	if bytes := regexp.MustCompile(`\d B\b`).FindAllString(out, -1); len(found) != len(bytes) || len(found) < 20 {
		t.Errorf("%d sizes in bytes, %d of them with MB and MiB:\n%s", len(bytes), len(found), out)
	}
	for _, m := range found {
		b, _ := strconv.ParseFloat(m[1], 64)
		if mb, mib := fmt.Sprintf("%.2f", b/1e6), fmt.Sprintf("%.2f", b/(1<<20)); m[2] != mb || m[3] != mib {
			t.Errorf("%q: want %s MB, %s MiB", m[0], mb, mib)
		}
	}
	if !strings.Contains(out, "1 MB = 10^6 bytes, 1 MiB = 2^20 bytes") {
		t.Errorf("the units are not defined:\n%s", out)
	}
}

// The KV table stops at the model's maximum context by default, and a
// --seq beyond it gets a note on stderr.
func TestInspectSeqs(t *testing.T) {
	work := t.TempDir()
	m := compiled(t, work)
	seqs := func(args ...string) ([]int, string) {
		t.Helper()
		out, stderr, code := run(t, work, append([]string{"inspect", m, "--json"}, args...)...)
		var r struct {
			Memory struct {
				KV struct {
					BySeq []struct {
						Seq int `json:"seq"`
					} `json:"by_seq"`
				} `json:"kv"`
			} `json:"memory"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 {
			t.Fatalf("%v: exit %d, %v, stderr %q", args, code, err, stderr)
		}
		var s []int
		for _, row := range r.Memory.KV.BySeq {
			s = append(s, row.Seq)
		}
		return s, stderr
	}
	if got, stderr := seqs(); !slices.Equal(got, []int{5, 8, 300, 512}) || stderr != "" {
		t.Errorf("default: lengths %v, stderr %q; want 5, 8, 300 and the maximum 512, no note", got, stderr)
	}
	got, stderr := seqs("--seq", "8,512,1000")
	want := "qwenc: note: --seq 1000 is beyond the model's maximum context of 512 tokens; qwenrun never runs a sequence that long\n"
	if !slices.Equal(got, []int{8, 512, 1000}) || stderr != want {
		t.Errorf("--seq 8,512,1000: lengths %v, stderr %q; want 8, 512, 1000 and %q", got, stderr, want)
	}
	text, _, _ := run(t, work, "inspect", m)
	if !regexp.MustCompile(`\n +512 +2 +\d+ B`).MatchString(text) || regexp.MustCompile(`\n +(1024|32768) +\d+ +\d+ B`).MatchString(text) {
		t.Errorf("the text's KV table does not stop at 512:\n%s", text)
	}
}

// Every key of inspect --json is snake_case (generation had EOS, DoSample,
// ...); generation's are generation_config.json's.
func TestInspectJSONKeys(t *testing.T) {
	work := t.TempDir()
	out, _, code := run(t, work, "inspect", compiled(t, work), "--json")
	var j map[string]any
	if err := json.Unmarshal([]byte(out), &j); err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if !snake.MatchString(k) {
					t.Errorf("key %s.%s is not snake_case", path, k)
				}
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	walk("", j)
	g, _ := j["generation"].(map[string]any)
	for _, k := range []string{"eos_token_id", "bos_token_id", "pad_token_id", "do_sample", "temperature", "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty"} {
		if _, ok := g[k]; !ok {
			t.Errorf("generation lacks %q: %v", k, g)
		}
	}
}

// A MoE file's report: the experts in the config, every parameter counted
// once (the tied embedding too) and the active ones with k of E experts,
// and decode_weight_bytes with k/E of each stacked expert section.
func TestInspectMoE(t *testing.T) {
	work := t.TempDir()
	s := synth.Shape{ModelType: "qwen3_moe", Hidden: 64, Intermediate: 48, Layers: 3, Heads: 2, KVHeads: 1, HeadDim: 32,
		Vocab: 300, MaxPositions: 512, Tied: true, DType: "BF16", EOS: synth.MiniEOS,
		Experts: 4, ExpertsPerToken: 2, MoEIntermediate: 40, MLPOnlyLayers: []int{1}}
	out := compiledShape(t, work, "moe", s)
	js, _, code := run(t, work, "inspect", out, "--json")
	var r struct {
		FormatVersion int `json:"format_version"`
		Config        struct {
			Experts      int   `json:"num_experts"`
			PerToken     int   `json:"num_experts_per_tok"`
			SparseLayers []int `json:"sparse_layers"`
		} `json:"config"`
		Sections []struct {
			Name  string   `json:"name"`
			Kind  string   `json:"kind"`
			Shape []uint64 `json:"shape"`
			Size  uint64   `json:"size"`
		} `json:"sections"`
		Memory struct {
			Decode uint64 `json:"decode_weight_bytes"`
			Params uint64 `json:"parameters"`
			Active uint64 `json:"active_parameters"`
		} `json:"memory"`
	}
	if err := json.Unmarshal([]byte(js), &r); err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	if r.FormatVersion != format.Version || r.Config.Experts != 4 || r.Config.PerToken != 2 || !slices.Equal(r.Config.SparseLayers, []int{0, 2}) {
		t.Errorf("version %d, config %+v", r.FormatVersion, r.Config)
	}
	var params, active, decode uint64
	for _, sec := range r.Sections {
		if sec.Kind == "bytes" {
			continue
		}
		n := uint64(1)
		for _, d := range sec.Shape {
			n *= d
		}
		frac := func(v uint64) uint64 { return v }
		if sec.Kind == "experts" {
			frac = func(v uint64) uint64 { return v * 2 / 4 }
		}
		if sec.Name != "embed_tokens" {
			params += n
			active += frac(n)
			decode += frac(sec.Size)
		}
	}
	// hand count: embedding 300x64, per layer attention 4 matrices and norms,
	// router 4x64, experts 4 x 3 x 40x64 or a dense 3 x 48x64, final norm
	want := uint64(300*64) + 3*uint64(64*64+32*64+32*64+64*64+64+64+32+32) + 2*uint64(4*64+4*3*40*64) + uint64(3*48*64) + 64
	if params != want || r.Memory.Params != want || r.Memory.Active != want-2*uint64(2*3*40*64) || r.Memory.Decode != decode {
		t.Errorf("parameters %d (sections %d, by hand %d), active %d, decode bytes %d (sections %d)", r.Memory.Params, params, want, r.Memory.Active, r.Memory.Decode, decode)
	}
	text, _, _ := run(t, work, "inspect", out)
	if !strings.Contains(text, "experts: 4 of width 40, 2 per token") || !strings.Contains(text, "read by one decode step (2 of 4 experts)") {
		t.Errorf("the text report does not describe the experts:\n%s", text)
	}
}

// --rope-scaling is recorded in the file; inspect shows it and the
// maximum context it allows; a spec that means nothing is refused.
// The text report gives what a guess of the MTP block reads, as --json's
// mtp_weight_bytes: qwenrun's --draft help points to it for that cost.
func TestInspectMTP(t *testing.T) {
	work := t.TempDir()
	s := synth.Shape{ModelType: "qwen3_5", Hidden: 64, Intermediate: 96, Layers: 4, Heads: 2, KVHeads: 1, HeadDim: 32,
		Vocab: 300, MaxPositions: 512, Tied: true, DType: "BF16", EOS: synth.MiniEOS,
		Qwen35: synth.Qwen35{FullAttentionInterval: 4, LinearKeyHeads: 2, LinearValueHeads: 2, LinearKeyHeadDim: 32, LinearValueHeadDim: 32,
			ConvKernel: 4, PartialRotaryFactor: 0.25, MTPLayers: 1}}
	out := compiledShape(t, work, "q35", s)
	js, _, _ := run(t, work, "inspect", out, "--json")
	var r struct {
		Memory struct {
			MTP uint64 `json:"mtp_weight_bytes"`
		} `json:"memory"`
	}
	if err := json.Unmarshal([]byte(js), &r); err != nil || r.Memory.MTP == 0 {
		t.Fatalf("inspect --json: mtp_weight_bytes %d (%v)", r.Memory.MTP, err)
	}
	text, _, _ := run(t, work, "inspect", out)
	if !regexp.MustCompile(`read by one MTP guess \(besides the LM head's rows\) +` + strconv.FormatUint(r.Memory.MTP, 10) + ` B`).MatchString(text) {
		t.Errorf("the text report does not give the %d bytes an MTP guess reads:\n%s", r.Memory.MTP, text)
	}
	text, _, _ = run(t, work, "inspect", compiled(t, work))
	if strings.Contains(text, "MTP guess") {
		t.Errorf("a model without an MTP block has an MTP row:\n%s", text)
	}
}

func TestCompileRopeScaling(t *testing.T) {
	work := t.TempDir()
	out := filepath.Join(work, "yarn.qbin")
	if _, stderr, code := run(t, work, "compile", "-q", model(t, "small-model"), "-o", out, "--max-prefill", "32", "--rope-scaling", "yarn:4:256"); code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	text, _, _ := run(t, work, "inspect", out)
	if !strings.Contains(text, "rope scaling: yarn, factor 4 over an original context of 256; attention factor 1.1386; maximum context 1024") {
		t.Errorf("inspect does not show the scaling:\n%s", text)
	}
	_, stderr, code := run(t, work, "compile", "-q", model(t, "small-model"), "-o", filepath.Join(work, "bad.qbin"), "--rope-scaling", "ntk:2")
	if code != 1 || !strings.Contains(stderr, `--rope-scaling "ntk:2": want none, linear:FACTOR or yarn:FACTOR[:ORIGINAL_CONTEXT]`) {
		t.Errorf("ntk:2: exit %d, %q", code, stderr)
	}
}

// An embedding file's report: no LM head section, and
// decode_weight_bytes counts what a step reads of it, the layers and the
// final norm, nothing of a head (the tied embedding's re-tiled copy, or
// the head a generation model of that vocabulary would have).
func TestInspectEmbedding(t *testing.T) {
	work := t.TempDir()
	out := filepath.Join(work, "emb.qbin")
	if _, stderr, code := run(t, work, "compile", "-q", testmodel.Dir(t, "tiny-emb"), "-o", out, "--max-prefill", "32", "--type", "q8"); code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	js, _, code := run(t, work, "inspect", out, "--json")
	var r struct {
		Config struct {
			Embedding bool `json:"embedding"`
		} `json:"config"`
		Sections []struct {
			Name string `json:"name"`
			Size uint64 `json:"size"`
		} `json:"sections"`
		Memory struct {
			Decode   uint64 `json:"decode_weight_bytes"`
			Head     uint64 `json:"embeddings_tile_major_bytes"`
			Layers   uint64 `json:"layers_bytes"`
			Norm     uint64 `json:"final_norm_bytes"`
			Weights  uint64 `json:"weights_bytes"`
			RowMajor uint64 `json:"embeddings_row_major_bytes"`
		} `json:"memory"`
	}
	if err := json.Unmarshal([]byte(js), &r); err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	var layers, norm uint64
	for _, s := range r.Sections {
		switch {
		case s.Name == format.SecLMHead:
			t.Errorf("an embedding file has an %s section of %d bytes", s.Name, s.Size)
		case strings.HasPrefix(s.Name, "layers."):
			layers += s.Size
		case s.Name == format.SecNorm:
			norm = s.Size
		}
	}
	mem := r.Memory
	if !r.Config.Embedding || layers == 0 || norm == 0 || mem.Decode != layers+norm || mem.Layers != layers || mem.Head != 0 {
		t.Errorf("embedding %v: decode_weight_bytes %d, want the layers' %d + the final norm's %d; head %d bytes", r.Config.Embedding, mem.Decode, layers, norm, mem.Head)
	}
	if mem.Weights != mem.RowMajor+layers+norm {
		t.Errorf("weights %d bytes: want the embedding's %d + the layers' %d + the final norm's %d", mem.Weights, mem.RowMajor, layers, norm)
	}
}

// withHeaderEdit rewrites a file's header after edit, keeping every
// section where it is.
func withHeaderEdit(t *testing.T, path string, edit func(h *format.Header)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := format.ReadHeader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	edit(h)
	if err := os.WriteFile(path, synthtest.WithHeader(t, b, h), 0o644); err != nil {
		t.Fatal(err)
	}
}

// inspect shows the features a file lists, its header's keys with their
// types, and each section's kind and role, in text and JSON; a feature or
// key this build does not know is shown and marked, not refused.
func TestInspectKeysFeaturesKinds(t *testing.T) {
	work := t.TempDir()
	m := compiled(t, work)
	type report struct {
		Features []struct {
			Name     string `json:"name"`
			Required bool   `json:"required"`
			Known    bool   `json:"known"`
		} `json:"features"`
		Keys []struct {
			Key   string `json:"key"`
			Type  string `json:"type"`
			Value any    `json:"value"`
			Known bool   `json:"known"`
		} `json:"keys"`
		Sections []struct {
			Name string `json:"name"`
			Kind string `json:"kind"`
			Role string `json:"role"`
		} `json:"sections"`
	}
	inspect := func() (report, string) {
		t.Helper()
		js, stderr, code := run(t, work, "inspect", m, "--json")
		var r report
		if err := json.Unmarshal([]byte(js), &r); err != nil || code != 0 {
			t.Fatalf("exit %d, %v, %q", code, err, stderr)
		}
		text, _, _ := run(t, work, "inspect", m)
		return r, text
	}
	key := func(r report, k string) (string, any, bool) {
		for _, e := range r.Keys {
			if e.Key == k {
				return e.Type, e.Value, e.Known
			}
		}
		t.Fatalf("no key %q", k)
		return "", nil, false
	}

	r, text := inspect()
	if len(r.Features) != 1 || r.Features[0].Name != "qk_norm" || !r.Features[0].Required || !r.Features[0].Known {
		t.Errorf("features %+v, want qk_norm, required", r.Features)
	}
	if typ, v, known := key(r, "config.hidden_size"); typ != "u32" || v != float64(40) || !known {
		t.Errorf("config.hidden_size: %s %v known %v", typ, v, known)
	}
	if typ, v, _ := key(r, "generation.eos_token_id"); typ != "i32[]" || fmt.Sprint(v) != fmt.Sprint([]any{float64(synth.MiniEOS[0]), float64(synth.MiniEOS[1])}) {
		t.Errorf("generation.eos_token_id: %s %v", typ, v)
	}
	want := map[string][2]string{"embed_tokens": {"embedding", "embed_tokens"}, "layers.1.q_proj": {"projection", "q_proj"},
		"layers.0.k_norm": {"norm", "k_norm"}, "norm": {"norm", "norm"}, "lm_head": {"lm_head", "lm_head"}, "tokenizer": {"bytes", "tokenizer"}}
	for _, s := range r.Sections {
		if w, ok := want[s.Name]; ok && (s.Kind != w[0] || s.Role != w[1]) {
			t.Errorf("section %s: kind %q role %q, want %q %q", s.Name, s.Kind, s.Role, w[0], w[1])
		}
		delete(want, s.Name)
	}
	if len(want) > 0 {
		t.Errorf("sections not listed: %v", want)
	}
	for _, line := range []string{"features: qk_norm\n", "\nconfig.hidden_size  ", "  u32  ", "  40\n", "kind", "role",
		" layers.1.q_proj  projection  q_proj  f16  tile-major "} {
		if !strings.Contains(regexp.MustCompile(` {2,}`).ReplaceAllString(text, "  "), line) {
			t.Errorf("the text does not show %q:\n%s", line, text)
		}
	}

	withHeaderEdit(t, m, func(h *format.Header) {
		h.UnknownFeatures = []format.Feature{{Name: "audio"}}
		h.Unknown = []format.Entry{{Key: "mtp.num_hidden_layers", Value: uint32(1)}}
	})
	r, text = inspect()
	if len(r.Features) != 2 || r.Features[0].Name != "audio" || r.Features[0].Required || r.Features[0].Known {
		t.Errorf("features %+v, want audio (optional, unknown) and qk_norm", r.Features)
	}
	if typ, v, known := key(r, "mtp.num_hidden_layers"); typ != "u32" || v != float64(1) || known {
		t.Errorf("mtp.num_hidden_layers: %s %v known %v", typ, v, known)
	}
	for _, line := range []string{"features: audio (optional, unknown to this build), qk_norm\n", "(unknown to this build)\n"} {
		if !strings.Contains(text, line) {
			t.Errorf("the text does not show %q:\n%s", line, text)
		}
	}
}
