package arch

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/qwenc/qwenc/format"
)

// GGUF files (llama.cpp's, LM Studio's, Ollama's store) hold the same
// models under other names: an architecture ("qwen3", "qwen35moe"), keys
// of hyperparameters under its name, tensors named blk.N.attn_q.weight,
// some of them laid out as llama.cpp computes with them. An architecture
// unit that reads them (ggufUnit) says how its config.json fields come
// from the keys, and where each section's values are in the file and
// what undoes llama.cpp's changes to them; the compiler reads a GGUF
// through this, as it reads a checkpoint through the Hugging Face names.
//
// llama.cpp's converter permutes the rows of q and k for the models it
// runs with interleaved RoPE (LLaMA's family); the Qwen architectures
// rotate halves (NEOX), as transformers does, so their q and k are stored
// as Hugging Face has them and need no permutation back.

// GGUFMeta is what an architecture reads of a GGUF file (package gguf's
// File gives it): metadata values by key, as the Go values of their
// types (uint32, float32, string, bool, []int32, ...), and the
// dimensions of tensors by name, in ggml's order (Dims[0] is a row).
type GGUFMeta interface {
	Value(key string) (any, bool)
	TensorDims(name string) ([]uint64, bool)
}

// ggufUnit is an architecture whose models come as GGUF files too.
type ggufUnit interface {
	// GGUFArch is its name in a GGUF's general.architecture.
	GGUFArch() string
	// ggufConfig adds the architecture's own config.json fields to f.
	ggufConfig(m GGUFMeta, f *ggufFields) error
	// GGUFTensor is where section t's values are in a GGUF.
	GGUFTensor(c *format.Config, t *Tensor) GGUFSource
}

// GGUFSource is where a section's values are in a GGUF file.
type GGUFSource struct {
	// Name is the GGUF tensor. For stacked experts it holds them all,
	// [experts, n, k] in row-major order, as the section does.
	Name string
	// Transform turns the tensor's values into the section's (its
	// SrcShape, if any, in row-major order: ggml's dimensions reversed).
	// The GGUF's shape may also differ from the section's by leading
	// dimensions of 1: ggml stores a one-row matrix as a vector.
	Transform Transform
}

// GGUFTensor returns where section t of an architecture's file is in a
// GGUF; ok is false for an architecture that does not read GGUF files.
func GGUFTensor(a Arch, c *format.Config, t *Tensor) (src GGUFSource, ok bool) {
	u, ok := a.(ggufUnit)
	if !ok {
		return GGUFSource{}, false
	}
	return u.GGUFTensor(c, t), true
}

// ForGGUF returns the architecture of a GGUF's general.architecture.
func (r Registry) ForGGUF(name string) (Arch, error) {
	var known []string
	for _, a := range r {
		if u, ok := a.(ggufUnit); ok {
			if u.GGUFArch() == name {
				return a, nil
			}
			known = append(known, u.GGUFArch())
		}
	}
	return nil, fmt.Errorf("general.architecture %q is not supported (%s)", name, strings.Join(known, ", "))
}

// ParseGGUF reads a GGUF's metadata into a config, as ParseConfig reads
// config.json's, and returns its architecture. An error names the key it
// is about ("qwen3.block_count"); the caller names the file.
func (r Registry) ParseGGUF(m GGUFMeta) (format.Config, Arch, error) {
	var c format.Config
	v, ok := m.Value("general.architecture")
	name, isString := v.(string)
	if !ok || !isString {
		return c, nil, fmt.Errorf("general.architecture: missing, or not a string")
	}
	a, err := r.ForGGUF(name)
	if err != nil {
		return c, nil, err
	}
	f := &ggufFields{m: m, arch: name, raw: map[string]json.RawMessage{}, origin: map[string]string{}}
	if err := f.common(); err != nil {
		return c, nil, err
	}
	if err := a.(ggufUnit).ggufConfig(m, f); err != nil {
		return c, nil, err
	}
	c.ModelType = a.ModelType()
	err = configure(&c, a, &HFConfig{raw: f.raw, origin: f.origin})
	return c, a, err
}

// ggufFields builds a config.json's fields from a GGUF's keys, each
// field remembering the key it came from.
type ggufFields struct {
	m      GGUFMeta
	arch   string // the keys' prefix
	raw    map[string]json.RawMessage
	origin map[string]string
}

// key is the name of the architecture's key k ("block_count" ->
// "qwen3.block_count").
func (f *ggufFields) key(k string) string { return f.arch + "." + k }

// set gives field the value v, naming where it came from.
func (f *ggufFields) set(field string, v any, from string) {
	b, err := json.Marshal(v)
	if err != nil {
		// A value of the metadata's own types always marshals but for a
		// float that is not finite, which no field takes.
		b = []byte(`"` + fmt.Sprint(v) + `"`)
	}
	f.raw[field] = b
	f.origin[field] = from
}

// copy sets field from the architecture's key k when it is there; the
// field names the key either way, so that a missing required field is
// reported as the missing key.
func (f *ggufFields) copy(field, k string) {
	key := f.key(k)
	f.origin[field] = key
	if v, ok := f.m.Value(key); ok {
		f.set(field, v, key)
	}
}

// number reads the architecture's key k as a number. It goes through
// the value's shortest decimal form, as set does: a float32 1e-06 is read
// as the 1e-06 of the config.json it was converted from, not as
// 9.99999997e-07.
func (f *ggufFields) number(k string) (float64, bool, error) {
	key := f.key(k)
	v, ok := f.m.Value(key)
	if !ok {
		return 0, false, nil
	}
	switch v.(type) {
	case uint8, int8, uint16, int16, uint32, int32, uint64, int64, float32, float64:
		var x float64
		b, err := json.Marshal(v)
		if err == nil {
			err = json.Unmarshal(b, &x)
		}
		if err == nil {
			return x, true, nil
		}
	}
	return 0, false, fmt.Errorf("key %q = %v (%T) is not a number", key, v, v)
}

// has reports whether the file has tensor name.
func (f *ggufFields) has(name string) bool {
	_, ok := f.m.TensorDims(name)
	return ok
}

// common sets the fields every architecture shares: the model's sizes,
// RoPE and its scaling, the norm's epsilon, whether the head is tied (no
// output.weight), and the vocabulary (the embedding's rows).
func (f *ggufFields) common() error {
	for _, c := range [][2]string{
		{"hidden_size", "embedding_length"}, {"num_hidden_layers", "block_count"},
		{"num_attention_heads", "attention.head_count"}, {"num_key_value_heads", "attention.head_count_kv"},
		{"intermediate_size", "feed_forward_length"}, {"max_position_embeddings", "context_length"},
		{"head_dim", "attention.key_length"}, {"rope_theta", "rope.freq_base"},
		{"rms_norm_eps", "attention.layer_norm_rms_epsilon"},
	} {
		f.copy(c[0], c[1])
	}
	// Keys llama.cpp requires, which config.json may leave to a
	// default: a file without them is not one llama.cpp wrote or runs.
	if err := f.required("attention.layer_norm_rms_epsilon"); err != nil {
		return err
	}
	if _, ok, _ := f.number("attention.key_length"); !ok {
		// llama.cpp's width of a head without the key, whatever the
		// architecture's config would default to.
		if err := f.ratio("head_dim", "embedding_length", "attention.head_count"); err != nil {
			return err
		}
	}
	if k, ok, err := f.number("attention.key_length"); err != nil {
		return err
	} else if v, vok, err := f.number("attention.value_length"); err != nil {
		return err
	} else if ok && vok && k != v {
		return fmt.Errorf("key %q = %v differs from %q = %v: attention with keys and values of different widths is not supported", f.key("attention.key_length"), k, f.key("attention.value_length"), v)
	}
	dims, ok := f.m.TensorDims("token_embd.weight")
	if !ok || len(dims) != 2 {
		return fmt.Errorf("tensor \"token_embd.weight\": missing, or not a matrix")
	}
	f.set("vocab_size", dims[1], "the rows of tensor \"token_embd.weight\"")
	if n, ok, err := f.number("vocab_size"); err != nil {
		return err
	} else if ok && n != float64(dims[1]) {
		return fmt.Errorf("key %q = %v, but tensor \"token_embd.weight\" has %d rows", f.key("vocab_size"), n, dims[1])
	}
	f.set("tie_word_embeddings", !f.has("output.weight"), "the absence of tensor \"output.weight\"")
	f.set("hidden_act", "silu", "the architecture")
	return f.ropeScaling()
}

// ropeScaling sets rope_scaling from the rope.scaling.* keys (and the
// older rope.scale_linear).
func (f *ggufFields) ropeScaling() error {
	typ := "none"
	if v, ok := f.m.Value(f.key("rope.scaling.type")); ok {
		s, isString := v.(string)
		if !isString {
			return fmt.Errorf("key %q = %v is not a string", f.key("rope.scaling.type"), v)
		}
		typ = s
	}
	factor, hasFactor, err := f.number("rope.scaling.factor")
	if err != nil {
		return err
	}
	if lin, ok, err := f.number("rope.scale_linear"); err != nil {
		return err
	} else if ok && !hasFactor {
		typ, factor, hasFactor = "linear", lin, true
	}
	if typ == "none" || (hasFactor && factor == 1 && typ == "linear") {
		return nil
	}
	if typ != "linear" && typ != "yarn" {
		return fmt.Errorf("key %q = %q: not supported (none, linear, yarn)", f.key("rope.scaling.type"), typ)
	}
	if a, ok, err := f.number("rope.scaling.attn_factor"); err != nil {
		return err
	} else if ok && a != 1 {
		return fmt.Errorf("key %q = %v: a yarn attention factor other than its default is not supported", f.key("rope.scaling.attn_factor"), a)
	}
	rs := map[string]any{"rope_type": typ, "factor": factor}
	for _, k := range [][2]string{{"original_max_position_embeddings", "rope.scaling.original_context_length"},
		{"beta_fast", "rope.scaling.yarn_beta_fast"}, {"beta_slow", "rope.scaling.yarn_beta_slow"}} {
		if v, ok, err := f.number(k[1]); err != nil {
			return err
		} else if ok {
			rs[k[0]] = v
		}
	}
	f.set("rope_scaling", rs, f.key("rope.scaling.*"))
	return nil
}

// ggufName names a section's GGUF tensor: the layer's blk.N.<name> for
// a layer section (MTP layers are numbered after the main ones, as in
// GGUF), the model's for the others.
func ggufName(c *format.Config, t *Tensor, layerNames map[string]string) string {
	if t.Layer >= 0 {
		if n, ok := layerNames[t.Role]; ok {
			return fmt.Sprintf("blk.%d.%s", t.Layer, n)
		}
		return ""
	}
	switch t.Role {
	case format.SecEmbed:
		return "token_embd.weight"
	case format.SecNorm:
		return "output_norm.weight"
	case format.SecLMHead:
		if c.TieEmbeddings {
			return "token_embd.weight"
		}
		return "output.weight"
	}
	return ""
}

// ggufLayerNames are the GGUF names of the layer sections of the
// attention models, by role (llama.cpp's LLM_TENSOR_NAMES).
var ggufLayerNames = map[string]string{
	"input_layernorm": "attn_norm.weight",
	"q_proj":          "attn_q.weight", "k_proj": "attn_k.weight", "v_proj": "attn_v.weight",
	"q_bias": "attn_q.bias", "k_bias": "attn_k.bias", "v_bias": "attn_v.bias",
	"q_norm": "attn_q_norm.weight", "k_norm": "attn_k_norm.weight",
	"o_proj":                   "attn_output.weight",
	"post_attention_layernorm": "ffn_norm.weight",
	"gate_proj":                "ffn_gate.weight", "up_proj": "ffn_up.weight", "down_proj": "ffn_down.weight",
	"router":            "ffn_gate_inp.weight",
	"experts.gate_proj": "ffn_gate_exps.weight", "experts.up_proj": "ffn_up_exps.weight", "experts.down_proj": "ffn_down_exps.weight",
}

// required refuses a file without the architecture's key k, which
// llama.cpp requires, where the config's field would take a default
// (transformers') that need not be the model's.
func (f *ggufFields) required(k string) error {
	if _, ok := f.m.Value(f.key(k)); !ok {
		return fmt.Errorf("key %q missing (llama.cpp requires it too)", f.key(k))
	}
	return nil
}

// ratio sets field to a / b, from the architecture's keys ka and kb.
func (f *ggufFields) ratio(field, ka, kb string) error {
	a, okA, err := f.number(ka)
	if err != nil {
		return err
	}
	b, okB, err := f.number(kb)
	if err != nil {
		return err
	}
	from := fmt.Sprintf("%s / %s", f.key(ka), f.key(kb))
	f.origin[field] = from
	if okA && okB && b != 0 {
		f.set(field, a/b, from)
	}
	return nil
}

// layers is num_hidden_layers as set, for the units that list layers.
func (f *ggufFields) layers() (int, error) {
	if _, ok := f.raw["num_hidden_layers"]; !ok {
		return 0, fmt.Errorf("field %q missing", f.key("block_count"))
	}
	var n float64
	if err := json.Unmarshal(f.raw["num_hidden_layers"], &n); err != nil || n < 1 || n > 1<<16 || n != math.Trunc(n) {
		return 0, fmt.Errorf("key %q = %s is not a number of layers", f.key("block_count"), f.raw["num_hidden_layers"])
	}
	return int(n), nil
}
