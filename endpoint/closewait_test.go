package endpoint_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
)

// TestCloseWhileWaiting: World.Close while goroutines wait in Recv — on
// the world communicator and on private and shared endpoints — makes
// their waits fail with ErrClosed; nothing races with the shutdown or
// reads closed libfabric objects.
func TestCloseWhileWaiting(t *testing.T) {
	singleton(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"))
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	if w.Comm().Size() != 1 {
		w.Close()
		t.Fatalf("WEFT_PMI=singleton gave a job of %d ranks", w.Comm().Size())
	}
	priv, err := w.Comm().CreateEndpoints(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	shared, err := w.Comm().CreateEndpoints(ctx, 2, endpoint.Shared(true))
	if err != nil {
		t.Fatal(err)
	}
	comms := []*endpoint.Comm{w.Comm(), priv[0], priv[1], shared[0], shared[1]}
	var wg sync.WaitGroup
	errs := make([]error, len(comms))
	started := make(chan struct{}, len(comms))
	for i, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- struct{}{}
			_, errs[i] = c.Recv(ctx, make([]byte, 8), 0, 99)
		}()
	}
	for range comms {
		<-started
	}
	if err := w.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, endpoint.ErrClosed) {
			t.Errorf("Recv %d after Close: %v, want ErrClosed", i, err)
		}
	}
}
