package compiler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/qwenc/qwenc/chat"
	"github.com/qwenc/qwenc/format"
)

// parseConfig reads config.json into the format's model config, naming the
// field that is missing or wrong; the caller names the file, whose path it
// knows.
func parseConfig(b []byte) (format.Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return format.Config{}, err
	}
	var c format.Config
	str := func(k string) (string, error) {
		var s string
		m, ok := raw[k]
		if !ok {
			return "", fmt.Errorf("field %q missing", k)
		}
		if err := json.Unmarshal(m, &s); err != nil {
			return "", fmt.Errorf("field %q: %w", k, err)
		}
		return s, nil
	}
	num := func(k string, dst *float64, required bool) error {
		m, ok := raw[k]
		if !ok || bytes.Equal(m, []byte("null")) {
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
	integer := func(k string, dst *int, required bool) error {
		var f float64 = -1
		if err := num(k, &f, required); err != nil {
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
	boolean := func(k string, dst *bool) error {
		if m, ok := raw[k]; ok && !bytes.Equal(m, []byte("null")) {
			if err := json.Unmarshal(m, dst); err != nil {
				return fmt.Errorf("field %q: %w", k, err)
			}
		}
		return nil
	}
	var err error
	if c.ModelType, err = str("model_type"); err != nil {
		return c, err
	}
	if c.ModelType != "qwen3" && c.ModelType != "qwen2" {
		return c, fmt.Errorf("model_type %q not supported (qwen3, qwen2)", c.ModelType)
	}
	for _, f := range []struct {
		k   string
		dst *int
	}{
		{"hidden_size", &c.Hidden}, {"intermediate_size", &c.Intermediate}, {"num_hidden_layers", &c.Layers},
		{"num_attention_heads", &c.Heads}, {"vocab_size", &c.Vocab}, {"max_position_embeddings", &c.MaxPositions},
	} {
		if err := integer(f.k, f.dst, true); err != nil {
			return c, err
		}
	}
	c.KVHeads = c.Heads
	if err := integer("num_key_value_heads", &c.KVHeads, false); err != nil {
		return c, err
	}
	c.HeadDim = c.Hidden / c.Heads
	if err := integer("head_dim", &c.HeadDim, false); err != nil {
		return c, err
	}
	c.RopeTheta = 10000
	if err := num("rope_theta", &c.RopeTheta, false); err != nil {
		return c, err
	}
	c.RMSNormEps = 1e-6
	if err := num("rms_norm_eps", &c.RMSNormEps, false); err != nil {
		return c, err
	}
	// transformers' Qwen2Config and Qwen3Config both default to untied.
	c.TieEmbeddings = false
	if err := boolean("tie_word_embeddings", &c.TieEmbeddings); err != nil {
		return c, err
	}
	attnBias := c.ModelType == "qwen2" // Qwen2 always has q/k/v biases
	if err := boolean("attention_bias", &attnBias); err != nil {
		return c, err
	}
	if c.ModelType == "qwen2" {
		attnBias = true
	}
	c.QKVBias = attnBias
	c.QKNorm = c.ModelType == "qwen3"
	var sliding bool
	if err := boolean("use_sliding_window", &sliding); err != nil {
		return c, err
	}
	if sliding {
		return c, fmt.Errorf("field \"use_sliding_window\" is true; sliding-window attention is not supported")
	}
	if m, ok := raw["rope_scaling"]; ok && !bytes.Equal(m, []byte("null")) {
		return c, fmt.Errorf("field \"rope_scaling\" = %s; RoPE scaling is not supported", m)
	}
	if act, err := str("hidden_act"); err == nil && act != "silu" {
		return c, fmt.Errorf("field \"hidden_act\" = %q; only silu is supported", act)
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

// parseGeneration reads generation_config.json (nil: defaults). eos ids may
// be one number or a list.
func parseGeneration(b []byte, vocab int) (format.Generation, error) {
	g := format.DefaultGeneration()
	if b == nil {
		return g, nil
	}
	var raw struct {
		EOS               json.RawMessage `json:"eos_token_id"`
		BOS               *int32          `json:"bos_token_id"`
		Pad               *int32          `json:"pad_token_id"`
		DoSample          *bool           `json:"do_sample"`
		Temperature       *float32        `json:"temperature"`
		TopK              *int64          `json:"top_k"`
		TopP              *float32        `json:"top_p"`
		MinP              *float32        `json:"min_p"`
		RepetitionPenalty *float32        `json:"repetition_penalty"`
		PresencePenalty   *float32        `json:"presence_penalty"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return g, err
	}
	if len(raw.EOS) > 0 && !bytes.Equal(raw.EOS, []byte("null")) {
		var one int32
		if err := json.Unmarshal(raw.EOS, &one); err == nil {
			g.EOS = []int32{one}
		} else if err := json.Unmarshal(raw.EOS, &g.EOS); err != nil {
			return g, fmt.Errorf("field \"eos_token_id\": %w", err)
		}
	}
	if len(g.EOS) > 16 {
		return g, fmt.Errorf("field \"eos_token_id\": %d ids, at most 16", len(g.EOS))
	}
	for _, id := range g.EOS {
		if id < 0 || int(id) >= vocab {
			return g, fmt.Errorf("field \"eos_token_id\": id %d outside the vocabulary [0, %d)", id, vocab)
		}
	}
	set := func(dst *int32, v *int32) {
		if v != nil {
			*dst = *v
		}
	}
	set(&g.BOS, raw.BOS)
	set(&g.Pad, raw.Pad)
	if raw.DoSample != nil {
		g.DoSample = *raw.DoSample
	}
	for _, f := range []struct {
		name string
		dst  *float32
		v    *float32
	}{
		{"temperature", &g.Temperature, raw.Temperature}, {"top_p", &g.TopP, raw.TopP}, {"min_p", &g.MinP, raw.MinP},
		{"repetition_penalty", &g.RepetitionPenalty, raw.RepetitionPenalty}, {"presence_penalty", &g.PresencePenalty, raw.PresencePenalty},
	} {
		if f.v != nil {
			if *f.v < 0 {
				return g, fmt.Errorf("field %q = %v is negative", f.name, *f.v)
			}
			*f.dst = *f.v
		}
	}
	if raw.TopK != nil {
		if *raw.TopK < 0 || *raw.TopK > 1<<30 {
			return g, fmt.Errorf("field \"top_k\" = %d out of range", *raw.TopK)
		}
		g.TopK = uint32(*raw.TopK)
	}
	return g, nil
}

// chatTemplate extracts the chat template from tokenizer_config.json and
// names its family (format/SPEC.md, "Chat").
func chatTemplate(tokenizerConfig []byte) (template, family string, err error) {
	var raw struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(tokenizerConfig, &raw); err != nil {
		return "", "", err
	}
	if len(raw.ChatTemplate) > 0 && !bytes.Equal(raw.ChatTemplate, []byte("null")) {
		if err := json.Unmarshal(raw.ChatTemplate, &template); err != nil {
			// Some checkpoints give a list of named templates; take "default".
			var named []struct{ Name, Template string }
			if err2 := json.Unmarshal(raw.ChatTemplate, &named); err2 != nil {
				return "", "", fmt.Errorf("field \"chat_template\": %w", err)
			}
			for _, n := range named {
				if n.Name == "default" {
					template = n.Template
				}
			}
		}
	}
	if template != "" {
		if !strings.Contains(template, "<|im_start|>") {
			return "", "", fmt.Errorf("field \"chat_template\" is not a ChatML template this runtime can render")
		}
		family = chat.DetectFamily(template).String()
	}
	return template, family, nil
}
