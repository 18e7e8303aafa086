package endpoint_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
)

// TestCreateFreeEndpointsBounded: endpoints created and freed over and
// over are released for good — the world's list of endpoints to close
// stays empty and the heap does not grow with the number of rounds (each
// round used to keep about 13 KB until World.Close).
func TestCreateFreeEndpointsBounded(t *testing.T) {
	singleton(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"))
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	defer w.Close()
	if w.Comm().Size() != 1 {
		t.Fatalf("WEFT_PMI=singleton gave a job of %d ranks", w.Comm().Size())
	}
	round := func(opts ...endpoint.Option) {
		eps, err := w.Comm().CreateEndpoints(ctx, 2, opts...)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range eps {
			if err := c.Free(); err != nil {
				t.Fatal(err)
			}
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	rounds := 300
	if testing.Short() {
		rounds = 100
	}
	for range 20 { // warm up: caches, the private fabric
		round()
	}
	before := heap()
	for i := range rounds {
		round()
		round(endpoint.Shared(true))
		if n := endpoint.OpenEndpoints(w); n != 0 {
			t.Fatalf("round %d: the world still holds %d freed endpoints", i, n)
		}
	}
	after := heap()
	grew := int64(after) - int64(before)
	t.Logf("heap %d → %d bytes over %d rounds (%d bytes a round)", before, after, 2*rounds, grew/int64(2*rounds))
	if grew > 1<<20 {
		t.Errorf("heap grew by %d bytes over %d create/free rounds", grew, 2*rounds)
	}
}
