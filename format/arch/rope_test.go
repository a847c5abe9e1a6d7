package arch

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format"
)

func parseRope(t *testing.T, ropeScaling string) (format.Config, error) {
	t.Helper()
	cfg := `{"model_type":"qwen3","hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,
		"num_key_value_heads":2,"head_dim":32,"vocab_size":300,"max_position_embeddings":4096,"rope_theta":1000000,
		"rope_scaling":` + ropeScaling + `}`
	return Builtin().ParseConfig([]byte(cfg))
}

// TestRopeScalingConfig reads rope_scaling as transformers does: either
// key for the type, "default" as none, yarn's defaults (beta 32 and 1,
// truncation, attention factor 0.1 ln(factor) + 1, the original context
// from max_position_embeddings), and names what it cannot do.
func TestRopeScalingConfig(t *testing.T) {
	for _, c := range []struct {
		json string
		want format.RopeScaling
		err  string
	}{
		{`null`, format.RopeScaling{}, ""},
		{`{"rope_type":"default"}`, format.RopeScaling{}, ""},
		{`{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}`,
			format.RopeScaling{Type: "yarn", Factor: 4, OriginalMax: 32768, AttentionFactor: 0.1*math.Log(4) + 1, BetaFast: 32, BetaSlow: 1, Truncate: true}, ""},
		{`{"type":"yarn","factor":2,"attention_factor":1.5,"beta_fast":8,"beta_slow":2,"truncate":false}`,
			format.RopeScaling{Type: "yarn", Factor: 2, OriginalMax: 4096, AttentionFactor: 1.5, BetaFast: 8, BetaSlow: 2}, ""},
		{`{"rope_type":"linear","factor":2}`, format.RopeScaling{Type: "linear", Factor: 2, OriginalMax: 4096, AttentionFactor: 1}, ""},
		{`{"rope_type":"dynamic","factor":2}`, format.RopeScaling{}, `rope_scaling: type "dynamic" not supported (linear, yarn)`},
		{`{"rope_type":"yarn"}`, format.RopeScaling{}, `rope_scaling: field "factor" missing`},
		{`{"rope_type":"yarn","factor":0.5}`, format.RopeScaling{}, `rope_scaling: factor 0.5, want at least 1`},
		{`{"rope_type":"yarn","factor":4,"mscale":1}`, format.RopeScaling{}, `rope_scaling: "mscale" is not supported`},
	} {
		cfg, err := parseRope(t, c.json)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%s: %v, want %q", c.json, err, c.err)
			}
			continue
		}
		if err != nil || cfg.RopeScaling != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.json, cfg.RopeScaling, err, c.want)
		}
	}
	cfg, _ := parseRope(t, `{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}`)
	if cfg.MaxContext() != 131072 {
		t.Errorf("maximum context %d, want 131072", cfg.MaxContext())
	}
}

// TestSetRopeScaling: the compile flag means what the config field means.
func TestSetRopeScaling(t *testing.T) {
	cfg, _ := parseRope(t, `null`)
	if err := SetRopeScaling(&cfg, "yarn:4:32768"); err != nil {
		t.Fatal(err)
	}
	same, _ := parseRope(t, `{"rope_type":"yarn","factor":4,"original_max_position_embeddings":32768}`)
	if cfg.RopeScaling != same.RopeScaling {
		t.Errorf("yarn:4:32768 gives %+v, the config field %+v", cfg.RopeScaling, same.RopeScaling)
	}
	if err := SetRopeScaling(&cfg, "none"); err != nil || cfg.RopeScaling != (format.RopeScaling{}) {
		t.Errorf("none: %+v, %v", cfg.RopeScaling, err)
	}
	for _, bad := range []string{"yarn", "yarn:x", "ntk:2", "yarn:4:0", "linear:0.5", "yarn:NaN", "linear:Inf", "yarn:-inf:32768"} {
		if err := SetRopeScaling(&cfg, bad); err == nil {
			t.Errorf("%q accepted, as %+v", bad, cfg.RopeScaling)
		}
	}
}

// TestRopeFrequencies checks the scaled frequencies against values worked
// out by hand from transformers' formulas (head_dim 8, theta 10000): linear
// divides every one by the factor; yarn with an original context of 64
// keeps pair 0, divides pairs 2 and 3, and ramps between.
func TestRopeFrequencies(t *testing.T) {
	c := format.Config{HeadDim: 8, RopeTheta: 10000}
	base := []float64{1, 0.1, 0.01, 0.001}
	c.RopeScaling = format.RopeScaling{Type: "linear", Factor: 2, AttentionFactor: 1}
	f, s := RopeFrequencies(&c)
	for i := range base {
		if math.Abs(f[i]-base[i]/2) > 1e-15 || s != 1 {
			t.Errorf("linear: pair %d: %g (scale %g)", i, f[i], s)
		}
	}
	// yarn: correction dimension for r rotations = 8 ln(64 / (2πr)) / (2 ln 10000);
	// r = 32: ln(0.3183) < 0, so low = floor(-0.124) -> 0;
	// r = 1: 8 ln(10.186) / 18.42 = 1.0082, high = ceil -> 2.
	// The ramp (i - 0) / 2 over pairs 0..3: 0, 0.5, 1, 1; the kept share is
	// 1 minus it.
	c.RopeScaling = format.RopeScaling{Type: "yarn", Factor: 4, OriginalMax: 64, AttentionFactor: 1.1, BetaFast: 32, BetaSlow: 1, Truncate: true}
	f, s = RopeFrequencies(&c)
	keep := []float64{1, 0.5, 0, 0}
	for i := range base {
		want := base[i]/4*(1-keep[i]) + base[i]*keep[i]
		if math.Abs(f[i]-want) > 1e-15 || s != 1.1 {
			t.Errorf("yarn: pair %d: %g, want %g (scale %g)", i, f[i], want, s)
		}
	}
}

// TestConfigDefaults: the fields a config.json may leave out take
// transformers' defaults for its model type: head_dim 128 for Qwen3, 256
// for Qwen3.5 and the hidden size over the heads for Qwen2 and
// Qwen3-MoE; Qwen3.5's partial_rotary_factor 0.25.
func TestConfigDefaults(t *testing.T) {
	base := `"hidden_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 8, "intermediate_size": 3072,
		"vocab_size": 151936, "max_position_embeddings": 40960`
	for typ, want := range map[string]int{"qwen2": 64, "qwen3": 128} {
		c, err := Builtin().ParseConfig([]byte(`{"model_type": "` + typ + `", ` + base + `}`))
		if err != nil || c.HeadDim != want {
			t.Errorf("%s without head_dim: head_dim %d (%v), want %d", typ, c.HeadDim, err, want)
		}
	}
	c, err := Builtin().ParseConfig([]byte(`{"model_type": "qwen3_moe", ` + base + `, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64}`))
	if err != nil || c.HeadDim != 64 {
		t.Errorf("qwen3_moe without head_dim: head_dim %d (%v), want 64", c.HeadDim, err)
	}
	var q35 map[string]any
	raw, err := os.ReadFile("../../testdata/tiny-q35/config.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &q35); err != nil {
		t.Fatal(err)
	}
	text := q35["text_config"].(map[string]any)
	delete(text, "partial_rotary_factor")
	delete(text["rope_parameters"].(map[string]any), "partial_rotary_factor")
	delete(text, "head_dim")
	b, _ := json.Marshal(q35)
	if c, err := Builtin().ParseConfig(b); err != nil || c.HeadDim != 256 || c.Rotary() != 64 {
		t.Errorf("qwen3_5 without head_dim and partial_rotary_factor: head_dim %d, %d rotated (%v), want 256 and 64", c.HeadDim, c.Rotary(), err)
	}
}

// TestConfigRefusesWhatItCannotRead: an optional field of -1, or of the
// wrong type, is refused by name rather than read as absent, which put
// the default in its place (num_key_value_heads -1 compiled as full
// multi-head attention).
func TestConfigRefusesWhatItCannotRead(t *testing.T) {
	base := `"model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 96,
		"vocab_size": 300, "max_position_embeddings": 4096`
	for field, want := range map[string]string{
		`"num_key_value_heads": -1`: `field "num_key_value_heads" = -1 is not a positive integer`,
		`"head_dim": -1`:            `field "head_dim" = -1 is not a positive integer`,
		`"intermediate_size": -1`:   `field "intermediate_size" = -1 is not a positive integer`,
		`"hidden_act": 5`:           `field "hidden_act": json: cannot unmarshal number into Go value of type string`,
	} {
		_, err := Builtin().ParseConfig([]byte(`{` + base + `, ` + field + `}`))
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", field, err, want)
		}
	}
}

// A Qwen2 config whose heads do not divide hidden_size, with no head_dim,
// is the config's fault, said of its fields; Qwen3's default head_dim
// (128) makes the same sizes a valid Qwen3 config.
func TestConfigHeadsMustDivideHidden(t *testing.T) {
	cfg := func(model string) string {
		return `{"model_type": "` + model + `", "hidden_size": 100, "num_hidden_layers": 2, "num_attention_heads": 8,
			"intermediate_size": 96, "vocab_size": 300, "max_position_embeddings": 4096}`
	}
	_, err := Builtin().ParseConfig([]byte(cfg("qwen2")))
	want := `field "hidden_size" = 100 is not a multiple of "num_attention_heads" = 8, and no "head_dim" gives the head size`
	if err == nil || err.Error() != want {
		t.Errorf("qwen2: %v, want %q", err, want)
	}
	c, err := Builtin().ParseConfig([]byte(cfg("qwen3")))
	if err != nil || c.HeadDim != 128 {
		t.Errorf("qwen3: head_dim %d, %v; want 128", c.HeadDim, err)
	}
	c, err = Builtin().ParseConfig([]byte(strings.Replace(cfg("qwen2"), "100", "96", 1)))
	if err != nil || c.HeadDim != 12 {
		t.Errorf("qwen2 96/8: head_dim %d, %v; want 12", c.HeadDim, err)
	}
}
