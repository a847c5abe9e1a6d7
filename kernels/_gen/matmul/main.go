// Command matmul generates kernels/matmul_amd64.s, the AVX2 and AVX-512
// tile-major f16 matrix kernels. It is a plain text generator (no
// dependencies) so the unrolled register-blocked GEMM variants stay
// consistent; the kernels themselves are in ../internal/tilemat, shared
// with the int8 generator ../i8matmul. Run it from this directory:
//
//	go run . -out ../../matmul_amd64.s
package main

import "github.com/qwenc/qwenc/kernels/_gen/internal/tilemat"

func main() {
	tilemat.Main("matmul", "../../matmul_amd64.s", tilemat.Gen{
		Elem: tilemat.F16, Prefetch: 4096, PrefetchOp: "PREFETCHT0", GemmPrefetch: 4,
	})
}
