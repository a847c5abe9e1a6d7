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
	"strings"

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
		}
	})
}

// isa is an instruction set the routines are written for.
type isa struct {
	name  string // suffix of the Go function names
	vec   string // register prefix, "Z" or "Y"
	lanes int    // float32 per register
}

var (
	avx512 = isa{name: "AVX512", vec: "Z", lanes: 16}
	avx2   = isa{name: "AVX2", vec: "Y", lanes: 8}
)

func (v isa) wide() bool { return v.vec == "Z" }

// r names vector register i at the full width.
func (v isa) r(i int) string { return fmt.Sprintf("%s%d", v.vec, i) }

// zero clears register i. VXORPS on Z registers is AVX-512DQ; VPXORD does
// the same in AVX-512F.
func (v isa) zero(i int) {
	if v.wide() {
		p("VPXORD %s, %s, %s", v.r(i), v.r(i), v.r(i))
	} else {
		p("VXORPS %s, %s, %s", v.r(i), v.r(i), v.r(i))
	}
}

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
			if v.wide() {
				return v.r(expFirstReg + i)
			}
			return name + "<>(SB)"
		}
	}
	panic("no exp constant " + name)
}

// loadExp loads the exp constants into their registers (AVX-512 only).
func (v isa) loadExp() {
	if !v.wide() {
		return
	}
	for i, c := range expConsts {
		op := "VBROADCASTSS"
		if c.integer {
			op = "VPBROADCASTD"
		}
		p("%s %s<>(SB), %s", op, c.name, v.r(expFirstReg+i))
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
	X, T1, T2, T3 := v.r(x), v.r(t1), v.r(t2), v.r(t3)
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
func (v isa) reduce(f fn, op string, regs ...int) {
	for d := 1; d < len(regs); d *= 2 {
		for i := 0; i+d < len(regs); i += 2 * d {
			a, b := v.r(regs[i]), v.r(regs[i+d])
			p("V%sPS %s, %s, %s", op, b, a, a)
		}
	}
	r, t := regs[0], regs[1]
	if v.wide() {
		p("VEXTRACTF64X4 $1, Z%d, Y%d", r, t)
		p("V%sPS Y%d, Y%d, Y%d", op, t, r, r)
	}
	p("VEXTRACTF128 $1, Y%d, X%d", r, t)
	p("V%sPS X%d, X%d, X%d", op, t, r, r)
	p("VMOVHLPS X%d, X%d, X%d", r, r, t)
	p("V%sPS X%d, X%d, X%d", op, t, r, r)
	p("VMOVSHDUP X%d, X%d", r, t)
	p("V%sSS X%d, X%d, X%d", op, t, r, r)
	p("VMOVSS X%d, %s", r, f.arg("ret"))
}

// fn is one routine being emitted: its name and its arguments.
type fn struct {
	name string
	args map[string]arg
}

// arg is an argument: its (FP) operand and Go type.
type arg struct{ operand, typ string }

// routine emits the comment and TEXT line of base+v.name, whose Go
// parameters (as ops_amd64.go declares them) and result are given, and
// returns it with its frame laid out as the Go ABI0 does: each argument
// at its size's alignment, the result ("ret") at the next multiple of 8.
func (v isa) routine(base, params, result string, doc ...string) fn {
	f := fn{name: base + v.name, args: map[string]arg{}}
	off := 0
	place := func(name, typ string) {
		size := 8
		switch typ {
		case "float32":
			size = 4
		case "int", "*float32", "*uint16":
		default:
			panic("routine " + f.name + ": unknown type " + typ)
		}
		off = (off + size - 1) &^ (size - 1)
		f.args[name] = arg{fmt.Sprintf("%s+%d(FP)", name, off), typ}
		off += size
	}
	var names []string
	for _, param := range strings.Split(params, ",") {
		words := strings.Fields(param)
		names = append(names, words[0])
		if len(words) == 2 {
			for _, n := range names {
				place(n, words[1])
			}
			names = nil
		}
	}
	if result != "" {
		off = (off + 7) &^ 7
		place("ret", result)
	}
	comment("%s", strings.TrimSpace(fmt.Sprintf("func %s(%s) %s", f.name, params, result)))
	for _, d := range doc {
		comment("%s", d)
	}
	emit.Text(f.name, off)
	return f
}

// arg is the (FP) operand of argument name.
func (f fn) arg(name string) string {
	a, ok := f.args[name]
	if !ok {
		panic(f.name + ": no argument " + name)
	}
	return a.operand
}

// load loads arguments into registers, given as pairs of argument name
// and register: a float32 is broadcast into every lane of a vector
// register, anything else moved into a general one.
func (f fn) load(pairs ...string) {
	for i := 0; i < len(pairs); i += 2 {
		op := "MOVQ"
		if f.args[pairs[i]].typ == "float32" {
			op = "VBROADCASTSS"
		}
		p("%s %s, %s", op, f.arg(pairs[i]), pairs[i+1])
	}
}

func ret() {
	p("VZEROUPPER")
	p("RET")
	emit.End()
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
	if off := j * v.lanes * q.size; off != 0 {
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
			p("ADDQ $%d, %s", u*v.lanes*q.size, q.reg)
		}
		p("SUBQ $%d, CX", u*v.lanes)
	}
	one := fmt.Sprintf("%s_%d", name, v.lanes)
	if unroll == 1 {
		label(one)
		body(1)
		step(1)
		p("JNZ %s", one)
		return
	}
	all := fmt.Sprintf("%s_%d", name, unroll*v.lanes)
	done := name + "_done"
	label(all)
	p("CMPQ CX, $%d", unroll*v.lanes)
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
	f := v.routine("sumSq", "x *float32, n int", "float32")
	f.load("x", "SI", "n", "CX")
	for j := range unroll {
		v.zero(j)
	}
	v.loop(f.name, unroll, []ptr{pSI},
		func(j int) { p("VMOVUPS %s, %s", v.at(pSI, j), v.r(4+j)) },
		func(j int) { p("VFMADD231PS %s, %s, %s", v.r(4+j), v.r(4+j), v.r(j)) })
	v.reduce(f, "ADD", 0, 1, 2, 3)
	ret()
}

func mulScale(v isa) {
	f := v.routine("mulScale", "dst, x, w *float32, s float32, n int", "")
	f.load("dst", "DI", "x", "SI", "w", "DX", "s", v.r(8), "n", "CX")
	v.loop(f.name, unroll, []ptr{pSI, pDX, pDI},
		func(j int) { p("VMULPS %s, %s, %s", v.at(pSI, j), v.r(8), v.r(j)) },
		func(j int) { p("VMULPS %s, %s, %s", v.at(pDX, j), v.r(j), v.r(j)) },
		func(j int) { p("VMOVUPS %s, %s", v.r(j), v.at(pDI, j)) })
	ret()
}

func add(v isa) {
	f := v.routine("add", "dst, a, b *float32, n int", "")
	f.load("dst", "DI", "a", "SI", "b", "DX", "n", "CX")
	v.loop(f.name, unroll, []ptr{pSI, pDX, pDI},
		func(j int) { p("VMOVUPS %s, %s", v.at(pSI, j), v.r(j)) },
		func(j int) { p("VADDPS %s, %s, %s", v.at(pDX, j), v.r(j), v.r(j)) },
		func(j int) { p("VMOVUPS %s, %s", v.r(j), v.at(pDI, j)) })
	ret()
}

func scale(v isa) {
	f := v.routine("scale", "x *float32, s float32, n int", "")
	f.load("x", "DI", "s", v.r(8), "n", "CX")
	v.loop(f.name, unroll, []ptr{pDI},
		func(j int) { p("VMULPS %s, %s, %s", v.at(pDI, j), v.r(8), v.r(j)) },
		func(j int) { p("VMOVUPS %s, %s", v.r(j), v.at(pDI, j)) })
	ret()
}

func axpy(v isa) {
	f := v.routine("axpy", "dst *float32, a float32, x *float32, n int", "")
	f.load("dst", "DI", "a", v.r(8), "x", "SI", "n", "CX")
	v.loop(f.name, unroll, []ptr{pSI, pDI},
		func(j int) { p("VMOVUPS %s, %s", v.at(pDI, j), v.r(j)) },
		func(j int) { p("VFMADD231PS %s, %s, %s", v.at(pSI, j), v.r(8), v.r(j)) },
		func(j int) { p("VMOVUPS %s, %s", v.r(j), v.at(pDI, j)) })
	ret()
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
	f := v.routine("siluMul", "dst, gate, up *float32, n int", "")
	f.load("dst", "DI", "gate", "SI", "up", "DX", "n", "CX")
	v.loadExp()
	v.zero(zeroReg)
	g := func(j int) string { return v.r(5 + j) }
	e := func(j int) string { return v.r(expReg(j)) }
	v.loop(f.name, expUnroll, []ptr{pSI, pDX, pDI},
		func(j int) { p("VMOVUPS %s, %s", v.at(pSI, j), g(j)) },
		func(j int) { p("VSUBPS %s, %s, %s", g(j), v.r(zeroReg), e(j)) },
		v.expAt,
		func(j int) { p("VADDPS %s, %s, %s", v.k("one"), e(j), e(j)) },
		func(j int) { p("VDIVPS %s, %s, %s", e(j), g(j), g(j)) },
		func(j int) { p("VMULPS %s, %s, %s", v.at(pDX, j), g(j), g(j)) },
		func(j int) { p("VMOVUPS %s, %s", g(j), v.at(pDI, j)) })
	ret()
}

func expSub(v isa) {
	f := v.routine("expSub", "x *float32, m float32, n int", "float32",
		"Sets x[i] = exp(x[i]-m) and returns the sum.")
	f.load("x", "SI", "m", v.r(minuend), "n", "CX")
	v.loadExp()
	acc := func(j int) int { return 12 + j }
	for j := range expUnroll {
		v.zero(acc(j))
	}
	e := func(j int) string { return v.r(expReg(j)) }
	v.loop(f.name, expUnroll, []ptr{pSI},
		func(j int) { p("VMOVUPS %s, %s", v.at(pSI, j), e(j)) },
		func(j int) { p("VSUBPS %s, %s, %s", v.r(minuend), e(j), e(j)) },
		v.expAt,
		func(j int) { p("VMOVUPS %s, %s", e(j), v.at(pSI, j)) },
		func(j int) { p("VADDPS %s, %s, %s", e(j), v.r(acc(j)), v.r(acc(j))) })
	v.reduce(f, "ADD", acc(0), acc(1))
	ret()
}

func maxOf(v isa) {
	f := v.routine("max", "x *float32, n int", "float32",
		"Ignores NaNs and returns -Inf if there is nothing else: VMAXPS returns",
		"its second source when either is NaN, and the data is the first source,",
		"the running maximum the second.")
	f.load("x", "SI", "n", "CX")
	p("VBROADCASTSS %s<>(SB), %s", negInf.name, v.r(0))
	for j := 1; j < unroll; j++ {
		p("VMOVAPS %s, %s", v.r(0), v.r(j))
	}
	v.loop(f.name, unroll, []ptr{pSI},
		func(j int) { p("VMOVUPS %s, %s", v.at(pSI, j), v.r(4+j)) },
		func(j int) { p("VMAXPS %s, %s, %s", v.r(j), v.r(4+j), v.r(j)) })
	v.reduce(f, "MAX", 0, 1, 2, 3)
	ret()
}

// cmpEq compares the elements at mem with register val for equality into
// the j-th compare result of index. AVX-512 compares write mask registers
// (K1 up); AVX2 has none, so its compares write all-ones lanes into
// vector registers (from Y2).
func (v isa) cmpEq(mem string, val, j int) {
	if v.wide() {
		p("VCMPPS $0, %s, %s, K%d", mem, v.r(val), 1+j)
	} else {
		p("VCMPPS $0, %s, %s, %s", mem, v.r(val), v.r(2+j))
	}
}

// anyEq clears ZF if any of the four compare results has a lane set:
// KORTESTW of two ORs of masks on AVX-512, VMOVMSKPS of the OR of the
// vectors on AVX2.
func (v isa) anyEq() {
	if v.wide() {
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
	if v.wide() {
		p("KMOVW K1, %s", reg)
	} else {
		p("VMOVMSKPS Y2, %s", reg)
	}
}

func index(v isa) {
	f := v.routine("index", "x *float32, v float32, n int", "int",
		"Returns the first i with x[i] == v, or -1. Four registers at a time",
		"find the group that holds it, one at a time the register.")
	f.load("x", "SI", "v", v.r(1), "n", "CX")
	p("XORQ AX, AX")
	all := fmt.Sprintf("%s_%d", f.name, unroll*v.lanes)
	one := fmt.Sprintf("%s_%d", f.name, v.lanes)
	label(all)
	p("LEAQ %d(AX), DX", unroll*v.lanes)
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
	p("JGE %s_none", f.name)
	v.cmpEq("(SI)(AX*4)", 1, 0)
	v.eqBits("DX")
	p("TESTL DX, DX")
	p("JNZ %s_found", f.name)
	p("ADDQ $%d, AX", v.lanes)
	p("JMP %s", one)
	label(f.name + "_found")
	p("BSFL DX, DX")
	p("ADDQ DX, AX")
	p("MOVQ AX, %s", f.arg("ret"))
	p("VZEROUPPER")
	p("RET")
	label(f.name + "_none")
	p("MOVQ $-1, %s", f.arg("ret"))
	ret()
}

func rope(v isa) {
	f := v.routine("rope", "x0, x1, cos, sin *float32, n int", "",
		"x0' = x0*cos - x1*sin, x1' = x1*cos + x0*sin.")
	f.load("x0", "DI", "x1", "SI", "cos", "DX", "sin", "BX", "n", "CX")
	ptrs := []ptr{pDI, pSI, pDX, pBX}
	x0, x1, c, s, y0, y1 := v.r(0), v.r(1), v.r(2), v.r(3), v.r(4), v.r(5)
	v.loop(f.name, 1, ptrs,
		func(j int) {
			for i, q := range ptrs {
				p("VMOVUPS %s, %s", v.at(q, j), v.r(i))
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
	ret()
}

func f32ToF16(v isa) {
	f := v.routine("f32ToF16", "dst *uint16, src *float32, n int", "",
		"Rounds to nearest even (immediate 0).")
	f.load("dst", "DI", "src", "SI", "n", "CX")
	v.loop(f.name, unroll, []ptr{pSI, pDI16},
		func(j int) { p("VMOVUPS %s, %s", v.at(pSI, j), v.r(j)) },
		func(j int) { p("VCVTPS2PH $0, %s, %s", v.r(j), v.at(pDI16, j)) })
	ret()
}

func f16ToF32(v isa) {
	f := v.routine("f16ToF32", "dst *float32, src *uint16, n int", "")
	f.load("dst", "DI", "src", "SI", "n", "CX")
	v.loop(f.name, unroll, []ptr{pSI16, pDI},
		func(j int) { p("VCVTPH2PS %s, %s", v.at(pSI16, j), v.r(j)) },
		func(j int) { p("VMOVUPS %s, %s", v.r(j), v.at(pDI, j)) })
	ret()
}
