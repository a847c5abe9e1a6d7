// Package reference is an independent, plain float64 forward pass over a
// Hugging Face Qwen checkpoint (model types qwen2, qwen3 and qwen3_moe), and
// the writer of the expected/ data that the compiler's and the runtime's
// tests compare against (see testdata/README.md).
//
// It shares no code with the compiler or the runtime on purpose: it is the
// second opinion. It recomputes full causal attention at every position,
// keeps every weight as float64 and does nothing clever, so that reading it
// against transformers' modeling_qwen2.py, modeling_qwen3.py and
// modeling_qwen3_moe.py is enough to trust it. It is meant for small models
// (a few seconds for hidden sizes up to 64 with the full Qwen vocabulary).
package reference
