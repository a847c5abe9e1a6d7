package reference

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/internal/testmodel"
)

// chunkTolerance bounds the absolute difference between the chunked and
// the recurrent delta rule. Both are float64 sums over the same terms in
// another order: the shared data's two implementations agree to 1e-13 on
// logits near 18 and to 1e-14 on the states, while a state that does not
// cross a chunk boundary intact moves logits by 0.1 or more.
const chunkTolerance = 1e-12

// TestChunkedDeltaRule checks the second implementation of the delta rule
// against the first over the bundled Qwen3.5 models' cases longer than a
// chunk of 64 (transformers' prefill), and that the shared data's own
// comparison said as much.
func TestChunkedDeltaRule(t *testing.T) {
	for _, name := range []string{"tiny-q35", "tiny-q35-moe", "qwen35-go-demo"} {
		t.Run(name, func(t *testing.T) {
			if testing.Short() && name != "tiny-q35-moe" {
				t.Skip("-short: the 300- and 600-token passes at hidden 64 and 128 take seconds")
			}
			t.Parallel()
			m, err := Load(testmodel.Dir(t, name))
			if err != nil {
				t.Fatal(err)
			}
			e, err := ReadExpected(testmodel.Testdata(t, name, "expected"))
			if err != nil {
				t.Fatal(err)
			}
			if s := e.ChunkedVsRecurrent; s == nil || max(s.LastLogits, s.CoreOutput, s.FinalState) > chunkTolerance {
				t.Errorf("the shared data's chunked_vs_recurrent_max_abs is %+v", s)
			}
			long := 0
			for _, c := range e.Cases {
				if len(c.PromptIDs) <= 64 {
					continue
				}
				long++
				d, err := m.Diverge(c.PromptIDs, 64)
				if err != nil {
					t.Fatal(err)
				}
				if !(max(d.LastLogits, d.CoreOutput, d.FinalState) <= chunkTolerance) {
					t.Errorf("%s: chunked and recurrent differ by %+v, want at most %g", c.Name, d, chunkTolerance)
				}
				t.Logf("%s: %+v (the shared data: %+v)", c.Name, d, *e.ChunkedVsRecurrent)
			}
			if long == 0 {
				t.Fatal("no case longer than a chunk")
			}
		})
	}
}

// TestDeltaRuleChunkSizes compares the two forms of the delta rule on
// random sequences with fast and slow decays, for chunks of one token,
// of sizes that do and do not divide the length, and longer than it.
func TestDeltaRuleChunkSizes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n, dk, dv = 150, 7, 5
	q, k, v := make([][]float64, n), make([][]float64, n), make([][]float64, n)
	g, beta := make([]float64, n), make([]float64, n)
	for i := range n {
		q[i], k[i], v[i] = l2norm(randVec(rng, dk)), l2norm(randVec(rng, dk)), randVec(rng, dv)
		// log decays from -1e-3 (the state persists) to -30 (it is
		// forgotten at once), and whole stretches of each.
		g[i] = -math.Exp(rng.Float64()*10 - 7)
		if i/20%2 == 1 {
			g[i] = -30 * rng.Float64()
		}
		beta[i] = rng.Float64()
	}
	wantOut, wantState := recurrentDeltaRule(q, k, v, g, beta)
	for _, size := range []int{1, 3, 64, n, n + 7} {
		out, state := chunkedDeltaRule(q, k, v, g, beta, size)
		worst := 0.0
		for i := range out {
			worst = max(worst, maxAbsDiff(out[i], wantOut[i]))
		}
		for i := range state {
			worst = max(worst, maxAbsDiff(state[i], wantState[i]))
		}
		if !(worst <= chunkTolerance) {
			t.Errorf("chunks of %d: %g from the recurrence", size, worst)
		}
	}
	// The state carries what the sequence wrote: not a test that a zero
	// state would pass.
	if norm := math.Sqrt(dot(wantState[0], wantState[0])); norm < 0.01 {
		t.Errorf("final state row 0 has norm %g", norm)
	}
}

func randVec(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return v
}

// qwen35Config is tiny-q35's config.json as a map, for tests to change.
func qwen35Config(t *testing.T) map[string]any {
	b, err := os.ReadFile(testmodel.Testdata(t, "tiny-q35", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func readConfigMap(t *testing.T, c map[string]any) (Config, error) {
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return ReadConfig(path)
}

func TestQwen35Config(t *testing.T) {
	c, err := readConfigMap(t, qwen35Config(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.ModelType != "qwen3_5" || !c.Hybrid() || c.Hidden != 64 || c.RopeTheta != 1e7 || c.RotaryDims() != 8 ||
		c.LinearKeyHeads != 2 || c.LinearValueHeads != 4 || c.MTPLayers != 1 || !c.Tied || c.Linear(3) || !c.Linear(4) {
		t.Errorf("tiny-q35's config reads as %+v", c)
	}

	// Without layer_types, every full_attention_interval-th layer is full
	// attention; the text-only form has no nesting.
	text := qwen35Config(t)["text_config"].(map[string]any)
	delete(text, "layer_types")
	text["full_attention_interval"], text["num_hidden_layers"] = 3, 7
	got, err := readConfigMap(t, text)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"linear_attention", "linear_attention", "full_attention", "linear_attention", "linear_attention", "full_attention", "linear_attention"}
	if got.ModelType != "qwen3_5" || !slices.Equal(got.LayerTypes, want) {
		t.Errorf("text-only config without layer_types: %s %v, want qwen3_5 %v", got.ModelType, got.LayerTypes, want)
	}

	for _, tc := range []struct {
		change func(top, text map[string]any)
		want   string
	}{
		{func(_, t map[string]any) { t["layer_types"].([]any)[2] = "sliding_attention" }, `layer_types[2] is "sliding_attention"`},
		{func(_, t map[string]any) { t["layer_types"] = t["layer_types"].([]any)[:7] }, "layer_types has 7 entries for 8 layers"},
		{func(top, _ map[string]any) { top["tie_word_embeddings"] = false }, "tie_word_embeddings is false in one place and true in another"},
		{func(_, t map[string]any) { t["rope_parameters"].(map[string]any)["rope_type"] = "yarn" }, `rope type "yarn" is not supported`},
		{func(_, t map[string]any) { t["partial_rotary_factor"] = 0.5 }, "partial_rotary_factor is 0.25 in one place and 0.5 in another"},
		{func(_, t map[string]any) { t["linear_num_value_heads"] = 3 }, "linear_num_value_heads 3 is not a multiple of linear_num_key_heads 2"},
		{func(_, t map[string]any) { t["model_type"] = "qwen3_5_moe_text" }, `text_config.model_type "qwen3_5_moe_text" in a qwen3_5 config`},
		{func(top, _ map[string]any) { top["model_type"] = "qwen4_exp" }, `model_type "qwen4_exp"`},
		{func(_, t map[string]any) { t["mtp_use_dedicated_embeddings"] = true }, "mtp_use_dedicated_embeddings"},
		{func(_, t map[string]any) { t["norm_topk_prob"] = false }, "norm_topk_prob false"},
		{func(_, t map[string]any) { t["mlp_only_layers"] = []int{1} }, "every Qwen3.5-MoE layer is sparse"},
		{func(_, t map[string]any) { t["intermediate_size"] = 0 }, "intermediate_size is 0"},
	} {
		top := qwen35Config(t)
		tc.change(top, top["text_config"].(map[string]any))
		if _, err := readConfigMap(t, top); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
	}
	// A stray empty mlp_only_layers, and rope_parameters' "type" for
	// "rope_type", are accepted.
	top := qwen35Config(t)
	text = top["text_config"].(map[string]any)
	text["mlp_only_layers"] = []int{}
	rope := text["rope_parameters"].(map[string]any)
	rope["type"] = rope["rope_type"]
	delete(rope, "rope_type")
	if _, err := readConfigMap(t, top); err != nil {
		t.Error(err)
	}
}

// TestQwen35CaseRoundTrip computes a case of tiny-q35-moe with Case, as a
// generator of expected data would, writes and reads it back, and checks
// it against the shared data and the forward pass: the MTP entry and its
// logits file included.
func TestQwen35CaseRoundTrip(t *testing.T) {
	m, err := Load(testmodel.Dir(t, "tiny-q35-moe"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := ReadExpected(testmodel.Testdata(t, "tiny-q35-moe", "expected"))
	if err != nil {
		t.Fatal(err)
	}
	want := e.Cases[0]
	var positions []int
	for _, p := range want.Positions {
		positions = append(positions, p.Pos)
	}
	c, err := m.Case(Spec{Name: want.Name, Prompt: want.PromptIDs, Positions: positions, Greedy: len(want.Greedy)})
	if err != nil {
		t.Fatal(err)
	}
	if c.MTP == nil || c.RouterTies == nil || len(c.Router) != m.Config.Layers {
		t.Fatalf("case %+v: want MTP data and router statistics for every layer", c)
	}
	dir := t.TempDir()
	if err := WriteExpected(dir, "tiny-q35-moe", []Case{c}); err != nil {
		t.Fatal(err)
	}
	back, err := ReadExpected(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := back.Cases[0]
	if !slices.Equal(got.Greedy, want.Greedy) || got.MTP.NextToken != want.MTP.NextToken || !slices.Equal(got.MTP.Logits, c.MTP.Logits) ||
		got.MTP.LogitsFile != "hello.mtp.f32" || got.MTP.Pos != want.MTP.Pos || got.MTP.Hidden != want.MTP.Hidden {
		t.Errorf("greedy %v, MTP %+v; want %v, %+v", got.Greedy, *got.MTP, want.Greedy, *want.MTP)
	}
	d := &deviation{t: t}
	for j, top := range want.MTP.Top {
		if got.MTP.Top[j][0] != top[0] {
			t.Errorf("MTP top %d is id %v, want %v", j, got.MTP.Top[j][0], top[0])
		}
		d.check("MTP top logit", got.MTP.Top[j][1], top[1], tolerance)
	}
	d.check("MTP logsumexp", got.MTP.LogSumExp, want.MTP.LogSumExp, tolerance)
	d.check("MTP margin", got.MTP.Margin, want.MTP.Margin, tolerance)
	checkCase(t, m, got)
}
