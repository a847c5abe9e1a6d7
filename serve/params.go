package serve

import (
	"math"
	"math/rand/v2"

	"github.com/qwenc/qwenc/format"
	"github.com/qwenc/qwenc/sampling"
)

// paramsBuilder builds a request's sampling parameters: the model's
// generation config first, as qwenrun does, then what the request sets,
// each checked under the name the protocol gives it. The first invalid
// value is kept as err.
type paramsBuilder struct {
	p   sampling.Params
	err *apiError
}

func newParams(g format.Generation) *paramsBuilder {
	p := sampling.Defaults(g)
	p.Seed = rand.Uint64()
	return &paramsBuilder{p: p}
}

// float sets *dst to v when v is given and within [lo, hi].
func (b *paramsBuilder) float(name string, v *float64, lo, hi float64, dst *float32) {
	if v == nil || b.err != nil {
		return
	}
	if *v < lo || *v > hi {
		b.err = badRequest(name, "%s %v is outside [%v, %v]", name, *v, lo, hi)
		return
	}
	*dst = float32(*v)
}

// int sets *dst to v when v is given and at least lo.
func (b *paramsBuilder) int(name string, v *int, lo int, dst *int) {
	if v == nil || b.err != nil {
		return
	}
	if *v < lo {
		b.err = badRequest(name, "%s %d is less than %d", name, *v, lo)
		return
	}
	*dst = *v
}

func (b *paramsBuilder) seed(v *int64) {
	if v != nil {
		b.p.Seed = uint64(*v)
	}
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

func (f *samplingFields) params(g format.Generation) (sampling.Params, *apiError) {
	b := newParams(g)
	inf := math.Inf(1)
	b.float("temperature", f.Temperature, 0, inf, &b.p.Temperature)
	b.float("top_p", f.TopP, 0, 1, &b.p.TopP)
	b.float("min_p", f.MinP, 0, 1, &b.p.MinP)
	b.float("presence_penalty", f.PresencePenalty, -2, 2, &b.p.PresencePenalty)
	b.float("frequency_penalty", f.FrequencyPenalty, -2, 2, &b.p.FrequencyPenalty)
	b.float("repetition_penalty", f.RepetitionPenalty, 0, inf, &b.p.RepeatPenalty)
	b.int("top_k", f.TopK, -1, &b.p.TopK) // vLLM's -1 is "off", as 0 is here
	b.seed(f.Seed)
	return b.p, b.err
}
