// Package ggml is the table of ggml's tensor types, the types of the
// tensors in a GGUF file (llama.cpp's format): for each, its number in the
// file, its name, the elements and bytes of one block, and a decoder to
// float32 that computes exactly what ggml's own dequantizer
// (type_traits[type].to_float, ggml-quants.c) computes, bit for bit, as
// ggml-cpu's type traits do. Package format/gguf reads the files; the
// compiler decodes what it cannot map onto a weight type of its own
// (format/wtype) and quantizes it again.
package ggml
