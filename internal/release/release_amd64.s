//go:build !race

#include "textflag.h"

// func Store(addr *uint64, v uint64)
TEXT ·Store(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ addr+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, 0(AX)
	RET
