// Package compiler turns a Qwen model into a .qbin file
// (format/SPEC.md): weights converted to f16 or quantized and pre-tiled,
// the tokenizer in binary form, and the activation arena planned at
// compile time. It reads a Hugging Face checkpoint (config.json,
// safetensors, tokenizer.json) or a GGUF file (llama.cpp's, or a model
// of Ollama's store), each a source of the same configuration, tokenizer
// and tensors, streamed block by block.
package compiler
