//go:build amd64 && !purego

package kernels

// The assembly works on whole registers: the AVX-512 kernels on multiples
// of 16 float32, the AVX2 kernels on multiples of 8. Each ...Asm helper
// runs the kernel of p over the largest such prefix and returns its length
// (0 for Generic, which never gets here, or an unknown path).

func opVecLen(p Path, n int) int {
	switch p {
	case AVX512, AVX512VNNI:
		return n &^ 15
	case AVX2, AVXVNNI:
		return n &^ 7
	}
	return 0
}

func sumSqAsm(p Path, x []float32) (int, float32) {
	k := opVecLen(p, len(x))
	if k == 0 {
		return 0, 0
	}
	if p.wide() {
		return k, sumSqAVX512(&x[0], k)
	}
	return k, sumSqAVX2(&x[0], k)
}

func mulScaleAsm(p Path, dst, x, w []float32, s float32) int {
	k := opVecLen(p, len(x))
	if k == 0 {
		return 0
	}
	_, _ = dst[k-1], w[k-1]
	if p.wide() {
		mulScaleAVX512(&dst[0], &x[0], &w[0], s, k)
	} else {
		mulScaleAVX2(&dst[0], &x[0], &w[0], s, k)
	}
	return k
}

func addAsm(p Path, dst, a, b []float32) int {
	k := opVecLen(p, len(dst))
	if k == 0 {
		return 0
	}
	_, _ = a[k-1], b[k-1]
	if p.wide() {
		addAVX512(&dst[0], &a[0], &b[0], k)
	} else {
		addAVX2(&dst[0], &a[0], &b[0], k)
	}
	return k
}

func scaleAsm(p Path, x []float32, s float32) int {
	k := opVecLen(p, len(x))
	if k == 0 {
		return 0
	}
	if p.wide() {
		scaleAVX512(&x[0], s, k)
	} else {
		scaleAVX2(&x[0], s, k)
	}
	return k
}

func axpyAsm(p Path, dst []float32, a float32, x []float32) int {
	k := opVecLen(p, len(dst))
	if k == 0 {
		return 0
	}
	_ = x[k-1]
	if p.wide() {
		axpyAVX512(&dst[0], a, &x[0], k)
	} else {
		axpyAVX2(&dst[0], a, &x[0], k)
	}
	return k
}

func siluMulAsm(p Path, dst, gate, up []float32) int {
	k := opVecLen(p, len(dst))
	if k == 0 {
		return 0
	}
	_, _ = gate[k-1], up[k-1]
	if p.wide() {
		siluMulAVX512(&dst[0], &gate[0], &up[0], k)
	} else {
		siluMulAVX2(&dst[0], &gate[0], &up[0], k)
	}
	return k
}

func expSubAsm(p Path, x []float32, m float32) (int, float32) {
	k := opVecLen(p, len(x))
	if k == 0 {
		return 0, 0
	}
	if p.wide() {
		return k, expSubAVX512(&x[0], m, k)
	}
	return k, expSubAVX2(&x[0], m, k)
}

func maxAsm(p Path, x []float32) (int, float32) {
	k := opVecLen(p, len(x))
	if k == 0 {
		return 0, opNegInf()
	}
	if p.wide() {
		return k, maxAVX512(&x[0], k)
	}
	return k, maxAVX2(&x[0], k)
}

func indexAsm(p Path, x []float32, v float32) (int, int) {
	k := opVecLen(p, len(x))
	if k == 0 {
		return 0, -1
	}
	if p.wide() {
		return k, indexAVX512(&x[0], v, k)
	}
	return k, indexAVX2(&x[0], v, k)
}

func ropeAsm(p Path, x0, x1, cos, sin []float32) int {
	k := opVecLen(p, len(x0))
	if k == 0 {
		return 0
	}
	_, _, _ = x1[k-1], cos[k-1], sin[k-1]
	if p.wide() {
		ropeAVX512(&x0[0], &x1[0], &cos[0], &sin[0], k)
	} else {
		ropeAVX2(&x0[0], &x1[0], &cos[0], &sin[0], k)
	}
	return k
}

func f32ToF16Asm(p Path, dst []uint16, src []float32) int {
	k := opVecLen(p, len(dst))
	if k == 0 {
		return 0
	}
	_ = src[k-1]
	if p.wide() {
		f32ToF16AVX512(&dst[0], &src[0], k)
	} else {
		f32ToF16AVX2(&dst[0], &src[0], k)
	}
	return k
}

func f16ToF32Asm(p Path, dst []float32, src []uint16) int {
	k := opVecLen(p, len(dst))
	if k == 0 {
		return 0
	}
	_ = src[k-1]
	if p.wide() {
		f16ToF32AVX512(&dst[0], &src[0], k)
	} else {
		f16ToF32AVX2(&dst[0], &src[0], k)
	}
	return k
}

func dotAsm(p Path, a, b []float32) (int, float32) {
	k := opVecLen(p, len(a))
	if k == 0 {
		return 0, 0
	}
	_ = b[k-1]
	if p.wide() {
		return k, dotAVX512(&a[0], &b[0], k)
	}
	return k, dotAVX2(&a[0], &b[0], k)
}

func sigmoidMulAsm(p Path, dst, x, gate []float32) int {
	k := opVecLen(p, len(dst))
	if k == 0 {
		return 0
	}
	_, _ = x[k-1], gate[k-1]
	if p.wide() {
		sigmoidMulAVX512(&dst[0], &x[0], &gate[0], k)
	} else {
		sigmoidMulAVX2(&dst[0], &x[0], &gate[0], k)
	}
	return k
}

func mulScaleSiLUAsm(p Path, dst, x, w, z []float32, s float32) int {
	k := opVecLen(p, len(dst))
	if k == 0 {
		return 0
	}
	_, _, _ = x[k-1], w[k-1], z[k-1]
	if p.wide() {
		mulScaleSiLUAVX512(&dst[0], &x[0], &w[0], &z[0], s, k)
	} else {
		mulScaleSiLUAVX2(&dst[0], &x[0], &w[0], &z[0], s, k)
	}
	return k
}

// convRowsAsm runs the channels [0, k) of rows [0, n) of a convolution of
// taps taps over c channels (CausalConv's): out holds n rows, x n+taps-1,
// w taps; it returns k.
func convRowsAsm(p Path, out, x, w []float32, c, taps, n int) int {
	k := opVecLen(p, c)
	if k == 0 || n == 0 {
		return k
	}
	_, _, _ = out[(n-1)*c+k-1], x[(n+taps-2)*c+k-1], w[(taps-1)*c+k-1]
	if p.wide() {
		convRowsAVX512(&out[0], &x[0], &w[0], c, k, taps, n)
	} else {
		convRowsAVX2(&out[0], &x[0], &w[0], c, k, taps, n)
	}
	return k
}

// convStepAsm runs the channels [0, k) of one token of a convolution with
// a window of taps-1 >= 1 rows (CausalConv's decode); it returns k.
func convStepAsm(p Path, out, prev, x, w []float32, c, taps int) int {
	k := opVecLen(p, c)
	if k == 0 {
		return 0
	}
	_, _, _, _ = out[k-1], prev[(taps-2)*c+k-1], x[k-1], w[(taps-1)*c+k-1]
	if p.wide() {
		convStepAVX512(&out[0], &prev[0], &x[0], &w[0], c, k, taps)
	} else {
		convStepAVX2(&out[0], &prev[0], &x[0], &w[0], c, k, taps)
	}
	return k
}

// Generated by kernels/_gen/ops into ops_amd64.s. n is a positive multiple
// of the register width (16 for AVX512, 8 for AVX2); the pointers address
// n elements.

//go:noescape
func sumSqAVX512(x *float32, n int) float32

//go:noescape
func sumSqAVX2(x *float32, n int) float32

//go:noescape
func mulScaleAVX512(dst, x, w *float32, s float32, n int)

//go:noescape
func mulScaleAVX2(dst, x, w *float32, s float32, n int)

//go:noescape
func addAVX512(dst, a, b *float32, n int)

//go:noescape
func addAVX2(dst, a, b *float32, n int)

//go:noescape
func scaleAVX512(x *float32, s float32, n int)

//go:noescape
func scaleAVX2(x *float32, s float32, n int)

//go:noescape
func axpyAVX512(dst *float32, a float32, x *float32, n int)

//go:noescape
func axpyAVX2(dst *float32, a float32, x *float32, n int)

//go:noescape
func siluMulAVX512(dst, gate, up *float32, n int)

//go:noescape
func siluMulAVX2(dst, gate, up *float32, n int)

// expSub sets x[i] = exp(x[i]-m) and returns the sum.
//
//go:noescape
func expSubAVX512(x *float32, m float32, n int) float32

//go:noescape
func expSubAVX2(x *float32, m float32, n int) float32

// max ignores NaNs and returns -Inf if there is nothing else.
//
//go:noescape
func maxAVX512(x *float32, n int) float32

//go:noescape
func maxAVX2(x *float32, n int) float32

// index returns the first i with x[i] == v, or -1.
//
//go:noescape
func indexAVX512(x *float32, v float32, n int) int

//go:noescape
func indexAVX2(x *float32, v float32, n int) int

//go:noescape
func ropeAVX512(x0, x1, cos, sin *float32, n int)

//go:noescape
func ropeAVX2(x0, x1, cos, sin *float32, n int)

//go:noescape
func f32ToF16AVX512(dst *uint16, src *float32, n int)

//go:noescape
func f32ToF16AVX2(dst *uint16, src *float32, n int)

//go:noescape
func f16ToF32AVX512(dst *float32, src *uint16, n int)

//go:noescape
func f16ToF32AVX2(dst *float32, src *uint16, n int)

//go:noescape
func dotAVX512(a, b *float32, n int) float32

//go:noescape
func dotAVX2(a, b *float32, n int) float32

//go:noescape
func sigmoidMulAVX512(dst, x, gate *float32, n int)

//go:noescape
func sigmoidMulAVX2(dst, x, gate *float32, n int)

//go:noescape
func mulScaleSiLUAVX512(dst, x, w, z *float32, s float32, n int)

//go:noescape
func mulScaleSiLUAVX2(dst, x, w, z *float32, s float32, n int)

// convRows and convStep take c (the row stride) and cv, the channels they
// run, a positive multiple of the register width.
//
//go:noescape
func convRowsAVX512(out, x, w *float32, c, cv, taps, n int)

//go:noescape
func convRowsAVX2(out, x, w *float32, c, cv, taps, n int)

//go:noescape
func convStepAVX512(out, prev, x, w *float32, c, cv, taps int)

//go:noescape
func convStepAVX2(out, prev, x, w *float32, c, cv, taps int)
