package arch

import (
	"math"
	"strings"
	"testing"

	"github.com/qwenc/qwenc/format"
)

// isPermutation reports whether f maps [0, n) onto itself.
func isPermutation(f func(int) int, n int) bool {
	seen := make([]bool, n)
	for i := range n {
		j := f(i)
		if j < 0 || j >= n || seen[j] {
			return false
		}
		seen[j] = true
	}
	return true
}

// TestOnePlus: a zero-centred norm's weight w folded into 1 + w gives,
// through the plain RMSNorm the runtime computes, what Qwen3.5's
// x / rms(x) * (1 + w) does.
func TestOnePlus(t *testing.T) {
	x := []float64{0.5, -1.25, 2, 0.125}
	w := []float32{0, -0.5, 0.25, 3}
	folded := append([]float32(nil), w...)
	OnePlus(folded)
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	rms := math.Sqrt(ss/float64(len(x)) + 1e-6)
	for i := range x {
		want := x[i] / rms * (1 + float64(w[i]))
		if got := x[i] / rms * float64(folded[i]); got != want {
			t.Errorf("element %d: %v, want %v", i, got, want)
		}
	}
}

// TestNegExp: A = -exp(A_log), in f32 from an f64 exponential.
func TestNegExp(t *testing.T) {
	v := []float32{0, float32(math.Ln2), -1, 3.5}
	NegExp(v)
	for i, want := range []float64{-1, -2, -1 / math.E, -math.Exp(3.5)} {
		if v[i] != float32(want) {
			t.Errorf("element %d: %v, want %v", i, v[i], float32(want))
		}
	}
}

// TestHeadPart: Qwen3.5's q_proj rows, split as transformers does
// (q_proj(x).view(-1, head_dim*2), then torch.chunk(2, dim=-1), each
// part flattened head-major), are the rows HeadPart maps to.
func TestHeadPart(t *testing.T) {
	const heads, hd = 3, 4
	// flat[i] = i: the output row of q_proj each element comes from.
	view := make([][]int, heads) // [heads, 2*hd]
	for h := range view {
		for j := range 2 * hd {
			view[h] = append(view[h], h*2*hd+j)
		}
	}
	for part := range 2 {
		var want []int // chunk part of the last dimension, flattened
		for h := range heads {
			want = append(want, view[h][part*hd:(part+1)*hd]...)
		}
		row := HeadPart(hd, 2, part)
		for r, w := range want {
			if got := row(r); got != w {
				t.Errorf("part %d row %d: from row %d, want %d", part, r, got, w)
			}
		}
	}
	// Both parts together read every row once.
	both := func(r int) int { return HeadPart(hd, 2, r/(heads*hd))(r % (heads * hd)) }
	if !isPermutation(both, 2*heads*hd) {
		t.Error("the query and gate parts do not partition q_proj's rows")
	}
}

// TestGroupedToTiled: position s*nk + kh holds head kh*r + s (qwen35.md,
// section 8), the map is a permutation, and in the new order value head j
// reads key head j mod nk, the key head repeat_interleave gave its source
// head.
func TestGroupedToTiled(t *testing.T) {
	for _, c := range [][2]int{{2, 6}, {16, 32}, {16, 48}, {4, 4}} {
		nk, nv := c[0], c[1]
		r := nv / nk
		perm := GroupedToTiled(nk, nv)
		for s := range r {
			for kh := range nk {
				if got := perm(s*nk + kh); got != kh*r+s {
					t.Errorf("nk %d nv %d: position %d holds head %d, want %d", nk, nv, s*nk+kh, got, kh*r+s)
				}
			}
		}
		if !isPermutation(perm, nv) {
			t.Errorf("nk %d nv %d: not a permutation", nk, nv)
		}
		for j := range nv {
			if perm(j)/r != j%nk {
				t.Errorf("nk %d nv %d: head %d (from %d) reads key head %d by its source, %d by its place", nk, nv, j, perm(j), perm(j)/r, j%nk)
			}
		}
	}
}

// TestHeadRows: rows outside the run stay, rows inside move with their
// head, and the whole is a permutation.
func TestHeadRows(t *testing.T) {
	const offset, heads, dim, total = 5, 3, 2, 14
	reverse := func(h int) int { return heads - 1 - h }
	f := HeadRows(offset, heads, dim, reverse)
	want := []int{0, 1, 2, 3, 4, 9, 10, 7, 8, 5, 6, 11, 12, 13}
	for i, w := range want {
		if got := f(i); got != w {
			t.Errorf("row %d: from %d, want %d", i, got, w)
		}
	}
	if !isPermutation(f, total) {
		t.Error("not a permutation")
	}
}

// TestTransformCheck: a transform is checked against its tensor before
// anything is written.
func TestTransformCheck(t *testing.T) {
	q := Tensor{Section: "layers.3.q_proj", Kind: format.KindProjection, Shape: []uint64{8, 16}}
	conv := Tensor{Section: "layers.0.conv1d", Kind: format.KindConv, Shape: []uint64{12, 4}}
	experts := Tensor{Section: "layers.0.experts.gate_proj", Kind: format.KindExperts, Shape: []uint64{3, 8, 16}}
	for _, c := range []struct {
		name string
		t    *Tensor
		tr   Transform
		want string
	}{
		{"identity", &q, Transform{}, ""},
		{"query half", &q, Transform{SrcShape: []uint64{16, 16}, Row: HeadPart(4, 2, 0)}, ""},
		{"gate half", &q, Transform{SrcShape: []uint64{16, 16}, Row: HeadPart(4, 2, 1)}, ""},
		{"experts' halves", &experts, Transform{SrcShape: []uint64{16, 16}, Row: HeadPart(8, 2, 1)}, ""},
		{"conv1d [C, 1, K]", &conv, Transform{SrcShape: []uint64{12, 1, 4}}, ""},
		{"columns", &q, Transform{Col: HeadRows(0, 4, 4, GroupedToTiled(2, 4))}, ""},
		{"rows past the checkpoint's", &q, Transform{SrcShape: []uint64{8, 16}, Row: HeadPart(4, 2, 1)},
			`section "layers.3.q_proj": row 4 read from row 12 of 8`},
		{"fewer rows without a map", &q, Transform{SrcShape: []uint64{16, 16}}, `section "layers.3.q_proj": 8 rows from a checkpoint tensor of 16`},
		{"rows of another length", &conv, Transform{SrcShape: []uint64{12, 2, 4}}, `section "layers.0.conv1d": a transform from rows of 8 values to rows of 4`},
		{"a column outside", &q, Transform{Col: func(c int) int { return c + 1 }}, `section "layers.3.q_proj": column 15 read from column 16 of 16`},
	} {
		err := c.tr.Check(c.t)
		if (c.want == "" && err != nil) || (c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want))) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestTransformsAreIdentityToday: Qwen2 and Qwen3 change no checkpoint
// value, so their files' bytes are what they were before the hook
// existed.
func TestTransformsAreIdentityToday(t *testing.T) {
	for _, a := range Builtin() {
		if strings.HasPrefix(a.ModelType(), "qwen3_5") {
			continue // TestQwen35Transforms
		}
		c := qwen3_06B()
		c.ModelType = a.ModelType()
		if a.ModelType() == "qwen3_moe" {
			c.MoE = format.MoE{Experts: 4, ExpertsPerToken: 2, ExpertWidth: 64, Sparse: make([]bool, c.Layers)}
			c.MoE.Sparse[0] = true
		}
		for tensor := range Tensors(a, &c) {
			if tr := a.Transform(&c, &tensor); !tr.Identity() {
				t.Errorf("%s: %s has a transform", a.ModelType(), tensor.Section)
			}
		}
	}
}
