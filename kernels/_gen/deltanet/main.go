// Command deltanet generates kernels/deltanet_amd64.s: the Gated
// DeltaNet's state pass (kernels/deltanet.go) and the f32 matrix product
// its chunked form is built on (kernels/sgemm.go), for AVX-512 and AVX2.
// Run it from this directory:
//
//	go run . -out ../../deltanet_amd64.s
//
// Both are written once over an emit.ISA; the AVX-512 forms take wider
// blocks, as its 32 registers allow. Neither needs more than AVX-512F
// (or AVX2 and FMA).
package main

import (
	"fmt"

	"github.com/qwenc/qwenc/kernels/_gen/internal/emit"
)

var (
	p     = emit.P
	label = emit.Label
)

func main() {
	emit.Generate("deltanet", func() {
		emit.Comment("The Gated DeltaNet's kernels for deltanet_amd64.go: every column count")
		emit.Comment("is a positive multiple of the register width (16 float32 for the AVX512")
		emit.Comment("functions, 8 for AVX2); the Go side finishes any remainder.")
		emit.End()
		for _, v := range []emit.ISA{emit.AVX512, emit.AVX2} {
			deltaPass(v)
			for m := 1; m <= sgemmRows; m++ {
				sgemm(v, m)
			}
		}
	})
}

// passBlock is the registers of columns of the state pass's wide block.
// Each register of columns keeps two accumulators and the block's dp
// (read once, not as a memory operand every row: the pass is bound by its
// loads, a quarter faster so on Zen 5), beside the row's four scalars and
// a few registers the row's values pass through. AVX-512 takes eight, 128
// columns: the whole row of a 128-wide head, so that a decode token reads
// its state from memory in one stream (about 1.7 times the bandwidth of
// two half-row passes on a 2-core Zen 5). AVX2's 16 registers leave room
// for three (9 + 4 scalars + 3).
func passBlock(v emit.ISA) int {
	if v.Wide() {
		return 8
	}
	return 3
}

// deltaPass emits the one pass over a value head's state of the fused
// recurrent delta rule (kernels/deltanet.go gives the algebra). The state
// is held as P plus a pending rank-1 term kp ⊗ dp; the pass walks the
// columns in blocks, each block down every row:
//
//	x = P[i] + kp[i]·dp       the state row before this token
//	sk += k[i]·x, sq += q[i]·x
//	P[i] = decay·x
//
// and ends the block with the token's write (delta, kept as the new dp)
// and output, from four scalars the caller folds: c1 = decay·rk,
// c2 = rk·beta, c3 = rq·decay, c4 = qk·beta, with rk and rq the
// normalising factors of the raw k and q the pass reads:
//
//	t = v - c1·sk             (v minus the decayed state's prediction)
//	o = c3·sq + c4·t
//	dp = c2·t                 (beta·t scaled for the raw k the caller keeps as kp)
func deltaPass(v emit.ISA) {
	f := v.Routine("deltaPass", "s, kp, dp, k, q, v, o *float32, rows, cols, ld int, decay, c1, c2, c3, c4 float32", "",
		"One token over rows x cols of a head's state (rows ld floats apart); see deltanet.go.")
	b := passBlock(v)
	sk := func(j int) string { return v.R(j) }
	sq := func(j int) string { return v.R(b + j) }
	dp := func(j int) string { return v.R(2*b + j) }
	kp, k, q, decay := v.R(3*b), v.R(3*b+1), v.R(3*b+2), v.R(3*b+3)
	// The row's values need a register only from their load to their
	// store: a few, reused round the block's registers of columns.
	temps := 32 - (3*b + 4)
	if !v.Wide() {
		temps = 16 - (3*b + 4)
	}
	x := func(j int) string { return v.R(3*b + 4 + j%temps) }
	c1, c2, c3, c4 := kp, k, q, decay // the epilogue's, once the rows are done
	f.Load("s", "DI", "kp", "R8", "k", "R9", "q", "R10", "dp", "R11", "v", "R12", "o", "R13",
		"rows", "CX", "cols", "BX", "ld", "DX")
	p("SHLQ $2, DX")
	for _, w := range []int{b, 1} {
		top := fmt.Sprintf("%s_%d", f.Name, w)
		next := fmt.Sprintf("%s_%d", f.Name, 1)
		if w == 1 {
			next = f.Name + "_done"
		}
		at := func(j int, base string) string { return fmt.Sprintf("%d(%s)", 4*j*v.Lanes, base) }
		label(top)
		p("CMPQ BX, $%d", w*v.Lanes)
		p("JL %s", next)
		f.Load("decay", decay)
		p("MOVQ DI, SI")
		p("XORQ AX, AX")
		for j := range w {
			v.Zero(b + j)
			v.Zero(j)
		}
		for j := range w {
			p("VMOVUPS %s, %s", at(j, "R11"), dp(j))
		}
		label(top + "_row")
		if !v.Wide() && w > 1 {
			// AVX2's blocks are 24 columns: a decode token walks a
			// 128-wide state from memory in six strided passes, which
			// prefetching the next block's lines of each row speeds up
			// by about a sixth (AVX-512 reads such a row in one block).
			for l := range 2 {
				p("PREFETCHT0 %d(SI)", 4*w*v.Lanes+64*l)
			}
		}
		p("VBROADCASTSS (R8)(AX*4), %s", kp)
		p("VBROADCASTSS (R9)(AX*4), %s", k)
		p("VBROADCASTSS (R10)(AX*4), %s", q)
		for j := range w {
			p("VMOVUPS %s, %s", at(j, "SI"), x(j))
			p("VFMADD231PS %s, %s, %s", dp(j), kp, x(j))
			p("VFMADD231PS %s, %s, %s", x(j), k, sk(j))
			p("VFMADD231PS %s, %s, %s", x(j), q, sq(j))
			p("VMULPS %s, %s, %s", decay, x(j), x(j))
			p("VMOVUPS %s, %s", x(j), at(j, "SI"))
		}
		p("ADDQ DX, SI")
		p("INCQ AX")
		p("CMPQ AX, CX")
		p("JL %s_row", top)
		f.Load("c1", c1, "c2", c2, "c3", c3, "c4", c4)
		for j := range w {
			p("VMOVUPS %s, %s", at(j, "R12"), x(j))
			p("VFNMADD231PS %s, %s, %s", sk(j), c1, x(j))
			p("VMULPS %s, %s, %s", c3, sq(j), sq(j))
			p("VFMADD231PS %s, %s, %s", x(j), c4, sq(j))
			p("VMOVUPS %s, %s", sq(j), at(j, "R13"))
			p("VMULPS %s, %s, %s", c2, x(j), x(j))
			p("VMOVUPS %s, %s", x(j), at(j, "R11"))
		}
		for _, r := range []string{"DI", "R11", "R12", "R13"} {
			p("ADDQ $%d, %s", 4*w*v.Lanes, r)
		}
		p("SUBQ $%d, BX", w*v.Lanes)
		p("JMP %s", top)
	}
	label(f.Name + "_done")
	emit.Ret()
}

// sgemmRows is the most rows of C one sgemm routine computes; it must
// match sgemm.go. Six rows by the wide block's registers of columns keep
// 24 accumulators on AVX-512 (of 32 registers) and 12 on AVX2 (of 16),
// with the B row's registers and a broadcast beside them.
const sgemmRows = 6

// sgemmBlock is the registers of columns of the wide column block.
func sgemmBlock(v emit.ISA) int {
	if v.Wide() {
		return 4
	}
	return 2
}

// sgemm emits the routine for m rows of C = beta·C + A·B (A·B alone when
// acc is 0, C then not read): the columns in blocks of sgemmBlock
// registers, then one, each block through all of k with its m x w
// accumulators in registers. A's rows are in R8.. (row i at a + i·lda),
// indexed by AX = 4·kk; SI walks B's rows, DI the column blocks of C's
// first row, BX counts the columns left.
func sgemm(v emit.ISA, m int) {
	f := v.Routine(fmt.Sprintf("sgemm%d", m), "c *float32, ldc int, a *float32, lda int, b *float32, ldb int, n, k int, beta float32, acc int", "",
		fmt.Sprintf("%d rows of C [m, n] = beta*C + A [m, k] * B [k, n], all row-major; k >= 1.", m))
	nr := sgemmBlock(v)
	rows := []string{"R8", "R9", "R10", "R11", "R12", "R13"}
	f.Load("c", "DI", "a", "R8", "lda", "AX", "ldb", "DX", "n", "BX")
	p("SHLQ $2, AX")
	for i := 1; i < m; i++ {
		p("LEAQ (%s)(AX*1), %s", rows[i-1], rows[i])
	}
	p("SHLQ $2, DX")
	accReg := func(i, j int) string { return v.R(i*nr + j) }
	bReg := func(j int) string { return v.R(m*nr + j) }
	bcast, beta := v.R(m*nr+nr), v.R(m*nr+nr+1)
	f.Load("beta", beta)
	for _, w := range []int{nr, 1} {
		top := fmt.Sprintf("%s_%d", f.Name, w)
		next := fmt.Sprintf("%s_%d", f.Name, 1)
		if w == 1 {
			next = f.Name + "_done"
		}
		label(top)
		p("CMPQ BX, $%d", w*v.Lanes)
		p("JL %s", next)
		p("MOVQ DI, SI")
		p("SUBQ %s, SI", f.Arg("c"))
		p("ADDQ %s, SI", f.Arg("b"))
		p("MOVQ %s, CX", f.Arg("k"))
		p("XORQ AX, AX")
		for i := range m {
			for j := range w {
				v.Zero(i*nr + j)
			}
		}
		label(top + "_k")
		for j := range w {
			p("VMOVUPS %d(SI), %s", 4*j*v.Lanes, bReg(j))
		}
		for i := range m {
			p("VBROADCASTSS (%s)(AX*1), %s", rows[i], bcast)
			for j := range w {
				p("VFMADD231PS %s, %s, %s", bReg(j), bcast, accReg(i, j))
			}
		}
		p("ADDQ DX, SI")
		p("ADDQ $4, AX")
		p("DECQ CX")
		p("JNZ %s_k", top)
		// C's rows are ldc apart: CX walks them, AX is the stride.
		p("MOVQ %s, AX", f.Arg("ldc"))
		p("SHLQ $2, AX")
		p("MOVQ %s, SI", f.Arg("acc"))
		p("TESTQ SI, SI")
		p("JZ %s_store", top)
		p("MOVQ DI, CX")
		for i := range m {
			for j := range w {
				p("VFMADD231PS %d(CX), %s, %s", 4*j*v.Lanes, beta, accReg(i, j))
			}
			if i < m-1 {
				p("ADDQ AX, CX")
			}
		}
		label(top + "_store")
		p("MOVQ DI, CX")
		for i := range m {
			for j := range w {
				p("VMOVUPS %s, %d(CX)", accReg(i, j), 4*j*v.Lanes)
			}
			if i < m-1 {
				p("ADDQ AX, CX")
			}
		}
		p("ADDQ $%d, DI", 4*w*v.Lanes)
		p("SUBQ $%d, BX", w*v.Lanes)
		p("JMP %s", top)
	}
	label(f.Name + "_done")
	emit.Ret()
}
