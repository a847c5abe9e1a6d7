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

func TestBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "512": 512, "4G": 4e9, "1.5GB": 1.5e9, "512MiB": 512 << 20, "2 gib": 2 << 30, "10k": 10e3} {
		if got, err := Bytes(in); err != nil || got != want {
			t.Errorf("Bytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "G", "-1G", "4X", "1e99", "four"} {
		if _, err := Bytes(bad); err == nil {
			t.Errorf("Bytes(%q): no error", bad)
		}
	}
}
