package memcopy

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

var useAVX2 = cpu.X86.HasAVX2

// streamAVX2 copies n bytes (a multiple of 128) from src to 32-byte
// aligned dst with non-temporal stores, then fences them.
//
//go:noescape
func streamAVX2(dst, src unsafe.Pointer, n int)
