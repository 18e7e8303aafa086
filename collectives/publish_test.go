package collectives

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestPublish: a word published with publish reads back with Load, and a
// reader that sees it sees the plain writes made before it (the race
// detector checks the edge in its build).
func TestPublish(t *testing.T) {
	var w atomic.Uint64
	publish(&w, 7)
	if v := w.Load(); v != 7 {
		t.Fatalf("published 7, loaded %d", v)
	}
	const rounds = 5000
	publish(&w, 1) // round 1's turn
	var data [4]uint64
	var wg sync.WaitGroup
	wg.Add(1)
	bad := 0
	go func() {
		defer wg.Done()
		for i := uint64(1); i <= rounds; i++ {
			for w.Load() != 2*i {
			}
			for _, d := range data {
				if d != i {
					bad++
				}
			}
			publish(&w, 2*i+1)
		}
	}()
	for i := uint64(1); i <= rounds; i++ {
		for w.Load() != 2*i-1 {
		}
		for k := range data {
			data[k] = i
		}
		publish(&w, 2*i)
	}
	wg.Wait()
	if bad != 0 {
		t.Fatalf("%d stale reads", bad)
	}
}
