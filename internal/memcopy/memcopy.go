// Package memcopy copies bulk data that another core reads next, as the
// node transports move it between processes: Stream writes the
// destination with non-temporal stores, which go to memory without
// first taking the destination's cache lines from the core that read
// them last. Where two cores do not share a cache (two sockets, or a
// virtual machine whose vCPUs sit on different core complexes) a plain
// copy into lines the other core holds waits for each line to come
// back, and runs at a fraction of the memory's speed; the reader then
// finds the data in memory. Below a few KiB, or where the cores share a
// cache, a plain copy is as fast or faster (docs/perf/endpoint.md).
//
// Copy is the opposite case: a large copy whose destination this core
// reads next (a collective's result, a one-sided Get), which the
// runtime's copy would write with non-temporal stores from 1 MiB.
package memcopy

import "unsafe"

// MinStream is the length below which Stream makes a plain copy.
const MinStream = 1 << 10

// Stream copies min(len(dst), len(src)) bytes from src to dst and
// returns that count, as copy does, with non-temporal stores for the
// bulk of the data on amd64 with AVX2 (a plain copy elsewhere, and for
// fewer than MinStream bytes). The stores are visible to other cores
// when Stream returns, before any store that follows it. dst and src
// must not overlap.
func Stream(dst, src []byte) int {
	n := min(len(dst), len(src))
	if !useAVX2 || n < MinStream {
		return copy(dst, src)
	}
	head := int(-uintptr(unsafe.Pointer(unsafe.SliceData(dst)))) & 31
	copy(dst[:head], src[:head])
	body := (n - head) &^ 127
	streamAVX2(unsafe.Pointer(&dst[head]), unsafe.Pointer(&src[head]), body)
	copy(dst[head+body:n], src[head+body:n])
	return n
}

// SharedMin is the length from which Shared streams: from 8 KiB
// non-temporal stores were as fast as a plain copy where two cores share
// a cache and 2.7–3.6× faster where they do not; below it the plain copy
// is faster where the cores share one (docs/perf/endpoint.md, medium
// slots; docs/perf/collectives.md, exchange areas).
const SharedMin = 8 << 10

// Shared copies src into dst, memory that another core reads next (a
// slot or area of a node-shared segment, a buffer other threads copy
// out of), and returns the count copied: with Stream from SharedMin
// bytes, with copy below. Its stores are visible to other cores when it
// returns, before any store that follows it.
func Shared(dst, src []byte) int {
	if len(src) >= SharedMin && len(dst) >= SharedMin {
		return Stream(dst, src)
	}
	return copy(dst, src)
}

// Enabled reports whether Stream uses non-temporal stores on this
// machine.
func Enabled() bool { return useAVX2 }
