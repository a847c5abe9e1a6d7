package cliutil

import (
	"fmt"
	"strconv"
	"strings"
)

// List parses the items of a flag's comma-separated list.
func List[T any](s string, parse func(item string) (T, error)) ([]T, error) {
	var out []T
	for _, f := range strings.Split(s, ",") {
		v, err := parse(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Ints parses a comma-separated list of whole numbers of at least least;
// what says what an item should be, for the message: "a positive number".
func Ints(s string, least int, what string) ([]int, error) {
	return List(s, func(f string) (int, error) {
		v, err := strconv.Atoi(f)
		if err != nil || v < least {
			return 0, fmt.Errorf("%q is not %s", f, what)
		}
		return v, nil
	})
}

// Bytes parses a size: a whole number of bytes, or with a unit, K, M, G,
// T (powers of 1000, also KB, MB...) or KiB, MiB, GiB, TiB (of 1024).
func Bytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := t[:i], strings.ToUpper(strings.TrimSpace(t[i:]))
	mult := map[string]float64{"": 1, "B": 1, "K": 1e3, "KB": 1e3, "M": 1e6, "MB": 1e6, "G": 1e9, "GB": 1e9, "T": 1e12, "TB": 1e12,
		"KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}[unit]
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || mult == 0 || v < 0 || v*mult > 1<<62 {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with K, M, G, T or KiB, MiB, GiB, TiB)", s)
	}
	return int64(v * mult), nil
}
