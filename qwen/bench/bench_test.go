package bench

import "testing"

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
