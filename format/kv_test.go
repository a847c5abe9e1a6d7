package format_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/qwenc/qwenc/format"
)

// TestValueDisplay: every value prints for a person, and marshals to
// JSON, whatever a file holds (a NaN, a value of an unknown type).
func TestValueDisplay(t *testing.T) {
	for _, c := range []struct {
		v          any
		text, json string
	}{
		{uint32(7), "7", "7"},
		{"qwen3", `"qwen3"`, `"qwen3"`},
		{[]string{"a", "b c"}, `["a" "b c"]`, `["a","b c"]`},
		{[]bool{true, false}, "[true false]", "[true,false]"},
		{math.NaN(), "NaN", `"NaN"`},
		{[]float32{1.5, float32(math.Inf(-1))}, "[1.5 -Inf]", `[1.5,"-Inf"]`},
		{[]uint8{1, 2}, "[1 2]", "[1,2]"},
		{format.RawValue{Type: 12, Bytes: []byte{0xab, 1}}, "(type(12), 2 bytes)", `"ab01"`},
	} {
		j, err := json.Marshal(format.JSONValue(c.v))
		if got := format.FormatValue(c.v); got != c.text || err != nil || string(j) != c.json {
			t.Errorf("%#v: %q and %s (%v), want %q and %s", c.v, got, j, err, c.text, c.json)
		}
	}
}
