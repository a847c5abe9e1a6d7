// Package arch holds one unit per model architecture (qwen2.go, qwen3.go,
// qwen3_moe.go), as llama.cpp keeps src/models/<arch>.cpp: how the
// architecture's Hugging Face config.json reads, the tensors it expects
// under their Hugging Face names and the file sections they become (each
// with its kind and role, and the transform the compiler applies to its
// values: transform.go holds the ones a unit wires in), and the ops of
// its forward step. The compiler asks this package what to write, the
// runtime what to check and what to run; adding an architecture is one
// new file here, plus kernels if it needs new ops.
package arch
