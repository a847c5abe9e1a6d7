// Package kernels holds the numeric kernels of the engine: tile-major f16
// matrix-vector and matrix-matrix products, the small vector operations
// of a transformer step, and the Gated DeltaNet's (its causal
// convolution, and its delta rule as a fused recurrence and in chunks of
// small f32 products). It knows nothing about models.
//
// Every kernel exists as plain Go (the reference and the portable path) and,
// on amd64, as AVX2+FMA+F16C and AVX-512 assembly. A Path value selects the
// implementation; it is chosen once at start (Detect, or an override) and
// passed explicitly, so there is no mutable package state.
package kernels
