package fabric

import (
	"bytes"
	"testing"
	"time"

	"github.com/weft-hpc/weft/internal/testenv"
)

// TestTaggedUnexpectedIgnore sends first and posts the receive (with an
// ignore mask) afterwards, so the message is matched from the provider's
// unexpected queue. Every step is decided by completions, never by a
// pause: send-after-send ordering tells when the message has arrived, and
// a later probe message tells when the masked receive had its chance.
func TestTaggedUnexpectedIgnore(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			p := newPair(t, Hints{Provider: prov, Caps: CapMsg | CapTagged, MsgOrder: OrderSAS})
			if !p.info.MsgOrder.Has(OrderSAS) {
				testenv.Skip(t, "fi-order-sas:"+prov, "%s did not grant FI_ORDER_SAS (granted %s): no completion tells when the message is unexpected", prov, p.info.MsgOrder)
			}
			msg, marker, probe := []byte("unexpected"), []byte("marker"), []byte("probe")
			retry(t, func() error { return p.a.ep.TInject(msg, p.a.addr[1], 0x1234) }, p.a.cq, p.b.cq)
			retry(t, func() error { return p.a.ep.TInject(marker, p.a.addr[1], 0x77) }, p.a.cq, p.b.cq)
			// An exact-tag receive posted late matches on every provider; once
			// the marker is in, the message sent before it has arrived with no
			// receive posted for it: it is in the unexpected queue.
			mbuf := pinned(t, make([]byte, 64))
			retry(t, func() error { return p.b.ep.TRecv(mbuf, 0, AddrUnspec, 0x77, 0, 10) }, p.b.cq, p.a.cq)
			if !waitMatch(p, 10, 0x77, mbuf, marker, 10*time.Second) {
				t.Fatal("exact-tag receive did not match the unexpected marker")
			}
			rbuf := pinned(t, make([]byte, 64))
			retry(t, func() error { return p.b.ep.TRecv(rbuf, 0, AddrUnspec, 0x1200, 0xff, 9) }, p.b.cq, p.a.cq)
			// The probe's receive is posted after the masked one and its
			// message sent only then: a provider that matches the masked
			// receive against its unexpected queue has done so by the time
			// the probe completes.
			pbuf := pinned(t, make([]byte, 64))
			retry(t, func() error { return p.b.ep.TRecv(pbuf, 0, AddrUnspec, 0x66, 0, 11) }, p.b.cq, p.a.cq)
			retry(t, func() error { return p.a.ep.TInject(probe, p.a.addr[1], 0x66) }, p.a.cq, p.b.cq)
			matched, probed := false, false
			deadline := time.Now().Add(10 * time.Second)
			for !probed && time.Now().Before(deadline) {
				drain(p.b.cq)
				drain(p.a.cq)
				for len(backlog[p.b.cq]) > 0 && !probed {
					r := backlog[p.b.cq][0]
					backlog[p.b.cq] = backlog[p.b.cq][1:]
					switch {
					case r.err != nil:
						t.Fatalf("completion error: %v", r.err)
					case r.c.Context == 9:
						matched = r.c.Tag == 0x1234 && bytes.Equal(rbuf[:r.c.Len], msg)
						if !matched {
							t.Fatalf("masked receive completed with tag %#x, %q", r.c.Tag, rbuf[:r.c.Len])
						}
					case r.c.Context == 11:
						probed = true
					}
				}
			}
			if !probed {
				t.Fatal("the probe message never completed")
			}
			quirk := p.info.Quirks&QuirkUnexpectedIgnoreMask != 0
			switch {
			case matched && quirk:
				t.Errorf("%s now matches unexpected messages under an ignore mask: drop QuirkUnexpectedIgnoreMask", prov)
			case !matched && !quirk:
				t.Errorf("%s: a receive with an ignore mask did not match an unexpected tagged message", prov)
			case !matched:
				t.Logf("%s: QuirkUnexpectedIgnoreMask confirmed", prov)
				if err := p.b.ep.Cancel(9); err != nil {
					t.Fatal(err)
				}
				if _, err := waitComp(t, p.b.cq, p.a.cq); err == nil {
					t.Fatal("no cancel completion")
				}
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
