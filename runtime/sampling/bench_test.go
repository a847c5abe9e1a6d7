package sampling

import (
	"fmt"
	"testing"
)

func benchSample(b *testing.B, p Params) {
	benchSampleRow(b, p, randLogits(151936, 1))
}

func benchSampleRow(b *testing.B, p Params, l []float32) {
	s := New(len(l), p)
	b.ReportAllocs()
	for b.Loop() {
		s.Sample(l, nil) // no penalties, so l is not modified
	}
}

// Qwen3's generation_config.json defaults.
func BenchmarkSampleQwen3Defaults(b *testing.B) {
	benchSample(b, Params{Temperature: 0.6, TopK: 20, TopP: 0.95})
}

func BenchmarkSampleTopP09(b *testing.B) {
	b.Run("T0.6", func(b *testing.B) { benchSample(b, Params{Temperature: 0.6, TopP: 0.9}) })
	b.Run("T1.0", func(b *testing.B) { benchSample(b, Params{Temperature: 1, TopP: 0.9}) })
}

// A row as the small trained demo models give: their untrained tokens
// share about one logit (spread over 0.02 nats, or one weight), and
// top-p's cut falls among them.
func BenchmarkSampleTopPPlateau(b *testing.B) {
	for _, spread := range []float64{0.02, 0} {
		b.Run(fmt.Sprintf("spread=%g", spread), func(b *testing.B) {
			benchSampleRow(b, Params{Temperature: 1, TopP: 0.95}, plateauLogits(151936, spread, 1))
		})
	}
}

func BenchmarkSampleMinP(b *testing.B) {
	benchSample(b, Params{Temperature: 1, MinP: 0.05})
}

func BenchmarkSampleGreedy(b *testing.B) {
	benchSample(b, Params{})
}
