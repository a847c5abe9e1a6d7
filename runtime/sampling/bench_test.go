package sampling

import "testing"

func benchSample(b *testing.B, p Params) {
	const vocab = 151936
	l := randLogits(vocab, 1)
	s := New(vocab, p)
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

func BenchmarkSampleMinP(b *testing.B) {
	benchSample(b, Params{Temperature: 1, MinP: 0.05})
}

func BenchmarkSampleGreedy(b *testing.B) {
	benchSample(b, Params{})
}
