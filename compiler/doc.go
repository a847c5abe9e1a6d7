// Package compiler turns a Hugging Face Qwen checkpoint into a .qbin file
// (format/SPEC.md): weights converted to f16 and pre-tiled, the tokenizer
// in binary form, and the activation arena planned at compile time.
package compiler
