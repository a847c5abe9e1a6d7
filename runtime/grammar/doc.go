// Package grammar holds generated text to a context-free grammar over
// bytes: a JSON Schema, a regular expression or a chat format's tool
// calls is compiled to one, and a Matcher then gives, before each token, the
// mask of the vocabulary's tokens that keep the text in the grammar's
// language, and follows the tokens sampled.
//
// A Matcher is a pushdown automaton run on all its possible stacks at
// once (the grammar may be ambiguous). Masks are fast because most of the
// work is done once per grammar: for each place in a rule, the tokens
// that are accepted there whatever surrounds the rule are found once
// (when a Matcher first meets the place), by a walk of the vocabulary's
// byte trie (the adaptive token mask cache of XGrammar), and a step
// checks only the few that depend on the rest of the stack. Places where
// almost every token depends on the stack (whitespace before a value) are
// walked with the whole stack instead, which there prunes the trie at
// once.
//
// Repetitions with bounds (a string's maxLength, an array's maxItems) are
// counted loops: the stacks carry the count, so a bound of 524288 costs
// no more rules than one of 5. A string's constraints (pattern, format,
// lengths, propertyNames) are automata over characters, intersected and
// minimized before they become rules. A schema keyword the grammar
// cannot enforce is refused, or relaxed and reported (Grammar.Relaxed).
//
// Each state knows its distance, the tokens of a short completion, so
// that Matcher.Limit can hold an answer to a number of tokens: near the
// end the text takes the shortest way to its end rather than being cut
// off.
package grammar
