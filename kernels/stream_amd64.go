//go:build amd64 && !purego

package kernels

// sumAsm sums the largest prefix of x the path's assembly handles (a
// multiple of 64 floats) and returns its length.
func sumAsm(p Path, x []float32) (int, float32) {
	k := len(x) &^ 63
	if k == 0 || (!p.wide() && !p.narrow()) {
		return 0, 0
	}
	if p.wide() {
		return k, sumAVX512(&x[0], k)
	}
	return k, sumAVX2(&x[0], k)
}

//go:noescape
func sumAVX512(x *float32, n int) float32

//go:noescape
func sumAVX2(x *float32, n int) float32
