//go:build !amd64

package ccall

// Supported reports whether Call is available on this architecture.
const Supported = false

// Call is not available on this architecture (Supported is false); it
// returns -1 without calling fn.
func Call(fn, arg, stack uintptr) int64 { return -1 }
