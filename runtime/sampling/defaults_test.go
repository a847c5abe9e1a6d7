package sampling

import (
	"testing"

	"github.com/qwenc/qwenc/format"
)

// The generation config's values carry over; a config that does not sample
// is greedy whatever temperature it names.
func TestDefaults(t *testing.T) {
	g := format.Generation{DoSample: true, Temperature: 0.6, TopK: 20, TopP: 0.95, MinP: 0.05, RepetitionPenalty: 1.1, PresencePenalty: 0.5}
	want := Params{Temperature: 0.6, TopK: 20, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, PresencePenalty: 0.5}
	if got := Defaults(g); got != want {
		t.Errorf("Defaults = %+v, want %+v", got, want)
	}
	g.DoSample = false
	want.Temperature = 0
	if got := Defaults(g); got != want {
		t.Errorf("without do_sample: Defaults = %+v, want %+v", got, want)
	}
}
