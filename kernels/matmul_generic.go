//go:build !amd64 || purego

package kernels

func matVecArch[E tileElem](p Path, dst []float32, w []E, ldw int, x []float32, n, k, t0, t1 int) {
	unsupported(p)
}

func gemmArch[E tileElem](p Path, dst []float32, ldy int, w []E, ldw int, x []float32, ldx, m, n, k, t0, t1 int) {
	unsupported(p)
}
