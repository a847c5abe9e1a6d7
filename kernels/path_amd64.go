//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// Supported reports whether this CPU can run the path. The AVX paths also
// need F16C for VCVTPH2PS; x/sys/cpu has no F16C flag, but every CPU with
// AVX2+FMA that Go supports has it (Haswell and Zen onwards).
func (p Path) Supported() bool {
	switch p {
	case Auto, Generic:
		return true
	case AVX2:
		return cpu.X86.HasAVX2 && cpu.X86.HasFMA
	case AVX512:
		return cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL &&
			cpu.X86.HasAVX2 && cpu.X86.HasFMA
	case AVX512VNNI:
		return AVX512.Supported() && cpu.X86.HasAVX512VNNI
	case AVXVNNI:
		return AVX2.Supported() && cpu.X86.HasAVXVNNI
	}
	return false
}
