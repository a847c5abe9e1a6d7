package reference

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/internal/testmodel"
)

// tolerance bounds the relative difference |got-want| / max(1, |want|)
// between this forward pass and the stored float64 reference data. Both
// sides compute in float64 over the same weights and only the order of
// summation differs: the shared data agrees to 2e-14 (5e-13 for the
// logsumexp of qwen3-go-demo, a sum over 151936 terms), so 1e-9 leaves
// room for any order while a wrong formula moves logits by far more.
const tolerance = 1e-9

// f32Tolerance bounds the relative difference from the last-logits rows,
// which are float32: rounding to float32 alone moves a value by up to
// 2^-24 ≈ 6e-8 of it.
const f32Tolerance = 1e-7

// deviation tracks the largest relative difference seen, for the log.
type deviation struct {
	t    *testing.T
	max  float64
	what string
}

func (d *deviation) check(what string, got, want, tol float64) {
	dev := math.Abs(got-want) / max(1, math.Abs(want))
	if dev > d.max {
		d.max, d.what = dev, what
	}
	if !(dev <= tol) {
		d.t.Helper()
		d.t.Errorf("%s: got %.15g, want %.15g (relative difference %.3g > %.0e)", what, got, want, dev, tol)
	}
}

// TestBundledExpected checks the forward pass against the expected data of
// the bundled models: tiny-a, tiny-q2b, tiny-moe-a, tiny-q35, tiny-q35-moe
// and the trained qwen3-go-demo and qwen35-go-demo come from another
// implementation (the shared reference data), tiny-moe-b from this one
// (there the test guards against regressions, router statistics included).
func TestBundledExpected(t *testing.T) {
	for _, name := range []string{"tiny-a", "tiny-q2b", "tiny-moe-a", "tiny-moe-b", "qwen3-go-demo", "tiny-q35", "tiny-q35-moe", "qwen35-go-demo"} {
		t.Run(name, func(t *testing.T) {
			if testing.Short() && strings.HasSuffix(name, "go-demo") {
				t.Skip("-short: hidden 128 and 40-step continuations take seconds")
			}
			t.Parallel()
			dir := testmodel.Dir(t, name)
			m, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			e, err := ReadExpected(testmodel.Testdata(t, name, "expected"))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range e.Cases {
				if testing.Short() && len(c.PromptIDs) > 100 {
					continue
				}
				t.Run(c.Name, func(t *testing.T) { checkCase(t, m, c) })
			}
		})
	}
}

func checkCase(t *testing.T, m *Model, c Case) {
	d, d32 := &deviation{t: t}, &deviation{t: t}
	// By causality, one pass over the prompt and the greedy tokens gives
	// the logits of every greedy step (Greedy itself recomputes each step;
	// TestGreedyOnePassAgrees checks the two agree).
	seq := append(slices.Clone(c.PromptIDs), c.Greedy[:max(len(c.Greedy)-1, 0)]...)
	p, err := m.Forward(seq)
	if err != nil {
		t.Fatal(err)
	}
	// The rows of logits needed: the listed positions', then the last
	// prompt position's and the greedy steps'.
	var hidden [][]float64
	for _, want := range c.Positions {
		hidden = append(hidden, p.Hidden[want.Pos])
	}
	hidden = append(hidden, p.Hidden[len(c.PromptIDs)-1:]...)
	logits := m.Heads(hidden)
	for i, want := range c.Positions {
		got := Top(logits[i], len(want.Top))
		for j := range want.Top {
			if got[j][0] != want.Top[j][0] {
				t.Errorf("pos %d: top %d is id %v, want %v", want.Pos, j, got[j][0], want.Top[j][0])
			}
			d.check("top logit", got[j][1], want.Top[j][1], tolerance)
		}
		d.check("logsumexp", LogSumExp(logits[i]), want.LogSumExp, tolerance)
	}
	steps := logits[len(c.Positions):]
	if len(steps[0]) != len(c.LastLogits) {
		t.Fatalf("last logits: %d values, want %d", len(steps[0]), len(c.LastLogits))
	}
	for i, want := range c.LastLogits {
		d32.check("last logits", steps[0][i], float64(want), f32Tolerance)
	}
	for i, want := range c.Greedy {
		best, margin := Argmax(steps[i])
		if int32(best) != want {
			t.Fatalf("greedy step %d: token %d, want %d", i, best, want)
		}
		d.check("greedy margin", margin, c.GreedyMargins[i], tolerance)
	}
	if c.RouterTies != nil {
		checkRouter(t, p, c)
	}
	if c.MTP != nil {
		checkMTP(t, m, c, p.Hidden[:len(c.PromptIDs)], steps[0], d, d32)
	} else if m.HasMTP() {
		t.Errorf("the model has an MTP block, the case no MTP data")
	}
	t.Logf("max relative deviation %.2g (%s); from the float32 rows %.2g", d.max, d.what, d32.max)
}

// checkMTP compares the MTP block's prediction at the last prompt
// position, given the main model's hidden states over the prompt and its
// logits there.
func checkMTP(t *testing.T, m *Model, c Case, hidden [][]float64, last []float64, d, d32 *deviation) {
	want := c.MTP
	if next, _ := Argmax(last); int32(next) != want.NextToken || want.Pos != len(c.PromptIDs)-1 || want.Hidden != "post_final_norm" {
		t.Fatalf("MTP at %d after token %d from the %s state; the main head chooses %d at %d", want.Pos, want.NextToken, want.Hidden, next, len(c.PromptIDs)-1)
	}
	h, err := m.MTP(c.PromptIDs, hidden, want.NextToken)
	if err != nil {
		t.Fatal(err)
	}
	logits := m.Head(h[len(h)-1])
	got := Top(logits, len(want.Top))
	for j := range want.Top {
		if got[j][0] != want.Top[j][0] {
			t.Errorf("MTP: top %d is id %v, want %v", j, got[j][0], want.Top[j][0])
		}
		d.check("MTP top logit", got[j][1], want.Top[j][1], tolerance)
	}
	d.check("MTP logsumexp", LogSumExp(logits), want.LogSumExp, tolerance)
	_, margin := Argmax(logits)
	d.check("MTP margin", margin, want.Margin, tolerance)
	if len(logits) != len(want.Logits) {
		t.Fatalf("MTP logits: %d values, want %d", len(logits), len(want.Logits))
	}
	for i, w := range want.Logits {
		d32.check("MTP logits", logits[i], float64(w), f32Tolerance)
	}
}

// checkRouter compares the router statistics, which cover the prompt only.
func checkRouter(t *testing.T, p *Pass, c Case) {
	var prompt []Routes
	for _, r := range p.Routes {
		prompt = append(prompt, r.prefix(len(c.PromptIDs)))
	}
	got, ties := routerStats(prompt)
	if *ties != *c.RouterTies {
		t.Errorf("router ties %d, want %d", *ties, *c.RouterTies)
	}
	if len(got) != len(c.Router) {
		t.Fatalf("router statistics for %d layers, want %d", len(got), len(c.Router))
	}
	for i, want := range c.Router {
		if g := got[i]; g.Layer != want.Layer || !slices.Equal(g.ExpertsUsed, want.ExpertsUsed) || g.Ties != want.Ties ||
			math.Abs(g.MinMargin-want.MinMargin) > tolerance*max(1, math.Abs(want.MinMargin)) {
			t.Errorf("router statistics %+v, want %+v", g, want)
		}
	}
}

// TestTinyMoEBRouting checks what tiny-moe-b was made for (see its
// README): layer 0's zero router ties every expert, so every token takes
// experts 0, 1 and 2 at weight 1/6 each (norm_topk_prob is false), and the
// long prompts reach every expert of layer 3.
func TestTinyMoEBRouting(t *testing.T) {
	e, err := ReadExpected(testmodel.Testdata(t, "tiny-moe-b", "expected"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range e.Cases {
		if len(c.Router) != 3 {
			t.Fatalf("%s: router statistics for %d layers, want 3 (layer 2 is dense)", c.Name, len(c.Router))
		}
		if r := c.Router[0]; !slices.Equal(r.ExpertsUsed, []int{0, 1, 2}) || r.Ties != len(c.PromptIDs) || *c.RouterTies != r.Ties {
			t.Errorf("%s: layer 0 %+v, router ties %d; want experts [0 1 2] tied at all %d positions", c.Name, r, *c.RouterTies, len(c.PromptIDs))
		}
		if r := c.Router[2]; r.Layer != 3 || len(c.PromptIDs) >= 300 && len(r.ExpertsUsed) != 6 {
			t.Errorf("%s: layer 3 %+v, want all 6 experts", c.Name, r)
		}
	}
	m, err := Load(testmodel.Dir(t, "tiny-moe-b"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Forward(e.Cases[0].PromptIDs)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range p.Routes[0].Weights {
		if !slices.Equal(w, []float64{1.0 / 6, 1.0 / 6, 1.0 / 6}) || !p.Routes[0].Tied[i] {
			t.Errorf("position %d: layer 0 weights %v, want three of exactly 1/6, tied", i, w)
		}
	}
}

func TestGreedyOnePassAgrees(t *testing.T) {
	m, err := Load(testmodel.Dir(t, "tiny-moe-a"))
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int32{9707, 11, 1879, 0}
	tokens, margins, err := m.Greedy(prompt, 4)
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Forward(append(slices.Clone(prompt), tokens[:3]...))
	if err != nil {
		t.Fatal(err)
	}
	for i := range tokens {
		best, margin := Argmax(m.Head(p.Hidden[len(prompt)-1+i]))
		if int32(best) != tokens[i] || math.Abs(margin-margins[i]) > 1e-12 {
			t.Errorf("step %d: one pass gives %d (margin %g), step by step %d (margin %g)", i, best, margin, tokens[i], margins[i])
		}
	}
}

func TestLoadRefuses(t *testing.T) {
	_, err := Load(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("Load of an empty directory: %v, want an error naming config.json", err)
	}
}

func TestTop(t *testing.T) {
	got := Top([]float64{1, 3, 2, 3, -1, 2}, 4)
	want := [][2]float64{{1, 3}, {3, 3}, {2, 2}, {5, 2}}
	if !slices.Equal(got, want) {
		t.Errorf("Top = %v, want %v (ties: lower id first)", got, want)
	}
	if best, margin := Argmax([]float64{1, 3, 2, 3}); best != 1 || margin != 0 {
		t.Errorf("Argmax = %d, %g; want 1, 0", best, margin)
	}
}
