package bench

import (
	"testing"

	"github.com/qwenc/qwenc/kernels"
)

// Run refuses a measurement of nothing before it opens a model, in the
// words of qwenrun bench's flags.
func TestRunRefuses(t *testing.T) {
	ok := Config{Models: []string{"missing.qbin"}, PP: 1, TG: 1, Reps: 1}
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.PP = 0 }, "--pp 0: want 1 or more"},
		{func(c *Config) { c.TG = -1 }, "--tg -1: want 1 or more"},
		{func(c *Config) { c.Reps = 0 }, "--reps 0: want 1 or more"},
	} {
		cfg := ok
		tc.change(&cfg)
		if _, err := Run(cfg); err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", cfg, err, tc.want)
		}
	}
}

// The probe's workers read every value of its parts (sections of
// unrelated lengths) once between them, however many there are.
func TestBandwidthProbeSplit(t *testing.T) {
	b := &bandwidthProbe{}
	for _, n := range []int{7, 1000, 3, 0, 513, 64} {
		x := make([]float32, n)
		for i := range x {
			x[i] = 1
		}
		b.parts = append(b.parts, x)
		b.bytes += 4 * n
	}
	for _, p := range kernels.SupportedPaths() {
		for nw := 1; nw <= 64; nw++ {
			var got float32
			for w := range nw {
				got += b.sum(p, w, nw)
			}
			if want := float32(b.bytes / 4); got != want {
				t.Errorf("%s, %d workers: %v values read, want %v", p, nw, got, want)
			}
		}
	}
}
