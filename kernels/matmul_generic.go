//go:build !amd64 || purego

package kernels

func matVecArch(p Path, dst []float32, w []uint16, ldw int, x []float32, n, k, t0, t1 int) {
	unsupported(p)
}

func gemmArch(p Path, dst []float32, ldy int, w []uint16, ldw int, x []float32, ldx, m, n, k, t0, t1 int) {
	unsupported(p)
}
