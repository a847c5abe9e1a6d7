// Command ops generates kernels/ops_amd64.s: the vector operations of a
// transformer step (kernels/ops.go) for AVX-512 and AVX2. It is a plain
// text generator, like kernels/_gen/matmul; run it from this directory:
//
//	go run . -out ../../ops_amd64.s
//
// Each routine is written once, over an isa: the register file and its
// width. Where the two instruction sets differ in more than width, an isa
// method says so and why: how a register is zeroed, where exp keeps its
// constants (registers on AVX-512, memory on AVX2), and what a compare
// writes (a mask register on AVX-512, a vector on AVX2).
//
// Every routine takes n, a positive multiple of the register width (16
// float32 for AVX512, 8 for AVX2); ops_amd64.go finishes the remainder in
// Go. The AVX-512 code uses only AVX-512F forms (VPXORD rather than
// VXORPS, VEXTRACTF64X4 rather than VEXTRACTF32X8), so it needs nothing
// beyond what Path.Supported checks.
package main

import (
	"fmt"
	"math"

	"github.com/qwenc/qwenc/kernels/_gen/internal/emit"
)

var (
	p       = emit.P
	label   = emit.Label
	comment = emit.Comment
)

func main() {
	emit.Generate("ops", func() {
		constants()
		for _, v := range []isa{avx512, avx2} {
			sumSq(v)
			mulScale(v)
			add(v)
			scale(v)
			axpy(v)
			siluMul(v)
			expSub(v)
			maxOf(v)
			index(v)
			rope(v)
			f32ToF16(v)
			f16ToF32(v)
			dot(v)
			sigmoidMul(v)
			mulScaleSiLU(v)
			convRows(v)
			convStep(v)
		}
	})
}

// isa is an instruction set the routines are written for, with the
// methods below for what the ops need beyond emit's.
type isa struct{ emit.ISA }

var (
	avx512 = isa{emit.AVX512}
	avx2   = isa{emit.AVX2}
)

// A constant is one 32-byte row of a value repeated eight times: AVX2
// reads the row as a memory operand, AVX-512 broadcasts its first lane.
type constant struct {
	name    string
	bits    uint32
	integer bool // used by integer instructions (VPBROADCASTD, not VBROADCASTSS)
}

func f32(x float64) uint32 { return math.Float32bits(float32(x)) }

// The constants of exp (Cephes expf): log2(e); ln 2 split into C1 (exact
// in few bits, so n*C1 is exact) and C2; the polynomial of e^r on
// |r| <= ln2/2; the clamp range; the exponent bias. On AVX-512 loadExp
// puts them in Z16 upwards, in this order.
var expConsts = []constant{
	{name: "log2e", bits: f32(1.44269504088896341)},
	{name: "expC1", bits: f32(0.693359375)},
	{name: "expC2", bits: f32(-2.12194440e-4)},
	{name: "expP0", bits: f32(1.9875691500e-4)},
	{name: "expP1", bits: f32(1.3981999507e-3)},
	{name: "expP2", bits: f32(8.3334519073e-3)},
	{name: "expP3", bits: f32(4.1665795894e-2)},
	{name: "expP4", bits: f32(1.6666665459e-1)},
	{name: "expP5", bits: f32(5.0000001201e-1)},
	{name: "one", bits: f32(1)},
	{name: "expHi", bits: f32(89)},
	{name: "expLo", bits: f32(-87.33)},
	{name: "expBias", bits: 127, integer: true},
}

var negInf = constant{name: "negInf", bits: 0xff800000}

// expFirstReg is where loadExp puts the first exp constant on AVX-512.
const expFirstReg = 16

func constants() {
	comment("Vector kernels for ops_amd64.go: n is always a positive multiple of the")
	comment("register width (16 float32 for the AVX512 functions, 8 for AVX2); the Go")
	comment("side finishes any remainder.")
	emit.End()
	for _, c := range append(expConsts, negInf) {
		row := make([]uint32, 8)
		for i := range row {
			row[i] = c.bits
		}
		emit.Data(c.name, row...)
	}
	emit.End()
}

// k is the operand of exp constant name. AVX-512's 32 registers hold all
// of them, loaded once per call by loadExp; AVX2's 16 cannot spare 13, so
// every use reads the constant's row from memory.
func (v isa) k(name string) string {
	for i, c := range expConsts {
		if c.name == name {
			if v.Wide() {
				return v.R(expFirstReg + i)
			}
			return name + "<>(SB)"
		}
	}
	panic("no exp constant " + name)
}

// loadExp loads the exp constants into their registers (AVX-512 only).
func (v isa) loadExp() {
	if !v.Wide() {
		return
	}
	for i, c := range expConsts {
		op := "VBROADCASTSS"
		if c.integer {
			op = "VPBROADCASTD"
		}
		p("%s %s<>(SB), %s", op, c.name, v.R(expFirstReg+i))
	}
}

// exp sets register x to exp(x), using t1, t2 and t3 as scratch (Cephes
// expf: x = n·ln2 + r with |r| <= ln2/2, a degree-6 polynomial for e^r,
// then scaling by 2^n built in the exponent field). The argument is first
// clamped to [expLo, expHi] = [-87.33, 89] so that n stays in [-126, 128]:
// below, 2^n is a normal float and exp bottoms out at about 1e-38 instead
// of going subnormal; at the top, n = 128 puts 255 in the exponent field,
// so 2^n and the result are +Inf. Overflow must give Inf rather than a
// large finite value, or silu(g) = g/(1+exp(-g)) would grow again for g
// below -88 (g/3e38 is not small for g = -1e30). Arguments in (88.38,
// 88.72) that would still have a finite exp also give Inf; no caller
// needs those values.
func (v isa) exp(x, t1, t2, t3 int) {
	X, T1, T2, T3 := v.R(x), v.R(t1), v.R(t2), v.R(t3)
	p("VMINPS %s, %s, %s", v.k("expHi"), X, X)
	p("VMAXPS %s, %s, %s", v.k("expLo"), X, X)
	p("VMULPS %s, %s, %s", v.k("log2e"), X, T1)
	p("VCVTPS2DQ %s, %s", T1, T2)
	p("VCVTDQ2PS %s, %s", T2, T1)
	p("VFNMADD231PS %s, %s, %s", v.k("expC1"), T1, X)
	p("VFNMADD231PS %s, %s, %s", v.k("expC2"), T1, X)
	p("VMOVUPS %s, %s", v.k("expP0"), T1) // memory on AVX2: not VMOVAPS
	for _, c := range []string{"expP1", "expP2", "expP3", "expP4", "expP5"} {
		p("VFMADD213PS %s, %s, %s", v.k(c), X, T1)
	}
	p("VMULPS %s, %s, %s", X, X, T3)
	p("VFMADD213PS %s, %s, %s", X, T3, T1)
	p("VADDPS %s, %s, %s", v.k("one"), T1, T1)
	p("VPADDD %s, %s, %s", v.k("expBias"), T2, T2)
	p("VPSLLD $23, %s, %s", T2, T2)
	p("VMULPS %s, %s, %s", T2, T1, X)
}

// reduce combines the accumulators regs (a power of two of them, at least
// two) with op (ADD or MAX) and returns the result as f's float32: first
// pairwise into regs[0], then across its lanes into lane 0, halving the
// width each step, with regs[1] as scratch.
func (v isa) reduce(f emit.Fn, op string, regs ...int) {
	for d := 1; d < len(regs); d *= 2 {
		for i := 0; i+d < len(regs); i += 2 * d {
			a, b := v.R(regs[i]), v.R(regs[i+d])
			p("V%sPS %s, %s, %s", op, b, a, a)
		}
	}
	r, t := regs[0], regs[1]
	if v.Wide() {
		p("VEXTRACTF64X4 $1, Z%d, Y%d", r, t)
		p("V%sPS Y%d, Y%d, Y%d", op, t, r, r)
	}
	p("VEXTRACTF128 $1, Y%d, X%d", r, t)
	p("V%sPS X%d, X%d, X%d", op, t, r, r)
	p("VMOVHLPS X%d, X%d, X%d", r, r, t)
	p("V%sPS X%d, X%d, X%d", op, t, r, r)
	p("VMOVSHDUP X%d, X%d", r, t)
	p("V%sSS X%d, X%d, X%d", op, t, r, r)
	p("VMOVSS X%d, %s", r, f.Arg("ret"))
}

// ptr is a pointer register a loop advances; size is the bytes of one of
// its elements (4 for float32, 2 for binary16).
type ptr struct {
	reg  string
	size int
}

var (
	pDI   = ptr{"DI", 4}
	pSI   = ptr{"SI", 4}
	pDX   = ptr{"DX", 4}
	pBX   = ptr{"BX", 4}
	pDI16 = ptr{"DI", 2}
	pSI16 = ptr{"SI", 2}
)

// at is the memory operand of the elements of register j of an unrolled
// iteration.
func (v isa) at(q ptr, j int) string {
	if off := j * v.Lanes * q.size; off != 0 {
		return fmt.Sprintf("%d(%s)", off, q.reg)
	}
	return "(" + q.reg + ")"
}

// loop emits the loop of a routine that walks its vectors front to back,
// CX elements left: unroll registers per iteration while that many are
// left, then one register at a time. Each phase emits one instruction (or
// sequence) for register j of an iteration, at v.at(q, j) of every
// pointer q; the phases are emitted one after the other, each for every
// register, so the registers' chains are independent and interleaved. The
// one-register loop runs at most unroll-1 times: with unroll 2 it is
// straight-line code, with unroll 1 the only loop (entered without a test,
// as n > 0). The label name_done ends it.
func (v isa) loop(name string, unroll int, ptrs []ptr, phases ...func(j int)) {
	body := func(u int) {
		for _, ph := range phases {
			for j := range u {
				ph(j)
			}
		}
	}
	step := func(u int) {
		for _, q := range ptrs {
			p("ADDQ $%d, %s", u*v.Lanes*q.size, q.reg)
		}
		p("SUBQ $%d, CX", u*v.Lanes)
	}
	one := fmt.Sprintf("%s_%d", name, v.Lanes)
	if unroll == 1 {
		label(one)
		body(1)
		step(1)
		p("JNZ %s", one)
		return
	}
	all := fmt.Sprintf("%s_%d", name, unroll*v.Lanes)
	done := name + "_done"
	label(all)
	p("CMPQ CX, $%d", unroll*v.Lanes)
	p("JL %s", one)
	body(unroll)
	step(unroll)
	p("JMP %s", all)
	label(one)
	p("TESTQ CX, CX")
	p("JZ %s", done)
	body(1)
	if unroll > 2 {
		step(1)
		p("JMP %s", one)
	}
	label(done)
}

// The streaming routines unroll four registers: enough independent chains
// to cover the latency of an FMA or an add, and four cache lines (AVX-512)
// per iteration.
const unroll = 4

func sumSq(v isa) {
	f := v.Routine("sumSq", "x *float32, n int", "float32")
	f.Load("x", "SI", "n", "CX")
	for j := range unroll {
		v.Zero(j)
	}
	v.loop(f.Name, unroll, []ptr{pSI},
		func(j int) { p("VMOVUPS %s, %s", v.at(pSI, j), v.R(4+j)) },
		func(j int) { p("VFMADD231PS %s, %s, %s", v.R(4+j), v.R(4+j), v.R(j)) })
	v.reduce(f, "ADD", 0, 1, 2, 3)
	emit.Ret()
}

func mulScale(v isa) {
	f := v.Routine("mulScale", "dst, x, w *float32, s float32, n int", "")
	f.Load("dst", "DI", "x", "SI", "w", "DX", "s", v.R(8), "n", "CX")
	v.loop(f.Name, unroll, []ptr{pSI, pDX, pDI},
		func(j int) { p("VMULPS %s, %s, %s", v.at(pSI, j), v.R(8), v.R(j)) },
		func(j int) { p("VMULPS %s, %s, %s", v.at(pDX, j), v.R(j), v.R(j)) },
		func(j int) { p("VMOVUPS %s, %s", v.R(j), v.at(pDI, j)) })
	emit.Ret()
}

func add(v isa) {
	f := v.Routine("add", "dst, a, b *float32, n int", "")
	f.Load("dst", "DI", "a", "SI", "b", "DX", "n", "CX")
	v.loop(f.Name, unroll, []ptr{pSI, pDX, pDI},
		func(j int) { p("VMOVUPS %s, %s", v.at(pSI, j), v.R(j)) },
		func(j int) { p("VADDPS %s, %s, %s", v.at(pDX, j), v.R(j), v.R(j)) },
		func(j int) { p("VMOVUPS %s, %s", v.R(j), v.at(pDI, j)) })
	emit.Ret()
}

func scale(v isa) {
	f := v.Routine("scale", "x *float32, s float32, n int", "")
	f.Load("x", "DI", "s", v.R(8), "n", "CX")
	v.loop(f.Name, unroll, []ptr{pDI},
		func(j int) { p("VMULPS %s, %s, %s", v.at(pDI, j), v.R(8), v.R(j)) },
		func(j int) { p("VMOVUPS %s, %s", v.R(j), v.at(pDI, j)) })
	emit.Ret()
}

func axpy(v isa) {
	f := v.Routine("axpy", "dst *float32, a float32, x *float32, n int", "")
	f.Load("dst", "DI", "a", v.R(8), "x", "SI", "n", "CX")
	v.loop(f.Name, unroll, []ptr{pSI, pDI},
		func(j int) { p("VMOVUPS %s, %s", v.at(pDI, j), v.R(j)) },
		func(j int) { p("VFMADD231PS %s, %s, %s", v.at(pSI, j), v.R(8), v.R(j)) },
		func(j int) { p("VMOVUPS %s, %s", v.R(j), v.at(pDI, j)) })
	emit.Ret()
}

// The exp routines unroll two registers, two independent exp chains for
// the out-of-order core to overlap. Register j of an iteration computes
// in expReg(j) with the three after it as scratch: 0-3 and 8-11, clear of
// 4-7 (the routines' other values), 12-15 (accumulators, the subtrahend
// and zero) and AVX-512's constants from Z16.
const (
	expUnroll = 2
	minuend   = 14 // expSub's m
	zeroReg   = 15 // siluMul's 0, for the negation
)

func expReg(j int) int { return 8 * j }

func (v isa) expAt(j int) { e := expReg(j); v.exp(e, e+1, e+2, e+3) }

func siluMul(v isa) {
	f := v.Routine("siluMul", "dst, gate, up *float32, n int", "")
	f.Load("dst", "DI", "gate", "SI", "up", "DX", "n", "CX")
	v.loadExp()
	v.Zero(zeroReg)
	g := func(j int) string { return v.R(5 + j) }
	phases := []func(int){func(j int) { p("VMOVUPS %s, %s", v.at(pSI, j), g(j)) }}
	phases = append(phases, v.silu(g)...)
	phases = append(phases,
		func(j int) { p("VMULPS %s, %s, %s", v.at(pDX, j), g(j), g(j)) },
		func(j int) { p("VMOVUPS %s, %s", g(j), v.at(pDI, j)) })
	v.loop(f.Name, expUnroll, []ptr{pSI, pDX, pDI}, phases...)
	emit.Ret()
}

// silu is the phases that replace register g(j) by silu(g) = g/(1+exp(-g)),
// computing exp in expReg(j) and the three after it; the routine has
// loaded the exp constants and cleared zeroReg.
func (v isa) silu(g func(j int) string) []func(int) {
	e := func(j int) string { return v.R(expReg(j)) }
	return []func(int){
		func(j int) { p("VSUBPS %s, %s, %s", g(j), v.R(zeroReg), e(j)) },
		v.expAt,
		func(j int) { p("VADDPS %s, %s, %s", v.k("one"), e(j), e(j)) },
		func(j int) { p("VDIVPS %s, %s, %s", e(j), g(j), g(j)) }}
}

func expSub(v isa) {
	f := v.Routine("expSub", "x *float32, m float32, n int", "float32",
		"Sets x[i] = exp(x[i]-m) and returns the sum.")
	f.Load("x", "SI", "m", v.R(minuend), "n", "CX")
	v.loadExp()
	acc := func(j int) int { return 12 + j }
	for j := range expUnroll {
		v.Zero(acc(j))
	}
	e := func(j int) string { return v.R(expReg(j)) }
	v.loop(f.Name, expUnroll, []ptr{pSI},
		func(j int) { p("VMOVUPS %s, %s", v.at(pSI, j), e(j)) },
		func(j int) { p("VSUBPS %s, %s, %s", v.R(minuend), e(j), e(j)) },
		v.expAt,
		func(j int) { p("VMOVUPS %s, %s", e(j), v.at(pSI, j)) },
		func(j int) { p("VADDPS %s, %s, %s", e(j), v.R(acc(j)), v.R(acc(j))) })
	v.reduce(f, "ADD", acc(0), acc(1))
	emit.Ret()
}

func maxOf(v isa) {
	f := v.Routine("max", "x *float32, n int", "float32",
		"Ignores NaNs and returns -Inf if there is nothing else: VMAXPS returns",
		"its second source when either is NaN, and the data is the first source,",
		"the running maximum the second.")
	f.Load("x", "SI", "n", "CX")
	p("VBROADCASTSS %s<>(SB), %s", negInf.name, v.R(0))
	for j := 1; j < unroll; j++ {
		p("VMOVAPS %s, %s", v.R(0), v.R(j))
	}
	v.loop(f.Name, unroll, []ptr{pSI},
		func(j int) { p("VMOVUPS %s, %s", v.at(pSI, j), v.R(4+j)) },
		func(j int) { p("VMAXPS %s, %s, %s", v.R(j), v.R(4+j), v.R(j)) })
	v.reduce(f, "MAX", 0, 1, 2, 3)
	emit.Ret()
}

// cmpEq compares the elements at mem with register val for equality into
// the j-th compare result of index. AVX-512 compares write mask registers
// (K1 up); AVX2 has none, so its compares write all-ones lanes into
// vector registers (from Y2).
func (v isa) cmpEq(mem string, val, j int) {
	if v.Wide() {
		p("VCMPPS $0, %s, %s, K%d", mem, v.R(val), 1+j)
	} else {
		p("VCMPPS $0, %s, %s, %s", mem, v.R(val), v.R(2+j))
	}
}

// anyEq clears ZF if any of the four compare results has a lane set:
// KORTESTW of two ORs of masks on AVX-512, VMOVMSKPS of the OR of the
// vectors on AVX2.
func (v isa) anyEq() {
	if v.Wide() {
		p("KORW K1, K2, K5")
		p("KORW K3, K4, K6")
		p("KORTESTW K5, K6")
		return
	}
	p("VORPS Y2, Y3, Y2")
	p("VORPS Y4, Y5, Y4")
	p("VORPS Y2, Y4, Y2")
	p("VMOVMSKPS Y2, BX")
	p("TESTL BX, BX")
}

// eqBits moves the lanes of compare result 0 into the low bits of reg.
func (v isa) eqBits(reg string) {
	if v.Wide() {
		p("KMOVW K1, %s", reg)
	} else {
		p("VMOVMSKPS Y2, %s", reg)
	}
}

func index(v isa) {
	f := v.Routine("index", "x *float32, v float32, n int", "int",
		"Returns the first i with x[i] == v, or -1. Four registers at a time",
		"find the group that holds it, one at a time the register.")
	f.Load("x", "SI", "v", v.R(1), "n", "CX")
	p("XORQ AX, AX")
	all := fmt.Sprintf("%s_%d", f.Name, unroll*v.Lanes)
	one := fmt.Sprintf("%s_%d", f.Name, v.Lanes)
	label(all)
	p("LEAQ %d(AX), DX", unroll*v.Lanes)
	p("CMPQ DX, CX")
	p("JG %s", one)
	for j := range unroll {
		v.cmpEq(v.at(pSI, j)+"(AX*4)", 1, j)
	}
	v.anyEq()
	p("JNZ %s", one)
	p("MOVQ DX, AX")
	p("JMP %s", all)
	label(one)
	p("CMPQ AX, CX")
	p("JGE %s_none", f.Name)
	v.cmpEq("(SI)(AX*4)", 1, 0)
	v.eqBits("DX")
	p("TESTL DX, DX")
	p("JNZ %s_found", f.Name)
	p("ADDQ $%d, AX", v.Lanes)
	p("JMP %s", one)
	label(f.Name + "_found")
	p("BSFL DX, DX")
	p("ADDQ DX, AX")
	p("MOVQ AX, %s", f.Arg("ret"))
	p("VZEROUPPER")
	p("RET")
	label(f.Name + "_none")
	p("MOVQ $-1, %s", f.Arg("ret"))
	emit.Ret()
}

func rope(v isa) {
	f := v.Routine("rope", "x0, x1, cos, sin *float32, n int", "",
		"x0' = x0*cos - x1*sin, x1' = x1*cos + x0*sin.")
	f.Load("x0", "DI", "x1", "SI", "cos", "DX", "sin", "BX", "n", "CX")
	ptrs := []ptr{pDI, pSI, pDX, pBX}
	x0, x1, c, s, y0, y1 := v.R(0), v.R(1), v.R(2), v.R(3), v.R(4), v.R(5)
	v.loop(f.Name, 1, ptrs,
		func(j int) {
			for i, q := range ptrs {
				p("VMOVUPS %s, %s", v.at(q, j), v.R(i))
			}
		},
		func(int) {
			p("VMULPS %s, %s, %s", c, x0, y0)
			p("VFNMADD231PS %s, %s, %s", s, x1, y0)
			p("VMULPS %s, %s, %s", c, x1, y1)
			p("VFMADD231PS %s, %s, %s", s, x0, y1)
		},
		func(j int) {
			p("VMOVUPS %s, %s", y0, v.at(pDI, j))
			p("VMOVUPS %s, %s", y1, v.at(pSI, j))
		})
	emit.Ret()
}

func f32ToF16(v isa) {
	f := v.Routine("f32ToF16", "dst *uint16, src *float32, n int", "",
		"Rounds to nearest even (immediate 0).")
	f.Load("dst", "DI", "src", "SI", "n", "CX")
	v.loop(f.Name, unroll, []ptr{pSI, pDI16},
		func(j int) { p("VMOVUPS %s, %s", v.at(pSI, j), v.R(j)) },
		func(j int) { p("VCVTPS2PH $0, %s, %s", v.R(j), v.at(pDI16, j)) })
	emit.Ret()
}

func f16ToF32(v isa) {
	f := v.Routine("f16ToF32", "dst *float32, src *uint16, n int", "")
	f.Load("dst", "DI", "src", "SI", "n", "CX")
	v.loop(f.Name, unroll, []ptr{pSI16, pDI},
		func(j int) { p("VCVTPH2PS %s, %s", v.at(pSI16, j), v.R(j)) },
		func(j int) { p("VMOVUPS %s, %s", v.R(j), v.at(pDI, j)) })
	emit.Ret()
}
