package emit

import (
	"fmt"
	"strings"
)

// ISA is an instruction set a routine is written for: the register file
// and its width. The vector generators write each routine once, over an
// ISA.
type ISA struct {
	Name  string // suffix of the Go function names
	Vec   string // register prefix, "Z" or "Y"
	Lanes int    // float32 per register
}

var (
	AVX512 = ISA{Name: "AVX512", Vec: "Z", Lanes: 16}
	AVX2   = ISA{Name: "AVX2", Vec: "Y", Lanes: 8}
)

// Wide reports whether v is AVX-512.
func (v ISA) Wide() bool { return v.Vec == "Z" }

// R names vector register i at the full width.
func (v ISA) R(i int) string { return fmt.Sprintf("%s%d", v.Vec, i) }

// Zero clears register i. VXORPS on Z registers is AVX-512DQ; VPXORD does
// the same in AVX-512F.
func (v ISA) Zero(i int) {
	if v.Wide() {
		P("VPXORD %s, %s, %s", v.R(i), v.R(i), v.R(i))
	} else {
		P("VXORPS %s, %s, %s", v.R(i), v.R(i), v.R(i))
	}
}

// Fn is one routine being emitted: its name and its arguments.
type Fn struct {
	Name string
	args map[string]arg
}

// arg is an argument: its (FP) operand and Go type.
type arg struct{ operand, typ string }

// Routine emits the comment and TEXT line of base+v.Name, whose Go
// parameters (as the Go declaration gives them) and result are given, and
// returns it with its frame laid out as the Go ABI0 does: each argument
// at its size's alignment, the result ("ret") at the next multiple of 8.
func (v ISA) Routine(base, params, result string, doc ...string) Fn {
	f := Fn{Name: base + v.Name, args: map[string]arg{}}
	off := 0
	place := func(name, typ string) {
		size := 8
		switch typ {
		case "float32":
			size = 4
		case "int", "*float32", "*uint16":
		default:
			panic("routine " + f.Name + ": unknown type " + typ)
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
	Comment("%s", strings.TrimSpace(fmt.Sprintf("func %s(%s) %s", f.Name, params, result)))
	for _, d := range doc {
		Comment("%s", d)
	}
	Text(f.Name, off)
	return f
}

// Arg is the (FP) operand of argument name.
func (f Fn) Arg(name string) string {
	a, ok := f.args[name]
	if !ok {
		panic(f.Name + ": no argument " + name)
	}
	return a.operand
}

// Load loads arguments into registers, given as pairs of argument name
// and register: a float32 is broadcast into every lane of a vector
// register, anything else moved into a general one.
func (f Fn) Load(pairs ...string) {
	for i := 0; i < len(pairs); i += 2 {
		op := "MOVQ"
		if f.args[pairs[i]].typ == "float32" {
			op = "VBROADCASTSS"
		}
		P("%s %s, %s", op, f.Arg(pairs[i]), pairs[i+1])
	}
}

// Ret ends a vector routine: VZEROUPPER (the SSE code after it must not
// pay for dirty upper halves), RET and a blank line.
func Ret() {
	P("VZEROUPPER")
	P("RET")
	End()
}
