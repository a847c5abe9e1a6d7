package serve

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/qwenc/qwenc/format/chat"
	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/runtime/sampling"
)

// sampled is a sampling value of a request: the setting of the
// parameter table it sets, under the name the protocol gives it.
type sampled struct {
	setting, field string
	value          *float64
}

// floatParam and intParam are a request's fields; nil is unset.
func floatParam(setting, field string, v *float64) sampled { return sampled{setting, field, v} }

func intParam(setting, field string, v *int) sampled {
	p := sampled{setting: setting, field: field}
	if v != nil {
		f := float64(*v)
		p.value = &f
	}
	return p
}

// randomSeed is the seed that asks for a random one.
const randomSeed = -1

// samplingParams builds a request's sampling parameters: the model's
// generation config first, as qwenrun does, then what the request sets,
// applied in the table's order and checked against its ranges, the same
// for every protocol and the command line. The error names the field.
func samplingParams(defaults sampling.Params, seed *int64, given ...sampled) (sampling.Params, *apiError) {
	p := defaults
	p.Seed = rand.Uint64()
	// -1 is Ollama's default seed and llama-server's: a random one. Its
	// clients send it to ask for a fresh answer each time.
	if seed != nil && *seed != randomSeed {
		p.Seed = uint64(*seed)
	}
	for _, s := range sampling.Settings() {
		for _, g := range given {
			if g.setting != s.Name || g.value == nil {
				continue
			}
			s.Name = g.field // errors name the field as the client wrote it
			if err := s.Apply(&p, *g.value); err != nil {
				return p, badRequest(g.field, "%v", err)
			}
		}
	}
	return p, nil
}

// samplingFields are the sampling parameters of OpenAI's requests, with
// the extensions vLLM and llama-server accept (top_k, min_p,
// repetition_penalty).
type samplingFields struct {
	Temperature       *float64 `json:"temperature"`
	TopP              *float64 `json:"top_p"`
	TopK              *int     `json:"top_k"`
	MinP              *float64 `json:"min_p"`
	Seed              *int64   `json:"seed"`
	PresencePenalty   *float64 `json:"presence_penalty"`
	FrequencyPenalty  *float64 `json:"frequency_penalty"`
	RepetitionPenalty *float64 `json:"repetition_penalty"`
	// LogitBias maps token ids, written as strings, to what is added to
	// their logits.
	LogitBias map[string]float64 `json:"logit_bias"`
	vllmFields
}

// vllmFields are the extensions of vLLM's OpenAI requests that its
// clients (benchmarks above all) send: ignore_eos is honoured; the
// others, which would change the answer, are refused unless they are
// their defaults, rather than ignored.
type vllmFields struct {
	IgnoreEOS    *bool    `json:"ignore_eos"`
	MinTokens    *int     `json:"min_tokens"`
	StopTokenIDs []int32  `json:"stop_token_ids"`
	TypicalP     *float64 `json:"typical_p"`
	BestOf       *int     `json:"best_of"`
	// Its structured output (the guided_* fields, and structured_outputs
	// that replaced them), and its fields that change the tokens sampled
	// or the text returned: refused unless null, empty or false.
	GuidedJSON             json.RawMessage `json:"guided_json"`
	GuidedRegex            json.RawMessage `json:"guided_regex"`
	GuidedChoice           json.RawMessage `json:"guided_choice"`
	GuidedGrammar          json.RawMessage `json:"guided_grammar"`
	StructuredOutputs      json.RawMessage `json:"structured_outputs"`
	BadWords               json.RawMessage `json:"bad_words"`
	AllowedTokenIDs        json.RawMessage `json:"allowed_token_ids"`
	IncludeStopStrInOutput json.RawMessage `json:"include_stop_str_in_output"`
	UseBeamSearch          json.RawMessage `json:"use_beam_search"`
	TruncatePromptTokens   json.RawMessage `json:"truncate_prompt_tokens"`
	PromptLogprobs         json.RawMessage `json:"prompt_logprobs"`
}

// unsupported refuses the first of fields (names and values) that asks
// for something, saying what to send instead where there is something.
func unsupported(fields ...namedValue) *apiError {
	for _, f := range fields {
		switch strings.TrimSpace(string(f.value)) {
		case "", "null", "false", "[]", "{}", `""`:
			continue
		}
		return badRequest(f.name, "%s is not supported%s", f.name, f.instead)
	}
	return nil
}

// namedValue is a request's field that unsupported checks.
type namedValue struct {
	name    string
	value   json.RawMessage
	instead string
}

// apply sets a request's ignore_eos, or names the field it cannot hold.
func (v *vllmFields) apply(req *qwen.Request) *apiError {
	switch {
	case v.MinTokens != nil && *v.MinTokens != 0:
		return badRequest("min_tokens", "min_tokens is not supported (only 0)")
	case len(v.StopTokenIDs) > 0:
		return badRequest("stop_token_ids", "stop_token_ids is not supported: give the tokens' text in stop")
	case v.TypicalP != nil && *v.TypicalP != 1:
		return badRequest("typical_p", "typical_p is not supported (only 1)")
	case v.BestOf != nil && *v.BestOf != 1:
		return badRequest("best_of", "best_of must be 1: one answer per request")
	}
	const format = ": give a JSON Schema in response_format"
	if e := unsupported(namedValue{"guided_json", v.GuidedJSON, ": give a JSON Schema in text.format"}, namedValue{"guided_regex", v.GuidedRegex, ""},
		namedValue{"guided_choice", v.GuidedChoice, format + " (an enum)"}, namedValue{"guided_grammar", v.GuidedGrammar, ""},
		namedValue{"structured_outputs", v.StructuredOutputs, format}, namedValue{"bad_words", v.BadWords, ": give the tokens a logit_bias of -100"},
		namedValue{"allowed_token_ids", v.AllowedTokenIDs, ""}, namedValue{"include_stop_str_in_output", v.IncludeStopStrInOutput, ""},
		namedValue{"use_beam_search", v.UseBeamSearch, ""}, namedValue{"truncate_prompt_tokens", v.TruncatePromptTokens, ""},
		namedValue{"prompt_logprobs", v.PromptLogprobs, ""}); e != nil {
		return e
	}
	req.IgnoreEOS = v.IgnoreEOS != nil && *v.IgnoreEOS
	return nil
}

// takeGuided removes guided_json from v and returns it, for the endpoints
// that honour it (chat and completions, as vLLM's); apply refuses it on
// the others (the Responses API, whose vLLM form has no guided_json).
func (v *vllmFields) takeGuided() json.RawMessage {
	g := v.GuidedJSON
	v.GuidedJSON = nil
	return g
}

// guidedJSON sets vLLM's guided_json (a JSON Schema, or a string holding
// one, as vLLM takes it) as the answer's schema, enforced as vLLM
// enforces it: a keyword the grammar cannot hold is refused, not
// relaxed. It returns the field a schema error is of: guided_json when
// it is given, else formatPath.
func guidedJSON(raw json.RawMessage, req *qwen.Request, formatPath string) (string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return formatPath, nil
	}
	if req.JSONSchema != nil || req.JSONObject {
		return "", badRequest("guided_json", "guided_json and response_format both set the answer's format: give one")
	}
	if raw[0] == '"' {
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return "", badRequest("guided_json", "guided_json: %v", err)
		}
		raw = bytes.TrimSpace([]byte(text))
		if !json.Valid(raw) {
			return "", badRequest("guided_json", "guided_json: the string is not a JSON Schema (not JSON)")
		}
	}
	req.JSONSchema, req.RelaxSchema = raw, false
	return "guided_json", ignoreEOSFits(req)
}

// ignoreEOSFits refuses ignore_eos beside an answer a grammar ends (tools
// or a response format), naming the field: the library's refusal names
// its Go field, which an HTTP client never wrote.
func ignoreEOSFits(req *qwen.Request) *apiError {
	if req.IgnoreEOS && (len(req.Tools) > 0 || req.JSONSchema != nil || req.JSONObject) {
		return badRequest("ignore_eos", "ignore_eos would generate past the end that tools or a response format set")
	}
	return nil
}

func (f *samplingFields) params(defaults sampling.Params) (sampling.Params, *apiError) {
	return samplingParams(defaults, f.Seed,
		floatParam("temperature", "temperature", f.Temperature),
		floatParam("top_p", "top_p", f.TopP),
		intParam("top_k", "top_k", f.TopK),
		floatParam("min_p", "min_p", f.MinP),
		floatParam("presence_penalty", "presence_penalty", f.PresencePenalty),
		floatParam("frequency_penalty", "frequency_penalty", f.FrequencyPenalty),
		floatParam("repeat_penalty", "repetition_penalty", f.RepetitionPenalty))
}

// logitBias reads OpenAI's logit_bias, held to its range and to the
// vocabulary of vocab token ids.
func (f *samplingFields) logitBias(vocab int) (map[int32]float32, *apiError) {
	if len(f.LogitBias) == 0 {
		return nil, nil
	}
	bias := make(map[int32]float32, len(f.LogitBias))
	for key, b := range f.LogitBias {
		id, err := strconv.ParseInt(key, 10, 32)
		switch {
		case err != nil || id < 0 || id >= int64(vocab):
			return nil, badRequest("logit_bias", "logit_bias: key %q is not a token id from 0 to %d", key, vocab-1)
		case !(b >= -qwen.MaxLogitBias && b <= qwen.MaxLogitBias):
			return nil, badRequest("logit_bias", "logit_bias: %v for token %s is outside [-%d, %d]", b, key, qwen.MaxLogitBias, qwen.MaxLogitBias)
		}
		bias[int32(id)] = float32(b)
	}
	return bias, nil
}

// templateKwargs are vLLM's chat_template_kwargs: the variables a
// request passes to the chat template. The Qwen templates read two; any
// other they ignore, as Jinja does a variable it does not use.
type templateKwargs struct {
	EnableThinking   *bool `json:"enable_thinking"`
	PreserveThinking *bool `json:"preserve_thinking"`
}

// apply sets a request's template switches.
func (k *templateKwargs) apply(req *qwen.Request) {
	req.NoThinking = k.EnableThinking != nil && !*k.EnableThinking
	req.PreserveThinking = k.PreserveThinking != nil && *k.PreserveThinking
}

// thinks reports whether a model thinks (Qwen3's <think> block), which a
// reasoning effort or budget bounds: the one place the server asks.
func thinks(info qwen.Info) bool {
	// The model was opened with this format's name: Lookup knows it.
	f, _ := chat.Lookup(info.ChatTemplate)
	if f == nil {
		return false
	}
	_, ok := f.Thinking()
	return ok
}

// effort sets a request's thinking from a reasoning effort (field), as
// qwen's ThinkEffort reads it: none and minimal answer without thinking,
// the others think within a budget that leaves the answer room. Set
// MaxTokens first. A model that does not think has nothing to bound.
func (t *target) effort(effort, field string, req *qwen.Request) *apiError {
	if err := req.ThinkEffort(effort); err != nil {
		return badRequest(field, "%s: %v", field, err)
	}
	if !thinks(t.info) {
		req.ThinkBudget = 0
	}
	return nil
}

// thinkingBudget sets a request's thinking budget from a number of
// tokens (field): any positive one, small ones being useful on small
// models. A model whose chat format does not think has no thinking to
// bound, as a request switching it off has none to switch off for it.
func (t *target) thinkingBudget(budget int, field string, req *qwen.Request) *apiError {
	switch {
	case budget < 1:
		return badRequest(field, "%s: want a positive number of tokens, not %d", field, budget)
	case req.NoThinking:
		return badRequest(field, "%s bounds the thinking, which the request switches off", field)
	case thinks(t.info):
		req.ThinkBudget = budget
	}
	return nil
}
