package collectives

import (
	"fmt"
	"unsafe"

	"github.com/weft-hpc/weft/endpoint"
)

// Hybrid nonblocking calls: a communicator of several processes, some of
// them holding several handles. A nonblocking Barrier, Bcast or
// Allreduce combines the handles of each process through its memory as
// a call of one process does (nblocal.go): every member registers its
// buffers in the call's entry and the member that arrives last folds
// the members' contributions (or picks the root's data). That member
// then starts the call's nonblocking form among the processes' leaders
// (hier.pnet: one rank per process, on the leader handle's endpoint,
// which any member may drive while it holds the group's pmu) and
// returns; whichever member drives its handle next (Test, Wait, another
// call, the progress goroutine) tests that collective, and the one that
// sees it complete copies the result into every member's buffers and
// marks the entry done. So no member waits for another process in an
// I-call, and the messages between processes are one rank's per
// process, as in the blocking hierarchy.

// hybridColl reports whether the nonblocking form of k combines through
// process memory and then among the processes' leaders when the
// communicator spans several processes (localNB).
func hybridColl(k Collective) bool {
	return k == CollBarrier || k == CollBcast || k == CollReduce || k == CollAllreduce
}

// hybridReduce reports whether a reduction with an operation that is
// (or is not) commutative may take the hybrid path: the members of a
// process fold first, then the processes, which reorders the
// contributions; deterministic mode asks for one order whatever the
// shape.
func hybridReduce(c *Coll, commutative bool) bool {
	return commutative && c != nil && !c.cfg.det
}

// hybridRootedMin is the smallest Bcast or Reduce that takes the hybrid
// path: below it the flat schedule, where a rank that only sends (a
// Bcast's root, a Reduce's other ranks) completes as soon as its sends
// are out, was faster than waiting for every member of a process first
// (2 processes of 2 handles on the 2-vCPU VM, flat against hybrid, µs:
// Ibcast 8 B 3.2 against 6.5, 64 KiB 9.7–10.6 against 14.3–15.2, 128 KiB
// 16.7 both, 256 KiB 107 against 25, 1 MiB 310 against 102; Ireduce 8 B
// 3.8 against 6.8, 64 KiB 25 against 30, 128 KiB 66 against 27, 1 MiB
// 462 against 354; osu -weft hybrid).
const hybridRootedMin = 128 << 10

// hybridRooted reports whether a Bcast or Reduce of buf (the length every
// rank passes) may take the hybrid path.
func hybridRooted[T any](buf []T) bool {
	return len(buf)*int(unsafe.Sizeof(*new(T))) >= hybridRootedMin
}

// Each rank decides on its own length whether a Bcast or Reduce takes
// the hybrid path, so ranks whose lengths differ across hybridRootedMin
// (an erroneous program) take paths that never meet. So that they fail
// instead of waiting out their contexts, a member that runs such a call
// flat notes it in its slot (noteFlat), and a member waiting in a hybrid
// call looks now and then (straddled) for a member of its process that
// noted the call, for a message of the call from a rank that runs it
// flat, and for abort notices; the flat ranks learn of it from the abort
// notices the failing members send.

// noteFlat notes, for clone c of a nonblocking call k that runs flat,
// that other members of its process may run the call through process
// memory.
func (c *Coll) noteFlat(k Collective) {
	if c.own == nil || c.nb == nil || c.hybridOK {
		return
	}
	if h := c.own.hier; h != nil && h.hybrid && hybridColl(k) {
		h.g.slots[h.li].flatNB[c.seq%nbCalls].Store(c.seq)
	}
}

// straddleEvery is how many polls of a waiting hybrid call pass between
// two looks for ranks that run it flat.
const straddleEvery = 256

// straddled looks for ranks that run hybrid call e of clone c flat: a
// member of this process that noted the call, a message of the call from
// another rank, or an abort notice.
func (c *Coll) straddled(e *nbLocal) error {
	h := c.own.hier
	for m := range h.g.slots {
		if h.g.slots[m].flatNB[e.seq%nbCalls].Load() == e.seq {
			return fmt.Errorf("another member of this process ran %s #%d flat, with fewer than %d bytes, where this one combines it through process memory (the ranks' counts differ): %w",
				c.call, e.seq, hybridRootedMin, ErrInvalid)
		}
	}
	if err := c.abortNotice(); err != nil {
		return err
	}
	ok, st, err := c.comm.Iprobe(endpoint.AnySource, endpoint.AnyTag)
	if err != nil {
		return err
	}
	if ok && st.Tag&abortTag == 0 && uint32(st.Tag>>sigBits)&seqMask == e.seq&seqMask {
		return fmt.Errorf("rank %d sent a message of %s #%d, which it runs flat (fewer than %d bytes) where this rank combines it through process memory (the ranks' counts differ): %w",
			st.Source, c.call, e.seq, hybridRootedMin, ErrInvalid)
	}
	return nil
}

// reduceData is a Reduce's contribution: send, or recv in place (the
// root's; every rank's has the same length).
func reduceData[T any](send, recv []T) []T {
	if send == nil {
		return recv
	}
	return send
}

// runHybrid runs call s of clone c through its process group and then
// among the processes: the member that arrives last calls pre with every
// member's buffers (indexed by member), then remote, under the group's
// pmu, to start the collective among the processes' leaders on pnet;
// once that has completed, post with the same buffers finishes the call
// for every member.
func (c *Coll) runHybrid(s callSig, send, recv []byte, pre func(slots []nbSlot),
	remote func(pnet *Coll, slots []nbSlot) (*Request, error), post func(slots []nbSlot)) error {
	h := c.own.hier
	g := h.g
	at, e, err := c.joinLocal(s, 0)
	if err != nil {
		return c.fail(err)
	}
	e.slots[h.li] = nbSlot{send, recv}
	if int(e.arrived.Add(1)) == len(e.slots) {
		at.CompareAndSwap(e, nil)
		if !e.state.CompareAndSwap(nbOpen, nbWriting) {
			return c.fail(e.failure())
		}
		pre(e.slots)
		g.pmu.Lock()
		var q *Request
		switch pn := g.pnet; {
		case pn == nil: // not reached: the leader made it before its first call
			err = fmt.Errorf("%s #%d: no collectives among the processes' leaders: %w", c.call, c.seq, ErrInvalid)
		case pn.broken != nil:
			err = fmt.Errorf("%s #%d: an earlier call among the processes failed: %w", c.call, c.seq, pn.broken)
		default:
			q, err = remote(pn, e.slots)
		}
		if err == nil {
			e.post = post
			e.remote.Store(q)
		}
		g.pmu.Unlock()
		if err != nil {
			e.failRemote(g, err)
			return c.fail(e.failure())
		}
		e.advanceRemote(g)
	}
	return c.waitLocal(e)
}

// advanceRemote tests a hybrid call's collective among the processes,
// unless another member is at it, and on its completion finishes the
// call (post) and marks it done, or fails it.
func (e *nbLocal) advanceRemote(g *procGroup) {
	q := e.remote.Load()
	if q == nil || e.state.Load() != nbWriting || !g.pmu.TryLock() {
		return
	}
	defer g.pmu.Unlock()
	if e.state.Load() != nbWriting {
		return
	}
	done, err := q.Test()
	switch {
	case err != nil:
		e.failWriting(err)
	case done:
		e.post(e.slots)
		e.state.Store(nbDone)
	}
}

// remoteGone looks for an exited rank among those the hybrid call's
// collective among the processes waits for (as Request.Wait does for
// its own call), and fails the call if it finds one.
func (e *nbLocal) remoteGone(g *procGroup) error {
	q := e.remote.Load()
	if q == nil || q.s == nil {
		return nil
	}
	g.pmu.Lock()
	h := q.s.h
	h.mu.Lock()
	var err error
	if !q.s.done {
		err = q.s.cl.peerGone()
	}
	h.mu.Unlock()
	g.pmu.Unlock()
	if err != nil {
		e.failRemote(g, err)
	}
	return err
}

// failRemote fails a hybrid call whose part among the processes is in
// flight or could not start (with the group's pmu, so that no member
// is writing results meanwhile). A part in flight ends as a failed
// collective of the leaders' handle does: the other processes are told,
// and the handle breaks, ending its other calls.
func (e *nbLocal) failRemote(g *procGroup, err error) {
	g.pmu.Lock()
	defer g.pmu.Unlock()
	e.failWriting(err)
	if q := e.remote.Load(); q != nil && q.s != nil {
		h := q.s.h
		h.mu.Lock()
		h.end(q.s, err)
		h.mu.Unlock()
	}
}

// failWriting moves e from writing to failed with err.
func (e *nbLocal) failWriting(err error) {
	if e.state.CompareAndSwap(nbWriting, nbFailing) {
		e.err = err
		e.state.Store(nbFailed)
	}
}
