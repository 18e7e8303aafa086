#include "textflag.h"

// Every kernel computes dst[i] = dst[i] op src[i] over n bytes, n a
// multiple of 32: four 32-byte steps a round, then single steps.
// Arguments: dst+0(FP), src+8(FP), n+16(FP).

#define LOAD \
	MOVQ dst+0(FP), DI \
	MOVQ src+8(FP), SI \
	MOVQ n+16(FP), CX

// BINOP: an AVX2 instruction INSN m256, ymm, ymm (Go operand order:
// source two, source one, destination) with dst as source one.
#define BINOP(INSN) \
	LOAD \
round: \
	CMPQ CX, $128 \
	JB   step \
	VMOVDQU (DI), Y0 \
	VMOVDQU 32(DI), Y1 \
	VMOVDQU 64(DI), Y2 \
	VMOVDQU 96(DI), Y3 \
	INSN (SI), Y0, Y0 \
	INSN 32(SI), Y1, Y1 \
	INSN 64(SI), Y2, Y2 \
	INSN 96(SI), Y3, Y3 \
	VMOVDQU Y0, (DI) \
	VMOVDQU Y1, 32(DI) \
	VMOVDQU Y2, 64(DI) \
	VMOVDQU Y3, 96(DI) \
	ADDQ $128, DI \
	ADDQ $128, SI \
	SUBQ $128, CX \
	JMP  round \
step: \
	CMPQ CX, $32 \
	JB   done \
	VMOVDQU (DI), Y0 \
	INSN (SI), Y0, Y0 \
	VMOVDQU Y0, (DI) \
	ADDQ $32, DI \
	ADDQ $32, SI \
	SUBQ $32, CX \
	JMP  step \
done: \
	VZEROUPPER \
	RET

// FMIN and FMAX: Go's min and max of floats, x = dst and y = src, with
// the instructions the Go compiler emits for them on amd64, so that every
// result, NaN payloads included, is bitwise that of the scalar loop:
// m = MIN(x, y) (the instruction returns its second source on equal or
// unordered operands), then m | MIN(m, x), which gives -0 for ±0 and a
// NaN for a NaN operand. Max is -min(-x, -y), the sign flipped by XOR
// with a sign mask (all ones shifted left by BITS).
#define FMIN(MIN, OR) \
	LOAD \
fstep: \
	CMPQ CX, $32 \
	JB   fdone \
	VMOVDQU (DI), Y0 \
	VMOVDQU (SI), Y1 \
	MIN Y1, Y0, Y2 \
	MIN Y0, Y2, Y3 \
	OR  Y3, Y2, Y2 \
	VMOVDQU Y2, (DI) \
	ADDQ $32, DI \
	ADDQ $32, SI \
	SUBQ $32, CX \
	JMP  fstep \
fdone: \
	VZEROUPPER \
	RET

#define FMAX(MIN, OR, SHIFT, BITS) \
	LOAD \
	VPCMPEQD Y7, Y7, Y7 \
	SHIFT $BITS, Y7, Y7 \
fstep: \
	CMPQ CX, $32 \
	JB   fdone \
	VMOVDQU (DI), Y0 \
	VMOVDQU (SI), Y1 \
	VPXOR Y7, Y0, Y0 \
	VPXOR Y7, Y1, Y1 \
	MIN Y1, Y0, Y2 \
	MIN Y0, Y2, Y3 \
	OR  Y3, Y2, Y2 \
	VPXOR Y7, Y2, Y2 \
	VMOVDQU Y2, (DI) \
	ADDQ $32, DI \
	ADDQ $32, SI \
	SUBQ $32, CX \
	JMP  fstep \
fdone: \
	VZEROUPPER \
	RET

TEXT ·vaddI8(SB), NOSPLIT, $0-24
	BINOP(VPADDB)

TEXT ·vaddI16(SB), NOSPLIT, $0-24
	BINOP(VPADDW)

TEXT ·vaddI32(SB), NOSPLIT, $0-24
	BINOP(VPADDD)

TEXT ·vaddI64(SB), NOSPLIT, $0-24
	BINOP(VPADDQ)

TEXT ·vaddF32(SB), NOSPLIT, $0-24
	BINOP(VADDPS)

TEXT ·vaddF64(SB), NOSPLIT, $0-24
	BINOP(VADDPD)

TEXT ·vmulI16(SB), NOSPLIT, $0-24
	BINOP(VPMULLW)

TEXT ·vmulI32(SB), NOSPLIT, $0-24
	BINOP(VPMULLD)

TEXT ·vmulF32(SB), NOSPLIT, $0-24
	BINOP(VMULPS)

TEXT ·vmulF64(SB), NOSPLIT, $0-24
	BINOP(VMULPD)

TEXT ·vminI8(SB), NOSPLIT, $0-24
	BINOP(VPMINSB)

TEXT ·vminI16(SB), NOSPLIT, $0-24
	BINOP(VPMINSW)

TEXT ·vminI32(SB), NOSPLIT, $0-24
	BINOP(VPMINSD)

TEXT ·vminU8(SB), NOSPLIT, $0-24
	BINOP(VPMINUB)

TEXT ·vminU16(SB), NOSPLIT, $0-24
	BINOP(VPMINUW)

TEXT ·vminU32(SB), NOSPLIT, $0-24
	BINOP(VPMINUD)

TEXT ·vmaxI8(SB), NOSPLIT, $0-24
	BINOP(VPMAXSB)

TEXT ·vmaxI16(SB), NOSPLIT, $0-24
	BINOP(VPMAXSW)

TEXT ·vmaxI32(SB), NOSPLIT, $0-24
	BINOP(VPMAXSD)

TEXT ·vmaxU8(SB), NOSPLIT, $0-24
	BINOP(VPMAXUB)

TEXT ·vmaxU16(SB), NOSPLIT, $0-24
	BINOP(VPMAXUW)

TEXT ·vmaxU32(SB), NOSPLIT, $0-24
	BINOP(VPMAXUD)

TEXT ·vand(SB), NOSPLIT, $0-24
	BINOP(VPAND)

TEXT ·vor(SB), NOSPLIT, $0-24
	BINOP(VPOR)

TEXT ·vxor(SB), NOSPLIT, $0-24
	BINOP(VPXOR)

TEXT ·vminF32(SB), NOSPLIT, $0-24
	FMIN(VMINPS, VORPS)

TEXT ·vminF64(SB), NOSPLIT, $0-24
	FMIN(VMINPD, VORPD)

TEXT ·vmaxF32(SB), NOSPLIT, $0-24
	FMAX(VMINPS, VORPS, VPSLLD, 31)

TEXT ·vmaxF64(SB), NOSPLIT, $0-24
	FMAX(VMINPD, VORPD, VPSLLQ, 63)
