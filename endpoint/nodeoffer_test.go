package endpoint_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/testenv"
)

// TestNodeOffer: two processes exchange medium messages that a blocking
// Send offers from its own buffer (WEFT_TUNE nodeoffer). Sizes on both
// sides of nodeoffer and up to the slot size arrive byte for byte when
// the receive is posted first (the receiver copies from the sender's
// buffer); both ranks sending to each other before either receives still
// complete (each withdraws its offer and copies it into the slot, as an
// eager send would complete), and Iprobe reports the waiting message's
// size; messages the receiver finds by Iprobe before it receives them
// arrive whichever of the two took them; a typed receive unpacks an
// offered message and a smaller receive reports truncation.
func TestNodeOffer(t *testing.T) {
	if launch(t, 2, "native", 60*time.Second) {
		return
	}
	ctx := tctx(t, 45*time.Second)
	w := initWorld(t)
	defer w.Close()
	c := w.Comm()
	me, peer := c.Rank(), 1-c.Rank()
	med, lo := endpoint.MediumLimit(c, peer), endpoint.OfferMin()
	if lo == 0 || med < lo || med < 12000 {
		testenv.Skip(t, "nodeoffer", "WEFT_TUNE nodeoffer=%d with medium slots of %d bytes: no offers to test", lo, med)
	}
	counts := func() (int64, int64) {
		t.Helper()
		o, wd, ok := endpoint.OfferCounts(c, peer)
		if !ok {
			t.Fatal("the pair has no medium slots")
		}
		return o, wd
	}
	msg := func(n, salt int) []byte {
		b := make([]byte, n)
		pattern(b, 0, 1, salt)
		return b
	}
	const tagGo = 99

	// Posted first: rank 1 receives what rank 0 offers.
	sizes := []int{lo - 1, lo, 12000, med}
	for i, n := range sizes {
		want := msg(n, i)
		if me == 1 {
			got := make([]byte, n+64)
			r, err := c.Irecv(got, 0, i)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Send(ctx, nil, 0, tagGo); err != nil {
				t.Fatal(err)
			}
			st, err := r.Wait(ctx)
			if err != nil || st.Count != n || !bytes.Equal(got[:n], want) {
				t.Fatalf("%d bytes, posted first: %+v %v, data equal %v", n, st, err, bytes.Equal(got[:n], want))
			}
			continue
		}
		if _, err := c.Recv(ctx, nil, 1, tagGo); err != nil {
			t.Fatal(err)
		}
		o0, _ := counts()
		if err := c.Send(ctx, want, 1, i); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		o1, _ := counts()
		if offered := o1 - o0; offered != int64(min(1, max(0, n-lo+1))) {
			t.Fatalf("%d bytes (nodeoffer %d): %d offers", n, lo, offered)
		}
	}

	// Head to head: each rank sends before it receives. Nobody claims
	// either offer (no receive is posted until both Sends have returned),
	// so each sender withdraws its own and the Sends complete.
	for i, n := range []int{lo, med} {
		tag := 20 + i
		want := msg(n, 100+me)
		o0, w0 := counts()
		if err := c.Send(ctx, want, peer, tag); err != nil {
			t.Fatalf("%d bytes head to head: %v", n, err)
		}
		if o1, w1 := counts(); o1-o0 != 1 || w1-w0 != 1 {
			t.Fatalf("%d bytes head to head: %d offered, %d withdrawn; want 1 and 1", n, o1-o0, w1-w0)
		}
		// Both Sends return before either rank posts the receive.
		if err := c.Send(ctx, nil, peer, tagGo); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Recv(ctx, nil, peer, tagGo); err != nil {
			t.Fatal(err)
		}
		ok, st, err := c.Iprobe(peer, tag)
		for !ok && err == nil {
			ok, st, err = c.Iprobe(peer, tag)
		}
		if err != nil || st.Count != n {
			t.Fatalf("%d bytes head to head: Iprobe %+v %v", n, st, err)
		}
		got := make([]byte, n)
		if st, err := c.Recv(ctx, got, peer, tag); err != nil || st.Count != n || !bytes.Equal(got, msg(n, 100+peer)) {
			t.Fatalf("%d bytes head to head: %+v %v", n, st, err)
		}
	}

	// Found by Iprobe first, then received.
	for i := 0; i < 20; i++ {
		n := lo + i*(med-lo)/19
		want := msg(n, 200+i)
		if me == 0 {
			if err := c.Send(ctx, want, 1, 30); err != nil {
				t.Fatal(err)
			}
			continue
		}
		ok, st, err := c.Iprobe(0, 30)
		for !ok && err == nil {
			ok, st, err = c.Iprobe(0, 30)
		}
		if err != nil || st.Count != n {
			t.Fatalf("message %d: Iprobe %+v %v", i, st, err)
		}
		got := make([]byte, n)
		if st, err := c.Recv(ctx, got, 0, 30); err != nil || st.Count != n || !bytes.Equal(got, want) {
			t.Fatalf("message %d of %d bytes after Iprobe: %+v %v", i, n, st, err)
		}
	}

	// A typed receive (every third float64) and a truncated one.
	k := (lo + 7) / 8
	n := 8 * k
	want := msg(n, 300)
	third, err := committed(ddt.Vector(k, 1, 3, ddt.Float64))
	if err != nil {
		t.Fatal(err)
	}
	if me == 0 {
		o0, _ := counts()
		if _, err := c.Recv(ctx, nil, 1, tagGo); err != nil {
			t.Fatal(err)
		}
		for _, tag := range []int{40, 41} {
			if err := c.Send(ctx, want, 1, tag); err != nil {
				t.Fatal(err)
			}
		}
		if o1, _ := counts(); o1-o0 != 2 {
			t.Fatalf("%d of 2 sends offered", o1-o0)
		}
		return
	}
	wide := make([]byte, 3*n)
	r1, err := c.IrecvTyped(wide, 1, third, 0, 40)
	if err != nil {
		t.Fatal(err)
	}
	small := make([]byte, n/2)
	r2, err := c.Irecv(small, 0, 41)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, nil, 0, tagGo); err != nil {
		t.Fatal(err)
	}
	if st, err := r1.Wait(ctx); err != nil || st.Count != n {
		t.Fatalf("typed receive of an offer: %+v %v", st, err)
	}
	for j := 0; j < k; j++ {
		if !bytes.Equal(wide[24*j:24*j+8], want[8*j:8*j+8]) {
			t.Fatalf("typed receive of an offer: element %d differs", j)
		}
	}
	st, err := r2.Wait(ctx)
	if !errors.Is(err, endpoint.ErrTruncated) || st.Count != len(small) || !bytes.Equal(small, want[:len(small)]) {
		t.Fatalf("truncated receive of an offer: %+v %v", st, err)
	}
	if ok, st, err := c.Iprobe(endpoint.AnySource, endpoint.AnyTag); err != nil || ok {
		t.Fatal(fmt.Sprintf("messages left over: %v %+v %v", ok, st, err))
	}
}
