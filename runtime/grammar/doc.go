// Package grammar holds generated text to a context-free grammar over
// bytes: a JSON Schema, a regular expression or a chat format's tool
// calls is compiled to one, and a Matcher then gives, before each token, the
// mask of the vocabulary's tokens that keep the text in the grammar's
// language, and follows the tokens sampled.
//
// A Matcher is a pushdown automaton run on all its possible stacks at
// once (the grammar may be ambiguous). Masks are fast because most of the
// work is done when the grammar is compiled: for each place in a rule, the
// tokens that are accepted there whatever surrounds the rule are found
// once, by a walk of the vocabulary's byte trie (the adaptive token mask
// cache of XGrammar), and a step checks only the few that depend on the
// rest of the stack. Places where almost every token depends on the stack
// (whitespace before a value) are walked with the whole stack instead,
// which there prunes the trie at once.
package grammar
