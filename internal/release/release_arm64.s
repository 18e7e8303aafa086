//go:build !race

#include "textflag.h"

// func Store(addr *uint64, v uint64)
TEXT ·Store(SB), NOSPLIT|NOFRAME, $0-16
	MOVD addr+0(FP), R0
	MOVD v+8(FP), R1
	STLR R1, (R0)
	RET
