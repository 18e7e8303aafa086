package endpoint_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weft-hpc/weft/endpoint"
)

// singletonPair gives two private endpoints of one singleton process: the
// matching engine runs for real over shm, without launching processes.
func singletonPair(t testing.TB, opts ...endpoint.Option) (a, b *endpoint.Comm, ctx context.Context) {
	t.Helper()
	return providerPair(t, "shm", opts...)
}

// providerPair is singletonPair on provider prov.
func providerPair(t testing.TB, prov string, opts ...endpoint.Option) (a, b *endpoint.Comm, ctx context.Context) {
	t.Helper()
	w, ctx := singletonWorld(t, endpoint.WithProvider(prov))
	if w.Comm().Size() != 1 {
		t.Fatalf("WEFT_PMI=singleton gave a job of %d ranks", w.Comm().Size())
	}
	eps, err := w.Comm().CreateEndpoints(ctx, 2, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return eps[0], eps[1], ctx
}

// singletonWorld joins a singleton job (Init with opts) for the test,
// with a 20 s context; the world is closed when the test ends.
func singletonWorld(t testing.TB, opts ...endpoint.Option) (*endpoint.World, context.Context) {
	t.Helper()
	singleton(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	w, err := endpoint.Init(ctx, opts...)
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w, ctx
}

// Posted receives match in posting order, wildcards included; unexpected
// messages are consumed in arrival order.
func TestMatchingOrder(t *testing.T) {
	for _, shared := range []bool{false, true} {
		a, b, ctx := singletonPair(t, endpoint.Shared(shared))
		// a is driven by its own goroutine (shm needs the peer endpoint to be
		// driven while a connection is set up), b by the test goroutine.
		type msg struct {
			s   string
			tag int
		}
		sendq := make(chan msg, 8)
		senderDone := make(chan error, 1)
		go func() {
			for m := range sendq {
				if err := a.Send(ctx, []byte(m.s), 1, m.tag); err != nil {
					senderDone <- err
					return
				}
			}
			senderDone <- nil
		}()
		// expected path: the wildcard receive was posted first, so it takes
		// the first message even though the second receive names it exactly.
		anyb := make([]byte, 8)
		exact := make([]byte, 8)
		r1, _ := b.Irecv(anyb, endpoint.AnySource, endpoint.AnyTag)
		r2, _ := b.Irecv(exact, 0, 5)
		sendq <- msg{"first...", 5}
		sendq <- msg{"second..", 5}
		if err := endpoint.WaitAll(ctx, r1, r2); err != nil {
			t.Fatal(err)
		}
		if string(anyb) != "first..." || string(exact) != "second.." {
			t.Fatalf("shared=%v: posted order broken: %q %q", shared, anyb, exact)
		}
		// unexpected path: tags 6 then 7 arrive before any receive.
		sendq <- msg{"six.....", 6}
		sendq <- msg{"seven...", 7}
		close(sendq)
		ok, st, err := b.Iprobe(endpoint.AnySource, 7)
		for !ok && err == nil && ctx.Err() == nil {
			ok, st, err = b.Iprobe(endpoint.AnySource, 7)
		}
		if err != nil || st.Tag != 7 || st.Count != 8 {
			t.Fatalf("iprobe: %+v %v", st, err)
		}
		if err := <-senderDone; err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 8)
		if st, err := b.Recv(ctx, buf, endpoint.AnySource, endpoint.AnyTag); err != nil || st.Tag != 6 || string(buf) != "six....." {
			t.Fatalf("unexpected order: %+v %q %v", st, buf, err)
		}
		if st, err := b.Recv(ctx, buf, 0, endpoint.AnyTag); err != nil || st.Tag != 7 {
			t.Fatalf("second unexpected: %+v %v", st, err)
		}
		// WaitAny reports each completed request once.
		reqs := make([]*endpoint.Request, 3)
		bufs := [][]byte{make([]byte, 8), make([]byte, 8), make([]byte, 8)}
		for k := range reqs {
			reqs[k], _ = b.Irecv(bufs[k], 0, 20+k)
		}
		aDone := make(chan struct{})
		go func() { // a's owner for now
			defer close(aDone)
			for _, tg := range []int{21, 20, 22} {
				a.Send(ctx, []byte("waitany."), 1, tg)
			}
		}()
		seen := map[int]bool{}
		for range reqs {
			k, st, err := endpoint.WaitAny(ctx, reqs)
			if err != nil || k < 0 || seen[k] || st.Tag != 20+k {
				t.Fatalf("WaitAny: %d %+v %v", k, st, err)
			}
			seen[k] = true
		}
		if k, _, _ := endpoint.WaitAny(ctx, reqs); k != -1 {
			t.Fatalf("WaitAny with nothing left: %d", k)
		}
		<-aDone
		// A Recv whose context ends is cancelled: the next message goes to
		// the next receive.
		short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
		if _, err := b.Recv(short, buf, 0, 30); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Recv past its deadline: %v", err)
		} else if !strings.Contains(err.Error(), "from rank 0, tag 30") || !strings.Contains(err.Error(), "0 unexpected messages") {
			t.Fatalf("Recv past its deadline: %v, want what it waited for and what the endpoint holds", err)
		}
		cancelShort()
		aDone = make(chan struct{})
		go func() { defer close(aDone); a.Send(ctx, []byte("late...."), 1, 30) }()
		if st, err := b.Recv(ctx, buf, 0, 30); err != nil || string(buf) != "late...." || st.Count != 8 {
			t.Fatalf("after a timed-out Recv: %+v %q %v", st, buf, err)
		}
		<-aDone
		// cancel is immediate for an unmatched receive
		r, _ := b.Irecv(buf, 0, 9)
		r.Cancel()
		if st, err := r.Wait(ctx); !errors.Is(err, endpoint.ErrCanceled) || !st.Canceled {
			t.Fatalf("cancel: %+v %v", st, err)
		}
		// bad arguments
		if _, err := a.Isend(nil, 2, 0); !errors.Is(err, endpoint.ErrInvalid) {
			t.Fatalf("rank out of range: %v", err)
		}
		if _, err := a.Irecv(nil, 0, endpoint.TagUB+1); !errors.Is(err, endpoint.ErrInvalid) {
			t.Fatalf("tag out of range: %v", err)
		}
		if _, err := a.Isend(nil, 0, endpoint.AnyTag); !errors.Is(err, endpoint.ErrInvalid) {
			t.Fatalf("AnyTag on a send: %v", err)
		}
		a.Free()
		b.Free()
		if _, err := a.Isend(nil, 1, 0); !errors.Is(err, endpoint.ErrClosed) {
			t.Fatalf("send on a freed handle: %v", err)
		}
	}
}

// TestTestAll: TestAll reports false while a receive waits, drives both
// endpoints of one goroutine, and reports true with the first error once
// all completed; nil and completed sends count as complete.
func TestTestAll(t *testing.T) {
	a, b, ctx := singletonPair(t)
	in := make([]byte, 4)
	rr, err := b.Irecv(in, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if done, err := endpoint.TestAll(rr, nil); done || err != nil {
		t.Fatalf("TestAll before the send: %v %v", done, err)
	}
	sr, err := a.Isend([]byte("ping"), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		done, err := endpoint.TestAll(sr, rr, nil)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("TestAll never saw the pair complete")
		}
	}
	if string(in) != "ping" {
		t.Fatalf("received %q", in)
	}
	// the first error in slice order: a truncated receive
	short, err := b.Irecv(make([]byte, 2), 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Send(ctx, []byte("long message"), 1, 2); err != nil {
		t.Fatal(err)
	}
	for {
		done, err := endpoint.TestAll(nil, short)
		if done {
			if !errors.Is(err, endpoint.ErrTruncated) {
				t.Fatalf("TestAll error %v, want ErrTruncated", err)
			}
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("TestAll: %v", err)
		}
	}
	if done, err := endpoint.TestAll(); !done || err != nil {
		t.Fatalf("TestAll of nothing: %v %v", done, err)
	}
}

// WaitAll on one endpoint's receives that complete last-first returns
// once the first completes, with every receive's data in place.
func TestWaitAllOutOfOrder(t *testing.T) {
	for _, shared := range []bool{false, true} {
		a, b, ctx := singletonPair(t, endpoint.Shared(shared))
		const n = 5
		bufs := make([][]byte, n)
		reqs := make([]*endpoint.Request, n+1) // and a nil one
		for i := range n {
			bufs[i] = make([]byte, 1)
			r, err := b.Irecv(bufs[i], 0, i)
			if err != nil {
				t.Fatal(err)
			}
			reqs[i] = r
		}
		sent := make(chan error, 1)
		go func() {
			for i := n - 1; i >= 0; i-- {
				if i == 0 {
					time.Sleep(20 * time.Millisecond) // the others complete first
				}
				if err := a.Send(ctx, []byte{byte(10 + i)}, 1, i); err != nil {
					sent <- err
					return
				}
			}
			sent <- nil
		}()
		if err := endpoint.WaitAll(ctx, reqs...); err != nil {
			t.Fatalf("shared=%v: WaitAll: %v", shared, err)
		}
		if err := <-sent; err != nil {
			t.Fatalf("shared=%v: send: %v", shared, err)
		}
		for i := range n {
			if !reqs[i].Done() || bufs[i][0] != byte(10+i) {
				t.Fatalf("shared=%v: receive %d: done %v, got %d, want %d", shared, i, reqs[i].Done(), bufs[i][0], 10+i)
			}
		}
	}
}
