package arch

import (
	"fmt"
	"math"
)

// Transform is how the compiler turns a checkpoint tensor's values into
// its section's, before converting them to the section's dtype: an
// architecture's Transform method gives one for each of its tensors. It
// works row by row, so that the compiler applies it while streaming a
// tensor in blocks of rows with bounded memory: a section's rows are its
// first dimension (per expert, for stacked experts), a vector's rows are
// its elements (one column each), and a row's columns are the rest.
//
// Section row r, column c is Values applied to the checkpoint's row
// Row(r), column Col(c). The zero Transform is the identity.
type Transform struct {
	// SrcShape is the checkpoint tensor's shape (of one expert) when it
	// differs from the section's: its rows are its first dimension, and a
	// row is the product of the others, which equals the section's row
	// (a conv1d weight [C, 1, K] becomes [C, K]; a q_proj of query and
	// gate rows becomes two sections of half its rows) or, with Col, may
	// be wider (mtp.fc's two halves of columns become two sections).
	SrcShape []uint64
	// Row maps a section row to the checkpoint row it is read from; nil:
	// the same row.
	Row func(r int) int
	// Col maps a column of a section row to the column of the checkpoint
	// row it is read from; nil: the same column.
	Col func(c int) int
	// Values changes values in place, each on its own (the compiler may
	// call it on any run of values), after Row and Col.
	Values func(v []float32)
}

// Identity reports whether t changes nothing.
func (t *Transform) Identity() bool {
	return t.SrcShape == nil && t.Row == nil && t.Col == nil && t.Values == nil
}

// Check verifies t against the tensor it applies to: the checkpoint rows
// it reads exist, and Row and Col stay inside the checkpoint row's
// bounds. It runs every map once, so a broken one fails the compile
// before any weight is written.
func (t *Transform) Check(tensor *Tensor) error {
	dst := tensor.Shape
	if tensor.Kind.Rank() == 3 {
		dst = dst[1:]
	}
	rows, cols := rowsCols(dst)
	srcRows, srcCols := rows, cols
	if t.SrcShape != nil {
		srcRows, srcCols = rowsCols(t.SrcShape)
	}
	if srcCols != cols && (t.Col == nil || srcCols < cols) {
		return fmt.Errorf("section %q: a transform from rows of %d values to rows of %d", tensor.Section, srcCols, cols)
	}
	for _, m := range []struct {
		what string
		f    func(int) int
		n, m int
	}{{"row", t.Row, rows, srcRows}, {"column", t.Col, cols, srcCols}} {
		if m.f == nil {
			if m.n != m.m {
				return fmt.Errorf("section %q: %d %ss from a checkpoint tensor of %d", tensor.Section, m.n, m.what, m.m)
			}
			continue
		}
		for i := range m.n {
			if j := m.f(i); j < 0 || j >= m.m {
				return fmt.Errorf("section %q: %s %d read from %s %d of %d", tensor.Section, m.what, i, m.what, j, m.m)
			}
		}
	}
	return nil
}

// rowsCols is a shape's rows (its first dimension) and the values in a
// row (the product of the others; 1 for a vector).
func rowsCols(shape []uint64) (rows, cols int) {
	cols = 1
	for _, d := range shape[1:] {
		cols *= int(d)
	}
	return int(shape[0]), cols
}

// The transforms Qwen3.5 needs (design note qwen35.md, sections 4 and 8),
// for an architecture unit to wire into its Transform method.

// OnePlus folds the 1 of a zero-centred RMSNorm (x / rms(x) * (1 + w),
// Qwen3.5's every norm but linear_attn.norm) into its weight, so that the
// runtime's RMSNorm (x / rms(x) * w) computes it unchanged.
func OnePlus(v []float32) {
	for i := range v {
		v[i] += 1
	}
}

// NegExp is A = -exp(A_log), the per-head decay rate a Gated DeltaNet
// multiplies softplus(a + dt_bias) by, computed once at compile time.
func NegExp(v []float32) {
	for i := range v {
		v[i] = float32(-math.Exp(float64(v[i])))
	}
}

// HeadPart maps the rows of one of parts interleaved blocks of each
// head's rows: in the checkpoint, head h's rows are parts blocks of
// headDim rows one after the other; the section holds block part of every
// head, head after head. Qwen3.5's q_proj is [heads * 2 * head_dim,
// hidden], each head's query rows then its gate rows (torch.chunk of
// view(-1, head_dim * 2)): its query section is Transform{SrcShape:
// [2*q, hidden], Row: HeadPart(headDim, 2, 0)} and its gate the
// same with part 1. Splitting it in a first and a second half would be
// wrong.
func HeadPart(headDim, parts, part int) func(r int) int {
	return func(r int) int { return (r/headDim)*parts*headDim + part*headDim + r%headDim }
}

// GroupedToTiled is the value-head order llama.cpp's converter gives a
// Gated DeltaNet whose nv value heads share nk key heads (nv a multiple
// of nk, r = nv/nk): position s*nk + kh holds the checkpoint's head
// kh*r + s, so that value head j reads key head j mod nk (a tiled
// repeat) instead of j / r (repeat_interleave, the checkpoint's order).
// It maps a head of the new order to the checkpoint's.
func GroupedToTiled(nk, nv int) func(head int) int {
	r := nv / nk
	return func(j int) int { return (j%nk)*r + j/nk }
}

// TiledFromGrouped is GroupedToTiled's inverse: it maps a value head of
// the checkpoint's grouped order to its position in llama.cpp's tiled
// order, where an importer of a GGUF reads it.
func TiledFromGrouped(nk, nv int) func(head int) int {
	r := nv / nk
	return func(h int) int { return (h%r)*nk + h/r }
}

// HeadRows applies a head permutation to a run of rows (or columns):
// those in [offset, offset + heads*headDim) move by head, perm giving for
// each head of the result the head it comes from; the others stay. The
// value rows of in_proj_qkv are HeadRows(2*Dk, nv, dv, perm); in_proj_z's
// rows and out_proj's columns HeadRows(0, nv, dv, perm); A_log's and
// dt_bias's elements HeadRows(0, nv, 1, perm).
func HeadRows(offset, heads, headDim int, perm func(head int) int) func(int) int {
	end := offset + heads*headDim
	return func(i int) int {
		if i < offset || i >= end {
			return i
		}
		i -= offset
		return offset + perm(i/headDim)*headDim + i%headDim
	}
}
