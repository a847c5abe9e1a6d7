// Package reference is an independent, plain float64 forward pass over a
// Hugging Face Qwen checkpoint (model types qwen2, qwen3, qwen3_moe, and
// the hybrid Qwen3.5 family, qwen3_5 and qwen3_5_moe, with its MTP block),
// and the writer of the expected/ data that the compiler's and the
// runtime's tests compare against (see testdata/README.md).
//
// It shares no code with the compiler or the runtime on purpose: it is the
// second opinion. It recomputes full causal attention at every position,
// runs Qwen3.5's Gated DeltaNet recurrence token by token from a zero
// state, keeps every weight as float64 and does nothing clever, so that
// reading it against transformers' modeling_qwen2.py, modeling_qwen3.py,
// modeling_qwen3_moe.py, modeling_qwen3_5.py and modeling_qwen3_5_moe.py
// (and, for Qwen3.5, the project's design note qwen35.md) is enough to
// trust it. The delta rule has a second implementation, the chunked form
// transformers prefills with (ForwardChunked), which the tests hold to the
// recurrence. It is meant for small models (a few seconds for hidden sizes
// up to 128 with the full Qwen vocabulary).
package reference
