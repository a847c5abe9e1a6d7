//go:build !race

package qwen

const raceEnabled = false
