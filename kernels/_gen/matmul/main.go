// Command matmul generates kernels/matmul_amd64.s, the AVX2 and AVX-512
// tile-major f16 matrix kernels. It is a plain text generator (no
// dependencies) so the unrolled register-blocked GEMM variants stay
// consistent; run it from this directory:
//
//	go run . -out ../../matmul_amd64.s
package main

import (
	"flag"
	"fmt"

	"github.com/qwenc/qwenc/kernels/_gen/internal/emit"
)

var (
	p       = emit.P
	label   = emit.Label
	comment = emit.Comment
)

// gemmMaxM is the largest token block of the GEMM kernels; it must match
// matmul_amd64.go. The kernels read the activation rows in place, one
// general register per row: AVX-512 two tiles (4 Z weight regs) x 6 tokens
// = 24 accumulators; AVX2 half a tile (2 Y weight regs) x 6 tokens = 12.
const gemmMaxM = 6

// General registers of the activation rows of a GEMM block, read at
// (row)(AX*1) with AX = 4*j.
var rowRegs = [gemmMaxM]string{"BX", "DI", "R9", "R10", "R12", "R13"}

var (
	prefetch     = flag.Int("prefetch", 4096, "matvec software prefetch distance in bytes (0 = none)")
	prefetchOp   = flag.String("prefetchop", "PREFETCHT0", "matvec prefetch instruction")
	gemmPrefetch = flag.Int("gemmprefetch", 4, "GEMM software prefetch distance in k steps (0 = none)")
)

func main() {
	emit.Generate("matmul", func() {
		matVec512()
		matVecAVX2()
		for m := 1; m <= gemmMaxM; m++ {
			gemm512(1, m)
			gemm512(2, m)
			gemmAVX2(m, false)
			gemmAVX2(m, true)
		}
	})
}

// matVec512 emits matVecAVX512: for each of `tiles` tiles, 32 outputs.
// k is unrolled by 4 with 4 independent accumulator pairs (Z16..Z23).
func matVec512() {
	comment("func matVecAVX512(dst *float32, w *uint16, x *float32, k, tiles int)")
	comment("Requires k >= 1, tiles >= 1. Writes 32*tiles floats to dst.")
	emit.Text("matVecAVX512", 40)
	p("MOVQ dst+0(FP), DX")
	p("MOVQ w+8(FP), SI")
	p("MOVQ x+16(FP), R8")
	p("MOVQ k+24(FP), R9")
	p("MOVQ tiles+32(FP), R10")
	label("mv512tile")
	p("MOVQ R8, DI")
	p("MOVQ R9, CX")
	for r := 16; r < 24; r++ {
		p("VPXORD Z%d, Z%d, Z%d", r, r, r)
	}
	p("CMPQ CX, $4")
	p("JB mv512tail")
	label("mv512loop4")
	for j := 0; j < 4; j++ {
		if *prefetch > 0 {
			p("%s %d(SI)", *prefetchOp, *prefetch+64*j)
		}
		w0, w1, b := 3*j, 3*j+1, 3*j+2
		p("VCVTPH2PS %d(SI), Z%d", 64*j, w0)
		p("VCVTPH2PS %d(SI), Z%d", 64*j+32, w1)
		p("VBROADCASTSS %d(DI), Z%d", 4*j, b)
		p("VFMADD231PS Z%d, Z%d, Z%d", b, w0, 16+2*j)
		p("VFMADD231PS Z%d, Z%d, Z%d", b, w1, 17+2*j)
	}
	p("ADDQ $256, SI")
	p("ADDQ $16, DI")
	p("SUBQ $4, CX")
	p("CMPQ CX, $4")
	p("JAE mv512loop4")
	label("mv512tail")
	p("TESTQ CX, CX")
	p("JZ mv512reduce")
	label("mv512loop1")
	p("VCVTPH2PS (SI), Z0")
	p("VCVTPH2PS 32(SI), Z1")
	p("VBROADCASTSS (DI), Z2")
	p("VFMADD231PS Z2, Z0, Z16")
	p("VFMADD231PS Z2, Z1, Z17")
	p("ADDQ $64, SI")
	p("ADDQ $4, DI")
	p("DECQ CX")
	p("JNZ mv512loop1")
	label("mv512reduce")
	p("VADDPS Z18, Z16, Z16")
	p("VADDPS Z19, Z17, Z17")
	p("VADDPS Z22, Z20, Z20")
	p("VADDPS Z23, Z21, Z21")
	p("VADDPS Z20, Z16, Z16")
	p("VADDPS Z21, Z17, Z17")
	p("VMOVUPS Z16, (DX)")
	p("VMOVUPS Z17, 64(DX)")
	p("ADDQ $128, DX")
	p("DECQ R10")
	p("JNZ mv512tile")
	p("VZEROUPPER")
	p("RET")
	emit.End()
}

// matVecAVX2 emits matVecAVX2: k unrolled by 2 with 2 sets of 4 Y
// accumulators (Y8..Y15); weights/broadcast use Y0..Y4 (renamed).
func matVecAVX2() {
	comment("func matVecAVX2(dst *float32, w *uint16, x *float32, k, tiles int)")
	comment("Requires k >= 1, tiles >= 1. Writes 32*tiles floats to dst.")
	emit.Text("matVecAVX2", 40)
	p("MOVQ dst+0(FP), DX")
	p("MOVQ w+8(FP), SI")
	p("MOVQ x+16(FP), R8")
	p("MOVQ k+24(FP), R9")
	p("MOVQ tiles+32(FP), R10")
	label("mv2tile")
	p("MOVQ R8, DI")
	p("MOVQ R9, CX")
	for r := 8; r < 16; r++ {
		p("VXORPS Y%d, Y%d, Y%d", r, r, r)
	}
	p("CMPQ CX, $2")
	p("JB mv2tail")
	label("mv2loop2")
	if *prefetch > 0 {
		p("%s %d(SI)", *prefetchOp, *prefetch)
		p("%s %d(SI)", *prefetchOp, *prefetch+64)
	}
	for j := 0; j < 2; j++ {
		p("VBROADCASTSS %d(DI), Y4", 4*j)
		for q := 0; q < 4; q++ {
			p("VCVTPH2PS %d(SI), Y%d", 64*j+16*q, q)
		}
		for q := 0; q < 4; q++ {
			p("VFMADD231PS Y4, Y%d, Y%d", q, 8+4*j+q)
		}
	}
	p("ADDQ $128, SI")
	p("ADDQ $8, DI")
	p("SUBQ $2, CX")
	p("CMPQ CX, $2")
	p("JAE mv2loop2")
	label("mv2tail")
	p("TESTQ CX, CX")
	p("JZ mv2reduce")
	p("VBROADCASTSS (DI), Y4")
	for q := 0; q < 4; q++ {
		p("VCVTPH2PS %d(SI), Y%d", 16*q, q)
	}
	for q := 0; q < 4; q++ {
		p("VFMADD231PS Y4, Y%d, Y%d", q, 8+q)
	}
	p("ADDQ $64, SI")
	label("mv2reduce")
	for q := 0; q < 4; q++ {
		p("VADDPS Y%d, Y%d, Y%d", 12+q, 8+q, 8+q)
		p("VMOVUPS Y%d, %d(DX)", 8+q, 32*q)
	}
	p("ADDQ $128, DX")
	p("DECQ R10")
	p("JNZ mv2tile")
	p("VZEROUPPER")
	p("RET")
	emit.End()
}

// gemmHeader emits the TEXT line and the setup shared by the GEMM kernels:
// SI = w, R8 = ldw*64, CX = 4*k (loop end), AX = 0 (loop index, 4*j), the
// row registers; DX = dst and R11 = 4*ldy for initAcc.
func gemmHeader(name string, m, rows int, wType string) {
	comment("func %s(dst *float32, ldy int, w %s, x *float32, ldx, k int, acc bool, ldw int)", name, wType)
	comment("Requires k >= 1. Computes dst[i*ldy + r] (+)= sum_{j<k} x[i*ldx + j] * W[r, j]")
	comment("for i < %d, r < %d; with acc the sums are added to dst, else dst is", m, rows)
	comment("overwritten. Column j of the tile is at w[32*j : 32*j+32]; a second tile")
	comment("starts at w[32*ldw] (ldw is the matrix's full k, so k can be a block).")
	emit.Text(name, 64)
	p("MOVQ w+16(FP), SI")
	p("MOVQ ldw+56(FP), R8")
	p("SHLQ $6, R8")
	p("MOVQ x+24(FP), %s", rowRegs[0])
	p("MOVQ ldx+32(FP), R11")
	p("SHLQ $2, R11")
	for i := 1; i < m; i++ {
		p("LEAQ (%s)(R11*1), %s", rowRegs[i-1], rowRegs[i])
	}
	p("MOVQ k+40(FP), CX")
	p("SHLQ $2, CX")
	p("MOVQ dst+0(FP), DX")
	p("MOVQ ldy+8(FP), R11")
	p("SHLQ $2, R11")
}

// initAcc zeroes the m*per accumulators (reg prefix rp, from first) or,
// with acc, loads them from dst (token i at DX + i*R11, byte offset
// off + width*q), then sets AX = 0 and falls into the loop.
func initAcc(name, rp string, m, per, first, off int) {
	width := 64
	if rp == "Y" {
		width = 32
	}
	p("XORQ AX, AX")
	p("MOVBLZX acc+48(FP), R8") // reuse R8 briefly
	p("TESTL R8, R8")
	p("JNZ %sload", name)
	for i := 0; i < m*per; i++ {
		r := first + i
		if rp == "Z" {
			p("VPXORD Z%d, Z%d, Z%d", r, r, r)
		} else {
			p("VXORPS Y%d, Y%d, Y%d", r, r, r)
		}
	}
	p("JMP %sready", name)
	label(name + "load")
	p("MOVQ DX, R8")
	for i := 0; i < m; i++ {
		for q := 0; q < per; q++ {
			p("VMOVUPS %d(R8), %s%d", off+width*q, rp, first+per*i+q)
		}
		if i < m-1 {
			p("ADDQ R11, R8")
		}
	}
	label(name + "ready")
	p("MOVQ ldw+56(FP), R8")
	p("SHLQ $6, R8")
}

// storeAcc stores the accumulators to dst (DX, stride R11).
func storeAcc(rp string, m, per, first, off int) {
	width := 64
	if rp == "Y" {
		width = 32
	}
	for i := 0; i < m; i++ {
		for q := 0; q < per; q++ {
			p("VMOVUPS %s%d, %d(DX)", rp, first+per*i+q, off+width*q)
		}
		if i < m-1 {
			p("ADDQ R11, DX")
		}
	}
}

// gemm512 emits gemmAVX512T<tiles>M<m>: tiles (1 or 2) consecutive tiles x
// m tokens. Per column j the weights are converted once into Z0..Z(2t-1)
// and each token's x[i, j] is broadcast into Z4; token i accumulates in
// Z(5+2t*i) ...
func gemm512(tiles, m int) {
	name := fmt.Sprintf("gemmAVX512T%dM%d", tiles, m)
	per := 2 * tiles
	gemmHeader(name, m, 32*tiles, "*uint16")
	initAcc(name, "Z", m, per, 5, 0)
	l := name + "loop"
	label(l)
	if *gemmPrefetch > 0 {
		p("PREFETCHT0 %d(SI)", 64**gemmPrefetch)
		if tiles == 2 {
			p("PREFETCHT0 %d(SI)(R8*1)", 64**gemmPrefetch)
		}
	}
	p("VCVTPH2PS (SI), Z0")
	p("VCVTPH2PS 32(SI), Z1")
	if tiles == 2 {
		p("VCVTPH2PS (SI)(R8*1), Z2")
		p("VCVTPH2PS 32(SI)(R8*1), Z3")
	}
	for i := 0; i < m; i++ {
		p("VBROADCASTSS (%s)(AX*1), Z4", rowRegs[i])
		for q := 0; q < per; q++ {
			p("VFMADD231PS Z4, Z%d, Z%d", q, 5+per*i+q)
		}
	}
	p("ADDQ $64, SI")
	p("ADDQ $4, AX")
	p("CMPQ AX, CX")
	p("JNE %s", l)
	storeAcc("Z", m, per, 5, 0)
	p("VZEROUPPER")
	p("RET")
	emit.End()
}

// gemmAVX2 emits gemmAVX2M<m>: one tile x m tokens, as two passes over k of
// 16 rows each: weights in Y0, Y1, broadcast in Y2, accumulators Y3...
//
// With f32 it emits gemmAVX2F32M<m>, the same over a tile already
// converted to float32 (column j at w[32*j:], 128 bytes). Prefill sweeps
// every tile once per block of 6 tokens, and converting the f16 weights
// in each sweep costs a fifth of the multiply-adds' throughput where
// 256-bit operations run as two halves (first-generation Zen: this
// kernel in cache 33.5 GFLOP/s on one thread, 26.5 with the
// conversion); gemmPanelDriver converts each tile's k-block once.
func gemmAVX2(m int, f32 bool) {
	name, wType, step := fmt.Sprintf("gemmAVX2M%d", m), "*uint16", 64
	if f32 {
		name, wType, step = fmt.Sprintf("gemmAVX2F32M%d", m), "*float32", 128
	}
	gemmHeader(name, m, 32, wType)
	for h := 0; h < 2; h++ {
		hn := fmt.Sprintf("%sh%d", name, h)
		if h == 1 {
			p("MOVQ w+16(FP), SI")
			p("MOVQ dst+0(FP), DX")
		}
		initAcc(hn, "Y", m, 2, 3, 64*h)
		l := hn + "loop"
		label(l)
		switch {
		case f32:
			p("VMOVUPS %d(SI), Y0", 64*h)
			p("VMOVUPS %d(SI), Y1", 64*h+32)
		default:
			if *gemmPrefetch > 0 {
				p("PREFETCHT0 %d(SI)", 64**gemmPrefetch)
			}
			p("VCVTPH2PS %d(SI), Y0", 32*h)
			p("VCVTPH2PS %d(SI), Y1", 32*h+16)
		}
		for i := 0; i < m; i++ {
			p("VBROADCASTSS (%s)(AX*1), Y2", rowRegs[i])
			p("VFMADD231PS Y2, Y0, Y%d", 3+2*i)
			p("VFMADD231PS Y2, Y1, Y%d", 4+2*i)
		}
		p("ADDQ $%d, SI", step)
		p("ADDQ $4, AX")
		p("CMPQ AX, CX")
		p("JNE %s", l)
		storeAcc("Y", m, 2, 3, 64*h)
	}
	p("VZEROUPPER")
	p("RET")
	emit.End()
}
