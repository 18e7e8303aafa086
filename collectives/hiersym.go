package collectives

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/weft-hpc/weft/internal/memcopy"
)

// Small collectives among the handles of one process without a leader
// (symmetric steps in process memory): every member writes its part into
// an area of its own (two cache lines), after the area's mark, and reads
// the other members' areas once their marks show the call. The leader's scheme
// takes two hand-offs between cores in turn (the members' arrivals to the
// leader, the leader's release back to them); here each member's line
// crosses once, and the crossings overlap. Barrier, Allreduce, Allgather
// and Alltoall use it where each member's part fits its area (symBytes),
// and so does Bcast between two handles;
// a reduction folds the lines in rank order on every member, so the
// result is bitwise the same everywhere and deterministic mode holds.
//
// A member has two lines and uses them in alternate calls: it writes the
// line of call k once every other member has finished call k-2, which
// it knows when it saw them all arrive at call k-1 in a symmetric step,
// and otherwise waits until every other member's publication (pub) shows
// call k-1 or later: the calls that meet in process memory publish there
// as they begin, and so does the symmetric step, before it waits.

// symBytes is the part a member's area carries (with the mark, two cache
// lines: 64-byte parts went 0.20 → 0.15 µs in a Bcast between two handles
// against one line's 56).
const symBytes = 120

// symLocalMax is the most handles a symmetric step in process memory
// serves: each member reads every other member's line.
const symLocalMax = 8

// symLine is a member's line of one parity: the mark of the call whose
// part it holds (seq<<32 | signature<<2 | slotArrived|slotFlat), and the
// part.
type symLine struct {
	mark atomic.Uint64
	data [symBytes]byte
}

// symPubPolls is how many polls of a member's line a symmetric step
// makes per look at its publication (for a member in another call).
const symPubPolls = 64

// algSym stands for the symmetric steps in process memory in call
// signatures, so that a member that took the leader's path instead is a
// mismatch.
const algSym Algorithm = 253

// symLocal reports whether a call whose parts take part bytes per member
// runs as a symmetric step in process memory: every rank of the
// communicator is a handle of this process, as many as symFits allows
// (decided when the group was made), and the parts fit a member's area.
// Every handle gives the same answer.
func (c *Coll) symLocal(part int) bool {
	h := c.hier
	return h != nil && h.procs == 1 && h.g.sym && part <= symBytes
}

// symFits reports whether a process group of m handles takes symmetric
// steps: a few handles, no more than the goroutines Go runs at once
// (GOMAXPROCS, read when the group is made so that every member sees
// the same). With more, every member waits for every other one to be
// scheduled, where the leader's scheme lets the leader run on: 4 handles
// with GOMAXPROCS 2 took 0.62 µs for a Bcast of 8 bytes after a
// symmetric Barrier, against 0.12 after the leader's.
func symFits(m int) bool {
	return m > 1 && m <= symLocalMax && m <= runtime.GOMAXPROCS(0)
}

// symReady starts a symmetric call in process memory with signature s.
func (c *Coll) symReady(ctx context.Context, s callSig) error {
	c.inHier = true
	s.alg = algSym
	return c.ready(ctx, s)
}

// symStep runs a symmetric step in process memory: put writes this
// member's part into its line, and once every other member has written
// its own for this call, get reads them (line(i): member i's, in the
// group's order, which is rank order). With from a member's index, only
// that member's line is waited for (from itself waits for none).
func (c *Coll) symStep(ctx context.Context, from int, put func(b []byte), get func(line func(i int) []byte)) error {
	h := c.hier
	g := h.g
	seq := c.seq
	me := h.li
	if err := c.settle(ctx); err != nil {
		return err
	}
	mark := uint64(seq)<<32 | c.sig<<2&sigBitsMask | slotArrived | slotFlat
	// Published first: a member waiting below for this one to begin call
	// seq-1 sees it (a flat nonblocking call publishes nothing).
	publish(&g.slots[me].pub, mark)
	if c.symAt != seq-1 {
		// The lines of this parity were last read in call seq-2: wait
		// until every other member has begun call seq-1.
		for j := range g.slots {
			if j == me {
				continue
			}
			pub := &g.slots[j].pub
			if !before(pub.Load()>>32, uint64(seq-1)) {
				continue
			}
			if err := c.hierSpin(ctx, func() (bool, error) {
				if !before(pub.Load()>>32, uint64(seq-1)) {
					return true, nil
				}
				if g.state.Load()&3 == phFailed {
					return false, g.failed()
				}
				return false, nil
			}, false, false); err != nil {
				return err
			}
		}
	}
	ln := &g.slots[me].sym[seq&1]
	if put != nil {
		put(ln.data[:])
	}
	publish(&ln.mark, mark)
	for j := range g.slots {
		if j == me || from >= 0 && (j != from || me == from) {
			continue
		}
		lj, pub := &g.slots[j].sym[seq&1].mark, &g.slots[j].pub
		if lj.Load() == mark {
			continue
		}
		polls := 0
		if err := c.hierSpin(ctx, func() (bool, error) {
			if v := lj.Load(); v == mark {
				return true, nil
			} else if uint32(v>>32) == seq {
				return false, g.memberMismatch(c, j)
			}
			// Member j's other line, now and then: a member that polled it
			// at every turn would take it from j's cache at each call.
			if polls++; polls%symPubPolls != 0 {
				return false, nil
			}
			if v := pub.Load(); uint32(v>>32) == seq && v != mark {
				return false, g.memberMismatch(c, j)
			}
			if g.state.Load()&3 == phFailed {
				return false, g.failed()
			}
			return false, nil
		}, false, false); err != nil {
			return err
		}
	}
	// Every member arrived. One that gave the call up since (its context
	// ended while it waited) fails it for all; one that failed a later
	// call had finished this one.
	if g.failedBy(seq) {
		return g.failed()
	}
	if from < 0 || len(g.slots) == 2 && me != from {
		c.symAt = seq // (it saw every other member arrive)
	}
	if get != nil {
		if c.symLine == nil {
			c.symLine = func(i int) []byte { return c.hier.g.slots[i].sym[c.symSeq&1].data[:] }
		}
		c.symSeq = seq
		get(c.symLine)
	}
	return nil
}

// failedBy reports whether the group has failed for good in call seq or
// an earlier one.
func (g *procGroup) failedBy(seq uint32) bool {
	if g.state.Load()&3 != phFailed {
		return false
	}
	for {
		if f := g.failure.Load(); f != nil {
			return !before(uint64(seq), uint64(f.seq))
		}
		runtime.Gosched() // set just after the state by the member that failed it
	}
}

// memberMismatch is the error of a member that found member j of its
// process at another collective, or the same with other arguments, at
// its call c.seq.
func (g *procGroup) memberMismatch(c *Coll, j int) error {
	return fmt.Errorf("rank %d of this process called another collective, or with other arguments, where this rank is at %s #%d: %w",
		g.ranks[j], c.call, c.seq, ErrInvalid)
}

// symBarrier is Barrier as a symmetric step in process memory.
func symBarrier(ctx context.Context, c *Coll, s callSig) error {
	if err := c.symReady(ctx, s); err != nil {
		return c.hierEnd(err)
	}
	return c.hierEnd(c.symStep(ctx, -1, nil, nil))
}

// symAllreduce is Allreduce as a symmetric step in process memory: every
// member folds every line in rank order (send nil: the contribution is
// in acc).
func symAllreduce[T any](ctx context.Context, c *Coll, send, acc []T, op *Op[T], s callSig) error {
	if err := c.symReady(ctx, s); err != nil {
		return c.hierEnd(err)
	}
	in := acc
	if send != nil {
		in = send
	}
	nb := len(acc) * sizeOf[T]()
	err := c.symStep(ctx, -1, func(b []byte) { memcopy.Copy(b, bytesOf(in)) }, func(line func(i int) []byte) {
		memcopy.CopyOf(acc, elems[T](line(0)[:nb]))
		for i := 1; i < len(c.hier.g.slots); i++ {
			op.left(acc, elems[T](line(i)[:nb]))
		}
	})
	return c.hierEnd(err)
}

// symAllgather is Allgather as a symmetric step in process memory (send
// nil: this rank's block is in place in recv).
func symAllgather(ctx context.Context, c *Coll, send, recv []byte, s callSig) error {
	if err := c.symReady(ctx, s); err != nil {
		return c.hierEnd(err)
	}
	nb := s.count * s.esize
	mine := recv[c.rank*nb : (c.rank+1)*nb]
	if send == nil {
		send = mine
	}
	g := c.hier.g
	err := c.symStep(ctx, -1, func(b []byte) { memcopy.Copy(b, send) }, func(line func(i int) []byte) {
		memcopy.Copy(mine, send)
		for i, r := range g.ranks {
			if r != c.rank {
				memcopy.Copy(recv[r*nb:(r+1)*nb], line(i))
			}
		}
	})
	return c.hierEnd(err)
}

// symAlltoall is Alltoall as a symmetric step in process memory: a
// member's line holds its whole send buffer (send nil: in place, recv).
func symAlltoall(ctx context.Context, c *Coll, send, recv []byte, s callSig) error {
	if err := c.symReady(ctx, s); err != nil {
		return c.hierEnd(err)
	}
	if send == nil {
		send = recv
	}
	nb := s.count * s.esize
	g := c.hier.g
	err := c.symStep(ctx, -1, func(b []byte) { memcopy.Copy(b, send) }, func(line func(i int) []byte) {
		for i, r := range g.ranks {
			memcopy.Copy(recv[r*nb:(r+1)*nb], line(i)[c.rank*nb:])
		}
	})
	return c.hierEnd(err)
}

// symBcast is Bcast as a symmetric step in process memory: the root
// writes its line and leaves; the others copy from it.
func symBcast(ctx context.Context, c *Coll, b []byte, root int, s callSig) error {
	if err := c.symReady(ctx, s); err != nil {
		return c.hierEnd(err)
	}
	from := c.hier.local[root]
	var put func([]byte)
	var get func(func(int) []byte)
	if c.rank == root {
		put = func(l []byte) { memcopy.Copy(l, b) }
	} else {
		get = func(line func(int) []byte) { memcopy.Copy(b, line(from)) }
	}
	return c.hierEnd(c.symStep(ctx, from, put, get))
}
