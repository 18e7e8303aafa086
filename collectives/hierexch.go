package collectives

import (
	"context"
	"sync/atomic"

	"github.com/weft-hpc/weft/internal/memcopy"
)

// Symmetric node steps. A node step through the node's leader
// (nodeStepFrom) costs two hand-offs between processes: the others
// arrive and the leader reads them, then the leader publishes the result
// and the others read it. For the small vector of an Allreduce on a node
// without a network level every process can as well compute the result
// itself: each writes its part into its own exchange area and publishes
// its arrival, waits for every other process's, and folds the parts from
// the areas, a single hand-off (8-byte Allreduce between two processes
// 1.36–1.53× → 1.07–1.16× Open MPI's time; docs/perf/collectives.md).
// Every process folds the parts in the same (process) order as the
// node's leader does, so the results are bitwise the same on every
// process and equal to the leader's. An Allgather's blocks go the same
// way (symAllgather), one step where the gather to the leader and the copy
// back took two. The Barrier of two processes is a symmetric step with
// no data (topBarrier); Bcast and Reduce, whose steps through the leader
// take one hand-off where it matters, keep them, and so does the
// Barrier of more processes (on a crowded node, every process waiting
// for every other one slowed the calls after it).
//
// A process's exchange area has two halves of exchBytes, and its line
// two mark words, one of each per parity of the step. Process i writes
// the half and the mark of step s once every other process has begun
// step s-1 (its arrival word holds step s-1 or later): it has then
// finished step s-2, the last that read them. After a symmetric step
// that is known already (allAt), so a run of them waits for nothing but
// the arrivals. Every kind of node step publishes each process's
// arrival, the node's leader's included. A reader finds the mark of
// step s in the parity word of every other process until it has itself
// begun step s+1, so it sees every mark, and so every mismatch of calls.

const (
	// exchBytes is the part a process brings to a symmetric step, at
	// most.
	exchBytes = 16 << 10
	// symMax bounds the processes of a node that take symmetric steps:
	// each process reads every other one's arrival line and area, where
	// through the leader it reads one.
	symMax = 8
)

// symMark is the mark word of process i for the steps of s's parity.
func (ng *nodeGroup) symMark(i int, s uint64) *atomic.Uint64 { return ng.word(1+i, 1+int(s&1)) }

// exch returns process i's exchange area for step s.
func (ng *nodeGroup) exch(i int, s uint64) []byte {
	off := nodeHdr(ng.m) + (ng.m+1)*nodeSlot + (2*i+int(s&1))*exchBytes
	return ng.mem[off : off+exchBytes : off+exchBytes]
}

// symmetric reports whether a node step that brings at most n bytes per
// process goes as a symmetric exchange: one node (so no network level
// above it) with a node level, a few processes, a part that fits an
// exchange area. Every handle of every process gives the same answer
// (the node group itself is on the process leaders only).
func (c *Coll) symmetric(n int) bool {
	h := c.hier
	return h != nil && h.chunk > 0 && h.tops == 1 && h.procs > 1 && h.procs <= symMax && n <= exchBytes
}

// nodeExchange runs one symmetric node step on a process leader: put
// writes this process's part into its exchange area (with
// memcopy.Shared: the other processes read the area last, and where
// their cores share no cache with this one plain stores of 8 KiB and
// more wait for each line); once every process
// of the node has arrived at the step, get reads the parts (area(i):
// process i's).
func (c *Coll) nodeExchange(ctx context.Context, put func(area []byte), get func(area func(i int) []byte)) error {
	ng := c.hier.ng
	ng.step++
	s := ng.step
	mark := s<<32 | c.sig<<2&sigBitsMask | slotArrived
	me := ng.ni
	if me != 0 && ng.allAt != s-1 {
		// Step s-1 was the leader's or a stream, and this process did not
		// wait for its end: wait now, as nodeStepFrom does. The leader
		// may not have read this process's arrival at it yet, and the
		// arrival below overwrites it (after a stream, a producer that
		// had finished its chunks came here at once and the leader waited
		// forever for an arrival it no longer saw). After a step whose
		// end it waited for, the state word already shows it.
		if err := c.nodeWait(ctx, ng, s-1); err != nil {
			return err
		}
		if ng.prev != 0 {
			err := ng.checkOut(c, s-1, ng.prev)
			ng.prev = 0
			if err != nil {
				return err
			}
		}
	}
	if ng.allAt+1 < s {
		// The half and the mark word of step s were last read in step
		// s-2.
		for i := 0; i < ng.m; i++ {
			if i != me {
				if err := c.nodeBegun(ctx, ng, i, s-1); err != nil {
					return err
				}
			}
		}
	}
	put(ng.exch(me, s))
	publish(ng.symMark(me, s), mark)
	publish(ng.arrival(me), mark)
	for i := 0; i < ng.m; i++ {
		if i != me {
			if err := c.nodeBegunAt(ctx, ng, i, s, mark); err != nil {
				return err
			}
		}
	}
	// Every process arrived. One that gave the step up since (its
	// context ended while it waited) fails it for all; one that finished
	// it and failed in a later call does not.
	if v := ng.failure().Load(); v != 0 && int16(uint16(v>>40)-uint16(s)) < 0 {
		return ng.failed()
	}
	ng.allAt = s
	ng.symSteps++
	if ng.exchOf == nil {
		ng.exchOf = func(i int) []byte { return ng.exch(i, ng.exchStep) }
	}
	ng.exchStep = s
	get(ng.exchOf)
	if me == 0 {
		// For the steps through the leader that follow: this step is
		// done, and every process has begun it. The state word, which
		// every process polls with the failure word in line 0, is
		// written only when such a step begins (flushSym): a store per
		// symmetric step would take the line from the others' caches.
		ng.prev = mark
		ng.symDone = s
	}
	return nil
}

// before reports whether 32-bit step a comes before step b.
func before(a, b uint64) bool { return int32(uint32(a)-uint32(b)) < 0 }

// nodeBegun waits until process i of the node has begun step s or a
// later one.
func (c *Coll) nodeBegun(ctx context.Context, ng *nodeGroup, i int, s uint64) error {
	a := ng.arrival(i)
	if !before(a.Load()>>32, s) {
		return nil
	}
	return c.nodeSpin(ctx, ng, i, func() (bool, error) {
		if !before(a.Load()>>32, s) {
			return true, nil
		}
		return false, ng.failed()
	})
}

// nodeBegunAt waits until process i of the node has arrived at
// symmetric step s with mark; at step s with another mark it called
// another collective (or took another kind of step).
func (c *Coll) nodeBegunAt(ctx context.Context, ng *nodeGroup, i int, s, mark uint64) error {
	a, b := ng.symMark(i, s), ng.arrival(i)
	cond := func() (bool, error) {
		if a.Load() == mark {
			return true, nil
		}
		if v := b.Load(); v>>32 == s&(1<<32-1) && v != mark {
			return false, ng.mismatch(c, i)
		}
		return false, ng.failed()
	}
	if ok, err := cond(); ok || err != nil {
		return err
	}
	return c.nodeSpin(ctx, ng, i, cond)
}

// flushSym (the node's leader, as a step through it begins) publishes
// the end of the symmetric steps before it in the state word, which the
// other processes wait on in such a step.
func (ng *nodeGroup) flushSym() {
	if ng.symDone != 0 {
		publish(ng.state(), ng.symDone)
		ng.symDone = 0
	}
}

// mostRanks is the largest number of ranks one process of the
// communicator holds.
func (h *hier) mostRanks() int {
	most := 0
	for j := 0; j < h.procs; j++ {
		most = max(most, h.first[j+1]-h.first[j])
	}
	return most
}

// symAllgather (process leader, on a node that takes symmetric steps,
// members' buffers writable) moves an Allgather's blocks (nb bytes a
// rank) between the processes of the node in one symmetric step, where
// hierGather and nodeDown take two steps through the node's leader: each
// process brings its ranks' send buffers, in rank order, and copies every
// other process's blocks straight from its area into each of its ranks'
// recv, and its own ranks' blocks from their send buffers. No block is
// gathered into a staging buffer first: for one rank a process that cost
// two more copies of the blocks, one of them reading back the area just
// streamed to memory (8 KiB between two processes 2.9 → 1.75 µs,
// docs/perf/collectives.md).
func (c *Coll) symAllgather(ctx context.Context, nb int) error {
	h, g := c.hier, c.hier.g
	me := h.procOf[c.rank]
	return c.nodeExchange(ctx, func(area []byte) {
		for i := range g.slots {
			c.shared(area[i*nb:(i+1)*nb], g.slots[i].send)
		}
	}, func(area func(int) []byte) {
		for r := 0; r < c.size; r++ {
			var from []byte
			if j := h.procOf[r]; j != me {
				from = area(j)[h.local[r]*nb:]
			} else {
				from = g.slots[h.local[r]].send
			}
			for i := range g.slots {
				if g.ranks[i] != r {
					memcopy.Copy(g.slots[i].recv[r*nb:(r+1)*nb], from)
				}
			}
		}
	})
}

// symAlltoall reports whether an Alltoall of nb bytes per block between
// the processes of a node goes as one symmetric step (symAlltoallStep):
// the node takes such steps, every process's blocks fit its exchange
// area, and the hierarchy's mode allows it. Every process gives the same
// answer.
func (c *Coll) symAlltoall(nb int) bool {
	return c.hier != nil && c.hierMode(CollAlltoall) && c.symmetric(c.hier.mostRanks()*c.size*nb)
}

// symAlltoallStep (process leader, members' buffers writable) moves the
// blocks of an Alltoall (nb bytes each) between the processes of the
// node in one symmetric step: each process brings its ranks' send
// buffers, rank by rank, and copies the blocks addressed to its ranks
// out of the others' areas, where the flat Alltoall's messages take a
// hand-off each way between every pair of ranks. The blocks between the
// ranks of this process are alltoallOwn's.
func (c *Coll) symAlltoallStep(ctx context.Context, nb int) error {
	h, g := c.hier, c.hier.g
	row := c.size * nb // one rank's send buffer
	return c.nodeExchange(ctx, func(area []byte) {
		for i := range g.slots {
			c.shared(area[i*row:(i+1)*row], g.slots[i].send)
		}
	}, func(area func(int) []byte) {
		me := h.procOf[c.rank]
		for q := 0; q < c.size; q++ {
			if j := h.procOf[q]; j != me {
				from := area(j)[h.local[q]*row:]
				for i := range g.slots {
					ri := g.ranks[i]
					memcopy.Copy(g.slots[i].recv[q*nb:(q+1)*nb], from[ri*nb:])
				}
			}
		}
	})
}
