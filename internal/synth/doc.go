// Package synth writes random-weight Qwen checkpoints in Hugging Face
// layout (config.json, safetensors shards with an index, generation and
// tokenizer files) for any shape, including the real Qwen3-0.6B's and
// Qwen3-30B-A3B's, and the hybrid Qwen3.5 family's (dense and MoE, with
// the MTP block and a vision stub) laid out as Qwen3.5 ships. Tests use
// small ones; the compile benchmark uses the full-size one. Output is a
// pure function of the Shape (seeded), so files are reproducible.
package synth
