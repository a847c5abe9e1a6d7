// Command i8matmul generates kernels/i8matmul_amd64.s, the AVX2 and AVX-512
// tile-major int8 matrix kernels of the 8-bit KV cache: the f16 kernels of
// ../matmul (both come from ../internal/tilemat) with VPMOVSXBD + VCVTDQ2PS
// in place of VCVTPH2PS. Run it from this directory:
//
//	go run . -out ../../i8matmul_amd64.s
package main

import "github.com/qwenc/qwenc/kernels/_gen/internal/tilemat"

func main() {
	// A column is half the bytes of an f16 one but takes two vector
	// instructions to convert, one more than f16, so the AVX-512 matvec
	// reads x by embedded broadcasts and steps 8 columns at a time to stay
	// at memory speed (in L2 on Zen 4: 33 GB/s against 24 with a
	// VBROADCASTSS per column and 4 columns a step).
	tilemat.Main("i8matmul", "../../i8matmul_amd64.s", tilemat.Gen{
		Elem: tilemat.I8, Prefetch: 2048, PrefetchOp: "PREFETCHT0", GemmPrefetch: 4,
		Bcast512: true, Unroll512: 8, GemmBcastMaxM: 2,
	})
}
