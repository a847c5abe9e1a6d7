//go:build amd64 && !purego

package kernels

// The row kernels keep whole rows in registers, so they take head sizes
// that are a multiple of the register width; other sizes go row by row
// through DotF16 and AxpyF16. Both report whether they ran.

func dotRowsAsm(p Path, dst, q []float32, k []uint16, hd int, scale float32) bool {
	if len(dst) == 0 || hd != opVecLen(p, hd) {
		return false
	}
	_, _ = q[hd-1], k[len(dst)*hd-1]
	if p == AVX512 {
		dotRowsAVX512(&dst[0], &q[0], &k[0], len(dst), hd, scale)
	} else {
		dotRowsAVX2(&dst[0], &q[0], &k[0], len(dst), hd, scale)
	}
	return true
}

func axpyRowsAsm(p Path, out, s []float32, v []uint16, hd int) bool {
	if len(s) == 0 || hd != opVecLen(p, hd) {
		return false
	}
	_, _ = out[hd-1], v[len(s)*hd-1]
	if p == AVX512 {
		axpyRowsAVX512(&out[0], &s[0], &v[0], len(s), hd)
	} else {
		axpyRowsAVX2(&out[0], &s[0], &v[0], len(s), hd)
	}
	return true
}

// Implemented in attn_amd64.s; rows > 0 and hd a positive multiple of the
// register width.

//go:noescape
func dotRowsAVX512(dst, q *float32, k *uint16, rows, hd int, scale float32)

//go:noescape
func dotRowsAVX2(dst, q *float32, k *uint16, rows, hd int, scale float32)

//go:noescape
func axpyRowsAVX512(out, s *float32, v *uint16, rows, hd int)

//go:noescape
func axpyRowsAVX2(out, s *float32, v *uint16, rows, hd int)
