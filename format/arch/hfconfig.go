package arch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/qwenc/qwenc/format"
)

// HFConfig is a parsed config.json, or an object inside it, whose fields
// are read by name, so that an error names the field (with its path in
// the file: "text_config.hidden_size").
type HFConfig struct {
	raw  map[string]json.RawMessage
	path string // "" at the top, else the object's path and a dot
	// origin, for a config made from a GGUF file's metadata, names the
	// key (or the keys) each field comes from, for errors.
	origin map[string]string
}

// name is field k's path in the file, or what it was made from.
func (hf *HFConfig) name(k string) string {
	if o, ok := hf.origin[k]; ok {
		return o
	}
	return hf.path + k
}

// Object reads a field that is a JSON object, for its own fields; ok is
// false when it is absent or null.
func (hf *HFConfig) Object(k string) (sub *HFConfig, ok bool, err error) {
	m, ok := hf.present(k)
	if !ok {
		return nil, false, nil
	}
	sub = &HFConfig{path: hf.name(k) + "."}
	if err := json.Unmarshal(m, &sub.raw); err != nil {
		return nil, false, fmt.Errorf("field %q: %w", hf.name(k), err)
	}
	return sub, true, nil
}

// Strings reads a list of strings (absent or null: unchanged).
func (hf *HFConfig) Strings(k string, dst *[]string) error {
	if m, ok := hf.present(k); ok {
		if err := json.Unmarshal(m, dst); err != nil {
			return fmt.Errorf("field %q: %w", hf.name(k), err)
		}
	}
	return nil
}

// present reports whether field k is set to something other than null.
func (hf *HFConfig) present(k string) (json.RawMessage, bool) {
	m, ok := hf.raw[k]
	return m, ok && !bytes.Equal(m, []byte("null"))
}

// String reads a required string field.
func (hf *HFConfig) String(k string) (string, error) {
	m, ok := hf.present(k)
	if !ok {
		return "", fmt.Errorf("field %q missing", hf.name(k))
	}
	var s string
	if err := json.Unmarshal(m, &s); err != nil {
		return "", fmt.Errorf("field %q: %w", hf.name(k), err)
	}
	return s, nil
}

// Float reads a number; absent or null leaves dst unchanged unless the
// field is required.
func (hf *HFConfig) Float(k string, dst *float64, required bool) error {
	m, ok := hf.present(k)
	if !ok {
		if required {
			return fmt.Errorf("field %q missing", hf.name(k))
		}
		return nil
	}
	if err := json.Unmarshal(m, dst); err != nil {
		return fmt.Errorf("field %q: %w", hf.name(k), err)
	}
	return nil
}

// Int reads a positive integer, as Float.
func (hf *HFConfig) Int(k string, dst *int, required bool) error {
	return hf.intFrom(k, dst, required, 1)
}

// Count is Int for a field that may also be 0 (a count of optional
// layers).
func (hf *HFConfig) Count(k string, dst *int) error {
	return hf.intFrom(k, dst, false, 0)
}

func (hf *HFConfig) intFrom(k string, dst *int, required bool, lo float64) error {
	// Absence is asked of the field itself, not read from a sentinel
	// value: a config that says -1 would have passed for one that says
	// nothing, and the default been used in its place.
	if _, ok := hf.present(k); !ok && !required {
		return nil
	}
	var f float64
	if err := hf.Float(k, &f, required); err != nil {
		return err
	}
	if f != float64(int(f)) || f < lo || f > 1<<30 {
		what := "a positive integer"
		if lo == 0 {
			what = "an integer, 0 or more"
		}
		return fmt.Errorf("field %q = %v is not %s", hf.name(k), f, what)
	}
	*dst = int(f)
	return nil
}

// Ints reads a list of integers (absent or null: unchanged).
func (hf *HFConfig) Ints(k string, dst *[]int) error {
	if m, ok := hf.present(k); ok {
		if err := json.Unmarshal(m, dst); err != nil {
			return fmt.Errorf("field %q: %w", hf.name(k), err)
		}
	}
	return nil
}

// Bool reads a boolean (absent or null: unchanged).
func (hf *HFConfig) Bool(k string, dst *bool) error {
	if m, ok := hf.present(k); ok {
		if err := json.Unmarshal(m, dst); err != nil {
			return fmt.Errorf("field %q: %w", hf.name(k), err)
		}
	}
	return nil
}

// ParseConfig reads config.json: the fields every architecture shares,
// then those of its architecture, found in r. A multimodal checkpoint
// (Qwen3.5 ships as Qwen3_5ForConditionalGeneration) keeps the text
// model's fields under text_config, which is read instead of the top
// level; its model_type is the top level's, and a text-only config whose
// model_type names the text part ("qwen3_5_text") is that model. An error
// names the field; the caller names the file, whose path it knows.
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
	text, nested, err := hf.Object("text_config")
	if err != nil {
		return c, err
	}
	if nested {
		hf = text
	} else {
		c.ModelType = strings.TrimSuffix(c.ModelType, "_text")
	}
	a, err := r.For(c.ModelType)
	if err != nil {
		return c, err
	}
	err = configure(&c, a, hf)
	return c, err
}

// configure reads the fields every architecture shares, then a's own,
// into c (whose ModelType is set), and validates the result.
func configure(c *format.Config, a Arch, hf *HFConfig) error {
	for _, f := range []struct {
		k   string
		dst *int
	}{
		{"hidden_size", &c.Hidden}, {"num_hidden_layers", &c.Layers},
		{"num_attention_heads", &c.Heads}, {"vocab_size", &c.Vocab}, {"max_position_embeddings", &c.MaxPositions},
	} {
		if err := hf.Int(f.k, f.dst, true); err != nil {
			return err
		}
	}
	// A model whose every layer routes to experts has no dense width
	// (Config.Validate checks that the dense layers have one).
	if err := hf.Int("intermediate_size", &c.Intermediate, false); err != nil {
		return err
	}
	c.KVHeads = c.Heads
	if err := hf.Int("num_key_value_heads", &c.KVHeads, false); err != nil {
		return err
	}
	if err := hf.Int("head_dim", &c.HeadDim, false); err != nil {
		return err
	}
	c.RopeTheta = 10000
	if err := hf.Float("rope_theta", &c.RopeTheta, false); err != nil {
		return err
	}
	c.RMSNormEps = 1e-6
	if err := hf.Float("rms_norm_eps", &c.RMSNormEps, false); err != nil {
		return err
	}
	// transformers' Qwen configs all default to an untied head.
	if err := hf.Bool("tie_word_embeddings", &c.TieEmbeddings); err != nil {
		return err
	}
	var sliding bool
	if err := hf.Bool("use_sliding_window", &sliding); err != nil {
		return err
	}
	if sliding {
		return fmt.Errorf("field %q is true; sliding-window attention is not supported", hf.name("use_sliding_window"))
	}
	if err := ropeScaling(c, hf); err != nil {
		return err
	}
	// Absent is silu, transformers' default; a value of another type is
	// no activation this runs.
	if _, ok := hf.present("hidden_act"); ok {
		act, err := hf.String("hidden_act")
		if err != nil {
			return err
		}
		if act != "silu" {
			return fmt.Errorf("field %q = %q; only silu is supported", hf.name("hidden_act"), act)
		}
	}
	if err := a.Configure(c, hf); err != nil {
		return err
	}
	if c.HeadDim == 0 {
		// Neither config.json nor the architecture's default gives a head
		// size: it is hidden_size / num_attention_heads, which must divide,
		// or the q_proj shape check would be the first to object, naming a
		// tensor for the config's fault.
		if c.Hidden%c.Heads != 0 {
			return fmt.Errorf("field %q = %d is not a multiple of %q = %d, and no %q gives the head size", hf.name("hidden_size"), c.Hidden, hf.name("num_attention_heads"), c.Heads, hf.name("head_dim"))
		}
		c.HeadDim = c.Hidden / c.Heads
	}
	if err := c.Validate(); err != nil {
		return err
	}
	return nil
}
