//go:build amd64 && !purego

#include "textflag.h"

// Vector kernels for ops_amd64.go. n is always a positive multiple of the
// register width (16 float32 for the AVX512 functions, 8 for AVX2); the Go
// side finishes any remainder. The AVX-512 code uses only AVX-512F forms
// (VPXORD rather than VXORPS, VEXTRACTF64X4 rather than VEXTRACTF32X8), so
// it needs nothing beyond what Path.Supported checks.
//
// Constants live in one table of 32-byte rows, each a float32 (or int32)
// repeated eight times: AVX2 uses a row as a memory operand, AVX-512
// broadcasts its first element into a register.

#define LOG2E 0
#define C1 32
#define C2 64
#define P0 96
#define P1 128
#define P2 160
#define P3 192
#define P4 224
#define P5 256
#define ONE 288
#define HI 320
#define LO 352
#define I127 384
#define NEGINF 416

DATA consts<>+0(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA consts<>+8(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA consts<>+16(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA consts<>+24(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA consts<>+32(SB)/8, $0x3f3180003f318000
DATA consts<>+40(SB)/8, $0x3f3180003f318000
DATA consts<>+48(SB)/8, $0x3f3180003f318000
DATA consts<>+56(SB)/8, $0x3f3180003f318000
DATA consts<>+64(SB)/8, $0xb95e8083b95e8083
DATA consts<>+72(SB)/8, $0xb95e8083b95e8083
DATA consts<>+80(SB)/8, $0xb95e8083b95e8083
DATA consts<>+88(SB)/8, $0xb95e8083b95e8083
DATA consts<>+96(SB)/8, $0x3950696739506967
DATA consts<>+104(SB)/8, $0x3950696739506967
DATA consts<>+112(SB)/8, $0x3950696739506967
DATA consts<>+120(SB)/8, $0x3950696739506967
DATA consts<>+128(SB)/8, $0x3ab743ce3ab743ce
DATA consts<>+136(SB)/8, $0x3ab743ce3ab743ce
DATA consts<>+144(SB)/8, $0x3ab743ce3ab743ce
DATA consts<>+152(SB)/8, $0x3ab743ce3ab743ce
DATA consts<>+160(SB)/8, $0x3c0889083c088908
DATA consts<>+168(SB)/8, $0x3c0889083c088908
DATA consts<>+176(SB)/8, $0x3c0889083c088908
DATA consts<>+184(SB)/8, $0x3c0889083c088908
DATA consts<>+192(SB)/8, $0x3d2aa9c13d2aa9c1
DATA consts<>+200(SB)/8, $0x3d2aa9c13d2aa9c1
DATA consts<>+208(SB)/8, $0x3d2aa9c13d2aa9c1
DATA consts<>+216(SB)/8, $0x3d2aa9c13d2aa9c1
DATA consts<>+224(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA consts<>+232(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA consts<>+240(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA consts<>+248(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA consts<>+256(SB)/8, $0x3f0000003f000000
DATA consts<>+264(SB)/8, $0x3f0000003f000000
DATA consts<>+272(SB)/8, $0x3f0000003f000000
DATA consts<>+280(SB)/8, $0x3f0000003f000000
DATA consts<>+288(SB)/8, $0x3f8000003f800000
DATA consts<>+296(SB)/8, $0x3f8000003f800000
DATA consts<>+304(SB)/8, $0x3f8000003f800000
DATA consts<>+312(SB)/8, $0x3f8000003f800000
DATA consts<>+320(SB)/8, $0x42b2000042b20000
DATA consts<>+328(SB)/8, $0x42b2000042b20000
DATA consts<>+336(SB)/8, $0x42b2000042b20000
DATA consts<>+344(SB)/8, $0x42b2000042b20000
DATA consts<>+352(SB)/8, $0xc2aea8f6c2aea8f6
DATA consts<>+360(SB)/8, $0xc2aea8f6c2aea8f6
DATA consts<>+368(SB)/8, $0xc2aea8f6c2aea8f6
DATA consts<>+376(SB)/8, $0xc2aea8f6c2aea8f6
DATA consts<>+384(SB)/8, $0x0000007f0000007f
DATA consts<>+392(SB)/8, $0x0000007f0000007f
DATA consts<>+400(SB)/8, $0x0000007f0000007f
DATA consts<>+408(SB)/8, $0x0000007f0000007f
DATA consts<>+416(SB)/8, $0xff800000ff800000
DATA consts<>+424(SB)/8, $0xff800000ff800000
DATA consts<>+432(SB)/8, $0xff800000ff800000
DATA consts<>+440(SB)/8, $0xff800000ff800000
GLOBL consts<>(SB), RODATA|NOPTR, $448

// EXP512 sets X = exp(X) for 16 lanes (Cephes expf: x = n·ln2 + r with
// |r| ≤ ln2/2, a degree-6 polynomial for e^r, then scaling by 2^n built in
// the exponent field). The argument is first clamped to [LO, HI] = [-87.33,
// 89] so that n stays in [-126, 128]: below, 2^n is a normal float and exp
// bottoms out at about 1e-38 instead of going subnormal; at the top, n = 128
// puts 255 in the exponent field, so 2^n and the result are +Inf. Overflow
// must give Inf rather than a large finite value, or silu(g) = g/(1+exp(-g))
// would grow again for g below -88 (g/3e38 is not small for g = -1e30).
// Arguments in (88.38, 88.72) that would still have a finite exp also give
// Inf; no caller needs those values. Needs the constants loaded by
// LOADEXP512 into Z16-Z28. Clobbers T1, T2, T3.
#define LOADEXP512 \
	VBROADCASTSS consts<>+LOG2E(SB), Z16; \
	VBROADCASTSS consts<>+C1(SB), Z17; \
	VBROADCASTSS consts<>+C2(SB), Z18; \
	VBROADCASTSS consts<>+P0(SB), Z19; \
	VBROADCASTSS consts<>+P1(SB), Z20; \
	VBROADCASTSS consts<>+P2(SB), Z21; \
	VBROADCASTSS consts<>+P3(SB), Z22; \
	VBROADCASTSS consts<>+P4(SB), Z23; \
	VBROADCASTSS consts<>+P5(SB), Z24; \
	VBROADCASTSS consts<>+ONE(SB), Z25; \
	VBROADCASTSS consts<>+HI(SB), Z26; \
	VBROADCASTSS consts<>+LO(SB), Z27; \
	VPBROADCASTD consts<>+I127(SB), Z28

#define EXP512(X, T1, T2, T3) \
	VMINPS Z26, X, X; \
	VMAXPS Z27, X, X; \
	VMULPS Z16, X, T1; \
	VCVTPS2DQ T1, T2; \
	VCVTDQ2PS T2, T1; \
	VFNMADD231PS Z17, T1, X; \
	VFNMADD231PS Z18, T1, X; \
	VMOVAPS Z19, T1; \
	VFMADD213PS Z20, X, T1; \
	VFMADD213PS Z21, X, T1; \
	VFMADD213PS Z22, X, T1; \
	VFMADD213PS Z23, X, T1; \
	VFMADD213PS Z24, X, T1; \
	VMULPS X, X, T3; \
	VFMADD213PS X, T3, T1; \
	VADDPS Z25, T1, T1; \
	VPADDD Z28, T2, T2; \
	VPSLLD $23, T2, T2; \
	VMULPS T2, T1, X

// The same for 8 lanes, with the constants as memory operands (AVX2 has
// only 16 registers).
#define EXP256(X, T1, T2, T3) \
	VMINPS consts<>+HI(SB), X, X; \
	VMAXPS consts<>+LO(SB), X, X; \
	VMULPS consts<>+LOG2E(SB), X, T1; \
	VCVTPS2DQ T1, T2; \
	VCVTDQ2PS T2, T1; \
	VFNMADD231PS consts<>+C1(SB), T1, X; \
	VFNMADD231PS consts<>+C2(SB), T1, X; \
	VMOVUPS consts<>+P0(SB), T1; \
	VFMADD213PS consts<>+P1(SB), X, T1; \
	VFMADD213PS consts<>+P2(SB), X, T1; \
	VFMADD213PS consts<>+P3(SB), X, T1; \
	VFMADD213PS consts<>+P4(SB), X, T1; \
	VFMADD213PS consts<>+P5(SB), X, T1; \
	VMULPS X, X, T3; \
	VFMADD213PS X, T3, T1; \
	VADDPS consts<>+ONE(SB), T1, T1; \
	VPADDD consts<>+I127(SB), T2, T2; \
	VPSLLD $23, T2, T2; \
	VMULPS T2, T1, X

// Horizontal sum / max of a register into the low lane of its X form.
#define HSUM256(Y, X, TX) \
	VEXTRACTF128 $1, Y, TX; \
	VADDPS TX, X, X; \
	VMOVHLPS X, X, TX; \
	VADDPS TX, X, X; \
	VMOVSHDUP X, TX; \
	VADDSS TX, X, X

#define HSUM512(Z, Y, X, TY, TX) \
	VEXTRACTF64X4 $1, Z, TY; \
	VADDPS TY, Y, Y; \
	HSUM256(Y, X, TX)

#define HMAX256(Y, X, TX) \
	VEXTRACTF128 $1, Y, TX; \
	VMAXPS TX, X, X; \
	VMOVHLPS X, X, TX; \
	VMAXPS TX, X, X; \
	VMOVSHDUP X, TX; \
	VMAXSS TX, X, X

#define HMAX512(Z, Y, X, TY, TX) \
	VEXTRACTF64X4 $1, Z, TY; \
	VMAXPS TY, Y, Y; \
	HMAX256(Y, X, TX)

// func sumSqAVX512(x *float32, n int) float32
TEXT ·sumSqAVX512(SB), NOSPLIT, $0-20
	MOVQ   x+0(FP), SI
	MOVQ   n+8(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3

sumsq512_64:
	CMPQ        CX, $64
	JL          sumsq512_16
	VMOVUPS     (SI), Z4
	VMOVUPS     64(SI), Z5
	VMOVUPS     128(SI), Z6
	VMOVUPS     192(SI), Z7
	VFMADD231PS Z4, Z4, Z0
	VFMADD231PS Z5, Z5, Z1
	VFMADD231PS Z6, Z6, Z2
	VFMADD231PS Z7, Z7, Z3
	ADDQ        $256, SI
	SUBQ        $64, CX
	JMP         sumsq512_64

sumsq512_16:
	TESTQ       CX, CX
	JZ          sumsq512_done
	VMOVUPS     (SI), Z4
	VFMADD231PS Z4, Z4, Z0
	ADDQ        $64, SI
	SUBQ        $16, CX
	JMP         sumsq512_16

sumsq512_done:
	VADDPS Z1, Z0, Z0
	VADDPS Z3, Z2, Z2
	VADDPS Z2, Z0, Z0
	HSUM512(Z0, Y0, X0, Y1, X1)
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func mulScaleAVX512(dst, x, w *float32, s float32, n int)
TEXT ·mulScaleAVX512(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         w+16(FP), DX
	VBROADCASTSS s+24(FP), Z8
	MOVQ         n+32(FP), CX

mulscale512_64:
	CMPQ    CX, $64
	JL      mulscale512_16
	VMULPS  (SI), Z8, Z0
	VMULPS  64(SI), Z8, Z1
	VMULPS  128(SI), Z8, Z2
	VMULPS  192(SI), Z8, Z3
	VMULPS  (DX), Z0, Z0
	VMULPS  64(DX), Z1, Z1
	VMULPS  128(DX), Z2, Z2
	VMULPS  192(DX), Z3, Z3
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	ADDQ    $256, SI
	ADDQ    $256, DX
	ADDQ    $256, DI
	SUBQ    $64, CX
	JMP     mulscale512_64

mulscale512_16:
	TESTQ   CX, CX
	JZ      mulscale512_done
	VMULPS  (SI), Z8, Z0
	VMULPS  (DX), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, DI
	SUBQ    $16, CX
	JMP     mulscale512_16

mulscale512_done:
	VZEROUPPER
	RET

// func addAVX512(dst, a, b *float32, n int)
TEXT ·addAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX

add512_64:
	CMPQ    CX, $64
	JL      add512_16
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1
	VMOVUPS 128(SI), Z2
	VMOVUPS 192(SI), Z3
	VADDPS  (DX), Z0, Z0
	VADDPS  64(DX), Z1, Z1
	VADDPS  128(DX), Z2, Z2
	VADDPS  192(DX), Z3, Z3
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	ADDQ    $256, SI
	ADDQ    $256, DX
	ADDQ    $256, DI
	SUBQ    $64, CX
	JMP     add512_64

add512_16:
	TESTQ   CX, CX
	JZ      add512_done
	VMOVUPS (SI), Z0
	VADDPS  (DX), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, DI
	SUBQ    $16, CX
	JMP     add512_16

add512_done:
	VZEROUPPER
	RET

// func scaleAVX512(x *float32, s float32, n int)
TEXT ·scaleAVX512(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), DI
	VBROADCASTSS s+8(FP), Z8
	MOVQ         n+16(FP), CX

scale512_64:
	CMPQ    CX, $64
	JL      scale512_16
	VMULPS  (DI), Z8, Z0
	VMULPS  64(DI), Z8, Z1
	VMULPS  128(DI), Z8, Z2
	VMULPS  192(DI), Z8, Z3
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	ADDQ    $256, DI
	SUBQ    $64, CX
	JMP     scale512_64

scale512_16:
	TESTQ   CX, CX
	JZ      scale512_done
	VMULPS  (DI), Z8, Z0
	VMOVUPS Z0, (DI)
	ADDQ    $64, DI
	SUBQ    $16, CX
	JMP     scale512_16

scale512_done:
	VZEROUPPER
	RET

// func siluMulAVX512(dst, gate, up *float32, n int)
// Two registers per iteration give the out-of-order core two independent
// exp chains to overlap.
TEXT ·siluMulAVX512(SB), NOSPLIT, $0-32
	MOVQ   dst+0(FP), DI
	MOVQ   gate+8(FP), SI
	MOVQ   up+16(FP), DX
	MOVQ   n+24(FP), CX
	LOADEXP512
	VPXORD Z30, Z30, Z30

silu512_32:
	CMPQ    CX, $32
	JL      silu512_16
	VMOVUPS (SI), Z5
	VMOVUPS 64(SI), Z6
	VSUBPS  Z5, Z30, Z0
	VSUBPS  Z6, Z30, Z8
	EXP512(Z0, Z1, Z2, Z3)
	EXP512(Z8, Z9, Z10, Z11)
	VADDPS  Z25, Z0, Z0
	VADDPS  Z25, Z8, Z8
	VDIVPS  Z0, Z5, Z5
	VDIVPS  Z8, Z6, Z6
	VMULPS  (DX), Z5, Z5
	VMULPS  64(DX), Z6, Z6
	VMOVUPS Z5, (DI)
	VMOVUPS Z6, 64(DI)
	ADDQ    $128, SI
	ADDQ    $128, DX
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     silu512_32

silu512_16:
	TESTQ   CX, CX
	JZ      silu512_done
	VMOVUPS (SI), Z5
	VSUBPS  Z5, Z30, Z0
	EXP512(Z0, Z1, Z2, Z3)
	VADDPS  Z25, Z0, Z0
	VDIVPS  Z0, Z5, Z5
	VMULPS  (DX), Z5, Z5
	VMOVUPS Z5, (DI)

silu512_done:
	VZEROUPPER
	RET

// func expSubAVX512(x *float32, m float32, n int) float32
TEXT ·expSubAVX512(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), SI
	VBROADCASTSS m+8(FP), Z29
	MOVQ         n+16(FP), CX
	LOADEXP512
	VPXORD       Z12, Z12, Z12
	VPXORD       Z13, Z13, Z13

expsub512_32:
	CMPQ    CX, $32
	JL      expsub512_16
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z8
	VSUBPS  Z29, Z0, Z0
	VSUBPS  Z29, Z8, Z8
	EXP512(Z0, Z1, Z2, Z3)
	EXP512(Z8, Z9, Z10, Z11)
	VMOVUPS Z0, (SI)
	VMOVUPS Z8, 64(SI)
	VADDPS  Z0, Z12, Z12
	VADDPS  Z8, Z13, Z13
	ADDQ    $128, SI
	SUBQ    $32, CX
	JMP     expsub512_32

expsub512_16:
	TESTQ   CX, CX
	JZ      expsub512_done
	VMOVUPS (SI), Z0
	VSUBPS  Z29, Z0, Z0
	EXP512(Z0, Z1, Z2, Z3)
	VMOVUPS Z0, (SI)
	VADDPS  Z0, Z12, Z12

expsub512_done:
	VADDPS Z13, Z12, Z0
	HSUM512(Z0, Y0, X0, Y1, X1)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func maxAVX512(x *float32, n int) float32
// VMAXPS returns its second source when either is NaN; with the data as the
// first source and the running maximum as the second, NaNs are skipped.
TEXT ·maxAVX512(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS consts<>+NEGINF(SB), Z0
	VMOVAPS      Z0, Z1
	VMOVAPS      Z0, Z2
	VMOVAPS      Z0, Z3

max512_64:
	CMPQ    CX, $64
	JL      max512_16
	VMOVUPS (SI), Z4
	VMOVUPS 64(SI), Z5
	VMOVUPS 128(SI), Z6
	VMOVUPS 192(SI), Z7
	VMAXPS  Z0, Z4, Z0
	VMAXPS  Z1, Z5, Z1
	VMAXPS  Z2, Z6, Z2
	VMAXPS  Z3, Z7, Z3
	ADDQ    $256, SI
	SUBQ    $64, CX
	JMP     max512_64

max512_16:
	TESTQ   CX, CX
	JZ      max512_done
	VMOVUPS (SI), Z4
	VMAXPS  Z0, Z4, Z0
	ADDQ    $64, SI
	SUBQ    $16, CX
	JMP     max512_16

max512_done:
	VMAXPS Z1, Z0, Z0
	VMAXPS Z3, Z2, Z2
	VMAXPS Z2, Z0, Z0
	HMAX512(Z0, Y0, X0, Y1, X1)
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func indexAVX512(x *float32, v float32, n int) int
TEXT ·indexAVX512(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	VBROADCASTSS v+8(FP), Z1
	MOVQ         n+16(FP), CX
	XORQ         AX, AX

index512_64:
	LEAQ     64(AX), DX
	CMPQ     DX, CX
	JG       index512_16
	VCMPPS   $0, (SI)(AX*4), Z1, K1
	VCMPPS   $0, 64(SI)(AX*4), Z1, K2
	VCMPPS   $0, 128(SI)(AX*4), Z1, K3
	VCMPPS   $0, 192(SI)(AX*4), Z1, K4
	KORW     K1, K2, K5
	KORW     K3, K4, K6
	KORTESTW K5, K6
	JNZ      index512_16
	MOVQ     DX, AX
	JMP      index512_64

index512_16:
	CMPQ   AX, CX
	JGE    index512_none
	VCMPPS $0, (SI)(AX*4), Z1, K1
	KMOVW  K1, DX
	TESTL  DX, DX
	JNZ    index512_found
	ADDQ   $16, AX
	JMP    index512_16

index512_found:
	BSFL DX, DX
	ADDQ DX, AX
	MOVQ AX, ret+24(FP)
	VZEROUPPER
	RET

index512_none:
	MOVQ $-1, ret+24(FP)
	VZEROUPPER
	RET

// func ropeAVX512(x0, x1, cos, sin *float32, n int)
TEXT ·ropeAVX512(SB), NOSPLIT, $0-40
	MOVQ x0+0(FP), DI
	MOVQ x1+8(FP), SI
	MOVQ cos+16(FP), DX
	MOVQ sin+24(FP), BX
	MOVQ n+32(FP), CX

rope512_16:
	VMOVUPS      (DI), Z0
	VMOVUPS      (SI), Z1
	VMOVUPS      (DX), Z2
	VMOVUPS      (BX), Z3
	VMULPS       Z2, Z0, Z4
	VFNMADD231PS Z3, Z1, Z4
	VMULPS       Z2, Z1, Z5
	VFMADD231PS  Z3, Z0, Z5
	VMOVUPS      Z4, (DI)
	VMOVUPS      Z5, (SI)
	ADDQ         $64, DI
	ADDQ         $64, SI
	ADDQ         $64, DX
	ADDQ         $64, BX
	SUBQ         $16, CX
	JNZ          rope512_16
	VZEROUPPER
	RET

// func f32ToF16AVX512(dst *uint16, src *float32, n int)
TEXT ·f32ToF16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

tof16_512_64:
	CMPQ      CX, $64
	JL        tof16_512_16
	VMOVUPS   (SI), Z0
	VMOVUPS   64(SI), Z1
	VMOVUPS   128(SI), Z2
	VMOVUPS   192(SI), Z3
	VCVTPS2PH $0, Z0, (DI)
	VCVTPS2PH $0, Z1, 32(DI)
	VCVTPS2PH $0, Z2, 64(DI)
	VCVTPS2PH $0, Z3, 96(DI)
	ADDQ      $256, SI
	ADDQ      $128, DI
	SUBQ      $64, CX
	JMP       tof16_512_64

tof16_512_16:
	TESTQ     CX, CX
	JZ        tof16_512_done
	VMOVUPS   (SI), Z0
	VCVTPS2PH $0, Z0, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	SUBQ      $16, CX
	JMP       tof16_512_16

tof16_512_done:
	VZEROUPPER
	RET

// func f16ToF32AVX512(dst *float32, src *uint16, n int)
TEXT ·f16ToF32AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

tof32_512_64:
	CMPQ      CX, $64
	JL        tof32_512_16
	VCVTPH2PS (SI), Z0
	VCVTPH2PS 32(SI), Z1
	VCVTPH2PS 64(SI), Z2
	VCVTPH2PS 96(SI), Z3
	VMOVUPS   Z0, (DI)
	VMOVUPS   Z1, 64(DI)
	VMOVUPS   Z2, 128(DI)
	VMOVUPS   Z3, 192(DI)
	ADDQ      $128, SI
	ADDQ      $256, DI
	SUBQ      $64, CX
	JMP       tof32_512_64

tof32_512_16:
	TESTQ     CX, CX
	JZ        tof32_512_done
	VCVTPH2PS (SI), Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	SUBQ      $16, CX
	JMP       tof32_512_16

tof32_512_done:
	VZEROUPPER
	RET

// func sumSqAVX2(x *float32, n int) float32
TEXT ·sumSqAVX2(SB), NOSPLIT, $0-20
	MOVQ   x+0(FP), SI
	MOVQ   n+8(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

sumsq256_32:
	CMPQ        CX, $32
	JL          sumsq256_8
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS Y4, Y4, Y0
	VFMADD231PS Y5, Y5, Y1
	VFMADD231PS Y6, Y6, Y2
	VFMADD231PS Y7, Y7, Y3
	ADDQ        $128, SI
	SUBQ        $32, CX
	JMP         sumsq256_32

sumsq256_8:
	TESTQ       CX, CX
	JZ          sumsq256_done
	VMOVUPS     (SI), Y4
	VFMADD231PS Y4, Y4, Y0
	ADDQ        $32, SI
	SUBQ        $8, CX
	JMP         sumsq256_8

sumsq256_done:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM256(Y0, X0, X1)
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func mulScaleAVX2(dst, x, w *float32, s float32, n int)
TEXT ·mulScaleAVX2(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         w+16(FP), DX
	VBROADCASTSS s+24(FP), Y8
	MOVQ         n+32(FP), CX

mulscale256_32:
	CMPQ    CX, $32
	JL      mulscale256_8
	VMULPS  (SI), Y8, Y0
	VMULPS  32(SI), Y8, Y1
	VMULPS  64(SI), Y8, Y2
	VMULPS  96(SI), Y8, Y3
	VMULPS  (DX), Y0, Y0
	VMULPS  32(DX), Y1, Y1
	VMULPS  64(DX), Y2, Y2
	VMULPS  96(DX), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DX
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     mulscale256_32

mulscale256_8:
	TESTQ   CX, CX
	JZ      mulscale256_done
	VMULPS  (SI), Y8, Y0
	VMULPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     mulscale256_8

mulscale256_done:
	VZEROUPPER
	RET

// func addAVX2(dst, a, b *float32, n int)
TEXT ·addAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX

add256_32:
	CMPQ    CX, $32
	JL      add256_8
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VADDPS  (DX), Y0, Y0
	VADDPS  32(DX), Y1, Y1
	VADDPS  64(DX), Y2, Y2
	VADDPS  96(DX), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DX
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     add256_32

add256_8:
	TESTQ   CX, CX
	JZ      add256_done
	VMOVUPS (SI), Y0
	VADDPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     add256_8

add256_done:
	VZEROUPPER
	RET

// func scaleAVX2(x *float32, s float32, n int)
TEXT ·scaleAVX2(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), DI
	VBROADCASTSS s+8(FP), Y8
	MOVQ         n+16(FP), CX

scale256_32:
	CMPQ    CX, $32
	JL      scale256_8
	VMULPS  (DI), Y8, Y0
	VMULPS  32(DI), Y8, Y1
	VMULPS  64(DI), Y8, Y2
	VMULPS  96(DI), Y8, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     scale256_32

scale256_8:
	TESTQ   CX, CX
	JZ      scale256_done
	VMULPS  (DI), Y8, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     scale256_8

scale256_done:
	VZEROUPPER
	RET

// func siluMulAVX2(dst, gate, up *float32, n int)
TEXT ·siluMulAVX2(SB), NOSPLIT, $0-32
	MOVQ   dst+0(FP), DI
	MOVQ   gate+8(FP), SI
	MOVQ   up+16(FP), DX
	MOVQ   n+24(FP), CX
	VXORPS Y15, Y15, Y15

silu256_16:
	CMPQ    CX, $16
	JL      silu256_8
	VMOVUPS (SI), Y5
	VMOVUPS 32(SI), Y6
	VSUBPS  Y5, Y15, Y0
	VSUBPS  Y6, Y15, Y8
	EXP256(Y0, Y1, Y2, Y3)
	EXP256(Y8, Y9, Y10, Y11)
	VADDPS  consts<>+ONE(SB), Y0, Y0
	VADDPS  consts<>+ONE(SB), Y8, Y8
	VDIVPS  Y0, Y5, Y5
	VDIVPS  Y8, Y6, Y6
	VMULPS  (DX), Y5, Y5
	VMULPS  32(DX), Y6, Y6
	VMOVUPS Y5, (DI)
	VMOVUPS Y6, 32(DI)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, DI
	SUBQ    $16, CX
	JMP     silu256_16

silu256_8:
	TESTQ   CX, CX
	JZ      silu256_done
	VMOVUPS (SI), Y5
	VSUBPS  Y5, Y15, Y0
	EXP256(Y0, Y1, Y2, Y3)
	VADDPS  consts<>+ONE(SB), Y0, Y0
	VDIVPS  Y0, Y5, Y5
	VMULPS  (DX), Y5, Y5
	VMOVUPS Y5, (DI)

silu256_done:
	VZEROUPPER
	RET

// func expSubAVX2(x *float32, m float32, n int) float32
TEXT ·expSubAVX2(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), SI
	VBROADCASTSS m+8(FP), Y14
	MOVQ         n+16(FP), CX
	VXORPS       Y12, Y12, Y12
	VXORPS       Y13, Y13, Y13

expsub256_16:
	CMPQ    CX, $16
	JL      expsub256_8
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y8
	VSUBPS  Y14, Y0, Y0
	VSUBPS  Y14, Y8, Y8
	EXP256(Y0, Y1, Y2, Y3)
	EXP256(Y8, Y9, Y10, Y11)
	VMOVUPS Y0, (SI)
	VMOVUPS Y8, 32(SI)
	VADDPS  Y0, Y12, Y12
	VADDPS  Y8, Y13, Y13
	ADDQ    $64, SI
	SUBQ    $16, CX
	JMP     expsub256_16

expsub256_8:
	TESTQ   CX, CX
	JZ      expsub256_done
	VMOVUPS (SI), Y0
	VSUBPS  Y14, Y0, Y0
	EXP256(Y0, Y1, Y2, Y3)
	VMOVUPS Y0, (SI)
	VADDPS  Y0, Y12, Y12

expsub256_done:
	VADDPS Y13, Y12, Y0
	HSUM256(Y0, X0, X1)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func maxAVX2(x *float32, n int) float32
TEXT ·maxAVX2(SB), NOSPLIT, $0-20
	MOVQ    x+0(FP), SI
	MOVQ    n+8(FP), CX
	VMOVUPS consts<>+NEGINF(SB), Y0
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3

max256_32:
	CMPQ    CX, $32
	JL      max256_8
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VMAXPS  Y0, Y4, Y0
	VMAXPS  Y1, Y5, Y1
	VMAXPS  Y2, Y6, Y2
	VMAXPS  Y3, Y7, Y3
	ADDQ    $128, SI
	SUBQ    $32, CX
	JMP     max256_32

max256_8:
	TESTQ   CX, CX
	JZ      max256_done
	VMOVUPS (SI), Y4
	VMAXPS  Y0, Y4, Y0
	ADDQ    $32, SI
	SUBQ    $8, CX
	JMP     max256_8

max256_done:
	VMAXPS Y1, Y0, Y0
	VMAXPS Y3, Y2, Y2
	VMAXPS Y2, Y0, Y0
	HMAX256(Y0, X0, X1)
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func indexAVX2(x *float32, v float32, n int) int
TEXT ·indexAVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	VBROADCASTSS v+8(FP), Y1
	MOVQ         n+16(FP), CX
	XORQ         AX, AX

index256_32:
	LEAQ      32(AX), DX
	CMPQ      DX, CX
	JG        index256_8
	VCMPPS    $0, (SI)(AX*4), Y1, Y2
	VCMPPS    $0, 32(SI)(AX*4), Y1, Y3
	VCMPPS    $0, 64(SI)(AX*4), Y1, Y4
	VCMPPS    $0, 96(SI)(AX*4), Y1, Y5
	VORPS     Y2, Y3, Y2
	VORPS     Y4, Y5, Y4
	VORPS     Y2, Y4, Y2
	VMOVMSKPS Y2, BX
	TESTL     BX, BX
	JNZ       index256_8
	MOVQ      DX, AX
	JMP       index256_32

index256_8:
	CMPQ      AX, CX
	JGE       index256_none
	VCMPPS    $0, (SI)(AX*4), Y1, Y2
	VMOVMSKPS Y2, DX
	TESTL     DX, DX
	JNZ       index256_found
	ADDQ      $8, AX
	JMP       index256_8

index256_found:
	BSFL DX, DX
	ADDQ DX, AX
	MOVQ AX, ret+24(FP)
	VZEROUPPER
	RET

index256_none:
	MOVQ $-1, ret+24(FP)
	VZEROUPPER
	RET

// func ropeAVX2(x0, x1, cos, sin *float32, n int)
TEXT ·ropeAVX2(SB), NOSPLIT, $0-40
	MOVQ x0+0(FP), DI
	MOVQ x1+8(FP), SI
	MOVQ cos+16(FP), DX
	MOVQ sin+24(FP), BX
	MOVQ n+32(FP), CX

rope256_8:
	VMOVUPS      (DI), Y0
	VMOVUPS      (SI), Y1
	VMOVUPS      (DX), Y2
	VMOVUPS      (BX), Y3
	VMULPS       Y2, Y0, Y4
	VFNMADD231PS Y3, Y1, Y4
	VMULPS       Y2, Y1, Y5
	VFMADD231PS  Y3, Y0, Y5
	VMOVUPS      Y4, (DI)
	VMOVUPS      Y5, (SI)
	ADDQ         $32, DI
	ADDQ         $32, SI
	ADDQ         $32, DX
	ADDQ         $32, BX
	SUBQ         $8, CX
	JNZ          rope256_8
	VZEROUPPER
	RET

// func f32ToF16AVX2(dst *uint16, src *float32, n int)
TEXT ·f32ToF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

tof16_256_32:
	CMPQ      CX, $32
	JL        tof16_256_8
	VMOVUPS   (SI), Y0
	VMOVUPS   32(SI), Y1
	VMOVUPS   64(SI), Y2
	VMOVUPS   96(SI), Y3
	VCVTPS2PH $0, Y0, (DI)
	VCVTPS2PH $0, Y1, 16(DI)
	VCVTPS2PH $0, Y2, 32(DI)
	VCVTPS2PH $0, Y3, 48(DI)
	ADDQ      $128, SI
	ADDQ      $64, DI
	SUBQ      $32, CX
	JMP       tof16_256_32

tof16_256_8:
	TESTQ     CX, CX
	JZ        tof16_256_done
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	SUBQ      $8, CX
	JMP       tof16_256_8

tof16_256_done:
	VZEROUPPER
	RET

// func f16ToF32AVX2(dst *float32, src *uint16, n int)
TEXT ·f16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

tof32_256_32:
	CMPQ      CX, $32
	JL        tof32_256_8
	VCVTPH2PS (SI), Y0
	VCVTPH2PS 16(SI), Y1
	VCVTPH2PS 32(SI), Y2
	VCVTPH2PS 48(SI), Y3
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, 32(DI)
	VMOVUPS   Y2, 64(DI)
	VMOVUPS   Y3, 96(DI)
	ADDQ      $64, SI
	ADDQ      $128, DI
	SUBQ      $32, CX
	JMP       tof32_256_32

tof32_256_8:
	TESTQ     CX, CX
	JZ        tof32_256_done
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JMP       tof32_256_8

tof32_256_done:
	VZEROUPPER
	RET

// func axpyAVX512(dst *float32, a float32, x *float32, n int)
TEXT ·axpyAVX512(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	VBROADCASTSS a+8(FP), Z8
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX

axpy512_64:
	CMPQ        CX, $64
	JL          axpy512_16
	VMOVUPS     (DI), Z0
	VMOVUPS     64(DI), Z1
	VMOVUPS     128(DI), Z2
	VMOVUPS     192(DI), Z3
	VFMADD231PS (SI), Z8, Z0
	VFMADD231PS 64(SI), Z8, Z1
	VFMADD231PS 128(SI), Z8, Z2
	VFMADD231PS 192(SI), Z8, Z3
	VMOVUPS     Z0, (DI)
	VMOVUPS     Z1, 64(DI)
	VMOVUPS     Z2, 128(DI)
	VMOVUPS     Z3, 192(DI)
	ADDQ        $256, SI
	ADDQ        $256, DI
	SUBQ        $64, CX
	JMP         axpy512_64

axpy512_16:
	TESTQ       CX, CX
	JZ          axpy512_done
	VMOVUPS     (DI), Z0
	VFMADD231PS (SI), Z8, Z0
	VMOVUPS     Z0, (DI)
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         axpy512_16

axpy512_done:
	VZEROUPPER
	RET

// func axpyAVX2(dst *float32, a float32, x *float32, n int)
TEXT ·axpyAVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	VBROADCASTSS a+8(FP), Y8
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX

axpy256_32:
	CMPQ        CX, $32
	JL          axpy256_8
	VMOVUPS     (DI), Y0
	VMOVUPS     32(DI), Y1
	VMOVUPS     64(DI), Y2
	VMOVUPS     96(DI), Y3
	VFMADD231PS (SI), Y8, Y0
	VFMADD231PS 32(SI), Y8, Y1
	VFMADD231PS 64(SI), Y8, Y2
	VFMADD231PS 96(SI), Y8, Y3
	VMOVUPS     Y0, (DI)
	VMOVUPS     Y1, 32(DI)
	VMOVUPS     Y2, 64(DI)
	VMOVUPS     Y3, 96(DI)
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         axpy256_32

axpy256_8:
	TESTQ       CX, CX
	JZ          axpy256_done
	VMOVUPS     (DI), Y0
	VFMADD231PS (SI), Y8, Y0
	VMOVUPS     Y0, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         axpy256_8

axpy256_done:
	VZEROUPPER
	RET
