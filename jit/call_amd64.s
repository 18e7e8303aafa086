#include "textflag.h"

// func callCode(code uintptr, a *callArgs)
//
// Calls generated leaf code with the argument block pointer in BX. The
// generated code uses no stack beyond the return address pushed by CALL,
// calls nothing, preserves SP and BP and never touches R14, R15 or X15, and
// executes VZEROUPPER before RET when it used YMM/ZMM registers. NOSPLIT with
// a zero frame: the 8 bytes of the return address fit in the stack guard.
TEXT ·callCode(SB), NOSPLIT, $0-16
	MOVQ code+0(FP), AX
	MOVQ a+8(FP), BX
	CALL AX
	RET
