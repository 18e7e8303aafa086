package fabric

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// withNapHook makes CQ.Poll in the domain's CQs call f instead of sleeping
// between bursts.
func withNapHook(f func(time.Duration)) DomainOption {
	return func(c *domainConfig) { c.napHook = f }
}

// TestPollSleepsWhileWaiting waits on an empty CQ: Poll busy-polls for
// pollBusy, then sleeps between bursts, pollNapMin first and twice as long
// each time up to pollNapMax, never past ctx's deadline, and returns ctx's
// error.
func TestPollSleepsWhileWaiting(t *testing.T) {
	t.Parallel()
	var (
		start   time.Time
		firstAt time.Duration
		naps    []time.Duration
	)
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg}, withNapHook(func(d time.Duration) {
		if len(naps) == 0 {
			firstAt = time.Since(start)
		}
		naps = append(naps, d)
		time.Sleep(d)
	}))
	// The deadline leaves room for an oversubscribed machine, where each
	// short sleep overshoots by a scheduler tick: the naps recorded, not
	// the wall clock, show the back-off.
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	var out [1]Completion
	start = time.Now()
	n, err := p.a.cq.Poll(ctx, out[:])
	if n != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Poll of an empty CQ = %d, %v; want 0 and the deadline", n, err)
	}
	if len(naps) == 0 {
		t.Fatal("Poll never slept in 400 ms of waiting")
	}
	if firstAt < pollBusy {
		t.Errorf("first sleep after %v of waiting, want at least %v of busy polling", firstAt, pollBusy)
	}
	if naps[0] != pollNapMin {
		t.Errorf("first sleep %v, want %v", naps[0], pollNapMin)
	}
	sawMax := false
	for i, d := range naps {
		if d <= 0 || d > pollNapMax {
			t.Errorf("sleep %d: %v, outside (0, %v]", i, d, pollNapMax)
		}
		// Each sleep doubles the previous one up to the cap; only the last
		// may be cut short by the deadline.
		if i > 0 && i < len(naps)-1 && d != min(2*naps[i-1], pollNapMax) {
			t.Errorf("sleep %d: %v after %v, want %v", i, d, naps[i-1], min(2*naps[i-1], pollNapMax))
		}
		sawMax = sawMax || d == pollNapMax
	}
	if !sawMax {
		t.Errorf("sleeps %v never reached %v in 400 ms", naps, pollNapMax)
	}
}

// TestPollSeesLateCompletion posts a receive, waits for it with Poll, and
// sends the message only once Poll has started sleeping: Poll's bursts
// between the sleeps drive the receiver's progress and return the
// completion.
func TestPollSeesLateCompletion(t *testing.T) {
	t.Parallel()
	slept := make(chan struct{})
	var once sync.Once
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg}, withNapHook(func(d time.Duration) {
		once.Do(func() { close(slept) })
		time.Sleep(d)
	}))
	const recvCtx = 77
	buf := pinned(t, make([]byte, 16))
	if err := p.b.ep.Recv(buf, 0, AddrUnspec, recvCtx); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sent := make(chan error, 1)
	go func() {
		select {
		case <-slept:
		case <-ctx.Done():
			sent <- ctx.Err()
			return
		}
		// shm refuses the first send to a peer until the peer's progress
		// (here: Poll's bursts) has handled the connection.
		var comps [4]Completion
		for {
			err := p.a.ep.Inject([]byte("late"), p.a.addr[1])
			if !errors.Is(err, ErrAgain) {
				sent <- err
				return
			}
			if _, err := p.a.cq.Read(comps[:]); err != nil {
				sent <- err
				return
			}
			if ctx.Err() != nil {
				sent <- ctx.Err()
				return
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	var out [2]Completion
	n, err := p.b.cq.Poll(ctx, out[:])
	if serr := <-sent; serr != nil {
		t.Fatalf("send: %v", serr)
	}
	if err != nil || n != 1 {
		t.Fatalf("Poll = %d, %v; want the receive's completion", n, err)
	}
	if c := out[0]; c.Context != recvCtx || c.Len != len("late") || string(buf[:c.Len]) != "late" {
		t.Errorf("completion %+v, data %q; want context %d and \"late\"", c, buf[:c.Len], recvCtx)
	}
}
