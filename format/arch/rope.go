package arch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/qwenc/qwenc/format"
)

// RoPE and its scaling, as transformers' modeling_rope_utils computes
// them, shared by every architecture here.

// RopeFrequencies returns RoPE's inverse frequency for each pair of a
// head's rotated dimensions (pair t rotates element t with t + d/2, d
// the rotated dimensions: head_dim, or Qwen3.5's first quarter of it,
// from which transformers computes the frequencies too), in float64 so
// long positions stay exact before rounding, and the factor that
// multiplies cos and sin (1 but for yarn).
func RopeFrequencies(c *format.Config) (invFreq []float64, attentionFactor float64) {
	d := c.Rotary()
	invFreq = make([]float64, d/2)
	for i := range invFreq {
		invFreq[i] = 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(d))
	}
	rs := &c.RopeScaling
	switch rs.Type {
	case "linear":
		for i := range invFreq {
			invFreq[i] /= rs.Factor
		}
		return invFreq, 1
	case "yarn":
		// _compute_yarn_parameters: pairs that turn fewer than beta_slow
		// times over the original context are interpolated (divided by
		// the factor), those that turn more than beta_fast times are kept,
		// with a linear ramp over the dimensions in between.
		corr := func(rotations float64) float64 {
			return float64(d) * math.Log(float64(rs.OriginalMax)/(rotations*2*math.Pi)) / (2 * math.Log(c.RopeTheta))
		}
		low, high := corr(rs.BetaFast), corr(rs.BetaSlow)
		if rs.Truncate {
			low, high = math.Floor(low), math.Ceil(high)
		}
		low, high = max(low, 0), min(high, float64(d-1))
		if low == high {
			high += 0.001 // transformers' guard against a zero-width ramp
		}
		for i, f := range invFreq {
			ramp := min(max((float64(i)-low)/(high-low), 0), 1)
			extrapolation := 1 - ramp
			invFreq[i] = f/rs.Factor*(1-extrapolation) + f*extrapolation
		}
		return invFreq, rs.AttentionFactor
	}
	return invFreq, 1
}

// ropeScaling reads config.json's rope_scaling (absent, null or type
// "default": none) into c.RopeScaling, with transformers' defaults.
// max_position_embeddings must already be in c.
func ropeScaling(c *format.Config, hf *HFConfig) error {
	// Newer configs (transformers 5, Qwen3.5) give RoPE's parameters as
	// one object, rope_parameters: theta and the scaling's fields.
	if rp, ok, err := hf.Object("rope_parameters"); err != nil || ok {
		if err != nil {
			return err
		}
		if err := rp.Float("rope_theta", &c.RopeTheta, false); err != nil {
			return err
		}
		return resolveRopeScaling(c, rp, strings.TrimSuffix(rp.path, "."))
	}
	raw, ok := hf.present("rope_scaling")
	if !ok {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return fmt.Errorf("field %q: %w", hf.name("rope_scaling"), err)
	}
	return resolveRopeScaling(c, &HFConfig{raw: fields}, "rope_scaling")
}

// resolveRopeScaling fills c.RopeScaling from rope_scaling's fields. The
// factor is rope_scaling's own: some transformers versions derive yarn's
// from max_position_embeddings / original_max_position_embeddings instead,
// but vLLM and llama.cpp read the field, and Qwen's model cards give it.
func resolveRopeScaling(c *format.Config, rs *HFConfig, what string) error {
	typ := ""
	for _, k := range []string{"rope_type", "type"} {
		if _, ok := rs.present(k); ok {
			s, err := rs.String(k)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			typ = s
			break
		}
	}
	r := format.RopeScaling{Type: typ, OriginalMax: c.MaxPositions, AttentionFactor: 1}
	switch typ {
	case "", "default":
		c.RopeScaling = format.RopeScaling{}
		return nil
	case "linear", "yarn":
	default:
		return fmt.Errorf("%s: type %q not supported (linear, yarn)", what, typ)
	}
	for _, k := range []string{"mscale", "mscale_all_dim"} {
		if _, ok := rs.present(k); ok {
			return fmt.Errorf("%s: %q is not supported", what, k)
		}
	}
	if err := rs.Float("factor", &r.Factor, true); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !(r.Factor >= 1) {
		return fmt.Errorf("%s: factor %g, want at least 1", what, r.Factor)
	}
	if err := rs.Int("original_max_position_embeddings", &r.OriginalMax, false); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if typ == "yarn" {
		r.AttentionFactor = 0.1*math.Log(r.Factor) + 1
		r.BetaFast, r.BetaSlow, r.Truncate = 32, 1, true
		for _, f := range []struct {
			k   string
			dst *float64
		}{{"attention_factor", &r.AttentionFactor}, {"beta_fast", &r.BetaFast}, {"beta_slow", &r.BetaSlow}} {
			if err := rs.Float(f.k, f.dst, false); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
		}
		if err := rs.Bool("truncate", &r.Truncate); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	c.RopeScaling = r
	return nil
}

// SetRopeScaling overrides a config's RoPE scaling with a command-line
// spec, as if config.json said so: "none", "linear:FACTOR" or
// "yarn:FACTOR[:ORIGINAL]" (ORIGINAL: original_max_position_embeddings,
// default max_position_embeddings). Qwen3's model cards ask for
// yarn:4:32768.
func SetRopeScaling(c *format.Config, spec string) error {
	if spec == "none" {
		c.RopeScaling = format.RopeScaling{}
		return nil
	}
	parts := strings.Split(spec, ":")
	bad := fmt.Errorf("--rope-scaling %q: want none, linear:FACTOR or yarn:FACTOR[:ORIGINAL_CONTEXT]", spec)
	if len(parts) < 2 || len(parts) > 3 || (parts[0] != "linear" && parts[0] != "yarn") {
		return bad
	}
	fields := map[string]any{"rope_type": parts[0]}
	// ParseFloat takes NaN and Inf, which JSON cannot carry: the fields
	// below then came out empty, and the spec read as no scaling at all.
	f, err := strconv.ParseFloat(parts[1], 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return bad
	}
	fields["factor"] = f
	if len(parts) == 3 {
		n, err := strconv.Atoi(parts[2])
		if err != nil {
			return bad
		}
		fields["original_max_position_embeddings"] = n
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return fmt.Errorf("--rope-scaling %q: %w", spec, err)
	}
	var raw map[string]json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&raw); err != nil {
		return fmt.Errorf("--rope-scaling %q: %w", spec, err)
	}
	if err := resolveRopeScaling(c, &HFConfig{raw: raw}, "rope_scaling"); err != nil {
		return fmt.Errorf("--rope-scaling %q: %w", spec, err)
	}
	return c.Validate()
}
