// Package testmodel materialises the bundled Hugging Face test checkpoints
// (testdata/) as ordinary model directories. The repository stores the
// shared tokenizer.json and the demo weights gzip-compressed to stay small,
// so tests get a temporary directory with the decompressed files instead of
// reading testdata/ directly.
package testmodel
