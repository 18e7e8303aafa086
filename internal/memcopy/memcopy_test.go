package memcopy

import (
	"bytes"
	"fmt"
	"testing"
)

// TestStream: every length up to a few blocks past MinStream and some
// large ones, at every destination and source offset within a 32-byte
// step: the bytes copied equal copy's, the count is copy's, and the
// bytes around the destination are untouched.
func TestStream(t *testing.T) {
	src := make([]byte, 1<<17+64)
	for i := range src {
		src[i] = byte(i*7 + i>>8)
	}
	lengths := []int{0, 1, 31, MinStream - 1, MinStream, 1 << 16, 1<<16 + 129, 1 << 17}
	for n := MinStream; n < MinStream+300; n += 7 {
		lengths = append(lengths, n)
	}
	dst := make([]byte, len(src)+128)
	for _, n := range lengths {
		for doff := 0; doff < 33; doff += 3 {
			for _, soff := range []int{0, 1, 8, 31} {
				for i := range dst {
					dst[i] = 0xa5
				}
				d := dst[doff+16 : doff+16+n]
				if got := Stream(d, src[soff:soff+n]); got != n {
					t.Fatalf("n %d: Stream returned %d", n, got)
				}
				if !bytes.Equal(d, src[soff:soff+n]) {
					t.Fatalf("n %d, dst offset %d, src offset %d: bytes differ", n, doff, soff)
				}
				for i, b := range dst {
					if (i < doff+16 || i >= doff+16+n) && b != 0xa5 {
						t.Fatalf("n %d, dst offset %d: byte %d outside the destination written", n, doff, i)
					}
				}
			}
		}
	}
	if got := Stream(dst[:10], src[:5]); got != 5 {
		t.Fatalf("Stream of 5 into 10 returned %d", got)
	}
}

// TestShared: Shared copies like copy on both sides of SharedMin.
func TestShared(t *testing.T) {
	for _, n := range []int{0, 5, SharedMin - 1, SharedMin, SharedMin + 77} {
		src, dst := make([]byte, n), make([]byte, n+9)
		for i := range src {
			src[i] = byte(i*13 + 1)
		}
		if got := Shared(dst, src); got != n || !bytes.Equal(dst[:n], src) {
			t.Fatalf("n %d: Shared returned %d, bytes equal %v", n, got, bytes.Equal(dst[:n], src))
		}
		if n > 0 && Shared(dst[:n-1], src) != n-1 {
			t.Fatalf("n %d: Shared into a shorter dst did not stop at its length", n)
		}
	}
}

func BenchmarkStream(b *testing.B) {
	for _, n := range []int{4 << 10, 64 << 10, 1 << 20} {
		src, dst := make([]byte, n), make([]byte, n)
		b.Run(fmt.Sprintf("stream-%dK", n>>10), func(b *testing.B) {
			b.SetBytes(int64(n))
			for range b.N {
				Stream(dst, src)
			}
		})
		b.Run(fmt.Sprintf("copy-%dK", n>>10), func(b *testing.B) {
			b.SetBytes(int64(n))
			for range b.N {
				copy(dst, src)
			}
		})
	}
}
