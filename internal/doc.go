// Package internal is the roof over the helpers of the commands and the
// tests that are not part of any API: atomic file writes (fsutil), what
// Linux says of memory (mem), command-line parsing (cliutil), random
// checkpoints (synth, synthtest), the bundled test models (testmodel),
// random JSON Schemas (schemagen), an independent float64 forward pass
// (reference) and the repository's own checks (repotest). It holds no
// code of its own.
package internal
