package memcopy

import (
	"sync"
	"unsafe"

	"github.com/weft-hpc/weft/internal/cpucache"
)

// Go's runtime copies a block of goStreamMin bytes or more with
// non-temporal stores on amd64 (memmove's large-copy path), whatever the
// cache: a copy of 1 MiB then runs at half the speed of the same bytes
// copied in pieces (27 against 47 GB/s here), and whoever reads the
// destination next finds it in memory instead of the cache. glibc moves
// its own threshold with the last-level cache (three quarters of it), so
// a C program's memcpy of a few MiB stays in the cache.
const (
	goStreamMin = 1 << 20
	cachedChunk = goStreamMin / 2
)

// Copy copies min(len(dst), len(src)) bytes from src to dst and returns
// that count, as copy does, but keeps the destination in the cache where
// it fits: from 1 MiB up to CachedMax bytes it copies in pieces that the
// runtime copies with ordinary stores. Beyond CachedMax, for overlapping
// slices and below 1 MiB it is copy (and inlined, a length test more).
func Copy(dst, src []byte) int {
	if len(src) < goStreamMin {
		return copy(dst, src)
	}
	return copyCached(dst, src)
}

// CopyOf is Copy for slices of any element type.
func CopyOf[T any](dst, src []T) int {
	var zero T
	if len(src)*int(unsafe.Sizeof(zero)) < goStreamMin {
		return copy(dst, src)
	}
	return copyCached(dst, src)
}

// copyCached is Copy of 1 MiB or more.
func copyCached[T any](dst, src []T) int {
	n := min(len(dst), len(src))
	var zero T
	size := int(unsafe.Sizeof(zero))
	bytes := n * size
	if bytes >= CachedMax() || overlap(dst[:n], src[:n], bytes) {
		return copy(dst, src)
	}
	step := max(cachedChunk/size, 1)
	for off := 0; off < n; off += step {
		end := min(n, off+step)
		copy(dst[off:end], src[off:end])
	}
	return n
}

// overlap reports whether the bytes of two slices of the same length
// overlap.
func overlap[T any](a, b []T, bytes int) bool {
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(bytes) && pb < pa+uintptr(bytes)
}

// CachedMax is the size from which Copy leaves the runtime's
// non-temporal copy alone: a quarter of the last-level cache (source and
// destination then fill half of it), 4 MiB where the cache's size is
// unknown. Measured on a 32 MiB L3: pieces 1.75× faster than copy up to
// 4 MiB, 1.2× at 8 MiB, a tie at 12 MiB (docs/perf/collectives.md).
var CachedMax = sync.OnceValue(func() int {
	if n := int(cpucache.LastLevel(0)); n > 0 {
		return max(n/4, goStreamMin)
	}
	return 4 << 20
})
