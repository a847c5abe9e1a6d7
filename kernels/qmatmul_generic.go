//go:build !amd64 || purego

package kernels

// qArch has no kernels without amd64 assembly: every product is generic.
type qArch struct{}

var q8Kernels, q4Kernels, q6Kernels qArch

func quantizeActsArch(p Path, dst []byte, x []float32) int { unsupported(p); return 0 }

func gemmQArch(p Path, tt *TypeTraits, dst []float32, ldy int, w, xq []byte, m, n, k, t0, t1 int) bool {
	unsupported(p)
	return false
}
