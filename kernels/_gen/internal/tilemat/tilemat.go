// Package tilemat emits the AVX2 and AVX-512 kernels of tile-major weight
// matrices (32 rows per tile, one column of a tile contiguous) for the
// generators kernels/_gen/matmul (f16 weights) and kernels/_gen/i8matmul
// (int8 weights). The kernels are the same but for how a column's weights
// become f32 lanes and how many bytes they take.
package tilemat

import (
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/qwenc/qwenc/kernels/_gen/internal/emit"
)

var (
	buf     = &emit.Buf
	p       = emit.P
	label   = emit.Label
	comment = emit.Comment
)

// GemmMaxM is the largest token block of the GEMM kernels; it must match
// gemmMaxM in kernels/matmul_amd64.go. The kernels read the activation rows
// in place, one general register per row: AVX-512 two tiles (4 Z weight
// regs) x 6 tokens = 24 accumulators; AVX2 half a tile (2 Y weight regs) x
// 6 tokens = 12.
const GemmMaxM = 6

// General registers of the activation rows of a GEMM block, read at
// (row)(AX*1) with AX = 4*j.
var rowRegs = [GemmMaxM]string{"BX", "DI", "R9", "R10", "R12", "R13"}

// Elem describes the weight element type.
type Elem struct {
	// Infix goes between a kernel's family and its instruction set in its
	// name: matVec<Infix>AVX512, gemm<Infix>AVX512T1M1.
	Infix string
	// GoType is the Go type of the weights in the kernels' signatures.
	GoType string
	// Size is the size of one weight in bytes, a power of two.
	Size int
	// Cvt emits the conversion of the 16 (reg Z*) or 8 (reg Y*) weights at
	// mem into f32 lanes of reg.
	Cvt func(mem, reg string)
}

// F16 is IEEE binary16, converted by F16C's VCVTPH2PS.
var F16 = Elem{GoType: "uint16", Size: 2, Cvt: func(mem, reg string) {
	p("VCVTPH2PS %s, %s", mem, reg)
}}

// I8 is int8, sign-extended to int32 and converted exactly.
var I8 = Elem{Infix: "I8", GoType: "int8", Size: 1, Cvt: func(mem, reg string) {
	p("VPMOVSXBD %s, %s", mem, reg)
	p("VCVTDQ2PS %s, %s", reg, reg)
}}

// Gen generates the kernels of one element type.
type Gen struct {
	Elem
	// Prefetch is the matvec software prefetch distance in bytes (0 =
	// none) and PrefetchOp its instruction.
	Prefetch   int
	PrefetchOp string
	// GemmPrefetch is the GEMM software prefetch distance in k steps.
	GemmPrefetch int
	// Bcast512 makes the AVX-512 matvec FMAs read x[j] with an embedded
	// broadcast (VFMADD231PS.BCST) instead of a VBROADCASTSS, which takes
	// a vector pipe on Zen 4. (The GEMM, at the FMA rate, broadcasts once
	// per token for all its FMAs.)
	Bcast512 bool
	// Unroll512 is the AVX-512 matvec's unrolling of k, 4 or (with
	// Bcast512) 8; 0 means 4.
	Unroll512 int
	// GemmBcastMaxM makes the AVX-512 GEMMs of up to that many tokens
	// read x by embedded broadcasts too: with few tokens the conversions,
	// not the FMAs, fill the vector pipes, and a VBROADCASTSS per token
	// takes one more.
	GemmBcastMaxM int
}

func (g *Gen) unroll512() int {
	if g.Unroll512 == 0 {
		return 4
	}
	if g.Unroll512 != 4 && (g.Unroll512 != 8 || !g.Bcast512) {
		panic("tilemat: the AVX-512 matvec unrolls k by 4, or by 8 with embedded broadcasts")
	}
	return g.Unroll512
}

// fmaX512 emits the AVX-512 FMAs acc[q] += w[q] * x for the f32 x at mem,
// broadcast into Z(bcReg) first unless embedded.
func fmaX512(embedded bool, mem string, bcReg int, w, acc []int) {
	if !embedded {
		p("VBROADCASTSS %s, Z%d", mem, bcReg)
	}
	for q := range w {
		if embedded {
			p("VFMADD231PS.BCST %s, Z%d, Z%d", mem, w[q], acc[q])
		} else {
			p("VFMADD231PS Z%d, Z%d, Z%d", bcReg, w[q], acc[q])
		}
	}
}

// colBytes is the size of one column of a tile, 32 weights.
func (g *Gen) colBytes() int { return 32 * g.Size }

// colShift is log2(colBytes).
func (g *Gen) colShift() int {
	s := 0
	for 1<<s < g.colBytes() {
		s++
	}
	return s
}

// prefetchLines emits the matvec prefetches of the cache lines of the
// bytes [from, to) ahead of SI.
func (g *Gen) prefetchLines(from, to int) {
	if g.Prefetch <= 0 {
		return
	}
	for off := (from + 63) / 64 * 64; off < to; off += 64 {
		p("%s %d(SI)", g.PrefetchOp, g.Prefetch+off)
	}
}

// All emits every kernel: the matrix-vector kernels, then the GEMM kernels
// by token count.
func (g *Gen) All() {
	g.MatVec512()
	g.MatVecAVX2()
	for m := 1; m <= GemmMaxM; m++ {
		g.Gemm512(1, m)
		g.Gemm512(2, m)
		g.GemmAVX2(m)
	}
}

// matVecHeader emits the TEXT line of matVec<Infix><isa>, loads its
// arguments (DX = dst, SI = w, R8 = x, R9 = k, R10 = tiles) and starts the
// loop over tiles at label tile: DI = x and CX = k, the column loop's.
func (g *Gen) matVecHeader(isa, tile string) {
	name := "matVec" + g.Infix + isa
	comment("func %s(dst *float32, w *%s, x *float32, k, tiles int)", name, g.GoType)
	comment("Requires k >= 1, tiles >= 1. Writes 32*tiles floats to dst.")
	fmt.Fprintf(buf, "TEXT ·%s(SB), NOSPLIT, $0-40\n", name)
	p("MOVQ dst+0(FP), DX")
	p("MOVQ w+8(FP), SI")
	p("MOVQ x+16(FP), R8")
	p("MOVQ k+24(FP), R9")
	p("MOVQ tiles+32(FP), R10")
	label(tile)
	p("MOVQ R8, DI")
	p("MOVQ R9, CX")
}

// MatVec512 emits matVec<Infix>AVX512: for each of `tiles` tiles, 32
// outputs. k is unrolled by u = Unroll512 (4 or 8) with u independent
// accumulator pairs (Z16 on).
func (g *Gen) MatVec512() {
	cb, hb := g.colBytes(), 16*g.Size
	g.matVecHeader("AVX512", "mv512tile")
	u := g.unroll512()
	for r := 16; r < 16+2*u; r++ {
		p("VPXORD Z%d, Z%d, Z%d", r, r, r)
	}
	loop := fmt.Sprintf("mv512loop%d", u)
	p("CMPQ CX, $%d", u)
	p("JB mv512tail")
	label(loop)
	for j := 0; j < u; j++ {
		g.prefetchLines(cb*j, cb*j+1)
		w0, w1, b := 3*j, 3*j+1, 3*j+2
		if u > 4 { // 16 accumulators from Z16: no broadcast register
			w0, w1 = 2*j, 2*j+1
		}
		g.Cvt(fmt.Sprintf("%d(SI)", cb*j), fmt.Sprintf("Z%d", w0))
		g.Cvt(fmt.Sprintf("%d(SI)", cb*j+hb), fmt.Sprintf("Z%d", w1))
		fmaX512(g.Bcast512, fmt.Sprintf("%d(DI)", 4*j), b, []int{w0, w1}, []int{16 + 2*j, 17 + 2*j})
	}
	p("ADDQ $%d, SI", u*cb)
	p("ADDQ $%d, DI", 4*u)
	p("SUBQ $%d, CX", u)
	p("CMPQ CX, $%d", u)
	p("JAE %s", loop)
	label("mv512tail")
	p("TESTQ CX, CX")
	p("JZ mv512reduce")
	label("mv512loop1")
	g.Cvt("(SI)", "Z0")
	g.Cvt(fmt.Sprintf("%d(SI)", hb), "Z1")
	fmaX512(g.Bcast512, "(DI)", 2, []int{0, 1}, []int{16, 17})
	p("ADDQ $%d, SI", cb)
	p("ADDQ $4, DI")
	p("DECQ CX")
	p("JNZ mv512loop1")
	label("mv512reduce")
	// Pairwise sums of the u accumulator pairs into Z16, Z17.
	for st := 1; st < u; st *= 2 {
		for a := 0; a < u; a += 2 * st {
			p("VADDPS Z%d, Z%d, Z%d", 16+2*(a+st), 16+2*a, 16+2*a)
			p("VADDPS Z%d, Z%d, Z%d", 17+2*(a+st), 17+2*a, 17+2*a)
		}
	}
	p("VMOVUPS Z16, (DX)")
	p("VMOVUPS Z17, 64(DX)")
	p("ADDQ $128, DX")
	p("DECQ R10")
	p("JNZ mv512tile")
	p("VZEROUPPER")
	p("RET")
	fmt.Fprintln(buf)
}

// MatVecAVX2 emits matVec<Infix>AVX2: k unrolled by 2 with 2 sets of 4 Y
// accumulators (Y8..Y15); weights/broadcast use Y0..Y4 (renamed).
func (g *Gen) MatVecAVX2() {
	cb, qb := g.colBytes(), 8*g.Size
	g.matVecHeader("AVX2", "mv2tile")
	for r := 8; r < 16; r++ {
		p("VXORPS Y%d, Y%d, Y%d", r, r, r)
	}
	p("CMPQ CX, $2")
	p("JB mv2tail")
	label("mv2loop2")
	g.prefetchLines(0, 2*cb)
	for j := 0; j < 2; j++ {
		p("VBROADCASTSS %d(DI), Y4", 4*j)
		for q := 0; q < 4; q++ {
			g.Cvt(fmt.Sprintf("%d(SI)", cb*j+qb*q), fmt.Sprintf("Y%d", q))
		}
		for q := 0; q < 4; q++ {
			p("VFMADD231PS Y4, Y%d, Y%d", q, 8+4*j+q)
		}
	}
	p("ADDQ $%d, SI", 2*cb)
	p("ADDQ $8, DI")
	p("SUBQ $2, CX")
	p("CMPQ CX, $2")
	p("JAE mv2loop2")
	label("mv2tail")
	p("TESTQ CX, CX")
	p("JZ mv2reduce")
	p("VBROADCASTSS (DI), Y4")
	for q := 0; q < 4; q++ {
		g.Cvt(fmt.Sprintf("%d(SI)", qb*q), fmt.Sprintf("Y%d", q))
	}
	for q := 0; q < 4; q++ {
		p("VFMADD231PS Y4, Y%d, Y%d", q, 8+q)
	}
	p("ADDQ $%d, SI", cb)
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
	fmt.Fprintln(buf)
}

// gemmHeader emits the TEXT line and the setup shared by the GEMM kernels:
// SI = w, R8 = ldw*colBytes, CX = 4*k (loop end), AX = 0 (loop index,
// 4*j), the row registers; DX = dst and R11 = 4*ldy for initAcc.
func (g *Gen) gemmHeader(name string, m, rows int) {
	comment("func %s(dst *float32, ldy int, w *%s, x *float32, ldx, k int, acc bool, ldw int)", name, g.GoType)
	comment("Requires k >= 1. Computes dst[i*ldy + r] (+)= sum_{j<k} x[i*ldx + j] * W[r, j]")
	comment("for i < %d, r < %d; with acc the sums are added to dst, else dst is", m, rows)
	comment("overwritten. Column j of the tile is at w[32*j : 32*j+32]; a second tile")
	comment("starts at w[32*ldw] (ldw is the matrix's full k, so k can be a block).")
	fmt.Fprintf(buf, "TEXT ·%s(SB), NOSPLIT, $0-64\n", name)
	p("MOVQ w+16(FP), SI")
	p("MOVQ ldw+56(FP), R8")
	p("SHLQ $%d, R8", g.colShift())
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
func (g *Gen) initAcc(name, rp string, m, per, first, off int) {
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
	p("SHLQ $%d, R8", g.colShift())
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

// Gemm512 emits gemm<Infix>AVX512T<tiles>M<m>: tiles (1 or 2) consecutive
// tiles x m tokens. Per column j the weights are converted once into
// Z0..Z(2t-1) and each token's x[i, j] is broadcast into Z4; token i
// accumulates in Z(5+2t*i) ...
func (g *Gen) Gemm512(tiles, m int) {
	cb, hb := g.colBytes(), 16*g.Size
	name := fmt.Sprintf("gemm%sAVX512T%dM%d", g.Infix, tiles, m)
	per := 2 * tiles
	g.gemmHeader(name, m, 32*tiles)
	g.initAcc(name, "Z", m, per, 5, 0)
	l := name + "loop"
	label(l)
	if g.GemmPrefetch > 0 {
		p("PREFETCHT0 %d(SI)", cb*g.GemmPrefetch)
		if tiles == 2 {
			p("PREFETCHT0 %d(SI)(R8*1)", cb*g.GemmPrefetch)
		}
	}
	g.Cvt("(SI)", "Z0")
	g.Cvt(fmt.Sprintf("%d(SI)", hb), "Z1")
	if tiles == 2 {
		g.Cvt("(SI)(R8*1)", "Z2")
		g.Cvt(fmt.Sprintf("%d(SI)(R8*1)", hb), "Z3")
	}
	for i := 0; i < m; i++ {
		var w, acc []int
		for q := 0; q < per; q++ {
			w, acc = append(w, q), append(acc, 5+per*i+q)
		}
		fmaX512(m <= g.GemmBcastMaxM, fmt.Sprintf("(%s)(AX*1)", rowRegs[i]), 4, w, acc)
	}
	p("ADDQ $%d, SI", cb)
	p("ADDQ $4, AX")
	p("CMPQ AX, CX")
	p("JNE %s", l)
	storeAcc("Z", m, per, 5, 0)
	p("VZEROUPPER")
	p("RET")
	fmt.Fprintln(buf)
}

// GemmAVX2 emits gemm<Infix>AVX2M<m>: one tile x m tokens, as two passes
// over k of 16 rows each: weights in Y0, Y1, broadcast in Y2, accumulators
// Y3...
func (g *Gen) GemmAVX2(m int) {
	cb, hb, qb := g.colBytes(), 16*g.Size, 8*g.Size
	name := fmt.Sprintf("gemm%sAVX2M%d", g.Infix, m)
	g.gemmHeader(name, m, 32)
	for h := 0; h < 2; h++ {
		hn := fmt.Sprintf("%sh%d", name, h)
		if h == 1 {
			p("MOVQ w+16(FP), SI")
			p("MOVQ dst+0(FP), DX")
		}
		g.initAcc(hn, "Y", m, 2, 3, 64*h)
		l := hn + "loop"
		label(l)
		if g.GemmPrefetch > 0 {
			p("PREFETCHT0 %d(SI)", cb*g.GemmPrefetch)
		}
		g.Cvt(fmt.Sprintf("%d(SI)", hb*h), "Y0")
		g.Cvt(fmt.Sprintf("%d(SI)", hb*h+qb), "Y1")
		for i := 0; i < m; i++ {
			p("VBROADCASTSS (%s)(AX*1), Y2", rowRegs[i])
			p("VFMADD231PS Y2, Y0, Y%d", 3+2*i)
			p("VFMADD231PS Y2, Y1, Y%d", 4+2*i)
		}
		p("ADDQ $%d, SI", cb)
		p("ADDQ $4, AX")
		p("CMPQ AX, CX")
		p("JNE %s", l)
		storeAcc("Y", m, 2, 3, 64*h)
	}
	p("VZEROUPPER")
	p("RET")
	fmt.Fprintln(buf)
}

// Main is the generator command named gen: it parses the tuning flags
// (g's settings are their defaults) and -out (default out), and writes
// g.All() there.
func Main(gen, out string, g Gen) {
	outFlag := flag.String("out", out, "output file")
	flags(&g)
	flag.Parse()
	fmt.Fprintf(buf, "// Code generated by kernels/_gen/%s; DO NOT EDIT.\n\n", gen)
	fmt.Fprintf(buf, "//go:build amd64 && !purego\n\n#include \"textflag.h\"\n\n")
	g.All()
	if err := os.WriteFile(*outFlag, buf.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}

// flags registers the tuning flags of g, with g's settings as their
// defaults.
func flags(g *Gen) {
	flag.IntVar(&g.Prefetch, "prefetch", g.Prefetch, "matvec software prefetch distance in bytes (0 = none)")
	flag.StringVar(&g.PrefetchOp, "prefetchop", g.PrefetchOp, "matvec prefetch instruction")
	flag.IntVar(&g.GemmPrefetch, "gemmprefetch", g.GemmPrefetch, "GEMM software prefetch distance in k steps (0 = none)")
	flag.BoolVar(&g.Bcast512, "bcast", g.Bcast512, "AVX-512 matvec: FMAs with embedded broadcast of x")
	flag.IntVar(&g.Unroll512, "unroll", g.Unroll512, "AVX-512 matvec unrolling of k (4, or 8 with -bcast)")
}
