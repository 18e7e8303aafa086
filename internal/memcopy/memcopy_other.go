//go:build !amd64

package memcopy

import "unsafe"

const useAVX2 = false

// streamAVX2 is never called without AVX2; a plain copy keeps it safe.
func streamAVX2(dst, src unsafe.Pointer, n int) {
	copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
}
