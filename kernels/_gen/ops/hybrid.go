package main

import (
	"fmt"

	"github.com/qwenc/qwenc/kernels/_gen/internal/emit"
)

// The vector operations of the hybrid (Gated DeltaNet) layers and of the
// gates around them: a dot product, the sigmoid gate, the gated norm's
// scaling, and the causal convolution over channels.

func dot(v isa) {
	f := v.Routine("dot", "a, b *float32, n int", "float32")
	f.Load("a", "SI", "b", "DX", "n", "CX")
	for j := range unroll {
		v.Zero(j)
	}
	v.loop(f.Name, unroll, []ptr{pSI, pDX},
		func(j int) { p("VMOVUPS %s, %s", v.at(pSI, j), v.R(4+j)) },
		func(j int) { p("VFMADD231PS %s, %s, %s", v.at(pDX, j), v.R(4+j), v.R(j)) })
	v.reduce(f, "ADD", 0, 1, 2, 3)
	emit.Ret()
}

func sigmoidMul(v isa) {
	f := v.Routine("sigmoidMul", "dst, x, gate *float32, n int", "",
		"dst = x / (1 + exp(-gate)).")
	f.Load("dst", "DI", "x", "SI", "gate", "DX", "n", "CX")
	v.loadExp()
	v.Zero(zeroReg)
	g := func(j int) string { return v.R(5 + j) }
	e := func(j int) string { return v.R(expReg(j)) }
	v.loop(f.Name, expUnroll, []ptr{pSI, pDX, pDI},
		func(j int) { p("VMOVUPS %s, %s", v.at(pDX, j), e(j)) },
		func(j int) { p("VSUBPS %s, %s, %s", e(j), v.R(zeroReg), e(j)) },
		v.expAt,
		func(j int) { p("VADDPS %s, %s, %s", v.k("one"), e(j), e(j)) },
		func(j int) { p("VMOVUPS %s, %s", v.at(pSI, j), g(j)) },
		func(j int) { p("VDIVPS %s, %s, %s", e(j), g(j), g(j)) },
		func(j int) { p("VMOVUPS %s, %s", g(j), v.at(pDI, j)) })
	emit.Ret()
}

// mulScaleSiLU is the gated norm's second half: the normalised, weighted
// value times silu of the gate, in the order of the two passes it
// replaces ((x*s)*w, then silu(z) times that).
func mulScaleSiLU(v isa) {
	f := v.Routine("mulScaleSiLU", "dst, x, w, z *float32, s float32, n int", "",
		"dst = silu(z) * ((x*s)*w).")
	const sReg = minuend // no exp argument to subtract here
	f.Load("dst", "DI", "x", "SI", "w", "DX", "z", "BX", "s", v.R(sReg), "n", "CX")
	v.loadExp()
	v.Zero(zeroReg)
	g := func(j int) string { return v.R(5 + j) }
	t := func(j int) string { return v.R(12 + j) }
	phases := []func(int){func(j int) { p("VMOVUPS %s, %s", v.at(pBX, j), g(j)) }}
	phases = append(phases, v.silu(g)...)
	phases = append(phases,
		func(j int) { p("VMULPS %s, %s, %s", v.at(pSI, j), v.R(sReg), t(j)) },
		func(j int) { p("VMULPS %s, %s, %s", v.at(pDX, j), t(j), t(j)) },
		func(j int) { p("VMULPS %s, %s, %s", t(j), g(j), g(j)) },
		func(j int) { p("VMOVUPS %s, %s", g(j), v.at(pDI, j)) })
	v.loop(f.Name, expUnroll, []ptr{pSI, pDX, pBX, pDI}, phases...)
	emit.Ret()
}

// convAcc, convX are the registers of block register j: its sum (SiLU'd
// in place, as siluMul's g) and the input it loads.
func (v isa) convAcc(j int) string { return v.R(5 + j) }
func (v isa) convX(j int) string   { return v.R(4 + 3*j) }

// chanBlocks emits the loop over the channel blocks of one row of a
// convolution: blocks of two registers while they fill (two independent
// exp chains, as the exp routines), then of one. block(b) emits a block
// of b registers at channel byte offset AX, each through every tap (the
// taps are a runtime count); CX counts the channels left, cv is the (FP)
// operand of the vector channel count.
func (v isa) chanBlocks(name, cv string, block func(b int)) {
	p("XORQ AX, AX")
	p("MOVQ %s, CX", cv)
	for _, b := range []int{2, 1} {
		top := fmt.Sprintf("%s_b%d", name, b)
		label(top)
		p("CMPQ CX, $%d", b*v.Lanes)
		if b == 2 {
			p("JL %s_b1", name)
		} else {
			p("JL %s_row", name)
		}
		block(b)
		p("ADDQ $%d, AX", 4*b*v.Lanes)
		p("SUBQ $%d, CX", b*v.Lanes)
		p("JMP %s", top)
	}
	label(name + "_row")
}

// siluStore finishes a block of b registers: SiLU of the sums, stored at
// the output row DI, offset AX.
func (v isa) siluStore(b int) {
	for _, ph := range v.silu(v.convAcc) {
		for j := range b {
			ph(j)
		}
	}
	for j := range b {
		p("VMOVUPS %s, %d(DI)(AX*1)", v.convAcc(j), 4*j*v.Lanes)
	}
}

func convRows(v isa) {
	f := v.Routine("convRows", "out, x, w *float32, c, cv, taps, n int", "",
		"Row t of out, channels [0, cv): silu(sum over taps j of w[j] * x[t+j]);",
		"rows are c floats apart (w's too), cv a positive multiple of the register.")
	f.Load("out", "DI", "x", "SI", "w", "DX", "c", "R8", "n", "R9")
	p("SHLQ $2, R8")
	v.loadExp()
	v.Zero(zeroReg)
	label(f.Name + "_next")
	v.chanBlocks(f.Name, f.Arg("cv"), func(b int) {
		loop := fmt.Sprintf("%s_b%d_tap", f.Name, b)
		p("LEAQ (SI)(AX*1), R10")
		p("LEAQ (DX)(AX*1), R11")
		p("MOVQ %s, BX", f.Arg("taps"))
		for j := range b {
			v.Zero(5 + j)
		}
		label(loop)
		for j := range b {
			p("VMOVUPS %d(R10), %s", 4*j*v.Lanes, v.convX(j))
			p("VFMADD231PS %d(R11), %s, %s", 4*j*v.Lanes, v.convX(j), v.convAcc(j))
		}
		p("ADDQ R8, R10")
		p("ADDQ R8, R11")
		p("DECQ BX")
		p("JNZ %s", loop)
		v.siluStore(b)
	})
	p("ADDQ R8, DI")
	p("ADDQ R8, SI")
	p("DECQ R9")
	p("JNZ %s_next", f.Name)
	emit.Ret()
}

func convStep(v isa) {
	f := v.Routine("convStep", "out, prev, x, w *float32, c, cv, taps int", "",
		"One token: out = silu(sum over j < taps-1 of w[j]*prev[j] + w[taps-1]*x)",
		"over channels [0, cv), and the window prev (taps-1 >= 1 rows, oldest",
		"first) moves on by one row, x its newest: each row read and written once.")
	f.Load("out", "DI", "prev", "SI", "x", "R9", "w", "DX", "c", "R8")
	p("SHLQ $2, R8")
	v.loadExp()
	v.Zero(zeroReg)
	v.chanBlocks(f.Name, f.Arg("cv"), func(b int) {
		loop := fmt.Sprintf("%s_b%d_tap", f.Name, b)
		last := fmt.Sprintf("%s_b%d_new", f.Name, b)
		p("LEAQ (SI)(AX*1), R10")
		p("LEAQ (DX)(AX*1), R11")
		for j := range b {
			p("VMOVUPS %d(R10), %s", 4*j*v.Lanes, v.convX(j))
			p("VMULPS %d(R11), %s, %s", 4*j*v.Lanes, v.convX(j), v.convAcc(j))
		}
		p("MOVQ %s, BX", f.Arg("taps"))
		p("SUBQ $2, BX")
		p("JZ %s", last)
		label(loop)
		p("MOVQ R10, R12")
		p("ADDQ R8, R10")
		p("ADDQ R8, R11")
		for j := range b {
			p("VMOVUPS %d(R10), %s", 4*j*v.Lanes, v.convX(j))
			p("VFMADD231PS %d(R11), %s, %s", 4*j*v.Lanes, v.convX(j), v.convAcc(j))
			p("VMOVUPS %s, %d(R12)", v.convX(j), 4*j*v.Lanes)
		}
		p("DECQ BX")
		p("JNZ %s", loop)
		label(last)
		p("ADDQ R8, R11")
		for j := range b {
			p("VMOVUPS %d(R9)(AX*1), %s", 4*j*v.Lanes, v.convX(j))
			p("VFMADD231PS %d(R11), %s, %s", 4*j*v.Lanes, v.convX(j), v.convAcc(j))
			p("VMOVUPS %s, %d(R10)", v.convX(j), 4*j*v.Lanes)
		}
		v.siluStore(b)
	})
	emit.Ret()
}
