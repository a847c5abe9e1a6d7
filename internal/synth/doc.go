// Package synth writes random-weight Qwen checkpoints in Hugging Face
// layout (config.json, safetensors shards with an index, generation and
// tokenizer files) for any shape, including the real Qwen3-0.6B's and
// Qwen3-30B-A3B's. Tests use small ones; the compile benchmark uses the
// full-size one. Output is a pure function of the Shape (seeded), so files
// are reproducible.
package synth
