package vecop

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useAVX2 is whether the CPU and the OS support AVX2.
var useAVX2 = cpu.X86.HasAVX2

// The assembly kernels (vecop_amd64.s): n bytes, a multiple of 32.

//go:noescape
func vaddI8(dst, src unsafe.Pointer, n int)

//go:noescape
func vaddI16(dst, src unsafe.Pointer, n int)

//go:noescape
func vaddI32(dst, src unsafe.Pointer, n int)

//go:noescape
func vaddI64(dst, src unsafe.Pointer, n int)

//go:noescape
func vaddF32(dst, src unsafe.Pointer, n int)

//go:noescape
func vaddF64(dst, src unsafe.Pointer, n int)

//go:noescape
func vmulI16(dst, src unsafe.Pointer, n int)

//go:noescape
func vmulI32(dst, src unsafe.Pointer, n int)

//go:noescape
func vmulF32(dst, src unsafe.Pointer, n int)

//go:noescape
func vmulF64(dst, src unsafe.Pointer, n int)

//go:noescape
func vminI8(dst, src unsafe.Pointer, n int)

//go:noescape
func vminI16(dst, src unsafe.Pointer, n int)

//go:noescape
func vminI32(dst, src unsafe.Pointer, n int)

//go:noescape
func vminU8(dst, src unsafe.Pointer, n int)

//go:noescape
func vminU16(dst, src unsafe.Pointer, n int)

//go:noescape
func vminU32(dst, src unsafe.Pointer, n int)

//go:noescape
func vmaxI8(dst, src unsafe.Pointer, n int)

//go:noescape
func vmaxI16(dst, src unsafe.Pointer, n int)

//go:noescape
func vmaxI32(dst, src unsafe.Pointer, n int)

//go:noescape
func vmaxU8(dst, src unsafe.Pointer, n int)

//go:noescape
func vmaxU16(dst, src unsafe.Pointer, n int)

//go:noescape
func vmaxU32(dst, src unsafe.Pointer, n int)

//go:noescape
func vand(dst, src unsafe.Pointer, n int)

//go:noescape
func vor(dst, src unsafe.Pointer, n int)

//go:noescape
func vxor(dst, src unsafe.Pointer, n int)

//go:noescape
func vminF32(dst, src unsafe.Pointer, n int)

//go:noescape
func vminF64(dst, src unsafe.Pointer, n int)

//go:noescape
func vmaxF32(dst, src unsafe.Pointer, n int)

//go:noescape
func vmaxF64(dst, src unsafe.Pointer, n int)
