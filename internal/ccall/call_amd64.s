#include "textflag.h"

// func Call(fn, arg, stack uintptr) int64
//
// Switches SP to stack (16-byte aligned top of a C stack), calls fn with
// arg in DI under the System V ABI and switches back. The Go SP is kept on
// the C stack; the C function preserves BX, BP, R12-R15 (R14 is g) and the
// ABI wrapper restores X15 after return. NOSPLIT with a zero frame: nothing
// is pushed on the goroutine stack beyond Call's own return address.
TEXT ·Call(SB), NOSPLIT, $0-32
	MOVQ fn+0(FP), AX
	MOVQ arg+8(FP), DI
	MOVQ stack+16(FP), CX
	MOVQ SP, BX
	MOVQ CX, SP
	PUSHQ BX
	SUBQ $8, SP
	CALL AX
	ADDQ $8, SP
	POPQ BX
	MOVQ BX, SP
	MOVQ AX, ret+24(FP)
	RET
