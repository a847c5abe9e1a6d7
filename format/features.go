package format

import (
	"fmt"
	"slices"
	"strings"
)

// Feature is something a file needs of its reader beyond the format
// itself: a block of the architecture, a RoPE scaling, an output
// (SPEC.md, "Features"). A file lists its features under the keys
// features.required and features.optional: a reader that does not know a
// required one refuses the file (FeatureError) before anything else; an
// optional one it does not know it ignores (a file stays useful without
// it, as a model runs without its speculative-decoding block).
type Feature struct {
	Name     string
	Required bool
}

// featureRule is a feature this build knows, which configs need it, and
// the key that sets it: an architecture that does not run a feature
// refuses its key by name (package arch).
type featureRule struct {
	name     string
	required bool
	key      string
	of       func(c *Config) bool
}

// features are the features this build knows, in name order.
var features = []featureRule{
	{"attn_output_gate", true, "config.attn_output_gate", func(c *Config) bool { return c.AttnGate }},
	{"embedding", true, "config.embedding", func(c *Config) bool { return c.Embedding }},
	{"hybrid", true, "hybrid.linear_layers", func(c *Config) bool { return len(c.Hybrid.Linear) > 0 }},
	{"moe", true, "moe.num_experts", func(c *Config) bool { return c.MoE.Experts > 0 }},
	{"moe.shared_expert", true, "moe.shared_expert_intermediate_size", func(c *Config) bool { return c.MoE.SharedWidth > 0 }},
	// A reader that cannot draft with it still runs the model.
	{"mtp", false, "config.mtp_num_hidden_layers", func(c *Config) bool { return c.MTPLayers > 0 }},
	{"partial_rotary", true, "config.rotary_dims", func(c *Config) bool { return c.RotaryDims != 0 && c.RotaryDims != c.HeadDim }},
	{"qk_norm", true, "config.qk_norm", func(c *Config) bool { return c.QKNorm }},
	{"qkv_bias", true, "config.qkv_bias", func(c *Config) bool { return c.QKVBias }},
	{"rope_scaling.linear", true, "rope_scaling.type", func(c *Config) bool { return c.RopeScaling.Type == "linear" }},
	{"rope_scaling.yarn", true, "rope_scaling.type", func(c *Config) bool { return c.RopeScaling.Type == "yarn" }},
}

// Features is the one place the features a config needs come from: the
// writer lists them, and a reader checks a file's list against them.
func Features(c *Config) []Feature {
	var fs []Feature
	for _, f := range features {
		if f.of(c) {
			fs = append(fs, Feature{f.name, f.required})
		}
	}
	return fs
}

// FeatureKey is the key whose value makes a config need feature name
// ("" for a feature this build does not know).
func FeatureKey(name string) string {
	for _, f := range features {
		if f.name == name {
			return f.key
		}
	}
	return ""
}

// KnownFeature reports whether this build knows a feature.
func KnownFeature(name string) bool {
	return slices.ContainsFunc(features, func(f featureRule) bool { return f.name == name })
}

// FeatureError is a file that needs a feature this build does not have.
type FeatureError struct{ Feature string }

func (e *FeatureError) Error() string {
	return fmt.Sprintf("this file needs feature %q: update qwenrun", e.Feature)
}

const (
	keyRequired = "features.required"
	keyOptional = "features.optional"
)

// Features lists the features h's file lists: those its config needs,
// and those this build does not know that it was read with, in name
// order.
func (h *Header) Features() []Feature {
	fs := slices.Concat(Features(&h.Config), h.UnknownFeatures)
	slices.SortStableFunc(fs, func(a, b Feature) int { return strings.Compare(a.Name, b.Name) })
	return fs
}

// featureEntries are the key/value entries of h's features, each list in
// name order.
func featureEntries(h *Header) []Entry {
	var req, opt []string
	for _, f := range h.Features() {
		if f.Required {
			req = append(req, f.Name)
		} else {
			opt = append(opt, f.Name)
		}
	}
	var es []Entry
	if len(req) > 0 {
		es = append(es, Entry{keyRequired, req})
	}
	if len(opt) > 0 {
		es = append(es, Entry{keyOptional, opt})
	}
	return es
}

// featureList reads a feature key's names: an array of strings, each
// named once.
func featureList(es []Entry, key string) ([]string, error) {
	i, ok := slices.BinarySearchFunc(es, key, func(e Entry, k string) int { return strings.Compare(e.Key, k) })
	if !ok {
		return nil, nil
	}
	names, ok := es[i].Value.([]string)
	if !ok {
		t, _ := TypeOf(es[i].Value)
		return nil, fmt.Errorf("key %q: a %s, want a string[]", key, t)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			return nil, fmt.Errorf("key %q: feature %q listed twice", key, n)
		}
		seen[n] = true
	}
	return names, nil
}

// checkRequired refuses a file that needs a feature this build does not
// know. It runs on the key/value block before any key is interpreted, so
// that a newer file is refused for what it needs, not for what the
// feature changed.
func checkRequired(es []Entry) error {
	req, err := featureList(es, keyRequired)
	if err != nil {
		return err
	}
	for _, n := range req {
		if !KnownFeature(n) {
			return &FeatureError{n}
		}
	}
	return nil
}

// unmarshalFeatures checks the features a file lists against those its
// config needs, and keeps the optional ones this build does not know.
func unmarshalFeatures(es []Entry, h *Header) error {
	var listed []Feature
	for _, k := range []string{keyRequired, keyOptional} {
		names, err := featureList(es, k)
		if err != nil {
			return err
		}
		for _, n := range names {
			if !KnownFeature(n) {
				h.UnknownFeatures = append(h.UnknownFeatures, Feature{n, k == keyRequired})
				continue
			}
			listed = append(listed, Feature{n, k == keyRequired})
		}
	}
	slices.SortFunc(listed, func(a, b Feature) int { return strings.Compare(a.Name, b.Name) })
	if need := Features(&h.Config); !slices.Equal(listed, need) {
		return fmt.Errorf("features %s listed, but the config needs %s", featureNames(listed), featureNames(need))
	}
	return nil
}

// featureNames prints features as a file lists them, optional ones marked.
func featureNames(fs []Feature) string {
	var s []string
	for _, f := range fs {
		if f.Required {
			s = append(s, f.Name)
		} else {
			s = append(s, f.Name+" (optional)")
		}
	}
	return "[" + strings.Join(s, ", ") + "]"
}
