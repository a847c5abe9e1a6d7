// Command qmatmul generates kernels/qmatmul_amd64.s: the int8 kernels of
// the quantized weight types (q8, q4, q6) for AVX-512 with VNNI, AVX-512 BW
// without VNNI, and AVX2, and the activation quantizers. It is a plain text
// generator, like kernels/_gen/matmul; run it from this directory:
//
//	go run . -out ../../qmatmul_amd64.s
//
// Every product kernel computes, for one tile (32 rows; 8 or 16 rows per call on
// AVX2) and m token rows, over nb blocks of 32 columns:
//
//	dst[i*ldy + r] = sum_b (int32 dot of block b) * (scales) ...
//
// with the layouts of format/SPEC.md and the activation blocks of
// kernels/qmatmul.go. The Go signature of all of them is
//
//	func(dst *float32, ldy int, w *byte, x *byte, ldx, nb, pass int)
//
// (ldy in floats, ldx in bytes; pass selects the rows of an AVX2 call).
package main

import (
	"fmt"
	"strings"

	"github.com/qwenc/qwenc/kernels/_gen/internal/emit"
)

var (
	p       = emit.P
	label   = emit.Label
	comment = emit.Comment
)

// Layout constants (format/SPEC.md; kernels/quant.go and qmatmul.go).
const (
	q8Block  = 1088 // 64 bytes of f16 scales, 8 groups of 128 values
	q4Block  = 576  // 32 scales, 32 minimums, 8 groups of 64 nibble bytes
	q4Header = 128  // per 8 blocks: 32 f16 scales and 32 f16 minimum scales
	q6Block  = 832  // 32 f16 scales, 8 groups of 64 nibble bytes, 4 lines of high bits
	q6High   = 576  // the offset of the high bits in a q6 block
	actBlock = 48   // f32 d, f32 d*sum, i32 -128*sum, i32 sum, 32 x i8
)

// rowRegs hold the token rows' activation pointers; AX is the byte offset
// of the current block within every row.
var rowRegs = [6]string{"BX", "DI", "R9", "R10", "R12", "R13"}

// Maximum token rows per kernel, from the register budget of each. With
// VNNI, one token takes a full-tile kernel (q8zmm, q4zmm) and 2 to
// maxHalf tokens the half-tile kernels (q8half, q4half).
const (
	maxBWQ8 = 4
	maxBWQ4 = 5
	// maxSplitQ4: the q4 kernels over both nibbles of a pass' bytes take
	// two int sums a token.
	maxSplitQ4 = 6
	// maxSplitQ6: the same for q6.
	maxSplitQ6 = 6
	// maxAVX2Q8: the q8 half-tile kernels keep their float sums in dst.
	maxAVX2Q8 = 5
	maxHalf   = 12
	// maxQ6: two int and two float sums a token from Z10.
	maxQ6 = 5
)

// prefetchDist is how far ahead (bytes) the AVX2 and AVX-VNNI one-token
// kernels of q8 and q4 prefetch their weights: decode streams them once
// from memory (q6's prefetch whole blocks: q6avx2Tile). The AVX-512 ones
// prefetch nothing: the hardware prefetcher follows a tile's sequential
// stream, and on a Zen 4 EPYC the one-token
// q8 and q4 products of 2 threads ran 10-18% faster without their
// prefetches in interleaved runs, while the AVX2 kernels measured the
// same either way (within the +-8% of runs of identical code). Intel
// hosts were not measured.
const prefetchDist = 4096

func main() {
	emit.Generate("qmatmul", func() {
		constants()
		quantizeAVX512()
		quantizeAVX2()
		q8zmm(1, true)
		for m := 1; m <= maxBWQ8; m++ {
			q8zmm(m, false)
		}
		q4zmm(1, true)
		for m := 1; m <= maxBWQ4; m++ {
			q4zmm(m, false)
		}
		for m := 2; m <= maxHalf; m++ {
			q8half(m)
			q4half(m)
		}
		for m := 2; m <= maxAVX2Q8; m++ {
			q8avx2Half(m, false)
			q8avx2Half(m, true)
		}
		for m := 1; m <= maxSplitQ4; m++ {
			q4avx2Split(m, false)
			q4avx2Split(m, true)
		}
		for _, vnni := range []bool{false, true} {
			q8avx2Tile(vnni)
			q4avx2Tile(vnni)
		}
		q6zmm(1, true)
		for m := 1; m <= maxQ6; m++ {
			q6zmm(m, false)
		}
		for m := 2; m <= maxHalf; m++ {
			q6half(m)
		}
		for _, vnni := range []bool{false, true} {
			q6avx2Tile(vnni)
		}
		for m := 1; m <= maxSplitQ6; m++ {
			q6avx2Split(m, false)
			q6avx2Split(m, true)
		}
	})
}

func constants() {
	comment("Constants: broadcast sources and the AVX2 pack order.")
	emit.Data("qabs", 0x7fffffff)
	emit.Data("q127", 0x42fe0000)              // 127.0
	emit.Data("qmin", 0x0d800000)              // 2^-100: smaller blocks quantize to zero
	emit.Data("qnib", 0x0f0f0f0f)              // low nibble of every byte
	emit.Data("qsign", 0x80808080)             // offset of the q8 values
	emit.Data("qones", 0x00010001)             // int16 ones, for VPMADDWD
	emit.Data("qhigh", 0x30303030)             // bits 4 and 5 of every byte: a q6 value's high bits
	emit.Data("qperm", 0, 4, 1, 5, 2, 6, 3, 7) // VPACKSS* lane order back to memory order
	// Whole-register copies, for memory operands where registers run out.
	emit.Data("qsign8", 0x80808080, 0x80808080, 0x80808080, 0x80808080, 0x80808080, 0x80808080, 0x80808080, 0x80808080)
	emit.Data("qnib8", 0x0f0f0f0f, 0x0f0f0f0f, 0x0f0f0f0f, 0x0f0f0f0f, 0x0f0f0f0f, 0x0f0f0f0f, 0x0f0f0f0f, 0x0f0f0f0f)
	emit.Data("qhigh8", 0x30303030, 0x30303030, 0x30303030, 0x30303030, 0x30303030, 0x30303030, 0x30303030, 0x30303030)
	emit.Data("qones8", 0x00010001, 0x00010001, 0x00010001, 0x00010001, 0x00010001, 0x00010001, 0x00010001, 0x00010001)
	emit.End()
}

// vpdpbusd emits AVX-VNNI's VPDPBUSD acc, u, s on Y registers (acc +=
// the int32 sums of 4 products of u's unsigned bytes with s's signed
// ones) in its VEX encoding, as bytes: the Go assembler knows only the
// EVEX form, which needs AVX-512 VL, and CPUs with AVX-VNNI but no
// AVX-512 (Alder Lake onwards) fault on it.
func vpdpbusd(acc, u, s string) {
	var a, b, c int
	for _, r := range []struct {
		name string
		n    *int
	}{{acc, &a}, {u, &b}, {s, &c}} {
		if _, err := fmt.Sscanf(r.name, "Y%d", r.n); err != nil || *r.n < 0 || *r.n > 15 {
			panic("vpdpbusd: not a Y register: " + r.name)
		}
	}
	// VEX.256.66.0F38.W0 50 /r: C4, then R X B (inverted) and map 0F38,
	// then W, vvvv (inverted), L=1, pp=66; ModRM reg = acc, r/m = s.
	b1 := (^a>>3&1)<<7 | 1<<6 | (^c>>3&1)<<5 | 0x02
	b2 := (^b&15)<<3 | 1<<2 | 0x01
	modrm := 0xc0 | (a&7)<<3 | c&7
	p("BYTE $0xc4; BYTE $0x%02x; BYTE $0x%02x; BYTE $0x50; BYTE $0x%02x // VPDPBUSD %s, %s, %s", b1, b2, modrm, s, u, acc)
}

// header emits the TEXT line and loads the row pointers: row i at
// x + i*ldx in rowRegs[i]; SI = w, AX = 0, CX = nb*48 (the end of AX).
func header(name string, m int, doc ...string) {
	comment("func %s(dst *float32, ldy int, w *byte, x *byte, ldx, nb, pass int)", name)
	for _, d := range doc {
		comment("%s", d)
	}
	emit.Text(name, 56)
	p("MOVQ w+16(FP), SI")
	p("MOVQ x+24(FP), %s", rowRegs[0])
	p("MOVQ ldx+32(FP), R8")
	for i := 1; i < m; i++ {
		p("LEAQ (%s)(R8*1), %s", rowRegs[i-1], rowRegs[i])
	}
	p("MOVQ nb+40(FP), CX")
	p("IMULQ $%d, CX", actBlock)
	p("XORQ AX, AX")
}

// x returns the memory operand of byte off of the current activation
// block of token row i.
func x(i, off int) string { return fmt.Sprintf("%d(%s)(AX*1)", off, rowRegs[i]) }

// store writes the float accumulators (per token, regs of width bytes each)
// to dst rows i*ldy.
func store(m int, facc func(i, j int) string, per, width int) {
	p("MOVQ dst+0(FP), DX")
	p("MOVQ ldy+8(FP), R11")
	p("SHLQ $2, R11")
	for i := 0; i < m; i++ {
		for j := 0; j < per; j++ {
			p("VMOVUPS %s, %d(DX)", facc(i, j), width*j)
		}
		if i < m-1 {
			p("ADDQ R11, DX")
		}
	}
	p("VZEROUPPER")
	p("RET")
	emit.End()
}

// nextBlock moves to the next block of the weights (blockBytes) and of
// every activation row, and loops while blocks are left.
func nextBlock(blockBytes int, loop string) {
	p("ADDQ $%d, SI", blockBytes)
	p("ADDQ $%d, AX", actBlock)
	p("CMPQ AX, CX")
	p("JNE %s", loop)
}

// quantizeAVX512 emits quantizeActsAVX512(dst *byte, x *float32, blocks int):
// the activation blocks of kernels/qmatmul.go, exactly as the Go code
// computes them (the same divisions, VCVTPS2DQ rounding to nearest even).
func quantizeAVX512() {
	comment("func quantizeActsAVX512(dst *byte, x *float32, blocks int)")
	comment("Requires blocks >= 1.")
	emit.Text("quantizeActsAVX512", 24)
	p("MOVQ dst+0(FP), DI")
	p("MOVQ x+8(FP), SI")
	p("MOVQ blocks+16(FP), CX")
	p("VBROADCASTSS qabs<>(SB), Z31")
	p("VMOVSS q127<>(SB), X29")
	p("VMOVSS qmin<>(SB), X28")
	label("qa512loop")
	p("VMOVUPS (SI), Z0")
	p("VMOVUPS 64(SI), Z1")
	p("VANDPS Z31, Z0, Z2")
	p("VANDPS Z31, Z1, Z3")
	p("VMAXPS Z3, Z2, Z2")
	p("VEXTRACTF32X8 $1, Z2, Y3")
	p("VMAXPS Y3, Y2, Y2")
	p("VEXTRACTF128 $1, Y2, X3")
	p("VMAXPS X3, X2, X2")
	p("VPERMILPS $0x4e, X2, X3")
	p("VMAXPS X3, X2, X2")
	p("VPERMILPS $0xb1, X2, X3")
	p("VMAXPS X3, X2, X2")
	p("VUCOMISS X28, X2")
	p("JCS qa512zero")
	p("VDIVSS X2, X29, X4") // 127 / amax
	p("VDIVSS X29, X2, X5") // amax / 127
	p("VBROADCASTSS X4, Z4")
	p("VMULPS Z4, Z0, Z0")
	p("VMULPS Z4, Z1, Z1")
	p("VCVTPS2DQ Z0, Z0")
	p("VCVTPS2DQ Z1, Z1")
	p("VPMOVDB Z0, 16(DI)")
	p("VPMOVDB Z1, 32(DI)")
	p("VPADDD Z1, Z0, Z0")
	p("VEXTRACTI32X8 $1, Z0, Y1")
	p("VPADDD Y1, Y0, Y0")
	sumTail("qa512")
	p("ADDQ $128, SI")
	p("ADDQ $%d, DI", actBlock)
	p("DECQ CX")
	p("JNZ qa512loop")
	p("VZEROUPPER")
	p("RET")
	zeroBlock("qa512", 128)
	emit.End()
}

// sumTail reduces the int32 sums in Y0 to one, then writes the block's
// header from d in X5: d, d*sum, -128*sum, sum.
func sumTail(pfx string) {
	p("VEXTRACTI128 $1, Y0, X1")
	p("VPADDD X1, X0, X0")
	p("VPSHUFD $0x4e, X0, X1")
	p("VPADDD X1, X0, X0")
	p("VPSHUFD $0xb1, X0, X1")
	p("VPADDD X1, X0, X0")
	p("VMOVD X0, R8")
	p("VCVTSI2SSL R8, X6, X6")
	p("VMULSS X6, X5, X6")
	p("VMOVSS X5, (DI)")
	p("VMOVSS X6, 4(DI)")
	p("MOVL R8, 12(DI)")
	p("IMULL $-128, R8")
	p("MOVL R8, 8(DI)")
}

// zeroBlock emits the path of a block whose maximum is under 2^-100: all
// 48 bytes zero.
func zeroBlock(pfx string, step int) {
	label(pfx + "zero")
	p("VPXOR X0, X0, X0")
	p("VMOVDQU X0, (DI)")
	p("VMOVDQU X0, 16(DI)")
	p("VMOVDQU X0, 32(DI)")
	p("ADDQ $%d, SI", step)
	p("ADDQ $%d, DI", actBlock)
	p("DECQ CX")
	p("JNZ %sloop", pfx)
	p("VZEROUPPER")
	p("RET")
}

// quantizeAVX2 emits quantizeActsAVX2(dst *byte, x *float32, blocks int).
func quantizeAVX2() {
	comment("func quantizeActsAVX2(dst *byte, x *float32, blocks int)")
	comment("Requires blocks >= 1.")
	emit.Text("quantizeActsAVX2", 24)
	p("MOVQ dst+0(FP), DI")
	p("MOVQ x+8(FP), SI")
	p("MOVQ blocks+16(FP), CX")
	p("VBROADCASTSS qabs<>(SB), Y15")
	p("VMOVSS q127<>(SB), X14")
	p("VMOVSS qmin<>(SB), X13")
	p("VMOVDQU qperm<>(SB), Y12")
	label("qa2loop")
	for i := 0; i < 4; i++ {
		p("VMOVUPS %d(SI), Y%d", 32*i, i)
		p("VANDPS Y15, Y%d, Y%d", i, 4+i)
	}
	// The maximum reduces in X8, X9: Y0..Y3 hold the block.
	p("VMAXPS Y5, Y4, Y4")
	p("VMAXPS Y7, Y6, Y6")
	p("VMAXPS Y6, Y4, Y4")
	p("VEXTRACTF128 $1, Y4, X5")
	p("VMAXPS X5, X4, X8")
	p("VPERMILPS $0x4e, X8, X9")
	p("VMAXPS X9, X8, X8")
	p("VPERMILPS $0xb1, X8, X9")
	p("VMAXPS X9, X8, X8")
	p("VUCOMISS X13, X8")
	p("JCS qa2zero")
	p("VDIVSS X8, X14, X4")
	p("VDIVSS X14, X8, X5")
	p("VBROADCASTSS X4, Y4")
	for i := 0; i < 4; i++ {
		p("VMULPS Y4, Y%d, Y%d", i, i)
		p("VCVTPS2DQ Y%d, Y%d", i, i)
	}
	// Pack to bytes (saturation never applies: |q| <= 127), then put the
	// dwords back in memory order.
	p("VPACKSSDW Y1, Y0, Y6")
	p("VPACKSSDW Y3, Y2, Y7")
	p("VPACKSSWB Y7, Y6, Y6")
	p("VPERMD Y6, Y12, Y6")
	p("VMOVDQU Y6, 16(DI)")
	p("VPADDD Y1, Y0, Y0")
	p("VPADDD Y3, Y2, Y2")
	p("VPADDD Y2, Y0, Y0")
	sumTail("qa2")
	p("ADDQ $128, SI")
	p("ADDQ $%d, DI", actBlock)
	p("DECQ CX")
	p("JNZ qa2loop")
	p("VZEROUPPER")
	p("RET")
	zeroBlock("qa2", 128)
	emit.End()
}

// q8zmm emits gemmQ8VNNIM<m> (vnni) or gemmQ8BWM<m>: one q8 tile (32
// rows: two Z registers of 16) x m tokens.
//
// VNNI: VPDPBUSD multiplies the stored unsigned bytes q+128 with the
// signed activations; the block's int32 sums start at -128*sum(x), which
// removes the offset. BW: VPMADDUBSW would saturate on q+128, so the
// values are made signed (XOR 0x80) and the sign of each activation is
// moved onto them (VPBLENDMB of q and -q under the activation's sign
// mask), so |x| times that is at most 2*127*127 per pair.
func q8zmm(m int, vnni bool) {
	name := fmt.Sprintf("gemmQ8BWM%d", m)
	if vnni {
		name = fmt.Sprintf("gemmQ8VNNIM%d", m)
	}
	header(name, m, "One q8 tile (32 rows) x m token rows over nb blocks; pass is unused.")
	// Registers: VNNI: Z0, Z1 weights, Z2, Z3 scales, Z4, Z5 temps, int
	// sums Z6.., float sums Z18..; with one token the odd groups sum into
	// Z8, Z9 so four dependency chains run. BW: Z0, Z1 signed weights,
	// Z2, Z3 negated, Z4 x, Z5 |x|, Z6 signed, Z7 products, Z8 int16 ones,
	// Z9 zero, Z10 0x80, Z11, Z12 scales, Z13, Z14 temps, int Z15.., float
	// Z23...
	iacc := func(i, j int) string { return fmt.Sprintf("Z%d", 6+2*i+j) }
	facc := func(i, j int) string { return fmt.Sprintf("Z%d", 18+2*i+j) }
	sc0, sc1, t0, t1 := "Z2", "Z3", "Z4", "Z5"
	if !vnni {
		iacc = func(i, j int) string { return fmt.Sprintf("Z%d", 15+2*i+j) }
		facc = func(i, j int) string { return fmt.Sprintf("Z%d", 23+2*i+j) }
		sc0, sc1, t0, t1 = "Z11", "Z12", "Z13", "Z14"
		p("VPBROADCASTD qones<>(SB), Z8")
		p("VPXORD Z9, Z9, Z9")
		p("VPBROADCASTD qsign<>(SB), Z10")
	}
	split := vnni && m == 1
	for i := 0; i < m; i++ {
		for j := 0; j < 2; j++ {
			p("VPXORD %s, %s, %s", facc(i, j), facc(i, j), facc(i, j))
		}
	}
	loop := name + "loop"
	label(loop)
	for i := 0; i < m; i++ {
		if vnni {
			p("VPBROADCASTD %s, %s", x(i, 8), iacc(i, 0))
			p("VMOVDQA32 %s, %s", iacc(i, 0), iacc(i, 1))
		} else {
			p("VPXORD %s, %s, %s", iacc(i, 0), iacc(i, 0), iacc(i, 0))
			p("VPXORD %s, %s, %s", iacc(i, 1), iacc(i, 1), iacc(i, 1))
		}
	}
	if split {
		p("VPXORD Z8, Z8, Z8")
		p("VPXORD Z9, Z9, Z9")
	}
	for g := 0; g < 8; g++ {
		off := 64 + 128*g
		p("VMOVDQU32 %d(SI), Z0", off)
		p("VMOVDQU32 %d(SI), Z1", off+64)
		if !vnni {
			p("VPXORD Z10, Z0, Z0")
			p("VPXORD Z10, Z1, Z1")
			p("VPSUBB Z0, Z9, Z2")
			p("VPSUBB Z1, Z9, Z3")
		}
		for i := 0; i < m; i++ {
			if vnni {
				a0, a1 := iacc(i, 0), iacc(i, 1)
				if split && g%2 == 1 {
					a0, a1 = "Z8", "Z9"
				}
				p("VPDPBUSD.BCST %s, Z0, %s", x(i, 16+4*g), a0)
				p("VPDPBUSD.BCST %s, Z1, %s", x(i, 16+4*g), a1)
				continue
			}
			p("VPBROADCASTD %s, Z4", x(i, 16+4*g))
			p("VPMOVB2M Z4, K1")
			p("VPABSB Z4, Z5")
			for j := 0; j < 2; j++ {
				p("VPBLENDMB Z%d, Z%d, K1, Z6", 2+j, j)
				p("VPMADDUBSW Z6, Z5, Z7")
				p("VPMADDWD Z8, Z7, Z7")
				p("VPADDD Z7, %s, %s", iacc(i, j), iacc(i, j))
			}
		}
	}
	if split {
		p("VPADDD Z8, Z6, Z6")
		p("VPADDD Z9, Z7, Z7")
	}
	p("VCVTPH2PS (SI), %s", sc0)
	p("VCVTPH2PS 32(SI), %s", sc1)
	for i := 0; i < m; i++ {
		p("VMULPS.BCST %s, %s, %s", x(i, 0), sc0, t0)
		p("VMULPS.BCST %s, %s, %s", x(i, 0), sc1, t1)
		p("VCVTDQ2PS %s, %s", iacc(i, 0), iacc(i, 0))
		p("VCVTDQ2PS %s, %s", iacc(i, 1), iacc(i, 1))
		p("VFMADD231PS %s, %s, %s", t0, iacc(i, 0), facc(i, 0))
		p("VFMADD231PS %s, %s, %s", t1, iacc(i, 1), facc(i, 1))
	}
	nextBlock(q8Block, loop)
	store(m, facc, 2, 64)
}

// q4zmm emits gemmQ4VNNIM<m> or gemmQ4BWM<m>: one q4 tile x m tokens. The
// nibbles of a group unpack to the low rows (AND 0x0F) and the high rows
// (shift by 4, AND). The sums are of u*x with u in [0, 15]: VPDPBUSD
// directly, or VPMADDUBSW, whose int16 pair sums (at most 2*15*127) add up
// over a block's 8 groups without overflow before one VPMADDWD. Per block,
// d = D*sc and m = M*mn are formed per row in float; the result gains
// d*dx*sum - m*(dx*sum(x)).
func q4zmm(m int, vnni bool) {
	name := fmt.Sprintf("gemmQ4BWM%d", m)
	if vnni {
		name = fmt.Sprintf("gemmQ4VNNIM%d", m)
	}
	header(name, m, "One q4 tile (32 rows) x m token rows over nb blocks; pass is unused.")
	// Registers: Z0, Z1 values, Z2 temp, Z3 0x0F, Z4, Z5 block scales,
	// Z6, Z7 block minimums, Z8, Z9 temps (BW: Z8 int16 ones, Z9 x, Z10
	// products); sums Z10.. (BW Z11..) and float sums after them, then,
	// where four registers are left, the super-block's f16 scales and
	// minimum scales in float (hdr).
	first := 10
	if !vnni {
		first = 11
	}
	iacc := func(i, j int) string { return fmt.Sprintf("Z%d", first+2*i+j) }
	facc := func(i, j int) string { return fmt.Sprintf("Z%d", first+2*m+2*i+j) }
	// Converting the header once per super-block instead of once per
	// block takes 4 of a block's 70 vector instructions away: the
	// one-token products over weights in cache ran 11% faster, and over
	// weights streamed from memory by 2 threads 8-12% faster when the
	// memory delivered about 60 GB/s (Zen 4 EPYC, interleaved runs; the
	// same speed at 33 GB/s, where memory is the bound).
	hoist := first+4*m+4 <= 32
	hdr := func(j int) string { return fmt.Sprintf("Z%d", first+4*m+j) }
	t0, t1 := "Z8", "Z9"
	if !vnni {
		t0, t1 = "Z9", "Z10"
		p("VPBROADCASTD qones<>(SB), Z8")
	}
	p("VPBROADCASTD qnib<>(SB), Z3")
	p("MOVQ $1, DX") // blocks left in this super-block, after the first
	for i := 0; i < m; i++ {
		for j := 0; j < 2; j++ {
			p("VPXORD %s, %s, %s", facc(i, j), facc(i, j), facc(i, j))
		}
	}
	loop := name + "loop"
	label(loop)
	p("DECQ DX")
	p("JNZ %snohdr", name)
	p("MOVQ SI, R11") // the super-block header
	if hoist {
		for j := range 4 {
			p("VCVTPH2PS %d(SI), %s", 32*j, hdr(j))
		}
	}
	p("ADDQ $%d, SI", q4Header)
	p("MOVQ $%d, DX", 8)
	label(name + "nohdr")
	for i := 0; i < m; i++ {
		p("VPXORD %s, %s, %s", iacc(i, 0), iacc(i, 0), iacc(i, 0))
		p("VPXORD %s, %s, %s", iacc(i, 1), iacc(i, 1), iacc(i, 1))
	}
	for g := 0; g < 8; g++ {
		off := 64 + 64*g
		p("VMOVDQU32 %d(SI), Z2", off)
		p("VPANDD Z3, Z2, Z0")
		p("VPSRLW $4, Z2, Z2")
		p("VPANDD Z3, Z2, Z1")
		for i := 0; i < m; i++ {
			if vnni {
				p("VPDPBUSD.BCST %s, Z0, %s", x(i, 16+4*g), iacc(i, 0))
				p("VPDPBUSD.BCST %s, Z1, %s", x(i, 16+4*g), iacc(i, 1))
				continue
			}
			p("VPBROADCASTD %s, Z9", x(i, 16+4*g))
			for j := 0; j < 2; j++ {
				p("VPMADDUBSW Z9, Z%d, Z10", j)
				p("VPADDW Z10, %s, %s", iacc(i, j), iacc(i, j))
			}
		}
	}
	// d and m of this block, per row.
	for j, reg := range []string{"Z4", "Z5", "Z6", "Z7"} {
		src, off := 16*(j%2), 32*(j%2)
		if j >= 2 {
			src, off = 32+16*(j%2), 64+32*(j%2)
		}
		p("VPMOVZXBD %d(SI), %s", src, reg)
		p("VCVTDQ2PS %s, %s", reg, reg)
		if hoist {
			p("VMULPS %s, %s, %s", hdr(j), reg, reg)
			continue
		}
		p("VCVTPH2PS %d(R11), Z2", off)
		p("VMULPS Z2, %s, %s", reg, reg)
	}
	for i := 0; i < m; i++ {
		for j := 0; j < 2; j++ {
			a, f := iacc(i, j), facc(i, j)
			if !vnni {
				p("VPMADDWD Z8, %s, %s", a, a)
			}
			tt := []string{t0, t1}[j]
			p("VMULPS.BCST %s, Z%d, %s", x(i, 0), 4+j, tt)
			p("VCVTDQ2PS %s, %s", a, a)
			p("VFMADD231PS %s, %s, %s", tt, a, f)
			p("VFNMADD231PS.BCST %s, Z%d, %s", x(i, 4), 6+j, f)
		}
	}
	nextBlock(q4Block, loop)
	store(m, facc, 2, 64)
}

// q6HighShift emits the move of the high bits of a q6 value, in the byte
// of src at shift 2*(2*(g%2) + half) (half 1: rows 16..31), to bits 4 and
// 5 of tmp, and returns the register that holds them there (src itself
// when they are there already). The word shifts carry bits across bytes
// only into bits the caller's mask (0x30 in every byte) drops.
func q6HighShift(g, half int, src, tmp string) string {
	switch s := 2 * (2*(g%2) + half); {
	case s < 4:
		p("VPSLLW $%d, %s, %s", 4-s, src, tmp)
	case s == 4:
		return src
	default:
		p("VPSRLW $%d, %s, %s", s-4, src, tmp)
	}
	return tmp
}

// q6HighBits masks the high bits q6HighShift moves into dst (AVX2).
func q6HighBits(g, half int, src, mask, dst string) {
	p("VPAND %s, %s, %s", mask, q6HighShift(g, half, src, dst), dst)
}

// q6HighTernlog ORs the high bits into the nibbles in dst (AVX-512): the
// shifted bits masked and merged in one VPTERNLOGD (dst | (tmp & mask):
// truth table 0xF8).
func q6HighTernlog(g, half int, src, mask, tmp, dst string) {
	p("VPTERNLOGD $0xf8, %s, %s, %s", mask, q6HighShift(g, half, src, tmp), dst)
}

// q6zmm emits gemmQ6VNNIM<m> or gemmQ6BWM<m>: one q6 tile x m tokens. A
// group's nibbles unpack as q4's do, and the line of high bits that two
// groups share supplies bits 4 and 5 (q6HighTernlog), so the values are
// u = q + 32 in [0, 63]; the block's int32 sums start at -32*sum(x) (the
// activation header's -128*sum(x), shifted), which removes the offset.
// VNNI multiplies u and x directly; BW takes VPMADDUBSW (pairs at most
// 2*63*128, no saturation) widened by VPMADDWD per group. With one token
// the odd groups sum into a second pair of registers, so four dependency
// chains run. With VNNI only the one token's is used (q6half takes 2 to
// 12); without, up to maxQ6 tokens a pass (more take several). Unlike
// q8's and q4's, the q6 kernels issue no
// software prefetch: streaming a 151,936-row head on one thread (AMD
// EPYC, AVX-512 VNNI) they read 21-23 GB/s without it and 14-16 with it,
// the hardware prefetcher following a block's two streams better alone.
func q6zmm(m int, vnni bool) {
	name := fmt.Sprintf("gemmQ6BWM%d", m)
	if vnni {
		name = fmt.Sprintf("gemmQ6VNNIM%d", m)
	}
	header(name, m, "One q6 tile (32 rows) x m token rows over nb blocks; pass is unused.")
	// Z0, Z1 values (rows 0-15, 16-31), Z2 nibble bytes, then scales, Z3
	// 0x0F, Z4 high-bit temp, then scales, Z5 0x30, Z6 x (BW), then d*dx,
	// Z7 products (BW), then d*dx, Z8 int16 ones (BW), Z9 high bits; int
	// sums from Z10 (with one token Z10, Z11 the even groups', Z12, Z13
	// the odd ones'), float sums after them.
	iacc := func(i, j int) string { return fmt.Sprintf("Z%d", 10+2*i+j) }
	facc := func(i, j int) string { return fmt.Sprintf("Z%d", 10+2*m+2*i+j) }
	if m == 1 {
		facc = func(_, j int) string { return fmt.Sprintf("Z%d", 14+j) }
	}
	// Where the sums leave registers for them (one or two tokens), a
	// block's 13 lines are loaded first, in the order of their addresses
	// (full: its scales, 8 nibble lines and 4 high-bit lines), instead of
	// each where it is used, which jumped between the nibble lines and
	// the high-bit lines after them; for 3 and 4 tokens, the scales and
	// the high-bit lines first (part), then the nibble lines in order.
	// The sums are bit for bit the same. Streaming q6 weights from memory
	// on 2 threads (Zen 4 EPYC, interleaved runs), one token went from
	// 45.8 to 58.7 GB/s when the memory delivered about 60, and from
	// 31-33 to 33-35 where it delivered 35; two tokens x1.12-1.14 there,
	// three and four x1.02-1.04. Over weights in cache, the same speed.
	fr := 10 + 4*m // the first register the sums leave free
	if m == 1 {
		fr = 16
	}
	full := fr+14 <= 32
	part := !full && fr+6 <= 32
	sc := func(j int) string { return fmt.Sprintf("Z%d", fr+j) }
	lo := func(g int) string { return fmt.Sprintf("Z%d", fr+2+g) }
	hi := func(g int) string {
		if part {
			return fmt.Sprintf("Z%d", fr+2+g/2)
		}
		return fmt.Sprintf("Z%d", fr+10+g/2)
	}

	p("VPBROADCASTD qnib<>(SB), Z3")
	p("VPBROADCASTD qhigh<>(SB), Z5")
	if !vnni {
		p("VPBROADCASTD qones<>(SB), Z8")
	}
	for i := 0; i < m; i++ {
		for j := 0; j < 2; j++ {
			p("VPXORD %s, %s, %s", facc(i, j), facc(i, j), facc(i, j))
		}
	}
	loop := name + "loop"
	label(loop)
	if full || part {
		p("VCVTPH2PS (SI), %s", sc(0))
		p("VCVTPH2PS 32(SI), %s", sc(1))
		for g := 0; g < 8 && full; g++ {
			p("VMOVDQU32 %d(SI), %s", 64+64*g, lo(g))
		}
		for g := 0; g < 8; g += 2 {
			p("VMOVDQU32 %d(SI), %s", q6High+32*g, hi(g))
		}
	}
	for i := 0; i < m; i++ {
		p("VPBROADCASTD %s, %s", x(i, 8), iacc(i, 0))
		p("VPSRAD $2, %s, %s", iacc(i, 0), iacc(i, 0))
		p("VMOVDQA32 %s, %s", iacc(i, 0), iacc(i, 1))
	}
	if m == 1 {
		p("VPXORD Z12, Z12, Z12")
		p("VPXORD Z13, Z13, Z13")
	}
	for g := 0; g < 8; g++ {
		src, high := "Z2", "Z9"
		switch {
		case full:
			src, high = lo(g), hi(g)
		case part:
			high = hi(g)
			p("VMOVDQU32 %d(SI), Z2", 64+64*g)
		default:
			if g%2 == 0 {
				p("VMOVDQU32 %d(SI), Z9", q6High+32*g)
			}
			p("VMOVDQU32 %d(SI), Z2", 64+64*g)
		}
		p("VPANDD Z3, %s, Z0", src)
		p("VPSRLW $4, %s, Z2", src)
		p("VPANDD Z3, Z2, Z1")
		for h := 0; h < 2; h++ {
			q6HighTernlog(g, h, high, "Z5", "Z4", fmt.Sprintf("Z%d", h))
		}
		for i := 0; i < m; i++ {
			a0, a1 := iacc(i, 0), iacc(i, 1)
			if m == 1 && g%2 == 1 {
				a0, a1 = "Z12", "Z13"
			}
			if vnni {
				p("VPDPBUSD.BCST %s, Z0, %s", x(i, 16+4*g), a0)
				p("VPDPBUSD.BCST %s, Z1, %s", x(i, 16+4*g), a1)
				continue
			}
			p("VPBROADCASTD %s, Z6", x(i, 16+4*g))
			for h, a := range []string{a0, a1} {
				p("VPMADDUBSW Z6, Z%d, Z7", h)
				p("VPMADDWD Z8, Z7, Z7")
				p("VPADDD Z7, %s, %s", a, a)
			}
		}
	}
	if m == 1 {
		p("VPADDD Z12, Z10, Z10")
		p("VPADDD Z13, Z11, Z11")
	}
	sc0, sc1 := "Z2", "Z4"
	if full || part {
		sc0, sc1 = sc(0), sc(1)
	} else {
		p("VCVTPH2PS (SI), Z2")
		p("VCVTPH2PS 32(SI), Z4")
	}
	for i := 0; i < m; i++ {
		p("VMULPS.BCST %s, %s, Z6", x(i, 0), sc0)
		p("VMULPS.BCST %s, %s, Z7", x(i, 0), sc1)
		for j := 0; j < 2; j++ {
			p("VCVTDQ2PS %s, %s", iacc(i, j), iacc(i, j))
			p("VFMADD231PS Z%d, %s, %s", 6+j, iacc(i, j), facc(i, j))
		}
	}
	nextBlock(q6Block, loop)
	store(m, facc, 2, 64)
}

// q6avx2Tile emits gemmQ6AVX2Tile or gemmQ6AVXVNNITile: one whole q6 tile
// x one token on 16 Y registers (see q6zmm and q8avx2Tile): the rows of a
// block in four quarters of 8, each quarter's values unpacked from its 32
// nibble bytes and 32 bytes of high bits.
func q6avx2Tile(vnni bool) {
	name := "gemmQ6AVX2Tile"
	if vnni {
		name = "gemmQ6AVXVNNITile"
	}
	header(name, 1, "One q6 tile (32 rows) x 1 token row over nb blocks; pass is unused.")
	// Y3 0x0F, Y5 0x30; int sums Y8..Y11, float sums Y12..Y15 (rows 0-7,
	// 8-15, 16-23, 24-31); the others as q6avx2Pairs and q6vnniGroups say.
	p("VPBROADCASTD qnib<>(SB), Y3")
	p("VPBROADCASTD qhigh<>(SB), Y5")
	for q := 0; q < 4; q++ {
		p("VXORPS Y%d, Y%d, Y%d", 12+q, 12+q, 12+q)
	}
	loop := name + "loop"
	label(loop)
	// The block's lines are read where they are used, jumping between its
	// nibble lines and the high-bit lines after them, and 16 registers
	// cannot hold a block to load it in order as the AVX-512 kernels do;
	// so the lines of a block ahead are prefetched, in address order.
	// Streaming q6 weights on 2 threads (Zen 4 EPYC with AVX-512 off,
	// interleaved runs, 16384 x 2048), the 13 prefetches of the block two
	// ahead together at the top of the loop: 31.6-32.2 -> 35.0-35.9 GB/s
	// where the memory delivered about 35, 36.3 -> 45.7 at about 60. On a
	// first-generation Zen (AVX2 only) that bunch left the kernel at 0.65
	// of one thread's bandwidth (its misses queued behind each other while
	// the arithmetic waited); spread one per step of the block, with
	// q6AVX2Ahead, 151,936 x 1024 streamed at 5.7-5.9 -> 8.6-9.0 GB/s on
	// one thread, 10.1-10.4 -> 13.0-13.3 on two (q4's kernel: 13.6), in
	// three interleaved runs; in cache unchanged (11.6). The q4 file of
	// make bench's Qwen3-0.6B shape, whose head and use_more_bits
	// projections are q6 (44% of its bytes), decoded at 21.8-23.0 ->
	// 25.3-26.4 tok/s (qwenrun bench, four interleaved rounds). The AVX-VNNI
	// kernel prefetches the same way, not measured (no such host).
	for q := 0; q < 4; q++ {
		p("VPBROADCASTD %s, Y%d", x(0, 8), 8+q)
		p("VPSRAD $2, Y%d, Y%d", 8+q, 8+q)
	}
	if vnni {
		q6vnniGroups()
	} else {
		q6avx2Pairs()
	}
	tileScales("Y1", "Y2")
	nextBlock(q6Block, loop)
	store(1, func(_, q int) string { return fmt.Sprintf("Y%d", 12+q) }, 4, 32)
}

// q6AVX2Ahead is how far ahead (bytes, four blocks) the one-token q6
// AVX2 kernels prefetch: 2, 3, 4 and 5 blocks measured the same within
// the noise on a first-generation Zen.
const q6AVX2Ahead = 4 * q6Block

// q6Prefetch emits the prefetch of line step of the block q6AVX2Ahead
// ahead, for steps 0..15 of a block's 16 (a block has 13 lines).
func q6Prefetch(step int) {
	if step < q6Block/64 {
		p("PREFETCHT0 %d(SI)", q6AVX2Ahead+64*step)
	}
}

// q6Values emits the values u = q + 32 of quarter (half, lane) of group g
// into dst: the nibbles from the line at SI (Y0 their temp), ORed with
// the group's bits of the high-bit line in hi (masked by Y5, through Y0).
func q6Values(g, half, lane int, hi, dst string) {
	p("VMOVDQU %d(SI), Y0", 64+64*g+32*lane)
	if half == 0 {
		p("VPAND Y3, Y0, %s", dst)
	} else {
		p("VPSRLW $4, Y0, %s", dst)
		p("VPAND Y3, %s, %s", dst, dst)
	}
	q6HighBits(g, half, hi, "Y5", "Y0")
	p("VPOR Y0, %s, %s", dst, dst)
}

// q6vnniGroups emits the int sums of a q6 block in gemmQ6AVXVNNITile,
// group by group: Y1 the group's x, Y2 the values, Y6 the high bits.
func q6vnniGroups() {
	for g := 0; g < 8; g++ {
		p("VPBROADCASTD %s, Y1", x(0, 16+4*g))
		for q := 0; q < 4; q++ {
			half, lane := q/2, q%2
			if q%2 == 0 {
				q6Prefetch(g*2 + q/2)
			}
			p("VMOVDQU %d(SI), Y6", q6High+32*(g/2*2)+32*lane)
			q6Values(g, half, lane, "Y6", "Y2")
			vpdpbusd(fmt.Sprintf("Y%d", 8+q), "Y2", "Y1")
		}
	}
}

// q6avx2Pairs emits the int sums of a q6 block in gemmQ6AVX2Tile: the
// groups two at a time, quarter by quarter. Two groups' VPMADDUBSW pair
// sums (at most 2*63*127 each) add in int16 without overflow, so one
// VPMADDWD widens both, and the high-bit line the two groups share is
// loaded once. In cache (one thread, 1024 x 1024) 101 -> 106.5 GOP/s;
// streamed from memory, where decode runs, the same within the host's
// noise. Registers: Y1 and Y4 the two groups' x, Y2 and Y7 their values,
// then products, Y6 the high bits.
func q6avx2Pairs() {
	for g := 0; g < 8; g += 2 {
		p("VPBROADCASTD %s, Y1", x(0, 16+4*g))
		p("VPBROADCASTD %s, Y4", x(0, 16+4*(g+1)))
		for q := 0; q < 4; q++ {
			half, lane := q/2, q%2
			q6Prefetch(g*2 + q)
			p("VMOVDQU %d(SI), Y6", q6High+32*g+32*lane)
			q6Values(g, half, lane, "Y6", "Y2")
			p("VPMADDUBSW Y1, Y2, Y2")
			q6Values(g+1, half, lane, "Y6", "Y7")
			p("VPMADDUBSW Y4, Y7, Y7")
			p("VPADDW Y7, Y2, Y2")
			p("VPMADDWD qones8<>(SB), Y2, Y2")
			p("VPADDD Y2, Y%d, Y%d", 8+q, 8+q)
		}
	}
}

// The half-tile VNNI kernels, for 2 to 12 tokens. A full-tile kernel
// keeps two int and two float sums per token, so it takes at most 6
// tokens, and a decode step checking 8 drafts (or a server's step of 8
// conversations) needed two passes over each group of tiles: the first
// bound by memory, the second by arithmetic, one after the other. A
// half-tile kernel computes 16 rows of the tile at a time, one int and one
// float sum per token, so 12 tokens fit in one pass; the tile (in L1 or L2
// after its first half) is read twice from cache but once from memory, and
// the next tiles are prefetched into L2 at the rate the pass consumes
// them, so reading the weights overlaps the arithmetic. Against the
// full-tile kernels, the products of 2 to 24 tokens over weights streamed
// from memory took 0.6-0.8 of the time (2 threads, Xeon with VNNI), and
// prefill's 512 0.95 (q8) and 0.78 (q4).
//
// Activation rows: row i at x + i*ldx is addressed from one of four bases
// 3*ldx apart (BX, R9, R10, R12) with the index R8 = ldx scaled by 0, 1 or
// 2; the bases advance by a block each block.
var halfBases = [4]string{"BX", "R9", "R10", "R12"}

func xh(i, off int) string {
	b := halfBases[i/3]
	switch i % 3 {
	case 1:
		return fmt.Sprintf("%d(%s)(R8*1)", off, b)
	case 2:
		return fmt.Sprintf("%d(%s)(R8*2)", off, b)
	}
	return fmt.Sprintf("%d(%s)", off, b)
}

// halfPrefetchLead is how far (bytes) the L2 prefetch runs ahead of the
// first half's reading of the weights.
const halfPrefetchLead = 8192

// halfHeader emits the TEXT line of a half-tile kernel of type typ whose
// tiles take perBlock bytes per block, and sets R13, the prefetch
// address: the lead ahead of half the tile, from where the prefetch
// advances half a block per block and half, so that it covers the next
// tile by the end of the call.
func halfHeader(name, typ string, perBlock int) {
	comment("func %s(dst *float32, ldy int, w *byte, x *byte, ldx, nb, pass int)", name)
	comment("One %s tile (32 rows, 16 at a time) x m token rows over nb blocks; pass is unused.", typ)
	emit.Text(name, 56)
	p("MOVQ nb+40(FP), R13")
	p("IMULQ $%d, R13", perBlock/2)
	p("ADDQ w+16(FP), R13")
	p("ADDQ $%d, R13", halfPrefetchLead)
}

// halfStart loads the weights' address into SI, the activation bases
// (xh) of m tokens, and the block count into CX.
func halfStart(m int) {
	p("MOVQ w+16(FP), SI")
	p("MOVQ x+24(FP), BX")
	p("MOVQ ldx+32(FP), R8")
	for b := 1; b < (m+2)/3; b++ {
		p("LEAQ (%s)(R8*2), %s", halfBases[b-1], halfBases[b])
		p("ADDQ R8, %s", halfBases[b])
	}
	p("MOVQ nb+40(FP), CX")
}

// halfPrefetch prefetches bytes of weights into L2 at R13 and advances it.
func halfPrefetch(bytes int) {
	for off := 0; off < bytes; off += 64 {
		p("PREFETCHT1 %d(R13)", off)
	}
	p("ADDQ $%d, R13", bytes)
}

// halfNext advances the activation bases by a block and loops.
func halfNext(m, blockBytes int, loop string) {
	p("ADDQ $%d, SI", blockBytes)
	for b := 0; b < (m+2)/3; b++ {
		p("ADDQ $%d, %s", actBlock, halfBases[b])
	}
	p("DECQ CX")
	p("JNZ %s", loop)
}

// halfEnd ends a block of half h: the prefetch of its share of the
// weights, the next block, and after the last the half's stores.
func halfEnd(m, h, prefetch, blockBytes int, loop string, facc func(i int) string) {
	halfPrefetch(prefetch)
	halfNext(m, blockBytes, loop)
	halfStore(m, h, facc)
}

// ret ends a kernel.
func ret() {
	p("VZEROUPPER")
	p("RET")
	emit.End()
}

// halfStore writes the float sums of half h to dst rows i*ldy, columns
// 16h..16h+15.
func halfStore(m, h int, facc func(i int) string) {
	p("MOVQ dst+0(FP), DX")
	p("MOVQ ldy+8(FP), R11")
	p("SHLQ $2, R11")
	for i := 0; i < m; i++ {
		p("VMOVUPS %s, %d(DX)", facc(i), 64*h)
		if i < m-1 {
			p("ADDQ R11, DX")
		}
	}
}

// halfBegin starts half h of a half-tile kernel without super-blocks
// (q8, q6): the activation bases, the float sums zeroed, and the label of
// the loop over the blocks, which it returns.
func halfBegin(name string, m, h int, facc func(i int) string) string {
	halfStart(m)
	for i := 0; i < m; i++ {
		p("VPXORD %s, %s, %s", facc(i), facc(i), facc(i))
	}
	loop := fmt.Sprintf("%sh%d", name, h)
	label(loop)
	return loop
}

// halfNibbles unpacks into Z0 the nibbles of group g of the block at SI
// that hold the rows of half h (q4, q6: the low nibbles rows 0-15, the
// high ones 16-31), with 0x0F in Z2.
func halfNibbles(g, h int) {
	if h == 0 {
		p("VPANDD %d(SI), Z2, Z0", 64+64*g)
		return
	}
	p("VMOVDQU32 %d(SI), Z0", 64+64*g)
	p("VPSRLW $4, Z0, Z0")
	p("VPANDD Z2, Z0, Z0")
}

// halfScales ends a block of half h of a type with f16 row scales at the
// block's start (q8, q6): the float sums gain each token's int sums times
// the rows' scales times the token's dx (sc, tmp: registers for them).
func halfScales(m, h int, sc, tmp string, iacc, facc func(i int) string) {
	p("VCVTPH2PS %d(SI), %s", 32*h, sc)
	for i := 0; i < m; i++ {
		p("VMULPS.BCST %s, %s, %s", xh(i, 0), sc, tmp)
		p("VCVTDQ2PS %s, %s", iacc(i), iacc(i))
		p("VFMADD231PS %s, %s, %s", tmp, iacc(i), facc(i))
	}
}

// q8half emits gemmQ8VNNIH<m>: one q8 tile x m tokens, rows 0-15 then
// 16-31. Registers: Z0 weights, Z1 scales, Z2 temp, int sums Z3..,
// float sums Z3+m...
func q8half(m int) {
	name := fmt.Sprintf("gemmQ8VNNIH%d", m)
	halfHeader(name, "q8", q8Block)
	iacc := func(i int) string { return fmt.Sprintf("Z%d", 3+i) }
	facc := func(i int) string { return fmt.Sprintf("Z%d", 3+m+i) }
	for h := 0; h < 2; h++ {
		loop := halfBegin(name, m, h, facc)
		for i := 0; i < m; i++ {
			p("VPBROADCASTD %s, %s", xh(i, 8), iacc(i))
		}
		for g := 0; g < 8; g++ {
			p("VMOVDQU32 %d(SI), Z0", 64+128*g+64*h)
			for i := 0; i < m; i++ {
				p("VPDPBUSD.BCST %s, Z0, %s", xh(i, 16+4*g), iacc(i))
			}
		}
		halfScales(m, h, "Z1", "Z2", iacc, facc)
		halfEnd(m, h, q8Block/2, q8Block, loop, facc)
	}
	ret()
}

// q4half emits gemmQ4VNNIH<m>: one q4 tile x m tokens, the low nibbles'
// rows 0-15, then the high nibbles' rows 16-31. Registers: Z0 values, Z1
// temp, Z2 0x0F, Z3 block scales, Z4 block minimums, Z5 temp, int sums
// Z6.., float sums Z6+m...
func q4half(m int) {
	name := fmt.Sprintf("gemmQ4VNNIH%d", m)
	// A q4 tile is nb blocks and a header per 8 blocks: nb*(576+16) bytes.
	const perBlock = q4Block + q4Header/8
	halfHeader(name, "q4", perBlock)
	iacc := func(i int) string { return fmt.Sprintf("Z%d", 6+i) }
	facc := func(i int) string { return fmt.Sprintf("Z%d", 6+m+i) }
	p("VPBROADCASTD qnib<>(SB), Z2")
	for h := 0; h < 2; h++ {
		halfStart(m)
		p("MOVQ $1, DX") // blocks left in this super-block, after the first
		for i := 0; i < m; i++ {
			p("VPXORD %s, %s, %s", facc(i), facc(i), facc(i))
		}
		loop := fmt.Sprintf("%sh%d", name, h)
		label(loop)
		p("DECQ DX")
		p("JNZ %snohdr", loop)
		p("MOVQ SI, R11") // the super-block header
		p("ADDQ $%d, SI", q4Header)
		p("MOVQ $8, DX")
		label(loop + "nohdr")
		for i := 0; i < m; i++ {
			p("VPXORD %s, %s, %s", iacc(i), iacc(i), iacc(i))
		}
		for g := 0; g < 8; g++ {
			halfNibbles(g, h)
			for i := 0; i < m; i++ {
				p("VPDPBUSD.BCST %s, Z0, %s", xh(i, 16+4*g), iacc(i))
			}
		}
		// d and m of this block for the half's 16 rows.
		for j, reg := range []string{"Z3", "Z4"} {
			p("VPMOVZXBD %d(SI), %s", 32*j+16*h, reg)
			p("VCVTDQ2PS %s, %s", reg, reg)
			p("VCVTPH2PS %d(R11), Z1", 64*j+32*h)
			p("VMULPS Z1, %s, %s", reg, reg)
		}
		for i := 0; i < m; i++ {
			p("VMULPS.BCST %s, Z3, Z5", xh(i, 0))
			p("VCVTDQ2PS %s, %s", iacc(i), iacc(i))
			p("VFMADD231PS Z5, %s, %s", iacc(i), facc(i))
			p("VFNMADD231PS.BCST %s, Z4, %s", xh(i, 4), facc(i))
		}
		halfEnd(m, h, perBlock/2, q4Block, loop, facc)
	}
	ret()
}

// q6half emits gemmQ6VNNIH<m>: one q6 tile x m tokens, the low nibbles'
// rows 0-15, then the high nibbles' rows 16-31, each completed by its
// bits of the group's high-bit line (q6HighTernlog), so the values are u
// = q + 32 and the int sums start at -32*sum(x), as in q6zmm. Registers:
// Z0 values, Z1 the high-bit line, Z2 0x0F, Z3 block scales, Z4 0x30, Z5
// temp, int sums Z6.., float sums Z6+m... Against q6zmm's kernels of up
// to 5 tokens (one thread, weights in cache): 360-367 GOP/s at 8 to 512
// tokens, where they made 305-345; over a 151,936-row head streamed from
// memory on 2 threads, 8 tokens 14.6-16.5 GB/s where two passes of 4
// made 8.8-11.0.
func q6half(m int) {
	name := fmt.Sprintf("gemmQ6VNNIH%d", m)
	halfHeader(name, "q6", q6Block)
	iacc := func(i int) string { return fmt.Sprintf("Z%d", 6+i) }
	facc := func(i int) string { return fmt.Sprintf("Z%d", 6+m+i) }
	p("VPBROADCASTD qnib<>(SB), Z2")
	p("VPBROADCASTD qhigh<>(SB), Z4")
	for h := 0; h < 2; h++ {
		loop := halfBegin(name, m, h, facc)
		for i := 0; i < m; i++ {
			p("VPBROADCASTD %s, %s", xh(i, 8), iacc(i))
			p("VPSRAD $2, %s, %s", iacc(i), iacc(i))
		}
		for g := 0; g < 8; g++ {
			halfNibbles(g, h)
			p("VMOVDQU32 %d(SI), Z1", q6High+64*(g/2))
			q6HighTernlog(g, h, "Z1", "Z4", "Z5", "Z0")
			for i := 0; i < m; i++ {
				p("VPDPBUSD.BCST %s, Z0, %s", xh(i, 16+4*g), iacc(i))
			}
		}
		halfScales(m, h, "Z3", "Z5", iacc, facc)
		halfEnd(m, h, q6Block/2, q6Block, loop, facc)
	}
	ret()
}

// q8avx2Half emits gemmQ8AVX2H<m>: 16 rows (pass p: rows 16p..16p+15)
// of one q8 tile x m tokens, m >= 2. Exact int8 products on AVX2 take four
// instructions per 32 multiply-adds whatever the trick (VPSIGNB, VPMADDUBSW,
// VPMADDWD, VPADDD here; the nibble split or widening to int16 cost the
// same), so what is left to win is the work around them: the activation's
// broadcast and VPABSB serve two weight registers (16 rows), a weight
// register's load and XOR serve m tokens, and the float sums live in dst
// (read and written once a block) so the int sums of 5 tokens fit in the
// 16 registers. The first group of a block writes the int sums, saving
// their zeroing.
//
// With AVX-VNNI (gemmQ8AVXVNNIH<m>) one VPDPBUSD makes the 32
// multiply-adds of the stored unsigned bytes q+128 with the activations,
// and a block's int sums start at -128*sum(x), which removes the offset.
func q8avx2Half(m int, vnni bool) {
	name := fmt.Sprintf("gemmQ8AVX2H%d", m)
	if vnni {
		name = fmt.Sprintf("gemmQ8AVXVNNIH%d", m)
	}
	header(name, m, "Rows 16*pass .. 16*pass+15 of one q8 tile x m token rows over nb blocks.")
	// Y0, Y1 values (rows 16p.., 16p+8..), Y2 x, Y3 |x|, Y4 products;
	// int sums Y5.. (token i, rows half j: Y5+2i+j). At a block's end Y0,
	// Y1 take the scales and Y2 d(x) times them.
	iacc := func(i, j int) string { return fmt.Sprintf("Y%d", 5+2*i+j) }
	// dst row i: DX, (DX)(R13*1), (DX)(R13*2), then from R11 = DX + 3*R13.
	dst := func(i, off int) string {
		switch i {
		case 0:
			return fmt.Sprintf("%d(DX)", off)
		case 1, 2:
			return fmt.Sprintf("%d(DX)(R13*%d)", off, i)
		}
		if i == 3 {
			return fmt.Sprintf("%d(R11)", off)
		}
		return fmt.Sprintf("%d(R11)(R13*1)", off)
	}
	if m > 5 {
		panic("q8avx2Half: dst rows past 4 need another base")
	}
	p("MOVQ pass+48(FP), R8")
	p("SHLQ $5, R8") // scales: 32 bytes per pass; values at twice that
	p("MOVQ dst+0(FP), DX")
	p("MOVQ ldy+8(FP), R13")
	p("SHLQ $2, R13")
	p("LEAQ (DX)(R13*2), R11")
	p("ADDQ R13, R11")
	p("VXORPS Y0, Y0, Y0")
	for i := 0; i < m; i++ {
		p("VMOVUPS Y0, %s", dst(i, 0))
		p("VMOVUPS Y0, %s", dst(i, 32))
	}
	loop := name + "loop"
	label(loop)
	if vnni {
		for i := 0; i < m; i++ {
			p("VPBROADCASTD %s, %s", x(i, 8), iacc(i, 0))
			p("VMOVDQA %s, %s", iacc(i, 0), iacc(i, 1))
		}
	}
	for g := 0; g < 8; g++ {
		for j := 0; j < 2; j++ {
			p("VMOVDQU %d(SI)(R8*2), Y%d", 64+128*g+32*j, j)
			if !vnni {
				p("VPXOR qsign8<>(SB), Y%d, Y%d", j, j)
			}
		}
		for i := 0; i < m; i++ {
			p("VPBROADCASTD %s, Y2", x(i, 16+4*g))
			if vnni {
				vpdpbusd(iacc(i, 0), "Y0", "Y2")
				vpdpbusd(iacc(i, 1), "Y1", "Y2")
				continue
			}
			p("VPABSB Y2, Y3")
			for j := 0; j < 2; j++ {
				p("VPSIGNB Y2, Y%d, Y4", j)
				p("VPMADDUBSW Y4, Y3, Y4")
				if g == 0 {
					p("VPMADDWD qones8<>(SB), Y4, %s", iacc(i, j))
					continue
				}
				p("VPMADDWD qones8<>(SB), Y4, Y4")
				p("VPADDD Y4, %s, %s", iacc(i, j), iacc(i, j))
			}
		}
	}
	p("VCVTPH2PS (SI)(R8*1), Y0")
	p("VCVTPH2PS 16(SI)(R8*1), Y1")
	for i := 0; i < m; i++ {
		p("VBROADCASTSS %s, Y2", x(i, 0))
		for j := 0; j < 2; j++ {
			a := iacc(i, j)
			p("VMULPS Y%d, Y2, Y4", j)
			p("VCVTDQ2PS %s, %s", a, a)
			p("VFMADD213PS %s, Y4, %s", dst(i, 32*j), a)
			p("VMOVUPS %s, %s", a, dst(i, 32*j))
		}
	}
	nextBlock(q8Block, loop)
	p("VZEROUPPER")
	p("RET")
	emit.End()
}

// q4Scales loads 8 rows' block scales into d and minimums into mn, as
// floats: the u8 factors at sc (a format for the offset) plus off times
// the f16 super-block ones at hdr plus hoff, scales first, the minimums'
// factors 32 bytes further and theirs 64.
func q4Scales(sc, hdr string, off, hoff int, d, mn, tmp string) {
	for _, r := range []struct {
		reg  string
		o, h int
	}{{d, off, hoff}, {mn, 32 + off, 64 + hoff}} {
		p("VPMOVZXBD "+sc+", %s", r.o, r.reg)
		p("VCVTDQ2PS %s, %s", r.reg, r.reg)
		p("VCVTPH2PS "+hdr+", %s", r.h, tmp)
		p("VMULPS %s, %s, %s", tmp, r.reg, r.reg)
	}
}

// splitHeader emits the TEXT line of the split kernel of type typ (q4,
// q6) for m tokens, with AVX-VNNI or not, and returns its name. Four
// registers and two int sums a token fill the 16.
func splitHeader(typ string, m int, vnni bool) string {
	isa := "AVX2"
	if vnni {
		isa = "AVXVNNI"
	}
	name := fmt.Sprintf("gemm%s%sS%d", strings.ToUpper(typ), isa, m)
	comment("func %s(dst *float32, ldy int, w *byte, x *byte, ldx, nb, pass int)", name)
	comment("Rows 8*pass .. 8*pass+7 and 16+8*pass .. 16+8*pass+7 of one %s tile x m token rows over nb blocks.", typ)
	emit.Text(name, 56)
	if 2*m+4 > 16 {
		panic(name + ": too many tokens")
	}
	return name
}

// splitStart begins a split kernel (q4avx2Split, q6avx2Split): the
// activation bases of m tokens (halfStart), DI = 32*pass, R11 = 8*pass,
// R12 = ldy in bytes, and the dst rows of the pass (rows r and r+16 from
// dst) zeroed, their float sums kept there.
func splitStart(m int) {
	halfStart(m)
	p("MOVQ pass+48(FP), R11")
	p("MOVQ R11, DI")
	p("SHLQ $5, DI")
	p("SHLQ $3, R11")
	p("MOVQ ldy+8(FP), R12")
	p("SHLQ $2, R12")
	p("MOVQ dst+0(FP), AX")
	p("VXORPS Y0, Y0, Y0")
	for i := 0; i < m; i++ {
		p("VMOVUPS Y0, (AX)")
		p("VMOVUPS Y0, 64(AX)")
		if i < m-1 {
			p("ADDQ R12, AX")
		}
	}
}

// q4avx2Split emits gemmQ4AVX2S<m> or, with AVX-VNNI, gemmQ4AVXVNNIS<m>:
// the 16 rows whose nibbles share the 32 bytes of pass h (rows 8h..8h+7
// in the low nibbles, 16+8h..16+8h+7 in the high ones; dst rows r and
// r+16 from the dst given) x m tokens. On AVX2 a block's int16 pair sums
// (at most 8*2*15*127) need no widening before its end, so VPMADDUBSW and
// VPADDW make 32 multiply-adds; AVX-VNNI's VPDPBUSD makes them into int32
// sums, zeroed each block. An activation's broadcast, which costs about
// as much, serves 16 rows; the weights' load and nibble masks serve m
// tokens; the float sums live in dst, read and written once a block, so
// a token takes two registers.
func q4avx2Split(m int, vnni bool) {
	name := splitHeader("q4", m, vnni)
	// Activation rows from the bases of xh (R8 = ldx), advanced a block
	// each block; CX counts the blocks; SI the weights, R13 the header
	// of the super-block, DX the blocks left under it; DI = 32*pass (the
	// nibble bytes), R11 = 8*pass (block scales and minimums; header
	// f16s at twice that); AX walks the dst rows (R12 = ldy in bytes).
	// Y0 the high nibbles, Y1 the low ones, Y2 x, Y3 products (AVX2); int
	// sums Y4.. (token i: low rows Y4+2i, high Y5+2i). At a block's end
	// Y0 takes the scales, Y1 the minimums, Y2 a temporary, for the low
	// rows and then the high ones.
	iacc := func(i, half int) string { return fmt.Sprintf("Y%d", 4+2*i+half) }
	splitStart(m)
	p("MOVQ $1, DX")
	loop := name + "loop"
	label(loop)
	p("DECQ DX")
	p("JNZ %snohdr", name)
	p("MOVQ SI, R13")
	p("ADDQ $%d, SI", q4Header)
	p("MOVQ $8, DX")
	label(name + "nohdr")
	if vnni {
		for i := 0; i < m; i++ {
			for half := 0; half < 2; half++ {
				p("VPXOR %s, %s, %s", iacc(i, half), iacc(i, half), iacc(i, half))
			}
		}
	}
	for g := 0; g < 8; g++ {
		p("VMOVDQU %d(SI)(DI*1), Y0", 64+64*g)
		p("VPAND qnib8<>(SB), Y0, Y1")
		p("VPSRLW $4, Y0, Y0")
		p("VPAND qnib8<>(SB), Y0, Y0")
		for i := 0; i < m; i++ {
			p("VPBROADCASTD %s, Y2", xh(i, 16+4*g))
			for half := 0; half < 2; half++ {
				v := fmt.Sprintf("Y%d", 1-half)
				switch {
				case vnni:
					vpdpbusd(iacc(i, half), v, "Y2")
				case g == 0:
					p("VPMADDUBSW Y2, %s, %s", v, iacc(i, half))
				default:
					p("VPMADDUBSW Y2, %s, Y3", v)
					p("VPADDW Y3, %s, %s", iacc(i, half), iacc(i, half))
				}
			}
		}
	}
	for half := 0; half < 2; half++ {
		q4Scales("%d(SI)(R11*1)", "%d(R13)(R11*2)", 16*half, 32*half, "Y0", "Y1", "Y2")
		p("MOVQ dst+0(FP), AX")
		for i := 0; i < m; i++ {
			a := iacc(i, half)
			if !vnni {
				p("VPMADDWD qones8<>(SB), %s, %s", a, a)
			}
			p("VCVTDQ2PS %s, %s", a, a)
			p("VBROADCASTSS %s, Y2", xh(i, 0))
			p("VMULPS Y0, Y2, Y2")
			p("VFMADD213PS %d(AX), Y2, %s", 64*half, a)
			p("VBROADCASTSS %s, Y2", xh(i, 4))
			p("VFNMADD231PS Y2, Y1, %s", a)
			p("VMOVUPS %s, %d(AX)", a, 64*half)
			if i < m-1 {
				p("ADDQ R12, AX")
			}
		}
	}
	halfNext(m, q4Block, loop)
	ret()
}

// q6avx2Split emits gemmQ6AVX2S<m> or, with AVX-VNNI, gemmQ6AVXVNNIS<m>:
// the 16 rows of pass h of one q6 tile (as q4avx2Split's: rows 8h..8h+7
// from the low nibbles of the pass' 32 bytes of each group, 16+8h..
// 16+8h+7 from the high ones, each completed by its bits of the same 32
// bytes of the group's high-bit line) x m tokens. The values are u = q +
// 32 in [0, 63], unsigned, so where q8 needs VPSIGNB before VPMADDUBSW
// (its pairs of products at most 2*63*127, no saturation) q6 needs
// nothing; the int32 sums start at -32*sum(x), which removes the offset.
// The unpacking serves the m tokens. This is what makes q6 a prefill type
// on AVX2: the one-token kernel taken once per token made 96 GOP/s where
// q8's 16-row kernels made 122 (BenchmarkGemmQ, one thread, Zen 4 EPYC
// with AVX-512 off).
func q6avx2Split(m int, vnni bool) {
	name := splitHeader("q6", m, vnni)
	// Activation rows from the bases of xh (R8 = ldx); CX counts the
	// blocks; SI the weights, DI = 32*pass (the pass' bytes of a line),
	// R11 = 8*pass (its scales at twice that); AX walks the dst rows (R12
	// = ldy in bytes). Y0 the high rows' values, Y1 the low rows', Y2 the
	// high-bit line and then x, Y3 a temporary and then the products (AVX2)
	// or the scales; int sums Y4.. (token i: low rows Y4+2i, high Y5+2i).
	iacc := func(i, half int) string { return fmt.Sprintf("Y%d", 4+2*i+half) }
	splitStart(m)
	loop := name + "loop"
	label(loop)
	for i := 0; i < m; i++ {
		p("VPBROADCASTD %s, %s", xh(i, 8), iacc(i, 0))
		p("VPSRAD $2, %s, %s", iacc(i, 0), iacc(i, 0))
		p("VMOVDQA %s, %s", iacc(i, 0), iacc(i, 1))
	}
	for g := 0; g < 8; g++ {
		p("VMOVDQU %d(SI)(DI*1), Y0", 64+64*g)
		p("VPAND qnib8<>(SB), Y0, Y1")
		p("VPSRLW $4, Y0, Y0")
		p("VPAND qnib8<>(SB), Y0, Y0")
		p("VMOVDQU %d(SI)(DI*1), Y2", q6High+64*(g/2))
		for half := 0; half < 2; half++ {
			v := fmt.Sprintf("Y%d", 1-half)
			p("VPAND qhigh8<>(SB), %s, Y3", q6HighShift(g, half, "Y2", "Y3"))
			p("VPOR Y3, %s, %s", v, v)
		}
		for i := 0; i < m; i++ {
			p("VPBROADCASTD %s, Y2", xh(i, 16+4*g))
			for half := 0; half < 2; half++ {
				v := fmt.Sprintf("Y%d", 1-half)
				if vnni {
					vpdpbusd(iacc(i, half), v, "Y2")
					continue
				}
				p("VPMADDUBSW Y2, %s, Y3", v)
				p("VPMADDWD qones8<>(SB), Y3, Y3")
				p("VPADDD Y3, %s, %s", iacc(i, half), iacc(i, half))
			}
		}
	}
	for half := 0; half < 2; half++ {
		p("VCVTPH2PS %d(SI)(R11*2), Y3", 32*half)
		p("MOVQ dst+0(FP), AX")
		for i := 0; i < m; i++ {
			a := iacc(i, half)
			p("VCVTDQ2PS %s, %s", a, a)
			p("VBROADCASTSS %s, Y2", xh(i, 0))
			p("VMULPS Y3, Y2, Y2")
			p("VFMADD213PS %d(AX), Y2, %s", 64*half, a)
			p("VMOVUPS %s, %d(AX)", a, 64*half)
			if i < m-1 {
				p("ADDQ R12, AX")
			}
		}
	}
	halfNext(m, q6Block, loop)
	ret()
}

// q8avx2Tile emits gemmQ8AVX2Tile: one whole q8 tile (32 rows, four Y
// registers) x one token, the decode product. The 8-row kernels would
// read each tile's cache lines in four passes, which costs decode half of
// its bandwidth.
//
// With AVX-VNNI (gemmQ8AVXVNNITile) VPDPBUSD multiplies the stored
// unsigned bytes, the int sums starting at the block's -128*sum(x).
func q8avx2Tile(vnni bool) {
	name := "gemmQ8AVX2Tile"
	if vnni {
		name = "gemmQ8AVXVNNITile"
	}
	header(name, 1, "One q8 tile (32 rows) x 1 token row over nb blocks; pass is unused.")
	// Y0 values, Y1 x, Y2 |x|, Y3 products, Y4 int16 ones, Y5 0x80, Y6
	// scales, Y7 temp; int sums Y8..Y11, float sums Y12..Y15 (8 rows each).
	p("VPBROADCASTD qones<>(SB), Y4")
	p("VPBROADCASTD qsign<>(SB), Y5")
	for q := 0; q < 4; q++ {
		p("VXORPS Y%d, Y%d, Y%d", 12+q, 12+q, 12+q)
	}
	loop := name + "loop"
	label(loop)
	for q := 0; q < 4; q++ {
		if vnni {
			p("VPBROADCASTD %s, Y%d", x(0, 8), 8+q)
			continue
		}
		p("VPXOR Y%d, Y%d, Y%d", 8+q, 8+q, 8+q)
	}
	for g := 0; g < 8; g++ {
		p("PREFETCHT0 %d(SI)", prefetchDist+64+128*g)
		p("PREFETCHT0 %d(SI)", prefetchDist+128+128*g)
		p("VPBROADCASTD %s, Y1", x(0, 16+4*g))
		if vnni {
			for q := 0; q < 4; q++ {
				p("VMOVDQU %d(SI), Y0", 64+128*g+32*q)
				vpdpbusd(fmt.Sprintf("Y%d", 8+q), "Y0", "Y1")
			}
			continue
		}
		p("VPABSB Y1, Y2")
		for q := 0; q < 4; q++ {
			p("VMOVDQU %d(SI), Y0", 64+128*g+32*q)
			p("VPXOR Y5, Y0, Y0")
			p("VPSIGNB Y1, Y0, Y3")
			p("VPMADDUBSW Y3, Y2, Y3")
			p("VPMADDWD Y4, Y3, Y3")
			p("VPADDD Y3, Y%d, Y%d", 8+q, 8+q)
		}
	}
	p("PREFETCHT0 %d(SI)", prefetchDist)
	tileScales("Y7", "Y6")
	nextBlock(q8Block, loop)
	store(1, func(_, q int) string { return fmt.Sprintf("Y%d", 12+q) }, 4, 32)
}

// tileScales ends a block of a one-token AVX2 tile kernel whose rows
// have f16 scales at the block's start (q8, q6): the float sums Y12..Y15
// gain the int sums Y8..Y11 times the rows' scales times the token's dx
// (dx, sc: registers for them).
func tileScales(dx, sc string) {
	p("VBROADCASTSS %s, %s", x(0, 0), dx)
	for q := 0; q < 4; q++ {
		p("VCVTPH2PS %d(SI), %s", 16*q, sc)
		p("VMULPS %s, %s, %s", dx, sc, sc)
		p("VCVTDQ2PS Y%d, Y%d", 8+q, 8+q)
		p("VFMADD231PS %s, Y%d, Y%d", sc, 8+q, 12+q)
	}
}

// q4avx2Tile emits gemmQ4AVX2Tile: one whole q4 tile x one token (see
// q8avx2Tile). The int16 pair sums of a block's 8 groups stay under
// 2^15, so one VPMADDWD per block widens them.
//
// With AVX-VNNI (gemmQ4AVXVNNITile) VPDPBUSD makes int32 sums directly.
func q4avx2Tile(vnni bool) {
	name := "gemmQ4AVX2Tile"
	if vnni {
		name = "gemmQ4AVXVNNITile"
	}
	header(name, 1, "One q4 tile (32 rows) x 1 token row over nb blocks; pass is unused.")
	// Y0 nibble bytes, Y1 x, Y2 values, Y3 0x0F, Y4 int16 ones, Y5 block
	// scales, Y6 block minimums, Y7 temp; int16 sums Y8..Y11, float sums
	// Y12..Y15 (rows 0-7, 8-15, 16-23, 24-31).
	p("VPBROADCASTD qones<>(SB), Y4")
	p("VPBROADCASTD qnib<>(SB), Y3")
	p("MOVQ $1, DX")
	for q := 0; q < 4; q++ {
		p("VXORPS Y%d, Y%d, Y%d", 12+q, 12+q, 12+q)
	}
	loop := name + "loop"
	label(loop)
	p("DECQ DX")
	p("JNZ %snohdr", name)
	p("MOVQ SI, R13")
	p("ADDQ $%d, SI", q4Header)
	p("MOVQ $8, DX")
	label(name + "nohdr")
	for q := 0; q < 4; q++ {
		p("VPXOR Y%d, Y%d, Y%d", 8+q, 8+q, 8+q)
	}
	for g := 0; g < 8; g++ {
		p("PREFETCHT0 %d(SI)", prefetchDist+64+64*g)
		p("VPBROADCASTD %s, Y1", x(0, 16+4*g))
		for half := 0; half < 2; half++ {
			// Bytes 32*half..: the low nibbles are rows 8*half.., the
			// high nibbles rows 16+8*half...
			p("VMOVDQU %d(SI), Y0", 64+64*g+32*half)
			p("VPAND Y3, Y0, Y2")
			if vnni {
				vpdpbusd(fmt.Sprintf("Y%d", 8+half), "Y2", "Y1")
				p("VPSRLW $4, Y0, Y0")
				p("VPAND Y3, Y0, Y2")
				vpdpbusd(fmt.Sprintf("Y%d", 10+half), "Y2", "Y1")
				continue
			}
			p("VPMADDUBSW Y1, Y2, Y2")
			p("VPADDW Y2, Y%d, Y%d", 8+half, 8+half)
			p("VPSRLW $4, Y0, Y0")
			p("VPAND Y3, Y0, Y2")
			p("VPMADDUBSW Y1, Y2, Y2")
			p("VPADDW Y2, Y%d, Y%d", 10+half, 10+half)
		}
	}
	for q := 0; q < 4; q++ {
		q4Scales("%d(SI)", "%d(R13)", 8*q, 16*q, "Y5", "Y6", "Y7")
		a, f := fmt.Sprintf("Y%d", 8+q), fmt.Sprintf("Y%d", 12+q)
		if !vnni {
			p("VPMADDWD Y4, %s, %s", a, a)
		}
		p("VCVTDQ2PS %s, %s", a, a)
		p("VBROADCASTSS %s, Y7", x(0, 0))
		p("VMULPS Y5, Y7, Y7")
		p("VFMADD231PS Y7, %s, %s", a, f)
		p("VBROADCASTSS %s, Y7", x(0, 4))
		p("VFNMADD231PS Y7, Y6, %s", f)
	}
	nextBlock(q4Block, loop)
	store(1, func(_, q int) string { return fmt.Sprintf("Y%d", 12+q) }, 4, 32)
}
