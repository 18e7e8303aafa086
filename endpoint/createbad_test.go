package endpoint_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/errs"
)

// TestCreateEndpointsBadCount: a count no communicator can hold (negative,
// more than MaxRanks, more than MaxSharedHandles shared) is an ErrInvalid
// at once, before any endpoint is opened (a count of 2^40 used to open
// endpoints until the machine ran out of memory); the other callers of the
// collective learn of it through the exchange (ErrRemote) instead of
// waiting out their context; and a context that has ended stops the
// opening with nothing left open.
func TestCreateEndpointsBadCount(t *testing.T) {
	singleton(t)
	// On libfabric (shm), and on the node transport alone (a world that
	// opened no libfabric).
	for _, name := range []string{"shm", "native"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"), endpoint.WithNodeTransport(name == "native"))
			if err != nil {
				t.Fatalf("Init: %v", err)
			}
			defer w.Close()
			if (name == "native") == endpoint.FabricOpen(w) {
				t.Fatalf("%s world: libfabric open: %v", name, endpoint.FabricOpen(w))
			}
			createBad(t, ctx, w)
		})
	}
}

func createBad(t *testing.T, ctx context.Context, w *endpoint.World) {
	for _, tc := range []struct {
		n    int
		opts []endpoint.Option
	}{
		{-1, nil}, {endpoint.MaxRanks + 1, nil}, {1 << 40, nil}, {math.MaxInt, nil},
		{endpoint.MaxSharedHandles + 1, []endpoint.Option{endpoint.Shared(true)}},
	} {
		start := time.Now()
		eps, err := w.Comm().CreateEndpoints(ctx, tc.n, tc.opts...)
		if !errors.Is(err, endpoint.ErrInvalid) || eps != nil {
			t.Errorf("CreateEndpoints(%d): %d handles, %v; want ErrInvalid", tc.n, len(eps), err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("CreateEndpoints(%d) took %v", tc.n, took)
		}
		if n := endpoint.OpenEndpoints(w); n != 0 {
			t.Errorf("CreateEndpoints(%d) left %d endpoints open", tc.n, n)
		}
	}

	// Two handles call it together, one with a bad count.
	pair, err := w.Comm().CreateEndpoints(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range pair {
			c.Free()
		}
	}()
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	defer ccancel()
	got := make([]error, 2)
	done := make(chan int, 2)
	for i, c := range pair {
		go func() {
			n := 1
			if i == 0 {
				n = -1
			}
			eps, err := c.CreateEndpoints(cctx, n)
			for _, e := range eps {
				e.Free()
			}
			got[i] = err
			done <- i
		}()
	}
	<-done
	<-done
	if !errors.Is(got[0], endpoint.ErrInvalid) {
		t.Errorf("the caller with count -1: %v, want ErrInvalid", got[0])
	}
	if !errors.Is(got[1], errs.ErrRemote) || cctx.Err() != nil {
		t.Errorf("its peer: %v (context: %v), want ErrRemote before the deadline", got[1], cctx.Err())
	}

	// A context that has ended: no endpoint stays open.
	ended, end := context.WithCancel(ctx)
	end()
	if eps, err := w.Comm().CreateEndpoints(ended, 4); !errors.Is(err, context.Canceled) || eps != nil {
		t.Errorf("CreateEndpoints with an ended context: %d handles, %v", len(eps), err)
	}
	if n := endpoint.OpenEndpoints(w); n != 2 {
		t.Errorf("after an ended context: %d endpoints open, want the pair's 2", n)
	}
}
