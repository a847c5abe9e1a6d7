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
