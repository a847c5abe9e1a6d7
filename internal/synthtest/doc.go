// Package synthtest compiles random-weight models for the tests of the
// packages above the compiler (format's external tests, infer, the
// commands). It is separate from testmodel because the compiler's and the
// tokenizer's own tests use testmodel, and this package imports both.
package synthtest
