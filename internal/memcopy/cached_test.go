package memcopy

import (
	"fmt"
	"slices"
	"testing"
)

// TestCopy: Copy copies what copy copies and returns its count, for
// byte and wider elements, lengths around the 1 MiB threshold and the
// piece size, unequal lengths, and overlapping slices in both directions
// (where it must leave the job to copy).
func TestCopy(t *testing.T) {
	const mib = 1 << 20
	for _, n := range []int{0, 1, 4095, mib - 1, mib, mib + 1, mib + cachedChunk + 7, 3 * mib} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*13 + i>>9)
		}
		for _, short := range []int{0, 1, 100} {
			dst := make([]byte, max(n-short, 0)+8)
			want := slices.Clone(dst)
			wn := copy(want[:len(want)-8], src)
			if got := Copy(dst[:len(dst)-8], src); got != wn || !slices.Equal(dst, want) {
				t.Fatalf("bytes, n %d, dst shorter by %d: count %d (want %d), equal %v", n, short, got, wn, slices.Equal(dst, want))
			}
		}
	}
	// Elements of 24 bytes: the pieces hold whole elements.
	type triple struct{ a, b, c uint64 }
	src := make([]triple, (2<<20)/24+5)
	for i := range src {
		src[i] = triple{uint64(i), uint64(i) * 3, ^uint64(i)}
	}
	dst := make([]triple, len(src))
	if got := CopyOf(dst, src); got != len(src) || !slices.Equal(dst, src) {
		t.Fatalf("24-byte elements: count %d of %d, equal %v", got, len(src), slices.Equal(dst, src))
	}
	// Overlap, forwards and backwards, by less than a piece.
	for _, shift := range []int{1, 4096, cachedChunk + 3} {
		for _, forward := range []bool{true, false} {
			t.Run(fmt.Sprintf("overlap-%d-%v", shift, forward), func(t *testing.T) {
				buf := make([]byte, 3<<20)
				for i := range buf {
					buf[i] = byte(i * 7)
				}
				want := slices.Clone(buf)
				n := 2 << 20
				d, s := shift, 0
				if !forward {
					d, s = 0, shift
				}
				copy(want[d:d+n], want[s:s+n])
				if got := Copy(buf[d:d+n], buf[s:s+n]); got != n || !slices.Equal(buf, want) {
					t.Fatalf("count %d, equal %v", got, slices.Equal(buf, want))
				}
			})
		}
	}
	if m := CachedMax(); m < 1<<20 {
		t.Errorf("CachedMax %d below 1 MiB", m)
	}
}

// BenchmarkCopy compares copy with Copy of the same bytes between two
// buffers reused by every call (both in the cache when they fit):
//
//	go test -run '^$' -bench Copy ./internal/memcopy/
func BenchmarkCopy(b *testing.B) {
	for _, n := range []int{256 << 10, 1 << 20, 4 << 20, 8 << 20, 16 << 20} {
		src, dst := make([]byte, n), make([]byte, n)
		for i := range src {
			src[i] = byte(i)
		}
		for _, f := range []struct {
			name string
			f    func(d, s []byte) int
		}{{"copy", func(d, s []byte) int { return copy(d, s) }}, {"Copy", Copy}} {
			b.Run(fmt.Sprintf("%s/%dKiB", f.name, n>>10), func(b *testing.B) {
				b.SetBytes(int64(n))
				for b.Loop() {
					f.f(dst, src)
				}
			})
		}
	}
}
