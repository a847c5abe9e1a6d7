//go:build race

package qwen

// raceEnabled leaves the embedding models uncompiled under the race
// detector: compiling two 151,669-row models there takes half a minute,
// and their tests, skipped there (the Makefile's RACE_SKIP), run on one
// goroutine over the engine code the batching tests race.
const raceEnabled = true
