package format

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// key is one known key of the header's key/value block: the field of a
// Header it holds, whether every file has it, and the range of its value.
// The tables below are the one list of them: MarshalHeader writes from
// them, UnmarshalHeader reads through them, Config.Validate and Validate
// check their ranges, and SPEC.md lists them (TestSpecListsEveryKey).
type key struct {
	name string
	// required keys are always written and must be in a file; the others
	// are written only when not zero, and read as zero when absent.
	required bool
	// lo and hi bound a number (both ends included; a NaN is never in
	// range), or the length of an array. Both zero: any value.
	lo, hi float64
	// ref points to the field in h: a *int (stored as u32), or a pointer
	// to one of Entry's Go types, stored as that type.
	ref func(h *Header) any
}

const (
	maxDim  = 1 << 24         // a dimension or count of the model
	maxReal = math.MaxFloat64 // any finite number
	tiny    = math.SmallestNonzeroFloat64
)

// configKeys hold the model configuration.
var configKeys = []key{
	{"general.architecture", true, 0, 0, func(h *Header) any { return &h.Config.ModelType }},
	{"config.hidden_size", true, 1, maxDim, func(h *Header) any { return &h.Config.Hidden }},
	{"config.intermediate_size", false, 1, maxDim, func(h *Header) any { return &h.Config.Intermediate }},
	{"config.num_hidden_layers", true, 1, maxDim, func(h *Header) any { return &h.Config.Layers }},
	{"config.num_attention_heads", true, 1, maxDim, func(h *Header) any { return &h.Config.Heads }},
	{"config.num_key_value_heads", true, 1, maxDim, func(h *Header) any { return &h.Config.KVHeads }},
	{"config.head_dim", true, 1, maxDim, func(h *Header) any { return &h.Config.HeadDim }},
	{"config.vocab_size", true, 1, maxDim, func(h *Header) any { return &h.Config.Vocab }},
	{"config.max_position_embeddings", true, 1, maxDim, func(h *Header) any { return &h.Config.MaxPositions }},
	{"config.rope_theta", true, tiny, maxReal, func(h *Header) any { return &h.Config.RopeTheta }},
	{"config.rms_norm_eps", true, tiny, maxReal, func(h *Header) any { return &h.Config.RMSNormEps }},
	{"config.tie_word_embeddings", true, 0, 0, func(h *Header) any { return &h.Config.TieEmbeddings }},
	{"config.qk_norm", false, 0, 0, func(h *Header) any { return &h.Config.QKNorm }},
	{"config.qkv_bias", false, 0, 0, func(h *Header) any { return &h.Config.QKVBias }},
	{"config.embedding", false, 0, 0, func(h *Header) any { return &h.Config.Embedding }},
	{"config.append", false, 0, 16, func(h *Header) any { return &h.Config.Append }},
	{"config.rotary_dims", false, 2, maxDim, func(h *Header) any { return &h.Config.RotaryDims }},
	{"config.attn_output_gate", false, 0, 0, func(h *Header) any { return &h.Config.AttnGate }},
	{"config.mtp_num_hidden_layers", false, 1, 16, func(h *Header) any { return &h.Config.MTPLayers }},
	{"hybrid.linear_layers", false, 0, maxDim, func(h *Header) any { return &h.Config.Hybrid.Linear }},
	{"hybrid.linear_num_key_heads", false, 1, 1 << 16, func(h *Header) any { return &h.Config.Hybrid.KeyHeads }},
	{"hybrid.linear_num_value_heads", false, 1, 1 << 16, func(h *Header) any { return &h.Config.Hybrid.ValueHeads }},
	{"hybrid.linear_key_head_dim", false, 1, 1 << 16, func(h *Header) any { return &h.Config.Hybrid.KeyDim }},
	{"hybrid.linear_value_head_dim", false, 1, 1 << 16, func(h *Header) any { return &h.Config.Hybrid.ValueDim }},
	{"hybrid.linear_conv_kernel_dim", false, 1, 64, func(h *Header) any { return &h.Config.Hybrid.ConvKernel }},
	{"moe.num_experts", false, 1, 1 << 16, func(h *Header) any { return &h.Config.MoE.Experts }},
	{"moe.num_experts_per_tok", false, 1, 1 << 16, func(h *Header) any { return &h.Config.MoE.ExpertsPerToken }},
	{"moe.moe_intermediate_size", false, 1, maxDim, func(h *Header) any { return &h.Config.MoE.ExpertWidth }},
	{"moe.norm_topk_prob", false, 0, 0, func(h *Header) any { return &h.Config.MoE.NormTopK }},
	{"moe.sparse_layers", false, 0, maxDim, func(h *Header) any { return &h.Config.MoE.Sparse }},
	{"moe.shared_expert_intermediate_size", false, 1, maxDim, func(h *Header) any { return &h.Config.MoE.SharedWidth }},
	{"rope_scaling.type", false, 0, 0, func(h *Header) any { return &h.Config.RopeScaling.Type }},
	{"rope_scaling.factor", false, 1, 1e6, func(h *Header) any { return &h.Config.RopeScaling.Factor }},
	{"rope_scaling.original_max_position_embeddings", false, 1, maxDim, func(h *Header) any { return &h.Config.RopeScaling.OriginalMax }},
	{"rope_scaling.attention_factor", false, tiny, 1e6, func(h *Header) any { return &h.Config.RopeScaling.AttentionFactor }},
	{"rope_scaling.beta_fast", false, tiny, 1e6, func(h *Header) any { return &h.Config.RopeScaling.BetaFast }},
	{"rope_scaling.beta_slow", false, tiny, 1e6, func(h *Header) any { return &h.Config.RopeScaling.BetaSlow }},
	{"rope_scaling.truncate", false, 0, 0, func(h *Header) any { return &h.Config.RopeScaling.Truncate }},
}

// otherKeys hold the generation defaults and the chat format. The
// sampling defaults are bounded as the sampler bounds a request's
// (runtime/sampling), which starts from them.
var otherKeys = []key{
	{"generation.eos_token_id", true, 0, 16, func(h *Header) any { return &h.Generation.EOS }},
	{"generation.bos_token_id", true, 0, 0, func(h *Header) any { return &h.Generation.BOS }},
	{"generation.pad_token_id", true, 0, 0, func(h *Header) any { return &h.Generation.Pad }},
	{"generation.do_sample", true, 0, 0, func(h *Header) any { return &h.Generation.DoSample }},
	{"generation.temperature", true, 0, maxReal, func(h *Header) any { return &h.Generation.Temperature }},
	{"generation.top_k", true, 0, 1 << 30, func(h *Header) any { return &h.Generation.TopK }},
	{"generation.top_p", true, 0, 1, func(h *Header) any { return &h.Generation.TopP }},
	{"generation.min_p", true, 0, 1, func(h *Header) any { return &h.Generation.MinP }},
	{"generation.repetition_penalty", true, 0, maxReal, func(h *Header) any { return &h.Generation.RepetitionPenalty }},
	{"generation.presence_penalty", true, 0, 2, func(h *Header) any { return &h.Generation.PresencePenalty }},
	{"chat.format", false, 0, 0, func(h *Header) any { return &h.ChatFamily }},
}

// allKeys is every known key.
func allKeys() []key { return slices.Concat(configKeys, otherKeys) }

// load returns the value a field holds, as the type it is stored in.
func load(p any) any {
	switch p := p.(type) {
	case *int:
		return clampU32(*p)
	case *string:
		return *p
	case *bool:
		return *p
	case *float64:
		return *p
	case *float32:
		return *p
	case *uint32:
		return *p
	case *int32:
		return *p
	case *[]int32:
		return *p
	case *[]bool:
		return *p
	}
	panic(fmt.Sprintf("format: key field of type %T", p))
}

// clampU32 clamps an int to u32's range: Validate refuses what is out of
// range before a header is written, and this keeps an unvalidated one from
// wrapping around.
func clampU32(v int) uint32 { return uint32(min(max(v, 0), math.MaxUint32)) }

// store sets the field p to v, which must be of the type the field is
// stored as.
func store(p, v any) bool {
	switch p := p.(type) {
	case *int:
		u, ok := v.(uint32)
		*p = int(u)
		return ok
	case *string:
		return storeAs(p, v)
	case *bool:
		return storeAs(p, v)
	case *float64:
		return storeAs(p, v)
	case *float32:
		return storeAs(p, v)
	case *uint32:
		return storeAs(p, v)
	case *int32:
		return storeAs(p, v)
	case *[]int32:
		return storeAs(p, v)
	case *[]bool:
		return storeAs(p, v)
	}
	return false
}

func storeAs[T any](p *T, v any) bool {
	x, ok := v.(T)
	if ok {
		*p = x
	}
	return ok
}

// zero reports whether a stored value is its type's zero (an empty array
// included), which an optional key is not written with.
func zero(v any) bool {
	r := reflect.ValueOf(v)
	return r.IsZero() || (r.Kind() == reflect.Slice && r.Len() == 0)
}

// measure is what a key's range bounds: the field's number, or its
// array's length.
func measure(p any) (x float64, length bool) {
	switch p := p.(type) {
	case *int:
		return float64(*p), false
	case *uint32:
		return float64(*p), false
	case *int32:
		return float64(*p), false
	case *float32:
		return float64(*p), false
	case *float64:
		return *p, false
	case *[]int32:
		return float64(len(*p)), true
	case *[]bool:
		return float64(len(*p)), true
	}
	return 0, false
}

// checkRange checks the range of a key's value in h: always for a
// required key, for an optional one when it is set (not zero: a negative
// int is set, though it would be written as 0).
func (k *key) checkRange(h *Header) error {
	if k.lo == 0 && k.hi == 0 {
		return nil
	}
	x, length := measure(k.ref(h))
	if (!k.required && x == 0) || (x >= k.lo && x <= k.hi) {
		return nil
	}
	var want string
	switch {
	case k.lo == tiny && k.hi == maxReal:
		want = "positive and finite"
	case k.hi == maxReal:
		want = fmt.Sprintf("at least %s and finite", num(k.lo))
	case k.lo == tiny:
		want = fmt.Sprintf("in (0, %s]", num(k.hi))
	case length:
		want = fmt.Sprintf("at most %s long", num(k.hi))
	default:
		want = fmt.Sprintf("in [%s, %s]", num(k.lo), num(k.hi))
	}
	if length {
		return fmt.Errorf("%s: %s elements, want %s", k.name, num(x), want)
	}
	return fmt.Errorf("%s = %s, want %s", k.name, num(x), want)
}

// num prints a number, a whole one without an exponent.
func num(x float64) string {
	if x == math.Trunc(x) && math.Abs(x) < 1e15 {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// checkRanges checks every range of keys in h.
func checkRanges(h *Header, keys []key) error {
	for i := range keys {
		if err := keys[i].checkRange(h); err != nil {
			return err
		}
	}
	return nil
}

// Entries is h's key/value block as MarshalHeader writes it, in key
// order: the features, the known keys' values (an optional key only when
// set) and the keys h was read with that this build does not know.
func (h *Header) Entries() []Entry {
	es := featureEntries(h)
	known := map[string]bool{keyRequired: true, keyOptional: true}
	for _, k := range allKeys() {
		known[k.name] = true
		if v := load(k.ref(h)); k.required || !zero(v) {
			es = append(es, Entry{k.name, v})
		}
	}
	for _, x := range h.Unknown {
		// Unknown comes from a decoded file, where no key is both; a
		// known key set by hand in Unknown is the field's to say.
		if !known[x.Key] {
			es = append(es, x)
		}
	}
	slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	return es
}

// unmarshalEntries sets h's fields from a decoded key/value block, keeping
// the keys this build does not know in h.Unknown.
func unmarshalEntries(es []Entry, h *Header) error {
	byName := make(map[string]any, len(es))
	for _, x := range es {
		byName[x.Key] = x.Value
	}
	// unmarshalFeatures reads these.
	delete(byName, keyRequired)
	delete(byName, keyOptional)
	for _, k := range allKeys() {
		v, ok := byName[k.name]
		if !ok {
			if k.required {
				return fmt.Errorf("key %q: missing", k.name)
			}
			continue
		}
		delete(byName, k.name)
		if p := k.ref(h); !store(p, v) {
			t, _ := TypeOf(v)
			want, _ := TypeOf(load(p))
			return fmt.Errorf("key %q: a %s, want a %s", k.name, t, want)
		}
	}
	for _, x := range es {
		if _, unknown := byName[x.Key]; unknown {
			h.Unknown = append(h.Unknown, x)
		}
	}
	return nil
}
