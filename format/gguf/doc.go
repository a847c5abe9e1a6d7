// Package gguf reads GGUF files, the format of llama.cpp, LM Studio and
// Ollama's store: versions 2 and 3, little-endian, mapped read-only, and
// models split over several files (NAME-00001-of-00003.gguf). A file is
// its metadata (typed keys: the architecture's hyperparameters, the
// tokenizer, the chat template) and a directory of tensors, each with its
// ggml type (package format/ggml) and its dimensions in ggml's order:
// Dims[0] is the length of a row. Open checks everything the directory
// claims against the files before any tensor is read: sizes, offsets,
// alignment, types, overlaps. Write writes one, for tests and tools.
package gguf
