package endpoint

import (
	"fmt"
)

// Msg is one message of a batch of sends (Comm.IsendBatch): Buf for rank
// Dest (or ProcNull) with tag Tag.
type Msg struct {
	Buf  []byte
	Dest int
	Tag  int
}

// IsendBatch starts the sends of msgs, in order, each as Isend would
// start it, and returns reqs with one request per message appended, in
// the order of msgs (pass reqs[:0] of a slice kept between calls to
// allocate nothing). The requests are waited for and released like
// Isend's.
//
// What a batch saves is the per-call cost of Isend: the arguments are
// checked and the endpoint entered once for the whole batch, and the
// messages that travel inline through the node transport (Comm.Transport
// TransportNode, up to the ring's inline limit) are written into each
// peer's ring and made visible with one store per ring, after the last of
// them; a receiver sees them all at once. Other messages (peers on
// libfabric, larger messages, or a ring without room) go as their Isend
// would, in their place in the order. Messages to one peer arrive in the
// order of msgs, after those of earlier sends and before those of later
// ones; a batch as a whole is not atomic towards other goroutines using
// the same shared endpoint.
//
// Every message is checked before any is sent: a bad rank or tag, or a
// freed communicator, sends nothing, leaves reqs as it was and returns an
// error wrapping ErrInvalid (or ErrClosed) that names the message. An
// error while sending (the endpoint closed meanwhile, a provider failure)
// returns the requests of the messages started before the failing one,
// which was not sent, nor were those after it.
func (c *Comm) IsendBatch(reqs []*Request, msgs []Msg) ([]*Request, error) {
	if err := c.usable("send batch"); err != nil {
		return reqs, err
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Dest == ProcNull {
			continue
		}
		if err := c.checkPeer(m.Dest, false); err != nil {
			return reqs, fmt.Errorf("endpoint: send batch, message %d: %w", i, err)
		}
		if err := checkTag(m.Tag, false); err != nil {
			return reqs, fmt.Errorf("endpoint: send batch, message %d: %w", i, err)
		}
	}
	v := c.v
	v.lock()
	defer v.unlock()
	if _, err := v.beginSend(); err != nil {
		return reqs, err
	}
	// The rings written to since their last publication. The scratch
	// slice is taken out of v while in use: a shared endpoint's lock is
	// let go around the sends that go as Isend's.
	dirty := v.batchDirty[:0]
	v.batchDirty = nil
	publish := func() {
		for _, l := range dirty {
			l.out.Publish()
		}
		clear(dirty)
		dirty = dirty[:0]
	}
	defer func() {
		publish()
		v.batchDirty = dirty
	}()
	for i := range msgs {
		m := &msgs[i]
		if m.Dest == ProcNull {
			reqs = append(reqs, completedRequest)
			continue
		}
		l := c.link(m.Dest)
		if l != nil && len(m.Buf) <= l.inline && len(v.sendq) == 0 {
			first := !l.out.Pending()
			ok, err := l.out.Append(packTag(c.ctx, c.slots[m.Dest], c.rank, m.Tag), m.Buf)
			if err != nil {
				return reqs, fmt.Errorf("endpoint: send batch, message %d: %w", i, err)
			}
			if ok {
				if first {
					dirty = append(dirty, l)
				}
				c.count(m.Dest, len(m.Buf))
				reqs = append(reqs, completedRequest)
				continue
			}
		}
		// Not for a ring, or the ring is full: what was appended goes out
		// first, then this message as Isend sends it (with progress and,
		// if it must wait, queued in order).
		publish()
		v.unlock()
		r, err := c.isend(m.Buf, m.Dest, m.Tag, c.ctx)
		v.lock()
		if err != nil {
			return reqs, fmt.Errorf("endpoint: send batch, message %d: %w", i, err)
		}
		reqs = append(reqs, r)
		if v.isClosed() && i+1 < len(msgs) { // closed while unlocked: its rings are gone
			return reqs, fmt.Errorf("endpoint: send batch, message %d: send: %w", i+1, ErrClosed)
		}
	}
	return reqs, nil
}
