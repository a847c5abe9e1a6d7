// Package testarch is an architecture for the tests of the runtime alone:
// Qwen3's layers, each behind a recurrent mixer, x += conv(norm(x)), a
// causal depthwise convolution over the hidden state whose last inputs
// are a state that cannot go back by itself. Every layer then keeps a
// recurrent state beside its KV cache, as a hybrid model's do, and the
// runtime's sessions, prefix cache and drafts are checked on it against
// the same requests run without them. It is plugged into the compiler and
// the runtime as an arch.Registry entry; nothing in them names it.
package testarch
