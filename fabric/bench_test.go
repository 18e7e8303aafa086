package fabric

import (
	"errors"
	"testing"
)

// BenchmarkCQReadEmpty is the floor of every operation: one cgo crossing
// plus an empty fi_cq_read on shm.
func BenchmarkCQReadEmpty(b *testing.B) {
	p := newPair(b, Hints{Provider: "shm", Caps: CapMsg | CapTagged})
	var out [8]Completion
	b.ReportAllocs()
	for b.Loop() {
		p.a.cq.Read(out[:])
	}
}

// BenchmarkTaggedPingPong8 is an 8-byte tagged ping-pong between two
// endpoints driven by one goroutine (so no scheduler or second process in
// the loop): inject, poll, repost per half round trip.
func BenchmarkTaggedPingPong8(b *testing.B) {
	p := newPair(b, Hints{Provider: "shm", Caps: CapMsg | CapTagged})
	msg := []byte("8 bytes!")
	ra, err := p.dom.Alloc(8)
	if err != nil {
		b.Fatal(err)
	}
	rb, err := p.dom.Alloc(8)
	if err != nil {
		b.Fatal(err)
	}
	retry(b, func() error { return p.a.ep.TRecv(ra.Bytes(), ra.Desc(), AddrUnspec, 1, 0, 1) }, p.a.cq, p.b.cq)
	retry(b, func() error { return p.b.ep.TRecv(rb.Bytes(), rb.Desc(), AddrUnspec, 1, 0, 2) }, p.b.cq, p.a.cq)
	var out [4]Completion
	got := map[*CQ]int{}
	poll := func(cq *CQ) {
		n, err := cq.ReadSpin(out[:], 16)
		if err != nil {
			b.Fatal(err)
		}
		got[cq] += n
	}
	wait := func(cq *CQ) {
		for got[cq] == 0 {
			poll(cq)
		}
		got[cq]--
	}
	inject := func(ep *Endpoint, dest Addr, cqs ...*CQ) {
		for ep.TInject(msg, dest, 1) != nil {
			for _, c := range cqs {
				poll(c)
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		inject(p.a.ep, p.a.addr[1], p.a.cq, p.b.cq)
		wait(p.b.cq)
		if err := p.b.ep.TRecv(rb.Bytes(), rb.Desc(), AddrUnspec, 1, 0, 2); err != nil {
			b.Fatal(err)
		}
		inject(p.b.ep, p.b.addr[0], p.b.cq, p.a.cq)
		wait(p.a.cq)
		if err := p.a.ep.TRecv(ra.Bytes(), ra.Desc(), AddrUnspec, 1, 0, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRegisterCached measures a Register that the MR cache serves.
func BenchmarkRegisterCached(b *testing.B) {
	p := newPair(b, Hints{Provider: "shm", Caps: CapMsg | CapRMA})
	buf := make([]byte, 1<<20)
	mr, err := p.dom.Register(buf, AccessRemoteWrite)
	if err != nil {
		b.Fatal(err)
	}
	defer mr.Close()
	b.ReportAllocs()
	for b.Loop() {
		m, err := p.dom.Register(buf[4096:8192], AccessRemoteWrite)
		if err != nil {
			b.Fatal(err)
		}
		m.Close()
	}
}

// BenchmarkCQReadEmptyInC spins 100 empty fi_cq_reads inside one cgo call:
// the difference to BenchmarkCQReadEmpty is the cost of the crossing.
func BenchmarkCQReadEmptyInC(b *testing.B) {
	p := newPair(b, Hints{Provider: "shm", Caps: CapMsg | CapTagged})
	var out [8]Completion
	b.ReportAllocs()
	for b.Loop() {
		p.a.cq.ReadSpin(out[:], 100)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/fi_cq_read")
}

// halfTrip is one side of an in-process ping-pong step: PostAndRead posts
// ops and spins on peerCQ, where the message lands (one goroutine drives
// both sides), until it yields a completion. It does not call tb.Helper,
// which would cost more than the step.
func halfTrip(tb testing.TB, ep *Endpoint, ops []Op, peerCQ *CQ, out []Completion, spins int) {
	for {
		posted, n, err := ep.PostAndRead(ops, peerCQ, out, spins)
		if err != nil && !errors.Is(err, ErrAgain) {
			tb.Fatal(err)
		}
		ops = ops[posted:]
		if n > 0 {
			return
		}
	}
}

// BenchmarkBatchPingPong8 is BenchmarkTaggedPingPong8 with one cgo call
// per half round trip: each side's PostAndRead reposts its receive,
// injects to the peer and spins on the peer's CQ for the delivery (one
// goroutine drives both sides, so it reads the CQ the message lands in),
// i.e. the work of one side of a two-process ping-pong step.
func BenchmarkBatchPingPong8(b *testing.B) {
	p := newPair(b, Hints{Provider: "shm", Caps: CapMsg | CapTagged})
	buf, err := p.dom.Alloc(64)
	if err != nil {
		b.Fatal(err)
	}
	ra, rb, msg := buf.Bytes()[:8], buf.Bytes()[8:16], buf.Bytes()[16:24]
	copy(msg, "8 bytes!")
	postAll(b, p.a.ep, []Op{TRecvOp(ra, buf.Desc(), AddrUnspec, 1, 0, 1)}, p.a.cq)
	postAll(b, p.b.ep, []Op{TRecvOp(rb, buf.Desc(), AddrUnspec, 1, 0, 2)}, p.b.cq)
	// Connect both directions outside the timed loop.
	retry(b, func() error { return p.a.ep.TInject(msg, p.a.addr[1], 1) }, p.a.cq, p.b.cq)
	mustComp(b, p.b.cq, p.a.cq)
	retry(b, func() error { return p.b.ep.TInject(msg, p.b.addr[0], 1) }, p.b.cq, p.a.cq)
	mustComp(b, p.a.cq, p.b.cq)
	postAll(b, p.b.ep, []Op{TRecvOp(rb, buf.Desc(), AddrUnspec, 1, 0, 2)}, p.b.cq) // for the first ping
	ping := []Op{TRecvOp(ra, buf.Desc(), AddrUnspec, 1, 0, 1), TInjectOp(msg, p.a.addr[1], 1)}
	pong := []Op{TRecvOp(rb, buf.Desc(), AddrUnspec, 1, 0, 2), TInjectOp(msg, p.b.addr[0], 1)}
	var out [4]Completion
	half := func(ep *Endpoint, ops []Op, peerCQ *CQ) { halfTrip(b, ep, ops, peerCQ, out[:], 16) }
	b.ReportAllocs()
	for b.Loop() {
		half(p.a.ep, ping, p.b.cq)
		half(p.b.ep, pong, p.a.cq)
	}
}
