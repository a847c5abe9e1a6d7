package arch

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/qwenc/qwenc/format"
)

// HFConfig is a parsed config.json whose fields are read by name, so
// that an error names the field.
type HFConfig struct{ raw map[string]json.RawMessage }

// present reports whether field k is set to something other than null.
func (hf *HFConfig) present(k string) (json.RawMessage, bool) {
	m, ok := hf.raw[k]
	return m, ok && !bytes.Equal(m, []byte("null"))
}

// String reads a required string field.
func (hf *HFConfig) String(k string) (string, error) {
	m, ok := hf.present(k)
	if !ok {
		return "", fmt.Errorf("field %q missing", k)
	}
	var s string
	if err := json.Unmarshal(m, &s); err != nil {
		return "", fmt.Errorf("field %q: %w", k, err)
	}
	return s, nil
}

// Float reads a number; absent or null leaves dst unchanged unless the
// field is required.
func (hf *HFConfig) Float(k string, dst *float64, required bool) error {
	m, ok := hf.present(k)
	if !ok {
		if required {
			return fmt.Errorf("field %q missing", k)
		}
		return nil
	}
	if err := json.Unmarshal(m, dst); err != nil {
		return fmt.Errorf("field %q: %w", k, err)
	}
	return nil
}

// Int reads a positive integer, as Float.
func (hf *HFConfig) Int(k string, dst *int, required bool) error {
	f := float64(-1)
	if err := hf.Float(k, &f, required); err != nil {
		return err
	}
	if f == -1 && !required {
		return nil
	}
	if f != float64(int(f)) || f < 1 || f > 1<<30 {
		return fmt.Errorf("field %q = %v is not a positive integer", k, f)
	}
	*dst = int(f)
	return nil
}

// Ints reads a list of integers (absent or null: unchanged).
func (hf *HFConfig) Ints(k string, dst *[]int) error {
	if m, ok := hf.present(k); ok {
		if err := json.Unmarshal(m, dst); err != nil {
			return fmt.Errorf("field %q: %w", k, err)
		}
	}
	return nil
}

// Bool reads a boolean (absent or null: unchanged).
func (hf *HFConfig) Bool(k string, dst *bool) error {
	if m, ok := hf.present(k); ok {
		if err := json.Unmarshal(m, dst); err != nil {
			return fmt.Errorf("field %q: %w", k, err)
		}
	}
	return nil
}

// ParseConfig reads config.json: the fields every architecture shares,
// then those of its architecture, found in r. An error names the field;
// the caller names the file, whose path it knows.
func (r Registry) ParseConfig(b []byte) (format.Config, error) {
	hf := &HFConfig{}
	var c format.Config
	if err := json.Unmarshal(b, &hf.raw); err != nil {
		return c, err
	}
	var err error
	if c.ModelType, err = hf.String("model_type"); err != nil {
		return c, err
	}
	a, err := r.For(c.ModelType)
	if err != nil {
		return c, err
	}
	for _, f := range []struct {
		k   string
		dst *int
	}{
		{"hidden_size", &c.Hidden}, {"intermediate_size", &c.Intermediate}, {"num_hidden_layers", &c.Layers},
		{"num_attention_heads", &c.Heads}, {"vocab_size", &c.Vocab}, {"max_position_embeddings", &c.MaxPositions},
	} {
		if err := hf.Int(f.k, f.dst, true); err != nil {
			return c, err
		}
	}
	c.KVHeads = c.Heads
	if err := hf.Int("num_key_value_heads", &c.KVHeads, false); err != nil {
		return c, err
	}
	c.HeadDim = c.Hidden / c.Heads
	if err := hf.Int("head_dim", &c.HeadDim, false); err != nil {
		return c, err
	}
	c.RopeTheta = 10000
	if err := hf.Float("rope_theta", &c.RopeTheta, false); err != nil {
		return c, err
	}
	c.RMSNormEps = 1e-6
	if err := hf.Float("rms_norm_eps", &c.RMSNormEps, false); err != nil {
		return c, err
	}
	// transformers' Qwen configs all default to an untied head.
	if err := hf.Bool("tie_word_embeddings", &c.TieEmbeddings); err != nil {
		return c, err
	}
	var sliding bool
	if err := hf.Bool("use_sliding_window", &sliding); err != nil {
		return c, err
	}
	if sliding {
		return c, fmt.Errorf("field \"use_sliding_window\" is true; sliding-window attention is not supported")
	}
	if err := ropeScaling(&c, hf); err != nil {
		return c, err
	}
	if act, err := hf.String("hidden_act"); err == nil && act != "silu" {
		return c, fmt.Errorf("field \"hidden_act\" = %q; only silu is supported", act)
	}
	if err := a.Configure(&c, hf); err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}
