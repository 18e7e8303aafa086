package fabric

import (
	"bytes"
	"testing"
	"time"
)

// TestTaggedUnexpectedIgnore sends first and posts the receive (with an
// ignore mask) afterwards, so the message is matched from the provider's
// unexpected queue.
func TestTaggedUnexpectedIgnore(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			p := newPair(t, Hints{Provider: prov, Caps: CapMsg | CapTagged})
			msg := []byte("unexpected")
			retry(t, func() error { return p.a.ep.TInject(msg, p.a.addr[1], 0x1234) }, p.a.cq, p.b.cq)
			// Let the message arrive before the receive is posted.
			for i := 0; i < 50; i++ {
				drain(p.b.cq)
				drain(p.a.cq)
				time.Sleep(time.Millisecond)
			}
			rbuf := pinned(t, make([]byte, 64))
			retry(t, func() error { return p.b.ep.TRecv(rbuf, 0, AddrUnspec, 0x1200, 0xff, 9) }, p.b.cq, p.a.cq)
			matched := waitMatch(p, 9, 0x1234, rbuf, msg, 2*time.Second)
			quirk := p.info.Quirks&QuirkUnexpectedIgnoreMask != 0
			switch {
			case matched && quirk:
				t.Errorf("%s now matches unexpected messages under an ignore mask: drop QuirkUnexpectedIgnoreMask", prov)
			case !matched && !quirk:
				t.Errorf("%s: a receive with an ignore mask never matched an unexpected tagged message", prov)
			case !matched:
				t.Logf("%s: QuirkUnexpectedIgnoreMask confirmed", prov)
				if err := p.b.ep.Cancel(9); err != nil {
					t.Fatal(err)
				}
				if _, err := waitComp(t, p.b.cq, p.a.cq); err == nil {
					t.Fatal("no cancel completion")
				}
			}
			// An exact-tag receive posted late matches on every provider.
			msg2 := []byte("exact")
			retry(t, func() error { return p.a.ep.TInject(msg2, p.a.addr[1], 0x77) }, p.a.cq, p.b.cq)
			for i := 0; i < 20; i++ {
				drain(p.b.cq)
				time.Sleep(time.Millisecond)
			}
			retry(t, func() error { return p.b.ep.TRecv(rbuf, 0, AddrUnspec, 0x77, 0, 10) }, p.b.cq, p.a.cq)
			if !waitMatch(p, 10, 0x77, rbuf, msg2, 10*time.Second) {
				t.Errorf("exact-tag receive did not match the unexpected message")
			}
		})
	}
}

// waitMatch waits for the receive ctx to complete with tag and payload;
// false when nothing arrives within d.
func waitMatch(p *pair, ctx, tag uint64, rbuf, want []byte, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if q := backlog[p.b.cq]; len(q) > 0 {
			backlog[p.b.cq] = q[1:]
			c := q[0]
			return c.err == nil && c.c.Context == ctx && c.c.Tag == tag && bytes.Equal(rbuf[:c.c.Len], want)
		}
		drain(p.b.cq)
		drain(p.a.cq)
	}
	return false
}
