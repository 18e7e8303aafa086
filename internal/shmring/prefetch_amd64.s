#include "textflag.h"

// func prefetchWrite(addr *byte)
TEXT ·prefetchWrite(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ addr+0(FP), AX
	// PREFETCHW (AX), which the assembler does not name.
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
	RET

// func prefetchRead(addr *byte)
TEXT ·prefetchRead(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ addr+0(FP), AX
	PREFETCHT0 (AX)
	RET
