// Command qwengen writes a random-weight Qwen checkpoint in Hugging Face
// layout, for benchmarks and tests: by default the real Qwen3-0.6B shape,
// with --preset qwen3-30b-a3b the real Qwen3-30B-A3B's (a mixture of
// experts), and with --preset qwen3.5-0.8b, -2b, -4b, -9b, -27b,
// qwen3.5-35b-a3b or qwen3.5-122b-a10b the real shapes of the hybrid
// Qwen3.5 family, laid out as Qwen3.5 ships (multimodal config.json with
// text_config, model.language_model.*, the MTP block, a small vision stub,
// BF16 with F32 A_log and linear_attn.norm). Every other shape flag
// overrides one field of the preset, so
//
//	qwengen --preset qwen3-30b-a3b --layers 4 -o DIR ...
//
// writes the real tensor shapes at a twelfth of the depth: 6.2 GB, of
// which the embedding and the untied head are 1.2 GB and each layer 1.25 GB;
// and
//
//	qwengen --preset qwen3.5-35b-a3b --layers 4 --zero-experts -o DIR ...
//
// a four-layer slice of Qwen3.5-35B-A3B (three Gated DeltaNet layers and a
// full-attention one) whose routed experts are holes of sparse files.
// Tensors are written as they are drawn, so memory stays small at any size.
package main
