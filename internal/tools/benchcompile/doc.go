// Command benchcompile measures `qwenc compile` to each weight type on a
// random-weight checkpoint of the real Qwen3-0.6B shape against copying the
// same bytes with `cat > /dev/null` from a warm page cache, and each type
// against f16 (make bench-compile).
package main
