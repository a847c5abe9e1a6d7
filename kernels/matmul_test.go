package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// refF16 converts binary16 bits with math.Ldexp, independently of the
// kernels' conversion.
func refF16(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 0x1f
	f := float64(h & 0x3ff)
	switch e {
	case 0:
		return sign * math.Ldexp(f, -24)
	case 31:
		if f == 0 {
			return sign * math.Inf(1)
		}
		return math.NaN()
	}
	return sign * math.Ldexp(1024+f, e-25)
}

// randF16 draws finite f16 weights: mostly magnitudes in [2^-8, 2), some
// tiny normals and some subnormals (and zeros), both signs.
func randF16(r *rand.Rand) uint16 {
	sign := uint16(r.IntN(2)) << 15
	mant := uint16(r.IntN(1024))
	var e uint16
	switch c := r.IntN(10); {
	case c < 8:
		e = uint16(7 + r.IntN(9)) // 2^-8 .. 2^0 * 1.m
	case c < 9:
		e = uint16(1 + r.IntN(6)) // small normals
	default:
		e = 0 // subnormals and zero
	}
	return sign | e<<10 | mant
}

// tileMajor packs a row-major f16 [n, k] matrix into the tile-major layout
// with zero padding rows.
func tileMajor(rm []uint16, n, k int) []uint16 {
	w := make([]uint16, matTiles(n)*k*32)
	for r := range n {
		for j := range k {
			w[((r/32)*k+j)*32+r%32] = rm[r*k+j]
		}
	}
	return w
}

type matCase struct {
	n, k     int
	rm       []uint16 // row-major weights
	w        []uint16 // tile-major weights
	wf       []float64
	numTiles int
}

func newMatCase(r *rand.Rand, n, k int) *matCase {
	c := &matCase{n: n, k: k, rm: make([]uint16, n*k), wf: make([]float64, n*k), numTiles: matTiles(n)}
	for i := range c.rm {
		c.rm[i] = randF16(r)
		c.wf[i] = refF16(c.rm[i])
	}
	c.w = tileMajor(c.rm, n, k)
	return c
}

func randX(r *rand.Rand, size int) []float32 {
	x := make([]float32, size)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// ref returns the float64 dot product of row rr with x and sum |w*x|.
func (c *matCase) ref(rr int, x []float32) (dot, abs float64) {
	for j := range c.k {
		v := c.wf[rr*c.k+j] * float64(x[j])
		dot += v
		abs += math.Abs(v)
	}
	return
}

// tol is the allowed error of an f32 accumulation of k products whose
// absolute values sum to abs.
func tol(k int, abs float64) float64 {
	return abs*(4e-7*math.Sqrt(float64(k))+1e-6) + 1e-30
}

const sentinel = float32(-12345.678)

func fillSentinel(s []float32) {
	for i := range s {
		s[i] = sentinel
	}
}

// tileRanges returns the whole range and some sub-ranges of [0, nt).
func tileRanges(nt int) [][2]int {
	rs := [][2]int{{0, nt}, {0, 0}, {nt, nt}}
	if nt > 1 {
		rs = append(rs, [2]int{1, nt}, [2]int{0, nt - 1}, [2]int{nt / 2, nt/2 + 1})
	}
	if nt > 3 {
		rs = append(rs, [2]int{1, nt - 1})
	}
	return rs
}

var matShapesN = []int{1, 31, 32, 33, 64, 95, 100, 160}
var matShapesK = []int{1, 2, 3, 4, 5, 17, 64, 129, 1000}

func TestMatmulF16Conversion(t *testing.T) {
	for h := range 1 << 16 {
		got := float64(matF16ToF32(uint16(h)))
		want := refF16(uint16(h))
		if math.IsNaN(want) {
			if !math.IsNaN(got) {
				t.Fatalf("%#04x: got %v, want NaN", h, got)
			}
			continue
		}
		if got != want || math.Signbit(got) != math.Signbit(want) {
			t.Fatalf("%#04x: got %v, want %v", h, got, want)
		}
	}
}

func TestMatmulMatVec(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range matShapesN {
		for _, k := range matShapesK {
			c := newMatCase(r, n, k)
			x := randX(r, k)
			for _, tr := range tileRanges(c.numTiles) {
				for _, p := range SupportedPaths() {
					t.Run(fmt.Sprintf("%s/n=%d/k=%d/t=%d-%d", p, n, k, tr[0], tr[1]), func(t *testing.T) {
						const extra = 7
						dst := make([]float32, n+extra)
						fillSentinel(dst)
						p.MatVecTiles(dst, c.w, x, n, k, tr[0], tr[1])
						checkRows(t, c, dst, x, 0, n, tr[0], tr[1], len(dst))
					})
				}
			}
		}
	}
}

// checkRows checks one output row of length >= n at dst[off:]: positions
// in the tile range [32*t0, min(32*t1, n)) against the reference, all other
// positions of dst[off : off+width] are the sentinel.
func checkRows(t *testing.T, c *matCase, dst, x []float32, off, n, t0, t1, width int) {
	t.Helper()
	lo, hi := 32*t0, min(32*t1, n)
	bad := 0
	for r := range width {
		got := dst[off+r]
		if r < lo || r >= hi {
			if got != sentinel && math.Float32bits(got) != math.Float32bits(sentinel) {
				t.Errorf("position %d outside rows [%d, %d) written: %v", r, lo, hi, got)
				bad++
			}
			continue
		}
		want, abs := c.ref(r, x)
		if d := math.Abs(float64(got) - want); !(d <= tol(c.k, abs)) {
			t.Errorf("row %d: got %v, want %v (diff %.3g, tol %.3g)", r, got, want, d, tol(c.k, abs))
			bad++
		}
		if bad > 10 {
			t.FailNow()
		}
	}
}

func TestMatmulGemm(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	ms := []int{1, 2, 3, 5, 6, 7, 8, 12, 13, 14, 15, 16, 20, 29, 37}
	for _, n := range []int{1, 31, 32, 33, 95, 100, 160, 300} {
		for _, k := range []int{1, 3, 4, 17, 64, 1000} {
			c := newMatCase(r, n, k)
			for _, m := range ms {
				ldx := k + r.IntN(3)
				ldy := n + r.IntN(3)
				xs := randX(r, (m-1)*ldx+k)
				rngs := tileRanges(c.numTiles)
				if m > 3 && len(rngs) > 2 {
					rngs = [][2]int{rngs[0], rngs[len(rngs)-1]}
				}
				for _, tr := range rngs {
					for _, p := range SupportedPaths() {
						t.Run(fmt.Sprintf("%s/m=%d/n=%d/k=%d/ldx=%d/ldy=%d/t=%d-%d", p, m, n, k, ldx, ldy, tr[0], tr[1]), func(t *testing.T) {
							const extra = 5
							dst := make([]float32, (m-1)*ldy+n+extra)
							fillSentinel(dst)
							p.GemmTiles(dst, ldy, c.w, xs, ldx, m, n, k, tr[0], tr[1])
							for i := range m {
								width := ldy
								if i == m-1 {
									width = n + extra
								}
								checkRows(t, c, dst, xs[i*ldx:i*ldx+k], i*ldy, n, tr[0], tr[1], width)
							}
						})
					}
				}
			}
		}
	}
}

func TestMatmulPanics(t *testing.T) {
	w := make([]uint16, 2*8*32) // n = 64, k = 8
	x := make([]float32, 3*8)
	dst := make([]float32, 3*64)
	for _, p := range SupportedPaths() {
		cases := map[string]func(){
			"matvec short dst":  func() { p.MatVecTiles(dst[:63], w, x, 64, 8, 0, 2) },
			"matvec short w":    func() { p.MatVecTiles(dst, w[:len(w)-1], x, 64, 8, 0, 2) },
			"matvec short x":    func() { p.MatVecTiles(dst, w, x[:7], 64, 8, 0, 2) },
			"matvec bad range":  func() { p.MatVecTiles(dst, w, x, 64, 8, 1, 3) },
			"matvec neg range":  func() { p.MatVecTiles(dst, w, x, 64, 8, 2, 1) },
			"gemm short dst":    func() { p.GemmTiles(dst[:2*64+63], 64, w, x, 8, 3, 64, 8, 0, 2) },
			"gemm short x":      func() { p.GemmTiles(dst, 64, w, x[:23], 8, 3, 64, 8, 0, 2) },
			"gemm short w":      func() { p.GemmTiles(dst, 64, w[:32*8+5], x, 8, 3, 64, 8, 0, 2) },
			"gemm small ldx":    func() { p.GemmTiles(dst, 64, w, x, 7, 3, 64, 8, 0, 2) },
			"gemm small ldy":    func() { p.GemmTiles(dst, 63, w, x, 8, 3, 64, 8, 0, 2) },
			"gemm bad range":    func() { p.GemmTiles(dst, 64, w, x, 8, 3, 64, 8, 0, 3) },
			"gemm negative m":   func() { p.GemmTiles(dst, 64, w, x, 8, -1, 64, 8, 0, 2) },
			"matvec negative n": func() { p.MatVecTiles(dst, w, x, -1, 8, 0, 0) },
		}
		for name, f := range cases {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: %s did not panic", p, name)
					}
				}()
				f()
			}()
		}
		// Empty ranges are no-ops even with nil slices.
		p.MatVecTiles(nil, nil, nil, 64, 8, 1, 1)
		p.GemmTiles(nil, 64, nil, nil, 8, 0, 64, 8, 0, 2)
		p.GemmTiles(nil, 64, nil, nil, 8, 3, 64, 8, 2, 2)
	}
}

// TestMatmulZeroK: with k = 0 the outputs of the range are zero.
func TestMatmulZeroK(t *testing.T) {
	for _, p := range SupportedPaths() {
		dst := make([]float32, 70)
		fillSentinel(dst)
		p.MatVecTiles(dst, nil, nil, 70, 0, 1, 3)
		for i, v := range dst {
			want := sentinel
			if i >= 32 {
				want = 0
			}
			if v != want {
				t.Fatalf("%s: dst[%d] = %v, want %v", p, i, v, want)
			}
		}
		fillSentinel(dst)
		p.GemmTiles(dst, 35, nil, nil, 0, 2, 33, 0, 1, 2)
		for i, v := range dst {
			want := sentinel
			if i == 32 || i == 35+32 {
				want = 0
			}
			if v != want {
				t.Fatalf("%s: gemm dst[%d] = %v, want %v", p, i, v, want)
			}
		}
	}
}

// TestMatmulLd checks GemmTilesLd (m = 1: the matrix-vector kernel): the first k columns
// of tiles that have ldw, the rest of every tile filled with values that
// would show if read (NaN).
func TestMatmulLd(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const nan = 0x7e00
	for _, n := range []int{1, 31, 32, 33, 64, 100, 128, 160} {
		for _, ldw := range []int{1, 5, 17, 64, 256, 300} {
			ks := []int{0, 1, ldw - 1, ldw, 1 + r.IntN(ldw)}
			for _, k := range ks {
				if k < 0 {
					continue
				}
				// c holds the first k columns; w is c's tiles widened to ldw.
				c := newMatCase(r, n, k)
				w := make([]uint16, c.numTiles*ldw*32)
				for i := range w {
					w[i] = nan
				}
				for tile := range c.numTiles {
					copy(w[tile*ldw*32:], c.w[tile*k*32:(tile+1)*k*32])
				}
				for _, m := range []int{1, 2, 3, 6, 7, 13} {
					ldx := k + r.IntN(3)
					ldy := n + r.IntN(3)
					xs := randX(r, max(0, (m-1)*ldx+k))
					for _, tr := range tileRanges(c.numTiles) {
						for _, p := range SupportedPaths() {
							name := fmt.Sprintf("%s/m=%d/n=%d/k=%d/ldw=%d/t=%d-%d", p, m, n, k, ldw, tr[0], tr[1])
							const extra = 5
							dst := make([]float32, (m-1)*ldy+n+extra)
							fillSentinel(dst)
							p.GemmTilesLd(dst, ldy, w, ldw, xs, ldx, m, n, k, tr[0], tr[1])
							t.Run(name, func(t *testing.T) {
								for i := range m {
									width := ldy
									if i == m-1 {
										width = n + extra
									}
									checkRows(t, c, dst, xs[i*ldx:i*ldx+k], i*ldy, n, tr[0], tr[1], width)
								}
							})
						}
					}
				}
			}
		}
	}
}

func TestMatmulLdPanics(t *testing.T) {
	w := make([]uint16, 2*8*32) // n = 64, ldw = 8
	x := make([]float32, 3*8)
	dst := make([]float32, 3*64)
	for _, p := range SupportedPaths() {
		cases := map[string]func(){
			"matvec ldw < k":   func() { p.GemmTilesLd(dst, 64, w, 4, x, 8, 1, 64, 5, 0, 2) },
			"matvec short w":   func() { p.GemmTilesLd(dst, 64, w[:(8+5)*32-1], 8, x, 8, 1, 64, 5, 0, 2) },
			"gemm ldw < k":     func() { p.GemmTilesLd(dst, 64, w, 4, x, 8, 3, 64, 5, 0, 2) },
			"gemm short w":     func() { p.GemmTilesLd(dst, 64, w[:(8+5)*32-1], 8, x, 8, 3, 64, 5, 0, 2) },
			"gemm short x":     func() { p.GemmTilesLd(dst, 64, w, 8, x[:2*8+4], 8, 3, 64, 5, 0, 2) },
			"gemm short dst":   func() { p.GemmTilesLd(dst[:2*64+63], 64, w, 8, x, 8, 3, 64, 5, 0, 2) },
			"gemm bad range":   func() { p.GemmTilesLd(dst, 64, w, 8, x, 8, 3, 64, 5, 0, 3) },
			"matvec bad range": func() { p.GemmTilesLd(dst, 64, w, 8, x, 8, 1, 64, 5, 1, 3) },
		}
		for name, f := range cases {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: %s did not panic", p, name)
					}
				}()
				f()
			}()
		}
		// The last tile needs only its first k columns.
		p.GemmTilesLd(dst, 64, w[:(8+5)*32], 8, x, 8, 1, 64, 5, 0, 2)
		p.GemmTilesLd(dst, 64, w[:(8+5)*32], 8, x, 8, 3, 64, 5, 0, 2)
	}
}
