package cliutil

import (
	"slices"
	"testing"
)

func TestInts(t *testing.T) {
	for _, c := range []struct {
		s     string
		least int
		want  []int
		err   string
	}{
		{"1,2", 1, []int{1, 2}, ""},
		{" 0 , 40 ", 0, []int{0, 40}, ""},
		{"1,0", 1, nil, `"0" is not a positive number`},
		{"1,,2", 1, nil, `"" is not a positive number`},
		{"x", 0, nil, `"x" is not a positive number`},
	} {
		got, err := Ints(c.s, c.least, "a positive number")
		if c.err == "" && (err != nil || !slices.Equal(got, c.want)) || c.err != "" && (err == nil || err.Error() != c.err) {
			t.Errorf("%q: %v, %v; want %v, error %q", c.s, got, err, c.want, c.err)
		}
	}
}
