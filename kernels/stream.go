package kernels

// Sum returns the sum of x. It exists to measure the machine's read
// bandwidth with the same vector loads the kernels use (the benchmark's
// reference for "tokens/s against memory bandwidth"), so the vector paths
// keep many independent accumulators and do nothing but load and add.
func (p Path) Sum(x []float32) float32 {
	k, s := sumAsm(p, x)
	for _, v := range x[k:] {
		s += v
	}
	return s
}
