// Package runtime is the roof over what runs a compiled model: the
// forward pass and each sequence's state (infer), the batching engine
// (engine), the sampler (sampling), the grammars that hold sampling to a
// format (grammar) and the perplexity measure (perplexity). The runtime
// reads what package format and its children describe and never imports
// the compiler, so a binary that only runs models links none of it. It
// holds no code of its own.
package runtime
