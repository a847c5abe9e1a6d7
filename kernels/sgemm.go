package kernels

import "fmt"

// sgemmRows is the most rows of C one assembly call computes; it must
// match kernels/_gen/deltanet.
const sgemmRows = 6

// sgemm sets C = beta·C + A·B for row-major f32 matrices A [m, k] (rows
// lda apart), B [k, n] (ldb) and C [m, n] (ldc); with beta 0, C = A·B and
// C is not read (it may hold anything). With lower, A is lower triangular
// (A[i][j] = 0 for j > i, and those zeros are in A): row i reads only
// A[i][:i+1] and B's first i+1 rows, which halves a triangular product.
// C must not overlap A or B.
//
// The products of the chunked delta rule (deltanet.go) are small (tens to
// a few hundred rows and columns) and f32 throughout; the tile-major f16
// kernels of matmul.go are for weights.
func (p Path) sgemm(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, m, n, k int, beta float32, lower bool) {
	if m < 0 || n < 0 || k < 0 || lda < k || ldb < n || ldc < n {
		panic(fmt.Sprintf("kernels: sgemm: m, n, k = %d, %d, %d with lda, ldb, ldc = %d, %d, %d", m, n, k, lda, ldb, ldc))
	}
	if m == 0 || n == 0 {
		return
	}
	_ = c[(m-1)*ldc+n-1]
	if k > 0 {
		_, _ = a[(m-1)*lda+k-1], b[(k-1)*ldb+n-1]
	}
	// A panel of B's columns at a time, through every block of rows:
	// the panel (k x sgemmPanel) stays in the first-level cache while the
	// row blocks pass, where all of B (the state, 128 x 128) would not.
	for j0 := 0; j0 < n; j0 += sgemmPanel {
		nb := min(sgemmPanel, n-j0)
		for i0 := 0; i0 < m; i0 += sgemmRows {
			rows := min(sgemmRows, m-i0)
			kk := k
			if lower {
				kk = min(k, i0+rows)
			}
			p.sgemmBlock(c[i0*ldc+j0:], ldc, a[i0*lda:], lda, b[j0:], ldb, rows, nb, kk, beta)
		}
	}
}

// sgemmPanel is the columns of B one pass over the rows of C reads: 32
// KiB of a k = 128 operand.
const sgemmPanel = 64

// sgemmBlock is sgemm for at most sgemmRows rows.
func (p Path) sgemmBlock(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, m, n, k int, beta float32) {
	j0 := 0
	if p != Generic && k > 0 {
		j0 = sgemmAsm(p, c, ldc, a, lda, b, ldb, m, n, k, beta)
	}
	if j0 == n {
		return
	}
	for i := range m {
		row := c[i*ldc+j0 : i*ldc+n]
		if beta == 0 {
			clear(row)
		} else {
			for j := range row {
				row[j] *= beta
			}
		}
		for kk, aik := range a[i*lda : i*lda+k] {
			for j, bv := range b[kk*ldb+j0 : kk*ldb+n] {
				row[j] += aik * bv
			}
		}
	}
}
