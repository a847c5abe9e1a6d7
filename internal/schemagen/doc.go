// Package schemagen makes random JSON Schemas of the keywords package
// grammar supports, for the tests that fuzz it (grammar's, over random
// walks of its masks, and qwen's, over generations of a random model).
// Every schema it makes has valid instances, and its strings and arrays
// are bounded so that a random walk ends.
package schemagen
