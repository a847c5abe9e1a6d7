// Package bench measures how fast a compiled model runs: prefill and
// decode against the machine's read bandwidth measured in the same run
// (Run, as llama-bench does, with depths), and the engine under
// concurrent streams (Serve). Figures on a shared host drift from one
// minute to the next, so every ratio here is taken between figures
// measured together.
package bench
