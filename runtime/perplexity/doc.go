// Package perplexity measures how well a model predicts a text, with
// llama.cpp's llama-perplexity method so the figures compare directly: the
// tokens are split into non-overlapping chunks of Ctx tokens (the remainder
// dropped), each chunk is evaluated from an empty cache, and only the
// second half of each chunk is scored (every scored token then has at least
// Ctx/2 tokens of context). Against a base model it also gives the mean
// Kullback-Leibler divergence of the model's next-token distribution from
// the base's and how often their most likely tokens agree. Measure does
// the whole of it from the files, as qwenrun perplexity does.
package perplexity
