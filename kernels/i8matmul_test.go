package kernels

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// i8Case is a tile-major int8 matrix with tiles of ldw columns, of which
// the first k are the [n, k] matrix under test. Every other element (the
// columns k..ldw-1 and the padding rows of the last tile) is 127: the
// tests' activations make every result exact, so a kernel that read one
// would fail.
type i8Case struct {
	n, k, ldw int
	rm        []int8 // row-major [n, k]
	w         []int8 // tile-major [ceil(n/32), ldw, 32]
}

func newI8Case(r *rand.Rand, n, k, ldw int) *i8Case {
	c := &i8Case{n: n, k: k, ldw: ldw, rm: make([]int8, n*k), w: make([]int8, matTiles(n)*ldw*32)}
	for i := range c.rm {
		switch r.IntN(8) {
		case 0:
			c.rm[i] = -128
		case 1:
			c.rm[i] = 127
		default:
			c.rm[i] = int8(r.IntN(256) - 128)
		}
	}
	for i := range c.w {
		c.w[i] = 127
	}
	for rr := range n {
		for j := range k {
			c.w[((rr/32)*ldw+j)*32+rr%32] = c.rm[rr*k+j]
		}
	}
	return c
}

// ref is the dot product of row rr with x (exact for i8X activations).
func (c *i8Case) ref(rr int, x []float32) float64 {
	var dot float64
	for j := range c.k {
		dot += float64(c.rm[rr*c.k+j]) * float64(x[j])
	}
	return dot
}

// i8X returns m rows of k activations with row stride ldx: multiples of
// 1/4 in [-4, 4], so every product with an int8 weight and every partial
// sum of up to 8191 of them is an exact f32 whatever the order of the
// additions; the results must equal the reference exactly. The padding of
// the rows (columns k..ldx-1, and 8 more after the last row, in the
// slice's capacity) is 1, which would show if read.
func i8X(r *rand.Rand, m, k, ldx int) []float32 {
	x := make([]float32, max(0, m*ldx)+8)
	for i := range x {
		if i%max(ldx, 1) < k && i < m*ldx {
			x[i] = float32(r.IntN(33)-16) / 4
		} else {
			x[i] = 1
		}
	}
	return x[:max(0, (m-1)*ldx+k)]
}

// TestMatmulI8 checks MatVecTilesI8 and GemmTilesI8 against the exact
// reference on every path: the KV cache shapes, k around multiples of 32
// with ldw > k, and random shapes.
func TestMatmulI8(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	shapes := [][3]int{{256, 128, 128}, {256, 128, 160}, {256, 0, 128}, {33, 0, 5}}
	for _, k := range []int{1, 2, 3, 31, 32, 33, 100, 128, 129, 255, 256} {
		shapes = append(shapes, [3]int{128, k, 256})
	}
	for range 16 {
		n, k := 1+r.IntN(200), 1+r.IntN(300)
		shapes = append(shapes, [3]int{n, k, k + r.IntN(2)*r.IntN(40)})
	}
	for _, s := range shapes {
		n, k, ldw := s[0], s[1], s[2]
		c := newI8Case(r, n, k, ldw)
		for _, m := range []int{1, 2, 3, 6, 7, 13, 32} {
			ldx := k + r.IntN(3)
			ldy := n + r.IntN(3)
			xs := i8X(r, m, k, ldx)
			for _, tr := range tileRanges(matTiles(n)) {
				for _, p := range SupportedPaths() {
					for _, matvec := range []bool{false, true} {
						if matvec && m > 1 {
							continue
						}
						name := fmt.Sprintf("%s/m=%d/n=%d/k=%d/ldw=%d/ldx=%d/ldy=%d/t=%d-%d/matvec=%v", p, m, n, k, ldw, ldx, ldy, tr[0], tr[1], matvec)
						const extra = 5
						dst := make([]float32, (m-1)*ldy+n+extra)
						fillSentinel(dst)
						if matvec {
							p.MatVecTilesI8(dst, c.w, ldw, xs, n, k, tr[0], tr[1])
						} else {
							p.GemmTilesI8(dst, ldy, c.w, ldw, xs, ldx, m, n, k, tr[0], tr[1])
						}
						t.Run(name, func(t *testing.T) {
							for i := range m {
								width := ldy
								if i == m-1 {
									width = n + extra
								}
								x := xs[i*ldx : i*ldx+k]
								checkRowsRef(t, dst, i*ldy, n, tr[0], tr[1], width, func(rr int) (float64, float64) {
									return c.ref(rr, x), 0
								})
							}
						})
					}
				}
			}
		}
	}
}

func TestMatmulI8Panics(t *testing.T) {
	w := make([]int8, 2*8*32) // n = 64, ldw = 8
	x := make([]float32, 3*8)
	dst := make([]float32, 3*64)
	for _, p := range SupportedPaths() {
		cases := map[string]func(){
			"matvec ldw < k":    func() { p.MatVecTilesI8(dst, w, 4, x, 64, 5, 0, 2) },
			"matvec short dst":  func() { p.MatVecTilesI8(dst[:63], w, 8, x, 64, 5, 0, 2) },
			"matvec short w":    func() { p.MatVecTilesI8(dst, w[:(8+5)*32-1], 8, x, 64, 5, 0, 2) },
			"matvec short x":    func() { p.MatVecTilesI8(dst, w, 8, x[:4], 64, 5, 0, 2) },
			"matvec bad range":  func() { p.MatVecTilesI8(dst, w, 8, x, 64, 5, 1, 3) },
			"matvec neg range":  func() { p.MatVecTilesI8(dst, w, 8, x, 64, 5, 2, 1) },
			"matvec negative n": func() { p.MatVecTilesI8(dst, w, 8, x, -1, 5, 0, 0) },
			"gemm ldw < k":      func() { p.GemmTilesI8(dst, 64, w, 4, x, 8, 3, 64, 5, 0, 2) },
			"gemm short w":      func() { p.GemmTilesI8(dst, 64, w[:(8+5)*32-1], 8, x, 8, 3, 64, 5, 0, 2) },
			"gemm short x":      func() { p.GemmTilesI8(dst, 64, w, 8, x[:2*8+4], 8, 3, 64, 5, 0, 2) },
			"gemm short dst":    func() { p.GemmTilesI8(dst[:2*64+63], 64, w, 8, x, 8, 3, 64, 5, 0, 2) },
			"gemm bad range":    func() { p.GemmTilesI8(dst, 64, w, 8, x, 8, 3, 64, 5, 0, 3) },
			"gemm small ldx":    func() { p.GemmTilesI8(dst, 64, w, 8, x, 4, 3, 64, 5, 0, 2) },
			"gemm small ldy":    func() { p.GemmTilesI8(dst, 63, w, 8, x, 8, 3, 64, 5, 0, 2) },
			"gemm negative m":   func() { p.GemmTilesI8(dst, 64, w, 8, x, 8, -1, 64, 5, 0, 2) },
			"gemm m=1 short w":  func() { p.GemmTilesI8(dst, 64, w[:(8+5)*32-1], 8, x, 8, 1, 64, 5, 0, 2) },
		}
		for name, f := range cases {
			fn := "MatVecTilesI8"
			if strings.HasPrefix(name, "gemm") {
				fn = "GemmTilesI8"
			}
			func() {
				defer func() {
					e := recover()
					if e == nil {
						t.Errorf("%s: %s did not panic", p, name)
					} else if msg := fmt.Sprint(e); !strings.Contains(msg, fn+":") {
						t.Errorf("%s: %s: panic %q does not name %s", p, name, msg, fn)
					}
				}()
				f()
			}()
		}
		// Empty ranges are no-ops even with nil slices, and the last tile
		// needs only its first k columns.
		p.MatVecTilesI8(nil, nil, 8, nil, 64, 8, 1, 1)
		p.GemmTilesI8(nil, 64, nil, 8, nil, 8, 0, 64, 8, 0, 2)
		p.GemmTilesI8(nil, 64, nil, 8, nil, 8, 3, 64, 8, 2, 2)
		p.MatVecTilesI8(dst, w[:(8+5)*32], 8, x, 64, 5, 0, 2)
		p.GemmTilesI8(dst, 64, w[:(8+5)*32], 8, x, 8, 3, 64, 5, 0, 2)
	}
}

// TestMatmulTilesDoesNotAllocate: the attention of a decode step calls
// the tile kernels per head; none may allocate, with a padded last tile
// (staging buffers) or not.
func TestMatmulTilesDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, s := range [][3]int{{256, 128, 128}, {100, 37, 64}} {
		n, k, ldw := s[0], s[1], s[2]
		c := newI8Case(r, n, k, ldw)
		wf := make([]uint16, len(c.w))
		for i := range wf {
			wf[i] = randF16(r)
		}
		for _, p := range SupportedPaths() {
			for _, m := range []int{1, 7, 32} {
				x := i8X(r, m, k, k)
				dst := make([]float32, m*n)
				nt := matTiles(n)
				fs := map[string]func(){
					"MatVecTilesI8": func() { p.MatVecTilesI8(dst, c.w, ldw, x, n, k, 0, nt) },
					"GemmTilesI8":   func() { p.GemmTilesI8(dst, n, c.w, ldw, x, k, m, n, k, 0, nt) },
					"MatVecTilesLd": func() { p.MatVecTilesLd(dst, wf, ldw, x, n, k, 0, nt) },
					"GemmTilesLd":   func() { p.GemmTilesLd(dst, n, wf, ldw, x, k, m, n, k, 0, nt) },
				}
				for name, f := range fs {
					f() // build the portable path's tables
					if a := testing.AllocsPerRun(100, f); a != 0 {
						t.Errorf("%s %s n=%d k=%d m=%d: %v allocations per call", p, name, n, k, m, a)
					}
				}
			}
		}
	}
}
