//go:build race

package infer

// raceEnabled makes the slowest tests run one kernel path under the race
// detector: the paths' numbers are checked without it, and the races to
// find are the workers', the same on every path.
const raceEnabled = true
