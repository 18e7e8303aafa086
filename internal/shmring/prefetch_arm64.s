#include "textflag.h"

// func prefetchWrite(addr *byte)
TEXT ·prefetchWrite(SB), NOSPLIT|NOFRAME, $0-8
	MOVD addr+0(FP), R0
	PRFM (R0), PSTL1KEEP
	RET

// func prefetchRead(addr *byte)
TEXT ·prefetchRead(SB), NOSPLIT|NOFRAME, $0-8
	MOVD addr+0(FP), R0
	PRFM (R0), PLDL1KEEP
	RET
