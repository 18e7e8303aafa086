package ccall

// Supported reports whether Call is available on this architecture.
const Supported = true

// Call runs fn(arg) on the C stack whose 16-byte aligned top is stack and
// returns fn's 64-bit result. See the package documentation for what fn
// must satisfy.
//
//go:noescape
func Call(fn, arg, stack uintptr) int64
