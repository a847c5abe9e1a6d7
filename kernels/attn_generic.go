//go:build !amd64 || purego

package kernels

func dotRowsAsm(Path, []float32, []float32, []uint16, int, float32) bool { return false }
func axpyRowsAsm(Path, []float32, []float32, []uint16, int) bool         { return false }
