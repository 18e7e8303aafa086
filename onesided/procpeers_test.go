package onesided

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestFreeWithoutPeers: the library side of a rank that gives up. Free
// with a context that has ended releases the window at once and says so;
// another rank of the window in the same process that still waits on the
// window — in calls with a context or without — gets ErrPeerGone at once
// instead of waiting for its context or WEFT_ONESIDED_TIMEOUT, and can
// free its window too, without crashing; the libfabric objects of both are
// closed once both have freed.
func TestFreeWithoutPeers(t *testing.T) {
	requireProvider(t, "shm")
	for _, c := range []providerCase{{"shm", OrderAuto}, {"shm", OrderDelivery}} {
		t.Run(c.name(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			gs := newMemWorld(2)
			freed := make(chan struct{})
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i := range gs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = func() error {
						w, err := Allocate(ctx, gs[i], 4096, c.opts()...)
						if err != nil {
							return err
						}
						if i == 0 {
							defer close(freed)
							done, stop := context.WithCancel(ctx)
							stop()
							start := time.Now()
							err := w.Free(done)
							if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
								return fmt.Errorf("Free with an ended context: %v after %v, want context.Canceled at once", err, time.Since(start))
							}
							if err := w.Free(ctx); err != nil {
								return fmt.Errorf("second Free: %v", err)
							}
							return nil
						}
						<-freed
						start := time.Now()
						if _, err := w.FetchAndOp(0, 0, AtomicUint64, OpSum, 1); !errors.Is(err, ErrPeerGone) {
							return fmt.Errorf("FetchAndOp on a rank that left: %v, want ErrPeerGone", err)
						}
						if _, err := w.WaitSignal(ctx, 0, CmpGE, 1); !errors.Is(err, ErrPeerGone) {
							return fmt.Errorf("WaitSignal after a rank left: %v, want ErrPeerGone", err)
						}
						if err := w.Free(ctx); !errors.Is(err, ErrPeerGone) {
							return fmt.Errorf("Free after a rank left: %v, want ErrPeerGone", err)
						}
						if took := time.Since(start); took > 5*time.Second {
							return fmt.Errorf("the waits on a rank that left took %v", took)
						}
						return nil
					}()
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", i, err)
				}
			}
			if k := parkedReleases(); k != 0 {
				t.Errorf("%d parked libfabric paths left after both ranks freed", k)
			}
		})
	}
}
