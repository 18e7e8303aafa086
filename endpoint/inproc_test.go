package endpoint_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
)

// TestOneGoroutineDrivesPair: one goroutine owns a sender and a receiver
// endpoint of the same process and drives both. It posts a window of
// receives on the receiver, sends a window of messages from the sender
// (more than the shm provider's queue towards one peer holds, and the first
// one needs the receiver to be driven for shm's connection set-up), then
// completes everything with WaitAll. Isend must not spin on its own endpoint
// waiting for a receiver only this goroutine can drive: a send the provider
// cannot take now is queued in its request and posted by later progress
// (WaitAll drives every endpoint its requests belong to). Before that change
// the first Isend spun until WEFT_ENDPOINT_TIMEOUT and failed. Several such
// goroutines run at once, and a blocking Send between two endpoints of one
// goroutine is checked with a peer goroutine too.
func TestOneGoroutineDrivesPair(t *testing.T) {
	singleton(t)
	const (
		goroutines = 2
		window     = 1500 // > shm's default queue of 1024 entries per peer
		windows    = 3
	)
	for _, mode := range []struct {
		name   string
		shared bool
		eps    int
	}{{"private", false, 1}, {"shared", true, 1}, {"shared2", true, 2}} {
		t.Run(mode.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// A short internal timeout: the old code failed after it
			// instead of hanging for the default 60 s.
			w, err := endpoint.Init(ctx, endpoint.WithProvider("shm"), endpoint.WithTimeout(3*time.Second))
			if err != nil {
				t.Fatalf("Init: %v", err)
			}
			stuck := false // a goroutine may still be inside an operation: leave the endpoints open
			defer func() {
				if !stuck {
					w.Close()
				}
			}()
			if w.Comm().Size() != 1 {
				t.Fatalf("WEFT_PMI=singleton gave a job of %d ranks", w.Comm().Size())
			}
			// handles 0..G-1 send, G..2G-1 receive; goroutine i owns i and G+i
			// shared2: senders share one locked endpoint, receivers another.
			eps, err := w.Comm().CreateEndpoints(ctx, 2*goroutines, endpoint.Shared(mode.shared), endpoint.SharedEndpoints(mode.eps))
			if err != nil {
				t.Fatal(err)
			}
			sameSend := eps[0].Domain() == eps[goroutines-1].Domain()
			sameAll := eps[0].Domain() == eps[goroutines].Domain()
			if sameSend != mode.shared || sameAll != (mode.shared && mode.eps == 1) {
				t.Fatalf("endpoints: senders share one: %v, all share one: %v", sameSend, sameAll)
			}
			for _, c := range eps {
				if c.Shared() != mode.shared {
					t.Fatalf("handle %d: Shared() = %v", c.Rank(), c.Shared())
				}
			}
			done := make(chan error, goroutines)
			for i := 0; i < goroutines; i++ {
				go func(i int) {
					err := drivePair(ctx, eps[i], eps[goroutines+i], window, windows, t.Logf)
					if err != nil {
						err = fmt.Errorf("goroutine %d: %w", i, err)
					}
					done <- err
				}(i)
			}
			// Every goroutine must be back before anything is freed or
			// closed (closing an endpoint under a goroutine that is inside
			// an operation on it crashes): a failure or the deadlock limit
			// cancels ctx, which every wait of drivePair honours.
			limit := time.NewTimer(25 * time.Second)
			defer limit.Stop()
			for left, cancelled := goroutines, false; left > 0; {
				select {
				case err := <-done:
					left--
					if err != nil {
						t.Error(err)
						cancel()
					}
				case <-limit.C:
					if cancelled {
						stuck = true
						t.Fatalf("%d goroutines still running 10 s after their context was cancelled", left)
					}
					t.Error("deadlock: a goroutine driving its own sender and receiver did not finish in 25 s")
					cancel()
					cancelled = true
					limit.Reset(10 * time.Second)
				}
			}
			if t.Failed() {
				return
			}
			for _, c := range eps {
				if err := c.Free(); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// drivePair streams windows of 8-byte messages from s to r, both driven by
// the calling goroutine, and checks every payload.
func drivePair(ctx context.Context, s, r *endpoint.Comm, window, windows int, logf func(string, ...any)) error {
	dst, src := r.Rank(), s.Rank()
	bufs := make([][]byte, window)
	msgs := make([][]byte, window)
	for k := range bufs {
		bufs[k] = make([]byte, 8)
		msgs[k] = make([]byte, 8)
	}
	reqs := make([]*endpoint.Request, 2*window)
	for win := 0; win < windows; win++ {
		for k := 0; k < window; k++ {
			rr, err := r.Irecv(bufs[k], src, 1)
			if err != nil {
				return err
			}
			reqs[k] = rr
		}
		for k := 0; k < window; k++ {
			binary.LittleEndian.PutUint64(msgs[k], uint64(win*window+k))
			sr, err := s.Isend(msgs[k], dst, 1)
			if err != nil {
				return fmt.Errorf("window %d, Isend %d: %w", win, k, err)
			}
			reqs[window+k] = sr
		}
		if err := endpoint.WaitAll(ctx, reqs...); err != nil {
			return fmt.Errorf("window %d: %w", win, err)
		}
		for k := range bufs {
			if got := binary.LittleEndian.Uint64(bufs[k]); got != uint64(win*window+k) {
				return fmt.Errorf("window %d, message %d: got %d (order or content broken)", win, k, got)
			}
		}
	}
	// A blocking Send whose receiver this goroutine cannot drive at the same
	// time returns an error when its context ends instead of hanging.
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	many := 0
	for ; many < 4096; many++ {
		if err := s.Send(sctx, msgs[0], dst, 2); err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("blocking send into a full queue: %w", err)
			}
			break
		}
	}
	// Drain what was sent. A Send that timed out is still queued on s and
	// goes out once s is driven again (Iprobe drives s's progress).
	for k := 0; k < many; k++ {
		if _, err := r.Recv(ctx, bufs[0], src, 2); err != nil {
			return fmt.Errorf("drain %d of %d: %w", k, many, err)
		}
	}
	logf("%d blocking sends went out before one waited past its context (4096: none did)", many)
	if many < 4096 {
		rr, err := r.Irecv(bufs[0], src, 2)
		if err != nil {
			return err
		}
		for {
			if _, _, err := s.Iprobe(endpoint.AnySource, endpoint.AnyTag); err != nil {
				return err
			}
			ok, _, err := rr.Test()
			if err != nil {
				return fmt.Errorf("the send queued after its context ended: %w", err)
			}
			if ok {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("the send queued after its context ended never arrived: %w", ctx.Err())
			}
		}
	}
	return nil
}
