package kernels

import "fmt"

// Path names one implementation of the kernels.
type Path uint8

const (
	// Auto, the zero Path, stands for the fastest path this CPU supports
	// (Detect): a zero Options of the packages that run models is fast.
	// Resolve turns it into that path before any kernel runs.
	Auto Path = iota
	// Generic is portable Go; it is also the reference every other path is
	// tested against.
	Generic
	// AVX2 uses AVX2, FMA and F16C (VCVTPH2PS) on 256-bit registers.
	AVX2
	// AVX512 uses AVX-512F on 512-bit registers, and BW (VPMADDUBSW) for
	// the int8 products of quantized weights.
	AVX512
	// AVX512VNNI is AVX512 with the int8 products on AVX-512 VNNI
	// (VPDPBUSD); everything else is AVX512's.
	AVX512VNNI
	// AVXVNNI is AVX2 with the int8 products on AVX-VNNI (the VEX
	// VPDPBUSD of Alder Lake onwards and Zen 5, on 256-bit registers);
	// everything else is AVX2's. It comes last so the other paths keep
	// their values.
	AVXVNNI
)

// wide reports whether p runs the 512-bit kernels.
func (p Path) wide() bool { return p == AVX512 || p == AVX512VNNI }

// narrow reports whether p runs the 256-bit kernels.
func (p Path) narrow() bool { return p == AVX2 || p == AVXVNNI }

func (p Path) String() string {
	switch p {
	case Auto:
		return "auto"
	case Generic:
		return "generic"
	case AVX2:
		return "avx2"
	case AVX512:
		return "avx512"
	case AVX512VNNI:
		return "avx512vnni"
	case AVXVNNI:
		return "avxvnni"
	}
	return fmt.Sprintf("Path(%d)", uint8(p))
}

// ParsePath parses a path name; "" and "auto" give the best supported path.
// Asking for a path this CPU (or this build) cannot run is an error.
func ParsePath(s string) (Path, error) {
	var p Path
	switch s {
	case "", "auto":
		return Detect(), nil
	case "generic":
		p = Generic
	case "avx2":
		p = AVX2
	case "avx512":
		p = AVX512
	case "avx512vnni":
		p = AVX512VNNI
	case "avxvnni":
		p = AVXVNNI
	default:
		return 0, fmt.Errorf("kernels: unknown path %q (want auto, generic, avx2, avxvnni, avx512 or avx512vnni)", s)
	}
	if !p.Supported() {
		return 0, fmt.Errorf("kernels: path %s is not supported on this CPU or build", p)
	}
	return p, nil
}

// Resolve returns the path Auto stands for, Detect(), and any other path
// as it is.
func (p Path) Resolve() Path {
	if p == Auto {
		return Detect()
	}
	return p
}

// Detect returns the fastest path this CPU and build support.
func Detect() Path {
	for _, p := range []Path{AVX512VNNI, AVX512, AVXVNNI, AVX2} {
		if p.Supported() {
			return p
		}
	}
	return Generic
}

// SupportedPaths lists every path this CPU and build can run, Generic first;
// tests iterate over it so every dispatch path is checked.
func SupportedPaths() []Path {
	var ps []Path
	for _, p := range []Path{Generic, AVX2, AVXVNNI, AVX512, AVX512VNNI} {
		if p.Supported() {
			ps = append(ps, p)
		}
	}
	return ps
}
