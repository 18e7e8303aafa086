package release

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestPublishes: a reader that sees the flag stored by Store sees every
// plain write made before it (run with and without -race; the race
// detector checks the synchronisation in its build, the data check runs
// in both).
func TestPublishes(t *testing.T) {
	const rounds = 20000
	var data [8]uint64
	var flag uint64
	var wg sync.WaitGroup
	wg.Add(1)
	bad := 0
	go func() {
		defer wg.Done()
		for i := uint64(1); i <= rounds; i++ {
			for atomic.LoadUint64(&flag) != i {
			}
			for _, d := range data {
				if d != i {
					bad++
				}
			}
			Store(&flag, i+rounds) // hand back
		}
	}()
	for i := uint64(1); i <= rounds; i++ {
		if i > 1 {
			for atomic.LoadUint64(&flag) != i-1+rounds {
			}
		}
		for k := range data {
			data[k] = i
		}
		Store(&flag, i)
	}
	wg.Wait()
	if bad != 0 {
		t.Fatalf("%d stale reads", bad)
	}
}
