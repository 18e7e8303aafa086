package collectives

import (
	"sync/atomic"
	"testing"
)

// TestPublish: publish stores into the atomic.Uint64 itself (the cast to
// its word is right), which Load then reads; the ordering is
// internal/release's, tested there.
func TestPublish(t *testing.T) {
	var w [3]atomic.Uint64
	for i, v := range []uint64{7, 1 << 63, 0} {
		publish(&w[1], v)
		if got := w[1].Load(); got != v {
			t.Fatalf("store %d: published %#x, loaded %#x", i, v, got)
		}
		if w[0].Load() != 0 || w[2].Load() != 0 {
			t.Fatalf("store %d: the neighbouring words changed", i)
		}
	}
}
