// Package format reads and writes .qbin files: the preamble, the header
// (model config, generation defaults, chat family, arena plans) and the
// directory of 4096-aligned sections. SPEC.md in this directory is the
// byte-level specification; this code follows it. The package knows the
// file, not the math: it never converts or computes with weights.
package format
