//go:build amd64 && !purego

#include "textflag.h"

// Row kernels of Attend. hd (the head size) is a positive multiple of 16
// (AVX512) or 8 (AVX2) and rows > 0. Rows are hd binary16 values apart.

// func dotRowsAVX512(dst, q *float32, k *uint16, rows, hd int, scale float32)
//
// Four rows at a time share each load of q and give four independent FMA
// chains; their four sums are reduced together (two rounds of unpacks leave
// one partial sum per row in every 128-bit lane) into one 4-float store.
TEXT ·dotRowsAVX512(SB), NOSPLIT, $0-44
	MOVQ         dst+0(FP), DI
	MOVQ         q+8(FP), SI
	MOVQ         k+16(FP), R10
	MOVQ         rows+24(FP), CX
	MOVQ         hd+32(FP), BX
	VBROADCASTSS scale+40(FP), X14
	LEAQ         (BX)(BX*1), R8     // row stride in bytes
	LEAQ         (R10)(R8*1), R11
	LEAQ         (R11)(R8*1), R12
	LEAQ         (R12)(R8*1), R13
	SHLQ         $2, R8             // four rows

dotrows512_4:
	CMPQ   CX, $4
	JL     dotrows512_1
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	XORQ   AX, AX

dotrows512_4d:
	VMOVUPS     (SI)(AX*4), Z8
	VCVTPH2PS   (R10)(AX*2), Z4
	VCVTPH2PS   (R11)(AX*2), Z5
	VCVTPH2PS   (R12)(AX*2), Z6
	VCVTPH2PS   (R13)(AX*2), Z7
	VFMADD231PS Z8, Z4, Z0
	VFMADD231PS Z8, Z5, Z1
	VFMADD231PS Z8, Z6, Z2
	VFMADD231PS Z8, Z7, Z3
	ADDQ        $16, AX
	CMPQ        AX, BX
	JL          dotrows512_4d

	VUNPCKLPS     Z1, Z0, Z4
	VUNPCKHPS     Z1, Z0, Z5
	VADDPS        Z5, Z4, Z4
	VUNPCKLPS     Z3, Z2, Z6
	VUNPCKHPS     Z3, Z2, Z7
	VADDPS        Z7, Z6, Z6
	VUNPCKLPD     Z6, Z4, Z5
	VUNPCKHPD     Z6, Z4, Z7
	VADDPS        Z7, Z5, Z5
	VEXTRACTF64X4 $1, Z5, Y6
	VADDPS        Y6, Y5, Y5
	VEXTRACTF128  $1, Y5, X6
	VADDPS        X6, X5, X5
	VMULPS        X14, X5, X5
	VMOVUPS       X5, (DI)
	ADDQ          $16, DI
	ADDQ          R8, R10
	ADDQ          R8, R11
	ADDQ          R8, R12
	ADDQ          R8, R13
	SUBQ          $4, CX
	JMP           dotrows512_4

dotrows512_1:
	SHRQ $2, R8

dotrows512_1r:
	TESTQ  CX, CX
	JZ     dotrows512_done
	VPXORD Z0, Z0, Z0
	XORQ   AX, AX

dotrows512_1d:
	VCVTPH2PS   (R10)(AX*2), Z4
	VFMADD231PS (SI)(AX*4), Z4, Z0
	ADDQ        $16, AX
	CMPQ        AX, BX
	JL          dotrows512_1d
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VMOVHLPS      X0, X0, X1
	VADDPS        X1, X0, X0
	VMOVSHDUP     X0, X1
	VADDSS        X1, X0, X0
	VMULSS        X14, X0, X0
	VMOVSS        X0, (DI)
	ADDQ          $4, DI
	ADDQ          R8, R10
	DECQ          CX
	JMP           dotrows512_1r

dotrows512_done:
	VZEROUPPER
	RET

// func axpyRowsAVX512(out, s *float32, v *uint16, rows, hd int)
//
// out is taken in column blocks held in registers across all rows: 128
// columns (eight accumulators) while they last, then 64, then 16. A block
// of at least four registers gives each FMA chain time to complete while
// the conversions of the next row issue.
TEXT ·axpyRowsAVX512(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ v+16(FP), DX
	MOVQ hd+32(FP), BX
	LEAQ (BX)(BX*1), R8 // row stride in bytes
	XORQ AX, AX         // column

axpyrows512_128:
	LEAQ    128(AX), R9
	CMPQ    R9, BX
	JG      axpyrows512_64
	VMOVUPS (DI)(AX*4), Z0
	VMOVUPS 64(DI)(AX*4), Z1
	VMOVUPS 128(DI)(AX*4), Z2
	VMOVUPS 192(DI)(AX*4), Z3
	VMOVUPS 256(DI)(AX*4), Z4
	VMOVUPS 320(DI)(AX*4), Z5
	VMOVUPS 384(DI)(AX*4), Z6
	VMOVUPS 448(DI)(AX*4), Z7
	LEAQ    (DX)(AX*2), R10
	MOVQ    s+8(FP), R11
	MOVQ    rows+24(FP), CX

axpyrows512_128r:
	VBROADCASTSS (R11), Z16
	VCVTPH2PS    (R10), Z8
	VCVTPH2PS    32(R10), Z9
	VCVTPH2PS    64(R10), Z10
	VCVTPH2PS    96(R10), Z11
	VCVTPH2PS    128(R10), Z12
	VCVTPH2PS    160(R10), Z13
	VCVTPH2PS    192(R10), Z14
	VCVTPH2PS    224(R10), Z15
	VFMADD231PS  Z16, Z8, Z0
	VFMADD231PS  Z16, Z9, Z1
	VFMADD231PS  Z16, Z10, Z2
	VFMADD231PS  Z16, Z11, Z3
	VFMADD231PS  Z16, Z12, Z4
	VFMADD231PS  Z16, Z13, Z5
	VFMADD231PS  Z16, Z14, Z6
	VFMADD231PS  Z16, Z15, Z7
	ADDQ         $4, R11
	ADDQ         R8, R10
	DECQ         CX
	JNZ          axpyrows512_128r
	VMOVUPS      Z0, (DI)(AX*4)
	VMOVUPS      Z1, 64(DI)(AX*4)
	VMOVUPS      Z2, 128(DI)(AX*4)
	VMOVUPS      Z3, 192(DI)(AX*4)
	VMOVUPS      Z4, 256(DI)(AX*4)
	VMOVUPS      Z5, 320(DI)(AX*4)
	VMOVUPS      Z6, 384(DI)(AX*4)
	VMOVUPS      Z7, 448(DI)(AX*4)
	MOVQ         R9, AX
	JMP          axpyrows512_128

axpyrows512_64:
	LEAQ    64(AX), R9
	CMPQ    R9, BX
	JG      axpyrows512_16
	VMOVUPS (DI)(AX*4), Z0
	VMOVUPS 64(DI)(AX*4), Z1
	VMOVUPS 128(DI)(AX*4), Z2
	VMOVUPS 192(DI)(AX*4), Z3
	LEAQ    (DX)(AX*2), R10
	MOVQ    s+8(FP), R11
	MOVQ    rows+24(FP), CX

axpyrows512_64r:
	VBROADCASTSS (R11), Z16
	VCVTPH2PS    (R10), Z8
	VCVTPH2PS    32(R10), Z9
	VCVTPH2PS    64(R10), Z10
	VCVTPH2PS    96(R10), Z11
	VFMADD231PS  Z16, Z8, Z0
	VFMADD231PS  Z16, Z9, Z1
	VFMADD231PS  Z16, Z10, Z2
	VFMADD231PS  Z16, Z11, Z3
	ADDQ         $4, R11
	ADDQ         R8, R10
	DECQ         CX
	JNZ          axpyrows512_64r
	VMOVUPS      Z0, (DI)(AX*4)
	VMOVUPS      Z1, 64(DI)(AX*4)
	VMOVUPS      Z2, 128(DI)(AX*4)
	VMOVUPS      Z3, 192(DI)(AX*4)
	MOVQ         R9, AX
	JMP          axpyrows512_64

axpyrows512_16:
	CMPQ    AX, BX
	JGE     axpyrows512_done
	VMOVUPS (DI)(AX*4), Z0
	LEAQ    (DX)(AX*2), R10
	MOVQ    s+8(FP), R11
	MOVQ    rows+24(FP), CX

axpyrows512_16r:
	VBROADCASTSS (R11), Z16
	VCVTPH2PS    (R10), Z8
	VFMADD231PS  Z16, Z8, Z0
	ADDQ         $4, R11
	ADDQ         R8, R10
	DECQ         CX
	JNZ          axpyrows512_16r
	VMOVUPS      Z0, (DI)(AX*4)
	ADDQ         $16, AX
	JMP          axpyrows512_16

axpyrows512_done:
	VZEROUPPER
	RET

// func dotRowsAVX2(dst, q *float32, k *uint16, rows, hd int, scale float32)
TEXT ·dotRowsAVX2(SB), NOSPLIT, $0-44
	MOVQ         dst+0(FP), DI
	MOVQ         q+8(FP), SI
	MOVQ         k+16(FP), R10
	MOVQ         rows+24(FP), CX
	MOVQ         hd+32(FP), BX
	VBROADCASTSS scale+40(FP), X14
	LEAQ         (BX)(BX*1), R8
	LEAQ         (R10)(R8*1), R11
	LEAQ         (R11)(R8*1), R12
	LEAQ         (R12)(R8*1), R13
	SHLQ         $2, R8

dotrows256_4:
	CMPQ   CX, $4
	JL     dotrows256_1
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   AX, AX

dotrows256_4d:
	VMOVUPS     (SI)(AX*4), Y8
	VCVTPH2PS   (R10)(AX*2), Y4
	VCVTPH2PS   (R11)(AX*2), Y5
	VCVTPH2PS   (R12)(AX*2), Y6
	VCVTPH2PS   (R13)(AX*2), Y7
	VFMADD231PS Y8, Y4, Y0
	VFMADD231PS Y8, Y5, Y1
	VFMADD231PS Y8, Y6, Y2
	VFMADD231PS Y8, Y7, Y3
	ADDQ        $8, AX
	CMPQ        AX, BX
	JL          dotrows256_4d

	VUNPCKLPS    Y1, Y0, Y4
	VUNPCKHPS    Y1, Y0, Y5
	VADDPS       Y5, Y4, Y4
	VUNPCKLPS    Y3, Y2, Y6
	VUNPCKHPS    Y3, Y2, Y7
	VADDPS       Y7, Y6, Y6
	VUNPCKLPD    Y6, Y4, Y5
	VUNPCKHPD    Y6, Y4, Y7
	VADDPS       Y7, Y5, Y5
	VEXTRACTF128 $1, Y5, X6
	VADDPS       X6, X5, X5
	VMULPS       X14, X5, X5
	VMOVUPS      X5, (DI)
	ADDQ         $16, DI
	ADDQ         R8, R10
	ADDQ         R8, R11
	ADDQ         R8, R12
	ADDQ         R8, R13
	SUBQ         $4, CX
	JMP          dotrows256_4

dotrows256_1:
	SHRQ $2, R8

dotrows256_1r:
	TESTQ  CX, CX
	JZ     dotrows256_done
	VXORPS Y0, Y0, Y0
	XORQ   AX, AX

dotrows256_1d:
	VCVTPH2PS    (R10)(AX*2), Y4
	VFMADD231PS  (SI)(AX*4), Y4, Y0
	ADDQ         $8, AX
	CMPQ         AX, BX
	JL           dotrows256_1d
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VMULSS       X14, X0, X0
	VMOVSS       X0, (DI)
	ADDQ         $4, DI
	ADDQ         R8, R10
	DECQ         CX
	JMP          dotrows256_1r

dotrows256_done:
	VZEROUPPER
	RET

// func axpyRowsAVX2(out, s *float32, v *uint16, rows, hd int)
TEXT ·axpyRowsAVX2(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ v+16(FP), DX
	MOVQ hd+32(FP), BX
	LEAQ (BX)(BX*1), R8
	XORQ AX, AX

axpyrows256_64:
	LEAQ    64(AX), R9
	CMPQ    R9, BX
	JG      axpyrows256_32
	VMOVUPS (DI)(AX*4), Y0
	VMOVUPS 32(DI)(AX*4), Y1
	VMOVUPS 64(DI)(AX*4), Y2
	VMOVUPS 96(DI)(AX*4), Y3
	VMOVUPS 128(DI)(AX*4), Y4
	VMOVUPS 160(DI)(AX*4), Y5
	VMOVUPS 192(DI)(AX*4), Y6
	VMOVUPS 224(DI)(AX*4), Y7
	LEAQ    (DX)(AX*2), R10
	MOVQ    s+8(FP), R11
	MOVQ    rows+24(FP), CX

axpyrows256_64r:
	VBROADCASTSS (R11), Y12
	VCVTPH2PS    (R10), Y8
	VCVTPH2PS    16(R10), Y9
	VCVTPH2PS    32(R10), Y10
	VCVTPH2PS    48(R10), Y11
	VFMADD231PS  Y12, Y8, Y0
	VFMADD231PS  Y12, Y9, Y1
	VFMADD231PS  Y12, Y10, Y2
	VFMADD231PS  Y12, Y11, Y3
	VCVTPH2PS    64(R10), Y8
	VCVTPH2PS    80(R10), Y9
	VCVTPH2PS    96(R10), Y10
	VCVTPH2PS    112(R10), Y11
	VFMADD231PS  Y12, Y8, Y4
	VFMADD231PS  Y12, Y9, Y5
	VFMADD231PS  Y12, Y10, Y6
	VFMADD231PS  Y12, Y11, Y7
	ADDQ         $4, R11
	ADDQ         R8, R10
	DECQ         CX
	JNZ          axpyrows256_64r
	VMOVUPS      Y0, (DI)(AX*4)
	VMOVUPS      Y1, 32(DI)(AX*4)
	VMOVUPS      Y2, 64(DI)(AX*4)
	VMOVUPS      Y3, 96(DI)(AX*4)
	VMOVUPS      Y4, 128(DI)(AX*4)
	VMOVUPS      Y5, 160(DI)(AX*4)
	VMOVUPS      Y6, 192(DI)(AX*4)
	VMOVUPS      Y7, 224(DI)(AX*4)
	MOVQ         R9, AX
	JMP          axpyrows256_64

axpyrows256_32:
	LEAQ    32(AX), R9
	CMPQ    R9, BX
	JG      axpyrows256_8
	VMOVUPS (DI)(AX*4), Y0
	VMOVUPS 32(DI)(AX*4), Y1
	VMOVUPS 64(DI)(AX*4), Y2
	VMOVUPS 96(DI)(AX*4), Y3
	LEAQ    (DX)(AX*2), R10
	MOVQ    s+8(FP), R11
	MOVQ    rows+24(FP), CX

axpyrows256_32r:
	VBROADCASTSS (R11), Y12
	VCVTPH2PS    (R10), Y8
	VCVTPH2PS    16(R10), Y9
	VCVTPH2PS    32(R10), Y10
	VCVTPH2PS    48(R10), Y11
	VFMADD231PS  Y12, Y8, Y0
	VFMADD231PS  Y12, Y9, Y1
	VFMADD231PS  Y12, Y10, Y2
	VFMADD231PS  Y12, Y11, Y3
	ADDQ         $4, R11
	ADDQ         R8, R10
	DECQ         CX
	JNZ          axpyrows256_32r
	VMOVUPS      Y0, (DI)(AX*4)
	VMOVUPS      Y1, 32(DI)(AX*4)
	VMOVUPS      Y2, 64(DI)(AX*4)
	VMOVUPS      Y3, 96(DI)(AX*4)
	MOVQ         R9, AX
	JMP          axpyrows256_32

axpyrows256_8:
	CMPQ    AX, BX
	JGE     axpyrows256_done
	VMOVUPS (DI)(AX*4), Y0
	LEAQ    (DX)(AX*2), R10
	MOVQ    s+8(FP), R11
	MOVQ    rows+24(FP), CX

axpyrows256_8r:
	VBROADCASTSS (R11), Y12
	VCVTPH2PS    (R10), Y8
	VFMADD231PS  Y12, Y8, Y0
	ADDQ         $4, R11
	ADDQ         R8, R10
	DECQ         CX
	JNZ          axpyrows256_8r
	VMOVUPS      Y0, (DI)(AX*4)
	ADDQ         $8, AX
	JMP          axpyrows256_8

axpyrows256_done:
	VZEROUPPER
	RET
