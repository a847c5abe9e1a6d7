package serve

import (
	"math/rand/v2"

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

// samplingParams builds a request's sampling parameters: the model's
// generation config first, as qwenrun does, then what the request sets,
// applied in the table's order and checked against its ranges, the same
// for every protocol and the command line. The error names the field.
func samplingParams(defaults sampling.Params, seed *int64, given ...sampled) (sampling.Params, *apiError) {
	p := defaults
	p.Seed = rand.Uint64()
	if seed != nil {
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
