package endpoint

// Offered medium messages: a blocking Send of a medium message (nodeoffer
// ≤ size ≤ the slot size) to a node peer in another process does not copy
// the message into the pair's slot at once. It takes a free slot, marks it
// offered and sends a medium header carrying the address of its own
// buffer. A receiver that polls its ring claims the slot with a
// compare-and-swap and copies the message once, with process_vm_readv,
// straight from the sender's buffer into the posted receive (or into an
// unexpected buffer), then frees the slot. A sender whose offer is not
// claimed within offerWait withdraws it with a compare-and-swap of its own
// and copies the message into the slot: the receiver then takes it as any
// medium message. So the Send still completes without the receiver's
// help, as an eager send does, and two copies of freshly written lines
// between the cores become one copy of the sender's buffer (16 KiB: 2.2 µs
// a half round trip against 3.7; docs/perf/endpoint.md).
//
// A slot's flag word goes through these states; the sender moves it out
// of free, offered and failed, the receiver out of filled and claimed:
//
//	medFree      → medFilled     sender copied a message in (nodemed.go)
//	medFree      → medOffered    sender offers its buffer
//	medOffered   → medClaimed    receiver copies from the sender's buffer (CAS)
//	medClaimed   → medFree       receiver done: the Send completes
//	medClaimed   → medFailed     receiver's copy failed: the Send fails
//	medOffered   → medWithdrawn  sender copies into the slot (CAS), then
//	medWithdrawn → medFilled     and the receiver takes it from the slot
//	medFailed    → medFree       sender saw the failure
//	medFilled    → medFree       receiver copied it out

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/weft-hpc/weft/internal/cma"
	"github.com/weft-hpc/weft/internal/memcopy"
	"github.com/weft-hpc/weft/internal/release"
)

// Slot flag states (medArea.flag).
const (
	medFree      = 0
	medFilled    = 1
	medOffered   = 2
	medClaimed   = 3
	medFailed    = 4
	medWithdrawn = 5
)

// offerMagic starts the medium header of an offer ("wedo"): magic, then
// slot | size<<8 (a slot holds at most 1 MiB), then the buffer's address.
const offerMagic = 0x6f646577

// offerWait is how long a sender leaves its offer for the receiver to
// claim before it copies the message into the slot: long enough for a
// receiver that is waiting or polling to see the header (well under a
// microsecond), short against the time of a computation between calls.
const offerWait = 5 * time.Microsecond

// offerHeld is an offered message seen by its receiver (node.go holds one
// per link while its sender is filling the slot).
type offerHeld struct {
	t    uint64 // match word, rtsBit cleared
	aux  uint32 // folded type signature
	slot int
	n    int     // bytes; 0: nothing held
	addr uintptr // the sender's buffer
}

// offers reports whether a blocking Send of n bytes over l may be offered
// from the sender's buffer: l goes to another process and has medium
// slots, and n is from nodeoffer to the slot size.
func (l *nodeLink) offers(n int) bool {
	return !l.local && l.medOut != nil && tune.NodeOffer > 0 && n >= int(tune.NodeOffer) && n <= l.medOut.size && n > l.inline
}

// nodeSendOffer offers buf to rank dest of c through a free slot of l; the
// returned send completes when the receiver has copied it or the sender
// has copied it into the slot (checkOffers). false when no slot is free
// or the ring is full (nothing was sent). Caller holds the lock and
// v.sendq is empty.
func (v *vci) nodeSendOffer(c *Comm, l *nodeLink, t uint64, aux uint32, buf []byte, dest int) (*Request, bool) {
	a := l.medOut
	for k := 0; k < a.slots; k++ {
		i := (a.next + k) % a.slots
		f := a.flag(i)
		if atomic.LoadUint64(f) != medFree {
			continue
		}
		r := &Request{v: v, c: c, kind: kSendEager, state: stPosted, buf: buf, qrank: dest,
			reqExt: &reqExt{link: l, offer: i}}
		r.pinBuf(buf)   // the receiver reads it until the send completes
		*f = medOffered // published by the ring's release store below
		var h [medHdrSize]byte
		binary.LittleEndian.PutUint32(h[0:], offerMagic)
		binary.LittleEndian.PutUint32(h[4:], uint32(i)|uint32(len(buf))<<8)
		binary.LittleEndian.PutUint64(h[8:], uint64(cma.Addr(buf)))
		if ok, err := l.out.TrySendAux(t|rtsBit, aux, h[:]); !ok || err != nil {
			*f = medFree // never published
			r.unpinAll()
			return nil, false
		}
		r.timed = time.Now()
		a.next = i + 1
		a.offered++
		v.offers = append(v.offers, r)
		return r, true
	}
	return nil, false
}

// checkOffers completes the offered sends whose receivers are done with
// them, and withdraws those left unclaimed for offerWait. Caller holds
// the lock.
func (v *vci) checkOffers() {
	var now time.Time
	n := 0
	for _, r := range v.offers {
		if !v.checkOffer(r, &now) {
			v.offers[n] = r
			n++
		}
	}
	clear(v.offers[n:])
	v.offers = v.offers[:n]
}

// checkOffer advances offered send r; true once r has completed. now is
// read at most once per sweep.
func (v *vci) checkOffer(r *Request, now *time.Time) bool {
	l := r.link
	a := l.medOut
	f := a.flag(r.offer)
	switch atomic.LoadUint64(f) {
	case medFree:
		v.finish(r, nil)
		return true
	case medFailed:
		atomic.StoreUint64(f, medFree)
		v.finish(r, fmt.Errorf("endpoint: send %d bytes to rank %d: the receiver could not read the sender's buffer: %w", len(r.buf), r.qrank, ErrPeerGone))
		return true
	case medOffered:
		if now.IsZero() {
			*now = time.Now()
		}
		if now.Sub(r.timed) < offerWait || !atomic.CompareAndSwapUint64(f, medOffered, medWithdrawn) {
			return false
		}
		memcopy.Shared(a.slot(r.offer), r.buf)
		release.Store(f, medFilled)
		a.withdrawn++
		v.finish(r, nil)
		return true
	case medClaimed:
		// The receiver is copying; a receiver that died meanwhile never
		// frees the slot.
		if now.IsZero() {
			*now = time.Now()
		}
		if now.Sub(r.timed) > offerWait && l.id.Exited() {
			v.finish(r, fmt.Errorf("endpoint: send %d bytes to rank %d: node peer process %d exited while it read the message: %w", len(r.buf), r.qrank, l.id.PID, ErrPeerGone))
			return true
		}
	}
	return false
}

// nodeOffer takes offered message o at the head of l's ring (its header
// already read). Matched by a posted receive, it is claimed and copied
// from the sender's buffer; unmatched, it joins the unexpected queue as
// an offer, unclaimed, for the receive that will match it (takeOffer),
// while its sender may withdraw it meanwhile. Withdrawn and filled, it is
// taken from the slot as a medium message; withdrawn and still being
// filled, it is held and the rest of the ring waits (takeHeld).
func (v *vci) nodeOffer(l *nodeLink, o offerHeld) {
	f := l.medIn.flag(o.slot)
	switch atomic.LoadUint64(f) {
	case medFilled:
		v.medTake(l, o.t, o.aux, o.slot, o.n)
	case medWithdrawn:
		l.held = o
	case medOffered:
		for r := v.posted.head; r != nil; r = r.qnext {
			if tagMatches(o.t, r.want, r.ignore) {
				v.posted.remove(r)
				v.takeOffer(r, &offerRef{link: l, offerHeld: o})
				return
			}
		}
		v.appendUnexpected(unexp{tag: o.t, sig: o.aux, offer: &offerRef{link: l, offerHeld: o}})
		v.unexpOffers++
	default:
		v.log.Error("node offered message in a slot in an unexpected state; message lost", "member", l.member, "slot", o.slot, "state", atomic.LoadUint64(f))
	}
}

// settleOffers copies the unexpected offers whose senders have withdrawn
// them out of their slots, as an unexpected medium message is copied out
// at once: the slot is then free for the sender's next message. Caller
// holds the lock.
func (v *vci) settleOffers() {
	for i := range v.unexpected {
		u := &v.unexpected[i]
		if u.offer == nil || atomic.LoadUint64(u.offer.link.medIn.flag(u.offer.slot)) != medFilled {
			continue
		}
		o := u.offer
		a := o.link.medIn
		u.data = v.smallBuf(o.n)
		copy(u.data, a.slot(o.slot)[:o.n])
		release.Store(a.flag(o.slot), medFree)
		u.offer = nil
		v.unexpOffers--
	}
}

// offerRef is an offered message waiting in the unexpected queue.
type offerRef struct {
	link *nodeLink
	offerHeld
}

// takeHeld takes l's held offer once its sender has filled the slot;
// false while it has not.
func (v *vci) takeHeld(l *nodeLink) bool {
	o := l.held
	if atomic.LoadUint64(l.medIn.flag(o.slot)) != medFilled {
		return false
	}
	l.held = offerHeld{}
	v.medTake(l, o.t, o.aux, o.slot, o.n)
	return true
}

// takeOffer completes receive r with offered message o: claimed, it is
// copied from the sender's buffer; withdrawn, from the slot once the
// sender has filled it.
func (v *vci) takeOffer(r *Request, o *offerRef) {
	l := o.link
	f := l.medIn.flag(o.slot)
	for spins := 1; ; spins++ {
		switch atomic.LoadUint64(f) {
		case medOffered:
			if atomic.CompareAndSwapUint64(f, medOffered, medClaimed) {
				v.offerRead(r, o, f)
				return
			}
		case medFilled:
			v.medInto(r, l, o.t, o.aux, o.slot, o.n)
			return
		case medWithdrawn:
			// The sender is copying the message into the slot, in one go
			// under its endpoint's guard.
			if spins%1024 == 0 && l.id.Exited() {
				r.st = Status{Source: tagSource(o.t), Tag: tagUser(o.t)}
				v.finish(r, fmt.Errorf("endpoint: medium message from rank %d: node peer process %d exited while it copied it: %w", tagSource(o.t), l.id.PID, ErrPeerGone))
				return
			}
			runtime.Gosched()
		default:
			r.st = Status{Source: tagSource(o.t), Tag: tagUser(o.t)}
			v.finish(r, fmt.Errorf("endpoint: medium message from rank %d in a slot in state %d: %w", tagSource(o.t), atomic.LoadUint64(f), ErrInvalid))
			return
		}
	}
}

// dropOffer lets the sender of offered message o go without reading it
// (its communicator was freed).
func (v *vci) dropOffer(o *offerRef) {
	f := o.link.medIn.flag(o.slot)
	for spins := 1; ; spins++ {
		switch atomic.LoadUint64(f) {
		case medOffered:
			if atomic.CompareAndSwapUint64(f, medOffered, medClaimed) {
				release.Store(f, medFree)
				return
			}
		case medFilled:
			release.Store(f, medFree)
			return
		case medWithdrawn:
			if spins%1024 == 0 && o.link.id.Exited() {
				return
			}
			runtime.Gosched()
		default:
			return
		}
	}
}

// offerRead copies claimed offer o (slot flag f) from the sender's buffer
// into receive r and frees the slot, or marks it failed when the copy
// fails.
func (v *vci) offerRead(r *Request, o *offerRef, f *uint64) {
	src := tagSource(o.t)
	r.st = Status{Source: src, Tag: tagUser(o.t)}
	if err := checkSigWord(r, o.aux, uint64(o.n)); err != nil {
		release.Store(f, medFree) // nothing is read; the send completes
		v.finish(r, err)
		return
	}
	direct := (r.reqExt == nil || r.typed == nil && r.unpack == nil) && len(r.buf) >= o.n
	b := r.buf
	if !direct {
		b = v.inlineScratch(o.n)
	}
	if _, err := cma.Read(o.link.pid, b[:o.n], o.addr); err != nil {
		atomic.StoreUint64(f, medFailed)
		v.finish(r, fmt.Errorf("endpoint: medium message from rank %d: %w", src, err))
		return
	}
	release.Store(f, medFree)
	if !direct {
		v.deliver(r, o.t, b[:o.n])
		return
	}
	r.st.Count = o.n
	v.finish(r, nil)
}
