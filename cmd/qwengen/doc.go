// Command qwengen writes a random-weight Qwen checkpoint in Hugging Face
// layout, for benchmarks and tests: by default the real Qwen3-0.6B shape,
// with --preset qwen3-30b-a3b the real Qwen3-30B-A3B's (a mixture of
// experts). Every other shape flag overrides one field of the preset, so
//
//	qwengen --preset qwen3-30b-a3b --layers 4 -o DIR ...
//
// writes the real tensor shapes at a twelfth of the depth: 6.2 GB, of
// which the embedding and the untied head are 1.2 GB and each layer 1.25 GB.
// Tensors are written as they are drawn, so memory stays small at any size.
package main
