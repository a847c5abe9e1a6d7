//go:build !amd64 || purego

package kernels

// Supported reports whether this build can run the path: only Generic
// (which Auto stands for) without amd64 assembly.
func (p Path) Supported() bool { return p == Generic || p == Auto }
