package endpoint_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/eptest"
	"github.com/weft-hpc/weft/internal/settings"
	"github.com/weft-hpc/weft/internal/testenv"
)

// TestNodeMedium: two endpoints of one process, driven by one goroutine,
// exchange medium messages through the node transport's slots. Sizes on
// both sides of the inline and medium limits arrive byte for byte, posted
// first or unexpected; more unexpected medium messages than slots (the
// receiver is not driven while they are sent) go partly by rendezvous and
// are still received in order, by AnySource; a medium message into a
// smaller buffer reports truncation; a cancelled medium receive does not
// swallow the next message; typed messages pack into and unpack out of
// the slots.
func TestNodeMedium(t *testing.T) {
	tu, err := settings.Tune()
	if err != nil {
		t.Fatal(err)
	}
	if tu.NodeMedium <= tu.NodeInline {
		testenv.Skip(t, "nodemedium", "WEFT_TUNE nodemedium=%d, not above nodeinline=%d: no medium slots", tu.NodeMedium, tu.NodeInline)
	}
	a, b, ctx := singletonPair(t, endpoint.WithNodeTransport(true))
	if got, _ := a.Transport(1); got != endpoint.TransportNode {
		t.Fatalf("endpoints of one process talk through %s", got)
	}
	med := endpoint.MediumLimit(a, 1)
	if want := (int(tu.NodeMedium) + 63) &^ 63; med != want {
		t.Fatalf("medium limit %d, want nodemedium %d rounded up to 64 bytes", med, want)
	}
	inline := int(tu.NodeInline)
	slotCount := func() (int64, int64) {
		t.Helper()
		s, bz, ok := endpoint.MediumCounts(a, 1)
		if !ok {
			t.Fatal("the pair has no medium slots")
		}
		return s, bz
	}
	// send starts a send; past the eager limit it completes only once
	// received, so sends are waited for with done.
	var sends []*endpoint.Request
	send := func(n, tag, salt int) []byte {
		t.Helper()
		m := make([]byte, n)
		pattern(m, 0, 1, salt)
		r, err := a.Isend(m, 1, tag)
		if err != nil {
			t.Fatal(err)
		}
		sends = append(sends, r)
		return m
	}
	done := func() {
		t.Helper()
		if err := endpoint.WaitAll(ctx, sends...); err != nil {
			t.Fatal(err)
		}
		sends = sends[:0]
	}
	check := func(what string, got, want []byte, st endpoint.Status, err error) {
		t.Helper()
		if err != nil || st.Count != len(want) || st.Source != 0 || !bytes.Equal(got[:len(want)], want) {
			t.Fatalf("%s: %d bytes: status %+v, err %v, data equal %v", what, len(want), st, err, bytes.Equal(got[:min(len(want), len(got))], want))
		}
	}

	// Thresholds, unexpected then posted first.
	sent0, _ := slotCount()
	medFirst := endpoint.MediumFirst
	sizes := []int{medFirst - 1, medFirst, inline, inline + 1, 4096, med - 1, med, med + 1}
	viaSlots := 0
	for i, n := range sizes {
		if n <= med && (n >= medFirst || n > inline) {
			viaSlots += 2
		}
		want := send(n, i, i)
		got := make([]byte, n)
		st, err := b.Recv(ctx, got, 0, i)
		check("unexpected", got, want, st, err)

		got = make([]byte, n+1)
		r, err := b.Irecv(got, endpoint.AnySource, i)
		if err != nil {
			t.Fatal(err)
		}
		want = send(n, i, i+100)
		st, err = r.Wait(ctx)
		check("posted", got, want, st, err)
		done()
	}
	if s, _ := slotCount(); s-sent0 != int64(viaSlots) {
		t.Fatalf("%d messages went through the slots, want %d (min(%d, inline %d + 1) ≤ size ≤ %d)", s-sent0, viaSlots, medFirst, inline, med)
	}

	// A burst of messages the ring could carry inline, to an endpoint
	// nobody drives: the first take the free slots, the rest the ring's
	// cells, and they arrive in order.
	if inline >= medFirst {
		const tag, n = 9, 24
		var wants [][]byte
		_, busy0 := slotCount()
		for i := 0; i < n; i++ {
			wants = append(wants, send(medFirst+(i*97)%(inline-medFirst+1), tag, 3000+i))
		}
		if _, bz := slotCount(); bz == busy0 {
			t.Fatalf("%d messages to an endpoint nobody drove never found the slots busy", n)
		}
		for i, w := range wants {
			got := make([]byte, inline)
			st, err := b.Recv(ctx, got, endpoint.AnySource, tag)
			check(fmt.Sprintf("message %d of the inline burst", i+1), got, w, st, err)
		}
		done()
	}

	// Slot exhaustion: b is not driven while a sends, so the slots fill
	// and later messages go by rendezvous; after b took one (and so drained
	// the ring, freeing the slots), a sends more through the slots. All
	// arrive in order.
	const tag, first, second = 7, 14, 6
	var wants [][]byte
	_, busy0 := slotCount()
	for i := 0; i < first; i++ {
		wants = append(wants, send(med-i, tag, 1000+i))
	}
	if _, bz := slotCount(); bz == busy0 {
		t.Fatalf("%d medium messages to an endpoint nobody drove never found the slots busy", first)
	}
	ok, st, err := b.Iprobe(endpoint.AnySource, tag)
	if err != nil || !ok || st.Count != med {
		t.Fatalf("Iprobe: %v %+v %v, want a message of %d bytes", ok, st, err, med)
	}
	got := make([]byte, med)
	st, err = b.Recv(ctx, got, endpoint.AnySource, tag)
	check("first of many", got, wants[0], st, err)
	wants = wants[1:]
	s1, _ := slotCount()
	for i := 0; i < second; i++ {
		wants = append(wants, send(med-100-i, tag, 2000+i))
	}
	if s, _ := slotCount(); s == s1 {
		t.Fatal("the slots stayed busy after the receiver drained its ring")
	}
	for i, w := range wants {
		got := make([]byte, med)
		st, err := b.Recv(ctx, got, endpoint.AnySource, tag)
		check(fmt.Sprintf("message %d of the burst", i+1), got, w, st, err)
	}
	done()

	// Truncation, posted first and unexpected.
	small := make([]byte, 100)
	r, err := b.Irecv(small, 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	want := send(med, 8, 3000)
	if st, err := r.Wait(ctx); !errors.Is(err, endpoint.ErrTruncated) || st.Count != len(small) || !bytes.Equal(small, want[:len(small)]) {
		t.Fatalf("posted truncated receive: %+v %v", st, err)
	}
	want = send(med, 8, 3001)
	if st, err := b.Recv(ctx, small, 0, 8); !errors.Is(err, endpoint.ErrTruncated) || st.Count != len(small) || !bytes.Equal(small, want[:len(small)]) {
		t.Fatalf("unexpected truncated receive: %+v %v", st, err)
	}

	// Cancel of a posted medium receive: the next message goes to the next
	// receive.
	got = make([]byte, med)
	r, err = b.Irecv(got, 0, 9)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Cancel(); err != nil {
		t.Fatal(err)
	}
	if st, err := r.Wait(ctx); !errors.Is(err, endpoint.ErrCanceled) || !st.Canceled {
		t.Fatalf("cancelled receive: %+v %v", st, err)
	}
	want = send(med, 9, 4000)
	got2 := make([]byte, med)
	st, err = b.Recv(ctx, got2, 0, 9)
	check("after a cancel", got2, want, st, err)
	if !bytes.Equal(got, make([]byte, med)) {
		t.Fatal("the cancelled receive's buffer was written")
	}
	done()

	// Typed: packed into a slot, unpacked out of it (typed_test.go).
	const rows = 4096 / 8
	s0, _ := slotCount()
	if err := typedSend(ctx, a, 1, rows, 5); err != nil {
		t.Fatal(err)
	}
	if err := typedRecv(ctx, b, 0, rows, 5, 3); err != nil {
		t.Fatal(err)
	}
	if s, _ := slotCount(); s-s0 != 4 {
		t.Fatalf("%d typed messages of 4 KiB went through the slots, want 4", s-s0)
	}
	// The same of 1 KiB, which the ring could carry inline: the slots
	// take them too (from MediumFirst bytes).
	const smallRows = 1024 / 8
	s0, _ = slotCount()
	if err := typedSend(ctx, a, 1, smallRows, 5); err != nil {
		t.Fatal(err)
	}
	if err := typedRecv(ctx, b, 0, smallRows, 5, 3); err != nil {
		t.Fatal(err)
	}
	if s, _ := slotCount(); s-s0 != 4 {
		t.Fatalf("%d typed messages of 1 KiB went through the slots, want 4", s-s0)
	}
	if ok, st, err := b.Iprobe(endpoint.AnySource, endpoint.AnyTag); err != nil || ok {
		t.Fatalf("messages left over: %v %+v %v", ok, st, err)
	}
}

// TestNodeMediumTyped: typed messages of the medium slots between two
// processes, below and from the size at which the sender streams the slot
// (memcopy.SharedMin) up to the medium limit, every other float64 of the
// sender's buffer, received posted as every third float64 of the
// receiver's (blocks of 8 bytes, copied out of the slot before the
// unpack), as pairs of float64s every third pair (16-byte blocks,
// unpacked out of the slot below memcopy.SharedMin) and as contiguous
// bytes, and unexpected (after a Probe) as every third: each arrives byte
// for byte, and each went through a slot.
func TestNodeMediumTyped(t *testing.T) {
	if launch(t, 2, "native", 60*time.Second) {
		return
	}
	ctx := eptest.Ctx(t, 45*time.Second)
	w := initWorld(t)
	defer w.Close()
	c := w.Comm()
	if limit := endpoint.MediumLimit(c, 1-c.Rank()); limit < 16000 {
		testenv.Skip(t, "nodemedium", "medium slots of %d bytes (want at least 16000)", limit)
	}
	vec := func(n, stride int) *ddt.Type {
		ty, err := committed(ddt.Vector(n, 1, stride, ddt.Float64))
		if err != nil {
			t.Fatal(err)
		}
		return ty
	}
	pairs := func(n int) *ddt.Type {
		ty, err := committed(ddt.Vector(n, 2, 6, ddt.Float64))
		if err != nil {
			t.Fatal(err)
		}
		return ty
	}
	if !endpoint.TinyBlocks(1, vec(500, 3)) || endpoint.TinyBlocks(1, pairs(250)) {
		t.Fatal("blocks of 8 bytes not tiny, or of 16 bytes tiny")
	}
	const tagGo, tagPosted, tagContig, tagUnexp, tagPairs = 1, 2, 3, 4, 5
	for i, n := range []int{4000, 8192, 12000, 16000} {
		k := n / 8
		src := make([]byte, 2*n)
		pattern(src, 1, 0, 40+i)
		want := make([]byte, n) // the packed stream
		for j := 0; j < k; j++ {
			copy(want[8*j:8*j+8], src[16*j:16*j+8])
		}
		if c.Rank() == 1 {
			if _, err := c.Recv(ctx, nil, 0, tagGo); err != nil {
				t.Fatal(err)
			}
			sent, _, _ := endpoint.MediumCounts(c, 0)
			for _, tag := range []int{tagPosted, tagContig, tagUnexp, tagPairs} {
				if err := c.SendTyped(ctx, src, 1, vec(k, 2), 0, tag); err != nil {
					t.Fatalf("%d bytes, tag %d: %v", n, tag, err)
				}
			}
			if now, _, _ := endpoint.MediumCounts(c, 0); now-sent != 4 {
				t.Fatalf("%d bytes: %d of 4 typed messages went through a medium slot", n, now-sent)
			}
			continue
		}
		third := make([]byte, 3*n)
		contig := make([]byte, n)
		r1, err := c.IrecvTyped(third, 1, vec(k, 3), 1, tagPosted)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := c.Irecv(contig, 1, tagContig)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Send(ctx, nil, 1, tagGo); err != nil {
			t.Fatal(err)
		}
		wide := make([]byte, 3*n)
		r3, err := c.IrecvTyped(wide, 1, pairs(k/2), 1, tagPairs)
		if err != nil {
			t.Fatal(err)
		}
		if err := endpoint.WaitAll(ctx, r1, r2, r3); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < k/2; j++ {
			if !bytes.Equal(wide[48*j:48*j+16], want[16*j:16*j+16]) {
				t.Fatalf("%d bytes, typed receive of 16-byte blocks: block %d differs", n, j)
			}
		}
		if _, err := c.Probe(ctx, 1, tagUnexp); err != nil {
			t.Fatal(err)
		}
		late := make([]byte, 3*n)
		if st, err := c.RecvTyped(ctx, late, 1, vec(k, 3), 1, tagUnexp); err != nil || st.Count != n {
			t.Fatalf("%d bytes, unexpected: %+v %v", n, st, err)
		}
		for name, got := range map[string][]byte{"posted": third, "unexpected": late} {
			for j := 0; j < k; j++ {
				if !bytes.Equal(got[24*j:24*j+8], want[8*j:8*j+8]) {
					t.Fatalf("%d bytes, %s typed receive: element %d differs", n, name, j)
				}
			}
		}
		if !bytes.Equal(contig, want) {
			t.Fatalf("%d bytes into contiguous bytes: data differ", n)
		}
	}
}
