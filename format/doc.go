// Package format reads and writes .qbin files: the preamble, the header
// (a block of typed keys holding the model config, generation defaults,
// chat format and the features the file needs; the arena plans; the
// directory of 4096-aligned sections, each with its kind and role), and
// the positional headers of older versions. SPEC.md in this directory is
// the byte-level specification; this code follows it. The package knows
// the file, not the math: it never converts or computes with weights.
package format
