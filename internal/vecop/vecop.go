// Package vecop holds the element-wise vector kernels of the collectives'
// built-in reductions: dst[i] = dst[i] ∘ src[i] for sums, products,
// minima, maxima and bitwise operations on Go's numeric types. On amd64
// with AVX2 the bulk of a vector goes through 256-bit instructions (32
// bytes a step, four steps unrolled); the tail, other machines and the
// operations AVX2 lacks (64-bit integer products, minima and maxima) use
// plain Go loops. Every kernel is element-wise, so its result is bitwise
// that of the scalar loop: the vector width never changes the order of
// operations within an element.
//
// Float minima and maxima follow Go's min and max: a NaN operand gives a
// NaN, and -0 is smaller than +0.
package vecop

import "unsafe"

// Enabled reports whether the vector kernels are in use on this machine
// (amd64 with AVX2).
func Enabled() bool { return useAVX2 }

// MinBytes is the length in bytes below which the kernels run the scalar
// loop (a call into assembly costs a few nanoseconds), and below which a
// caller with its own loop may as well keep it.
const MinBytes = 64

// bulk returns how many leading bytes of an n-byte vector the assembly
// kernels take: whole 32-byte steps, or none below MinBytes.
func bulk(n int) int {
	if !useAVX2 || n < MinBytes {
		return 0
	}
	return n &^ 31
}

// Kind names an element type for Func.
type Kind uint8

// The element kinds. Int and Uint are the platform's 64-bit int and uint.
const (
	Int8 Kind = iota + 1
	Int16
	Int32
	Int64
	Uint8
	Uint16
	Uint32
	Uint64
	Float32
	Float64
)

// Op names an operation for Func.
type Op uint8

// The operations.
const (
	Sum Op = iota + 1
	Prod
	Min
	Max
	BAnd
	BOr
	BXor
)

// Func returns the kernel of op on elements of kind k, taking dst and src
// as raw memory of n bytes each (n a multiple of the element size), or nil
// where this package has no kernel for the pair (the caller keeps its own
// loop). The vectors must not overlap unless they are the same.
func Func(k Kind, op Op) func(dst, src unsafe.Pointer, n int) {
	switch op {
	case BAnd:
		return band
	case BOr:
		return bor
	case BXor:
		return bxor
	}
	return kernels[k][op]
}

// kernels[kind][op] are the arithmetic kernels.
var kernels = [Float64 + 1][BXor + 1]func(dst, src unsafe.Pointer, n int){
	Int8:    {Sum: addI8, Min: minI8, Max: maxI8},
	Int16:   {Sum: addI16, Prod: mulI16, Min: minI16, Max: maxI16},
	Int32:   {Sum: addI32, Prod: mulI32, Min: minI32, Max: maxI32},
	Int64:   {Sum: addI64},
	Uint8:   {Sum: addI8, Min: minU8, Max: maxU8},
	Uint16:  {Sum: addI16, Prod: mulI16, Min: minU16, Max: maxU16},
	Uint32:  {Sum: addI32, Prod: mulI32, Min: minU32, Max: maxU32},
	Uint64:  {Sum: addI64},
	Float32: {Sum: addF32, Prod: mulF32, Min: minF32, Max: maxF32},
	Float64: {Sum: addF64, Prod: mulF64, Min: minF64, Max: maxF64},
}

// view returns n bytes at p as a []T.
func view[T any](p unsafe.Pointer, n int) []T {
	var z T
	return unsafe.Slice((*T)(p), n/int(unsafe.Sizeof(z)))
}

// run applies the assembly kernel vec to the bulk of the vectors and the
// scalar loop tail to the rest.
func run[T any](dst, src unsafe.Pointer, n int, vec func(dst, src unsafe.Pointer, n int), tail func(d, s []T)) {
	b := bulk(n)
	if b > 0 {
		vec(dst, src, b)
	}
	if b < n {
		tail(view[T](unsafe.Add(dst, b), n-b), view[T](unsafe.Add(src, b), n-b))
	}
}

type integer interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

type number interface{ integer | ~float32 | ~float64 }

func addLoop[T number](d, s []T) {
	s = s[:len(d)]
	for i := range d {
		d[i] += s[i]
	}
}

func mulLoop[T number](d, s []T) {
	s = s[:len(d)]
	for i := range d {
		d[i] *= s[i]
	}
}

func minLoop[T number](d, s []T) {
	s = s[:len(d)]
	for i := range d {
		d[i] = min(d[i], s[i])
	}
}

func maxLoop[T number](d, s []T) {
	s = s[:len(d)]
	for i := range d {
		d[i] = max(d[i], s[i])
	}
}

func andLoop(d, s []byte) {
	s = s[:len(d)]
	for i := range d {
		d[i] &= s[i]
	}
}

func orLoop(d, s []byte) {
	s = s[:len(d)]
	for i := range d {
		d[i] |= s[i]
	}
}

func xorLoop(d, s []byte) {
	s = s[:len(d)]
	for i := range d {
		d[i] ^= s[i]
	}
}

func addI8(d, s unsafe.Pointer, n int)  { run(d, s, n, vaddI8, addLoop[int8]) }
func addI16(d, s unsafe.Pointer, n int) { run(d, s, n, vaddI16, addLoop[int16]) }
func addI32(d, s unsafe.Pointer, n int) { run(d, s, n, vaddI32, addLoop[int32]) }
func addI64(d, s unsafe.Pointer, n int) { run(d, s, n, vaddI64, addLoop[int64]) }
func addF32(d, s unsafe.Pointer, n int) { run(d, s, n, vaddF32, addLoop[float32]) }
func addF64(d, s unsafe.Pointer, n int) { run(d, s, n, vaddF64, addLoop[float64]) }

func mulI16(d, s unsafe.Pointer, n int) { run(d, s, n, vmulI16, mulLoop[int16]) }
func mulI32(d, s unsafe.Pointer, n int) { run(d, s, n, vmulI32, mulLoop[int32]) }
func mulF32(d, s unsafe.Pointer, n int) { run(d, s, n, vmulF32, mulLoop[float32]) }
func mulF64(d, s unsafe.Pointer, n int) { run(d, s, n, vmulF64, mulLoop[float64]) }

func minI8(d, s unsafe.Pointer, n int)  { run(d, s, n, vminI8, minLoop[int8]) }
func minI16(d, s unsafe.Pointer, n int) { run(d, s, n, vminI16, minLoop[int16]) }
func minI32(d, s unsafe.Pointer, n int) { run(d, s, n, vminI32, minLoop[int32]) }
func minU8(d, s unsafe.Pointer, n int)  { run(d, s, n, vminU8, minLoop[uint8]) }
func minU16(d, s unsafe.Pointer, n int) { run(d, s, n, vminU16, minLoop[uint16]) }
func minU32(d, s unsafe.Pointer, n int) { run(d, s, n, vminU32, minLoop[uint32]) }
func minF32(d, s unsafe.Pointer, n int) { run(d, s, n, vminF32, minLoop[float32]) }
func minF64(d, s unsafe.Pointer, n int) { run(d, s, n, vminF64, minLoop[float64]) }

func maxI8(d, s unsafe.Pointer, n int)  { run(d, s, n, vmaxI8, maxLoop[int8]) }
func maxI16(d, s unsafe.Pointer, n int) { run(d, s, n, vmaxI16, maxLoop[int16]) }
func maxI32(d, s unsafe.Pointer, n int) { run(d, s, n, vmaxI32, maxLoop[int32]) }
func maxU8(d, s unsafe.Pointer, n int)  { run(d, s, n, vmaxU8, maxLoop[uint8]) }
func maxU16(d, s unsafe.Pointer, n int) { run(d, s, n, vmaxU16, maxLoop[uint16]) }
func maxU32(d, s unsafe.Pointer, n int) { run(d, s, n, vmaxU32, maxLoop[uint32]) }
func maxF32(d, s unsafe.Pointer, n int) { run(d, s, n, vmaxF32, maxLoop[float32]) }
func maxF64(d, s unsafe.Pointer, n int) { run(d, s, n, vmaxF64, maxLoop[float64]) }

func band(d, s unsafe.Pointer, n int) { run(d, s, n, vand, andLoop) }
func bor(d, s unsafe.Pointer, n int)  { run(d, s, n, vor, orLoop) }
func bxor(d, s unsafe.Pointer, n int) { run(d, s, n, vxor, xorLoop) }
