//go:build !amd64

package vecop

import "unsafe"

// useAVX2 is false away from amd64: the loops below are never given a
// bulk, they only keep the kernel table's names defined.
var useAVX2 = false

func vaddI8(d, s unsafe.Pointer, n int)  { addLoop(view[int8](d, n), view[int8](s, n)) }
func vaddI16(d, s unsafe.Pointer, n int) { addLoop(view[int16](d, n), view[int16](s, n)) }
func vaddI32(d, s unsafe.Pointer, n int) { addLoop(view[int32](d, n), view[int32](s, n)) }
func vaddI64(d, s unsafe.Pointer, n int) { addLoop(view[int64](d, n), view[int64](s, n)) }
func vaddF32(d, s unsafe.Pointer, n int) { addLoop(view[float32](d, n), view[float32](s, n)) }
func vaddF64(d, s unsafe.Pointer, n int) { addLoop(view[float64](d, n), view[float64](s, n)) }
func vmulI16(d, s unsafe.Pointer, n int) { mulLoop(view[int16](d, n), view[int16](s, n)) }
func vmulI32(d, s unsafe.Pointer, n int) { mulLoop(view[int32](d, n), view[int32](s, n)) }
func vmulF32(d, s unsafe.Pointer, n int) { mulLoop(view[float32](d, n), view[float32](s, n)) }
func vmulF64(d, s unsafe.Pointer, n int) { mulLoop(view[float64](d, n), view[float64](s, n)) }
func vminI8(d, s unsafe.Pointer, n int)  { minLoop(view[int8](d, n), view[int8](s, n)) }
func vminI16(d, s unsafe.Pointer, n int) { minLoop(view[int16](d, n), view[int16](s, n)) }
func vminI32(d, s unsafe.Pointer, n int) { minLoop(view[int32](d, n), view[int32](s, n)) }
func vminU8(d, s unsafe.Pointer, n int)  { minLoop(view[uint8](d, n), view[uint8](s, n)) }
func vminU16(d, s unsafe.Pointer, n int) { minLoop(view[uint16](d, n), view[uint16](s, n)) }
func vminU32(d, s unsafe.Pointer, n int) { minLoop(view[uint32](d, n), view[uint32](s, n)) }
func vminF32(d, s unsafe.Pointer, n int) { minLoop(view[float32](d, n), view[float32](s, n)) }
func vminF64(d, s unsafe.Pointer, n int) { minLoop(view[float64](d, n), view[float64](s, n)) }
func vmaxI8(d, s unsafe.Pointer, n int)  { maxLoop(view[int8](d, n), view[int8](s, n)) }
func vmaxI16(d, s unsafe.Pointer, n int) { maxLoop(view[int16](d, n), view[int16](s, n)) }
func vmaxI32(d, s unsafe.Pointer, n int) { maxLoop(view[int32](d, n), view[int32](s, n)) }
func vmaxU8(d, s unsafe.Pointer, n int)  { maxLoop(view[uint8](d, n), view[uint8](s, n)) }
func vmaxU16(d, s unsafe.Pointer, n int) { maxLoop(view[uint16](d, n), view[uint16](s, n)) }
func vmaxU32(d, s unsafe.Pointer, n int) { maxLoop(view[uint32](d, n), view[uint32](s, n)) }
func vmaxF32(d, s unsafe.Pointer, n int) { maxLoop(view[float32](d, n), view[float32](s, n)) }
func vmaxF64(d, s unsafe.Pointer, n int) { maxLoop(view[float64](d, n), view[float64](s, n)) }
func vand(d, s unsafe.Pointer, n int)    { andLoop(view[byte](d, n), view[byte](s, n)) }
func vor(d, s unsafe.Pointer, n int)     { orLoop(view[byte](d, n), view[byte](s, n)) }
func vxor(d, s unsafe.Pointer, n int)    { xorLoop(view[byte](d, n), view[byte](s, n)) }
