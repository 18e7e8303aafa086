package endpoint_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
)

// TestFreedPeerInProcess: a handle of this process that is freed while
// another handle of the same communicator still talks to it — a rank that
// gives up — must leave the other with errors or timeouts, never a crash.
// libfabric's shm provider reaches an endpoint of the same process through
// its owner's mapping, so closing the freed handle's endpoint at once made
// the other's next send to it segfault (in fi_injectdata), and its read of
// the freed handle's rendezvous buffer too (in fi_read). The freed
// endpoint is now parked until the last handle of the communicator in this
// process is freed.
func TestFreedPeerInProcess(t *testing.T) {
	singleton(t)
	for _, mode := range []struct {
		name string
		opts []endpoint.Option
	}{
		{"private", nil},
		{"shared2", []endpoint.Option{endpoint.Shared(true), endpoint.SharedEndpoints(2)}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"), endpoint.WithTimeout(2*time.Second))
			if err != nil {
				t.Fatalf("Init: %v", err)
			}
			defer w.Close()
			if w.Comm().Size() != 1 {
				t.Fatalf("WEFT_PMI=singleton gave a job of %d ranks", w.Comm().Size())
			}
			eps, err := w.Comm().CreateEndpoints(ctx, 2, mode.opts...)
			if err != nil {
				t.Fatal(err)
			}
			a, b := eps[0], eps[1]
			// Both are connected, and a has a rendezvous send to b in
			// flight when it goes.
			big := bytes.Repeat([]byte{7}, 200000)
			sr, err := a.Isend([]byte("hello"), 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			rr, err := b.Irecv(make([]byte, 8), 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := endpoint.WaitAll(ctx, sr, rr); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Isend(big, 1, 2); err != nil {
				t.Fatal(err)
			}
			if err := a.Free(); err != nil {
				t.Fatalf("Free: %v", err)
			}
			if n := endpoint.ParkedEndpoints(w); n != 1 {
				t.Errorf("%d parked endpoints after freeing a, want 1", n)
			}
			// The rendezvous send that was in flight can still be received.
			got := make([]byte, len(big))
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			st, err := b.Recv(rctx, got, 0, 2)
			rcancel()
			t.Logf("receive of the freed handle's rendezvous send: %+v %v", st, err)
			if err == nil && !bytes.Equal(got, big) {
				t.Errorf("rendezvous data from the freed handle corrupted")
			}
			// Sends to it either complete (buffered) or give up; a
			// receive from it ends with its context.
			for i := 0; i < 2000; i++ {
				sctx, scancel := context.WithTimeout(ctx, 100*time.Millisecond)
				err := b.Send(sctx, make([]byte, 64), 0, 3)
				scancel()
				if err != nil {
					t.Logf("send %d to the freed handle: %v", i, err)
					break
				}
			}
			rctx, rcancel = context.WithTimeout(ctx, 200*time.Millisecond)
			if _, err := b.Recv(rctx, make([]byte, 8), 0, 4); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("receive from the freed handle: %v, want its context's end", err)
			}
			rcancel()
			if err := b.Free(); err != nil {
				t.Errorf("Free: %v", err)
			}
			if n := endpoint.ParkedEndpoints(w); n != 0 {
				t.Errorf("%d parked endpoints after freeing every handle", n)
			}
		})
	}
}
