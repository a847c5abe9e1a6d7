// Package tokenizer implements the byte-level BPE tokenizer of Qwen2,
// Qwen3 and Qwen3.5 exactly as Hugging Face tokenizers runs it (NFC,
// added-token splitting, the family's split pattern, byte-level mapping,
// rank-ordered merges), and a compact binary form of the vocabulary that
// loads without parsing.
//
// LoadHF reads tokenizer.json (and tokenizer_config.json) into a Vocab at
// compile time; Vocab.MarshalBinary encodes it with prebuilt hash tables;
// Load turns those bytes into a ready Tokenizer at run time by validating
// and slicing them.
package tokenizer
