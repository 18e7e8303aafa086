package collectives

import (
	"context"

	"github.com/weft-hpc/weft/internal/memcopy"
)

// The hierarchical collectives (hier.go). Each publishes this handle's
// buffers; on a member that is the whole call. The leader combines from
// the members' buffers, runs the collective among the leaders (h.net,
// one rank per process, process j being its rank j) and writes the
// result into the members' buffers in hierRelease.

// hierReady starts a hierarchical call with signature s (its algorithm
// marks it hierarchical, so that a rank running it flat is a mismatch).
func (c *Coll) hierReady(ctx context.Context, s callSig) error {
	c.inHier = true
	if nb := s.count * s.esize; s.count < 0 || nb >= parkMax && (s.call != callBcast || nb > stageMax) {
		c.calmAt = c.seq + parkCalm
	}
	c.polls = int32(c.seq-c.calmAt) < 0
	s.alg = algHier
	if ng := c.hier.ng; ng != nil && (c.own != nil || ng.turn.Load() != ng.tickets) {
		// A nonblocking call, or one after nonblocking calls that hold
		// or await the node level (nbnode.go).
		if err := c.nodeTurn(ctx, ng); err != nil {
			return err
		}
	}
	return c.ready(ctx, s)
}

// algHier stands for the hierarchical path in call signatures, algLocal
// for a nonblocking call through process memory (nblocal.go).
const (
	algHier  Algorithm = 255
	algLocal Algorithm = 254
)

func hierBarrier(ctx context.Context, c *Coll) error {
	if c.symLocal(0) {
		return symBarrier(ctx, c, callSig{call: callBarrier, root: -1})
	}
	if err := c.hierReady(ctx, callSig{call: callBarrier, root: -1}); err != nil {
		return c.hierEnd(err)
	}
	leader, err := c.hierArrive(ctx, nil, nil)
	if !leader || err != nil {
		return c.hierEnd(err)
	}
	err = c.topBarrier(ctx)
	if err == nil {
		err = c.hierRelease(func() {})
	}
	return c.hierEnd(err)
}

// hierBcast: the leader of the root's process takes the root's buffer
// (a copy into its own), the leaders broadcast among themselves, and each
// leader copies into its members' buffers.
func hierBcast(ctx context.Context, c *Coll, b []byte, root int, s callSig) error {
	if c.symLocal(len(b)) && len(c.hier.g.slots) == 2 {
		// (Among more handles the staged Bcast below stays: its members
		// also copy out after one hand-off, and a symmetric Bcast among
		// 3 or more handles could not be timed on this 2-core machine
		// with every handle on a core of its own.)
		return symBcast(ctx, c, b, root, s)
	}
	if err := c.hierReady(ctx, s); err != nil {
		return c.hierEnd(err)
	}
	if len(b) <= stageMax && c.hier.local[root] == 0 && len(c.hier.g.slots) > 1 && c.stagesBcast() {
		return c.hierEnd(c.hierBcastStaged(ctx, b, root))
	}
	leader, err := c.hierArrive(ctx, nil, b)
	if !leader || err != nil {
		return c.hierEnd(err)
	}
	h, g := c.hier, c.hier.g
	rp, rl := h.procOf[root], h.local[root]
	if rp == h.procOf[c.rank] && rl != 0 {
		memcopy.Copy(b, g.slots[rl].recv)
	}
	// Through the node's leader's steps (but see bcastPair): a stream,
	// or single copies from the root's buffer, keep the root's process
	// in the step until every other one has read it, where a step lets
	// it leave once its data is in its slot (docs/perf/collectives.md).
	err = c.topBcast(ctx, b, rp)
	if err == nil {
		err = c.hierRelease(func() {
			for i := 1; i < len(g.slots); i++ {
				memcopy.Copy(g.slots[i].recv, b)
			}
		})
	}
	return c.hierEnd(err)
}

// bcastPair reports whether a Bcast of nbytes between the two processes
// of one node, one rank each, goes as one point-to-point message instead
// of through the node's leader's steps: from collnodestream bytes up to
// one step's chunk (512 KiB). The node transport then moves it the way
// its link has measured to be faster (the pipelined copy, or the
// receiver's single copy from the root's buffer: endpoint's nodeway),
// where a step copies the whole of it into a slot and then out, one after
// the other. On an Intel Xeon host a 64 KiB Bcast took 4.2–4.4 µs this
// way against 8.4–8.5 through the slots, 256 KiB 11–12 against 21, 512
// KiB 27 against 43; at 1 MiB the slots' two steps of 512 KiB, whose
// copies stay in the cores' caches, took 70–73 µs against 86–89 for one
// single copy of the whole (docs/perf/collectives.md). Every rank gives
// the same answer: the shape is the communicator's and the size the
// call's.
func (c *Coll) bcastPair(nbytes int) bool {
	h := c.hier
	return h != nil && c.size == 2 && h.procs == 2 && c.streams(nbytes) && nbytes <= h.chunk && !c.pairReadsRooted(nbytes, false)
}

// stageMax bounds the Bcasts that hierBcastStaged runs.
const stageMax = 64 << 10

// stagesBcast reports whether a Bcast of up to stageMax among this
// process's handles is staged (hierBcastStaged) rather than written by
// the leader into every member's buffer once all have arrived: where a
// member may be waiting for a core (more handles than GOMAXPROCS, or a
// crowded node), so that the leader does not wait for it. Where every
// handle runs at once the leader's one copy is the faster way: two
// handles' 64 KiB Bcast took 1.6–1.9 µs against 9.1–9.5 staged on an Intel
// Xeon host, whose cores take 5 µs to hand 64 KiB over through memory
// or each other's caches (docs/perf/collectives.md).
func (c *Coll) stagesBcast() bool {
	return !c.hier.g.sym || c.crowded
}

// leaveMax bounds the contributions a Reduce's member copies aside to
// leave before its leader has folded them (hierLeave): beyond a few KiB
// the copy costs more than the wait it saves.
const leaveMax = 4 << 10

// hierBcastStaged is hierBcast of at most stageMax bytes from a root
// that is not a member of this process (it is a process's leader): the
// leader brings the root's data (its own, or from the levels above) into
// a buffer of the group, one per parity of the call, and the members
// copy it out themselves. The leader thus waits for no member to arrive
// with the call, only until every member has begun the one before (it
// then no longer reads the buffer of two calls ago); a member waits for
// the leader's release only.
func (c *Coll) hierBcastStaged(ctx context.Context, b []byte, root int) error {
	h, g := c.hier, c.hier.g
	seq := c.seq
	mark := uint64(seq)<<32 | c.sig<<2&sigBitsMask | slotArrived
	if err := c.settle(ctx); err != nil {
		return err
	}
	sl := &g.slots[h.li]
	sl.send, sl.recv = nil, nil
	g.publishSlot(h.li, mark, false)
	if h.li != 0 {
		if err := c.hierWaitDone(ctx, g, mark); err != nil {
			return err
		}
		memcopy.Copy(b, g.stage[seq&1])
		return nil
	}
	for i := 1; i < len(g.slots) && c.symAt != seq-1; i++ {
		// (After a symmetric step as call seq-1, every member has begun
		// it: hiersym.go.)
		m := &g.slots[i]
		begun := func() (bool, error) {
			v := m.pub.Load()
			switch at := uint32(v >> 32); {
			case v == mark || at == seq-1:
				return true, nil
			case at == seq:
				return false, g.memberMismatch(c, i)
			}
			if g.state.Load()&3 == phFailed {
				return false, g.failed()
			}
			return false, nil
		}
		if ok, err := begun(); ok || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		if err := c.hierSpin(ctx, begun, false, false); err != nil {
			return err
		}
	}
	if err := c.topBcast(ctx, b, h.procOf[root]); err != nil {
		return err
	}
	if err := g.begin(seq); err != nil {
		return err
	}
	st := g.stage[seq&1]
	if cap(st) < len(b) {
		st = make([]byte, min(max(2*len(b), 256), stageMax))
	}
	st = st[:len(b)]
	// From 8 KiB with non-temporal stores: a plain store into a line a
	// member's core read last waits for the line where the cores share
	// no cache (docs/perf/collectives.md).
	c.shared(st, b)
	g.stage[seq&1] = st
	g.done(seq, mark)
	return nil
}

// hierReduce: commutative operations outside deterministic mode fold the
// contributions of each process at its leader (in rank order), reduce
// among the leaders to the root's process, and the leader there writes
// the root's recv. Reductions in rank order gather every contribution at
// the root's leader, which folds them in rank order.
func hierReduce[T any](ctx context.Context, c *Coll, src, res []T, op *Op[T], root int, s callSig) error {
	if err := c.hierReady(ctx, s); err != nil {
		return c.hierEnd(err)
	}
	if c.hier.li != 0 && c.rank != root && len(src)*sizeOf[T]() <= leaveMax {
		return c.hierEnd(c.hierLeave(ctx, bytesOf(src)))
	}
	leader, err := c.hierArrive(ctx, bytesOf(src), bytesOf(res))
	if !leader || err != nil {
		return c.hierEnd(err)
	}
	h, g := c.hier, c.hier.g
	n, es := len(src), sizeOf[T]()
	rp, rl := h.procOf[root], h.local[root]
	mine := rp == h.procOf[c.rank]
	acc := elems[T](c.buf(0, n*es))
	direct := false // acc is the root's recv
	local := false  // one process: nothing folded before the release
	if c.cfg.det || !op.commutative {
		_, mt, _ := h.myTop(c.rank)
		rt := h.topOf[rp]
		var all []byte
		if all, err = hierGather(ctx, c, s, rt); err == nil && mt == rt {
			if h.tfirst[rt] == h.procOf[c.rank] { // the node's leader folds
				foldRanks(h, acc, elems[T](all), op)
			}
			err = c.nodeDown(ctx, bytesOf(acc), rp-h.tfirst[rt])
		}
	} else if h.ng == nil && h.net == nil {
		local = true // one process: folded as the release writes the root's recv
	} else if leads := rp == h.tfirst[h.topOf[rp]]; c.pairReadsRooted(n*es, !leads) {
		if mine {
			acc, direct = res, true // the root's result: folded in place
		}
		err = cmaReduce(ctx, c, src, acc, op, rp)
	} else if c.streams(n*es) && h.procs == 2 {
		if mine && rl == 0 {
			acc, direct = res, true // the leader's own result: folded in place
		}
		err = streamReduce(ctx, c, n, func(i int) []T { return elems[T](g.slots[i].send) }, acc, op, rp)
	} else {
		foldLocal(g, acc, op)
		err = topReduce(ctx, c, acc, op, rp)
	}
	if err == nil {
		err = c.hierRelease(func() {
			if local {
				out := elems[T](g.slots[rl].recv)
				foldBlocks(g, acc, n, op, func(a, b int, r []T) { memcopy.CopyOf(out[a:b], r) })
			} else if mine && !direct {
				memcopy.CopyOf(elems[T](g.slots[rl].recv), acc)
			}
		})
	}
	return c.hierEnd(err)
}

// hierAllreduce: as hierReduce, every leader then writing the result
// into its members' recv (send nil: the contribution is in acc).
func hierAllreduce[T any](ctx context.Context, c *Coll, send, acc []T, op *Op[T], s callSig) error {
	if c.symLocal(len(acc) * sizeOf[T]()) {
		return symAllreduce(ctx, c, send, acc, op, s)
	}
	if err := c.hierReady(ctx, s); err != nil {
		return c.hierEnd(err)
	}
	h, g := c.hier, c.hier.g
	n, es := len(acc), sizeOf[T]()
	if send != nil && len(g.slots) == 1 && op.commutative && !c.cfg.det && c.streamsAllreduce(n*es) {
		// The process's only rank streams its send buffer in and folds
		// into recv chunk by chunk (no whole copy of send first).
		_, err := c.hierArrive(ctx, bytesOf(send), bytesOf(acc))
		if err == nil {
			err = streamAllreduce(ctx, c, send, acc, op)
		}
		return c.hierEnd(err)
	}
	if send != nil {
		memcopy.CopyOf(acc, send)
	}
	if op.commutative && !c.cfg.det && c.lastRuns() {
		// The last member folds the others' contributions into its own
		// and writes the sum into their buffers.
		last, err := c.hierArriveLast(ctx, bytesOf(acc), bytesOf(acc))
		if last && err == nil {
			me := h.li
			for i := range g.slots {
				if i != me {
					op.left(acc, elems[T](g.slots[i].send))
				}
			}
			err = c.hierRelease(func() {
				for i := range g.slots {
					if i != me {
						memcopy.Copy(g.slots[i].recv, bytesOf(acc))
					}
				}
			})
		}
		return c.hierEnd(err)
	}
	leader, err := c.hierArrive(ctx, bytesOf(acc), bytesOf(acc))
	if !leader || err != nil {
		return c.hierEnd(err)
	}
	res, from := acc, 1
	if c.cfg.det || !op.commutative {
		res, from = elems[T](c.buf(0, n*es)), 0
		var all []byte
		if all, err = hierGather(ctx, c, s, -1); err == nil {
			if h.ng == nil || h.ng.ni == 0 { // the node's leader folds
				foldRanks(h, res, elems[T](all), op)
			}
			err = c.nodeDown(ctx, bytesOf(res), -1)
		}
	} else {
		for i := 1; i < len(g.slots); i++ {
			op.left(acc, elems[T](g.slots[i].send))
		}
		err = topReduce(ctx, c, acc, op, -1)
	}
	if err == nil {
		err = c.hierRelease(func() {
			for i := from; i < len(g.slots); i++ {
				memcopy.Copy(g.slots[i].recv, bytesOf(res))
			}
		})
	}
	return c.hierEnd(err)
}

// shareMin is the bytes a rank's part of a release in one process must
// reach for the ranks to write their parts themselves, in parallel
// (hierReleaseShared), rather than the leader writing every part: below
// it the second hand-off costs more than the copies.
const shareMin = 32 << 10

// hierAllgather: send is this rank's block (nil: already in its place in
// recv). Over one process every member's block goes into every other
// member's recv, copied by the leader or, from shareMin bytes a rank, by
// each member into its own; otherwise the leaders gather their
// processes' blocks among themselves first.
func hierAllgather(ctx context.Context, c *Coll, send, recv []byte, s callSig) error {
	if c.symLocal(s.count * s.esize) {
		return symAllgather(ctx, c, send, recv, s)
	}
	if err := c.hierReady(ctx, s); err != nil {
		return c.hierEnd(err)
	}
	nb := s.count * s.esize
	mine := recv[c.rank*nb : (c.rank+1)*nb]
	memcopy.Copy(mine, send)
	// The others read this rank's block from its send buffer: the copy in
	// recv was just written by this core, and another core's reads of
	// those lines wait for it to give them up.
	src := mine
	if send != nil {
		src = send
	}
	leader, err := c.hierArrive(ctx, src, recv)
	if !leader || err != nil {
		return c.hierEnd(err)
	}
	h, g := c.hier, c.hier.g
	if h.net == nil && h.ng == nil {
		if nb*(len(g.slots)-1) >= shareMin {
			err = c.hierReleaseShared(shareAllgather, nb) // each rank copies into its own recv
		} else {
			err = c.hierRelease(func() {
				for i := range g.slots {
					g.allgatherInto(i, nb)
				}
			})
		}
		return c.hierEnd(err)
	}
	if c.hierStreams(CollAllgather, nb) {
		// Every process's blocks straight into every process leader's
		// recv (read from the other leaders' recv, where the process's
		// own blocks go first, or through the node segment); then to
		// its members.
		for j := 1; j < len(g.slots); j++ {
			memcopy.Copy(recv[g.ranks[j]*nb:(g.ranks[j]+1)*nb], g.slots[j].send)
		}
		switch cma := h.procs == 2 || nb < cmaAllgatherMax; {
		case cma && c.singleCopy(true) && send != nil:
			err = c.cmaAllgatherFrom(ctx, send, recv, nb)
		case cma && c.singleCopy(false):
			err = c.cmaAllgather(ctx, recv, nb)
		default:
			err = c.streamAllgather(ctx, recv, nb)
		}
		if err == nil {
			err = c.hierRelease(func() {
				for i := 1; i < len(g.slots); i++ {
					memcopy.Copy(g.slots[i].recv, recv)
				}
			})
		}
		return c.hierEnd(err)
	}
	if c.symmetric(h.mostRanks() * nb) {
		if len(g.slots) > 1 {
			err = g.begin(c.seq) // the members' recv are written from here on
		}
		if err == nil {
			err = c.symAllgather(ctx, nb)
		}
		if err == nil {
			err = c.hierRelease(func() {})
		}
		return c.hierEnd(err)
	}
	all, err := hierGather(ctx, c, s, -1)
	if err == nil {
		err = c.nodeDown(ctx, all, -1)
	}
	if err == nil {
		err = c.hierRelease(func() {
			for i := range g.slots {
				for r := 0; r < c.size; r++ {
					if r != g.ranks[i] {
						memcopy.Copy(g.slots[i].recv[r*nb:(r+1)*nb], all[h.pos(r)*nb:])
					}
				}
			}
		})
	}
	return c.hierEnd(err)
}

// cmaAllgatherMax is the block from which an Allgather among more than
// two processes streams through the node segment even where single
// copies are possible: each process then reads every other one's block
// with the kernel's copy, which pins each page of the source, where
// through the slots it writes its own once and reads the others' at the
// speed of a plain copy (4 processes on 2 vCPUs, 1 MiB 791–901 µs
// against 573–805, 256 KiB 201–255 against 140–167; below, single
// copies won: 128 KiB 119–122 against 158–215; docs/perf/collectives.md).
const cmaAllgatherMax = 256 << 10

// hierAlltoall (every rank in this process): the leader copies block j of
// each rank's send into block i of rank j's recv. In place (send nil) a
// rank's blocks are copied aside first, as the others' land in its recv.
func hierAlltoall(ctx context.Context, c *Coll, send, recv []byte, s callSig) error {
	if c.symLocal(len(recv)) {
		return symAlltoall(ctx, c, send, recv, s)
	}
	if err := c.hierReady(ctx, s); err != nil {
		return c.hierEnd(err)
	}
	if send == nil {
		send = c.buf(0, len(recv))
		memcopy.Copy(send, recv)
	}
	leader, err := c.hierArrive(ctx, send, recv)
	if !leader || err != nil {
		return c.hierEnd(err)
	}
	g, nb := c.hier.g, s.count*s.esize
	if c.hier.procs == 1 {
		if nb*len(g.slots) >= shareMin {
			return c.hierEnd(c.hierReleaseShared(shareAlltoall, nb))
		}
		return c.hierEnd(c.hierRelease(func() { g.alltoallOwn(nb) }))
	}
	// Across processes: one symmetric step for small blocks, else the
	// node level's stream (hierStreams).
	if len(g.slots) > 1 {
		err = g.begin(c.seq) // the members' recv are written from here on
	}
	if err == nil {
		g.alltoallOwn(nb)
		switch {
		case c.pairReads(nb):
			err = c.cmaAlltoall(ctx, send, recv, nb)
		case c.symAlltoall(nb):
			err = c.symAlltoallStep(ctx, nb)
		case c.singleCopy(true):
			err = c.cmaAlltoall(ctx, send, recv, nb)
		default:
			err = c.streamAlltoall(ctx, nb)
		}
	}
	if err == nil {
		err = c.hierRelease(func() {})
	}
	return c.hierEnd(err)
}

// allgatherInto copies into member i's recv the blocks of nb bytes of
// every other member of g.
func (g *procGroup) allgatherInto(i, nb int) {
	for j := range g.slots {
		if i != j {
			memcopy.Copy(g.slots[i].recv[g.ranks[j]*nb:], g.slots[j].send)
		}
	}
}

// alltoallOwn copies block j of each rank's send of this process into
// block i of rank j's recv, for the ranks i and j of this process.
func (g *procGroup) alltoallOwn(nb int) {
	for j := range g.slots {
		g.alltoallInto(j, nb)
	}
}

// alltoallInto copies into member j's recv its blocks from every member
// of g (itself included).
func (g *procGroup) alltoallInto(j, nb int) {
	rj := g.ranks[j]
	for i := range g.slots {
		ri := g.ranks[i]
		memcopy.Copy(g.slots[j].recv[ri*nb:(ri+1)*nb], g.slots[i].send[rj*nb:])
	}
}

// hierGather (leader) returns every rank's published send buffer (s.count
// elements of s.esize bytes), process by process (process j's ranks from
// h.first[j] on, in rank order), at the leader of top-level group root
// (a node, or a process without a node level), or at every one for root
// -1: the process leaders of a node bring theirs to the node's leader
// (nodeGatherUp), and the top-level leaders send their groups' blocks to
// it, or to each other, directly.
func hierGather(ctx context.Context, c *Coll, s callSig, root int) ([]byte, error) {
	h, g := c.hier, c.hier.g
	nb := s.count * s.esize
	all := c.buf(1, h.first[h.procs]*nb)
	me, mt, _ := h.myTop(c.rank)
	for i := range g.slots {
		memcopy.Copy(all[(h.first[me]+i)*nb:], g.slots[i].send)
	}
	if err := c.nodeGatherUp(ctx, all, nb); err != nil {
		return nil, err
	}
	if h.net == nil {
		return all, nil
	}
	blk := func(t int) []byte { return all[h.first[h.tfirst[t]]*nb : h.first[h.tfirst[t+1]]*nb] }
	err := h.netCall(ctx, callSig{call: s.call, root: root, count: s.count, esize: s.esize, op: s.op, alg: Linear}, func(nc *Coll) error {
		if root >= 0 && mt != root {
			if err := nc.send(blk(mt), root); err != nil {
				return err
			}
			return nc.wait(ctx)
		}
		for t := 0; t < nc.size; t++ {
			if t != mt {
				if err := nc.recv(blk(t), t); err != nil {
					return err
				}
			}
		}
		for t := 0; root < 0 && t < nc.size; t++ {
			if t != mt {
				if err := nc.send(blk(mt), t); err != nil {
					return err
				}
			}
		}
		return nc.wait(ctx)
	})
	return all, err
}

// foldBlock is the bytes foldBlocks folds at a time.
const foldBlock = 16 << 10

// foldBlocks folds the contributions of g's ranks (their send buffers,
// n elements) in rank order, a block at a time into tmp, and passes each
// folded block [a, b) to emit.
func foldBlocks[T any](g *procGroup, tmp []T, n int, op *Op[T], emit func(a, b int, r []T)) {
	w := max(1, foldBlock/sizeOf[T]())
	src := func(i int) []T { return elems[T](g.slots[i].send) }
	for a := 0; a < n; a += w {
		b := min(a+w, n)
		t := tmp[:b-a]
		foldChunk(t, g, src, a, b, op)
		emit(a, b, t)
	}
}

// foldLocal sets acc to the contributions (send buffers) of g's ranks
// combined in rank order.
func foldLocal[T any](g *procGroup, acc []T, op *Op[T]) {
	memcopy.CopyOf(acc, elems[T](g.slots[0].send))
	for i := 1; i < len(g.slots); i++ {
		op.left(acc, elems[T](g.slots[i].send))
	}
}

// foldRanks sets res to every rank's contribution in all (hierGather's
// layout) combined in rank order: ((x₀ ∘ x₁) ∘ x₂) ∘ …, as the flat
// algorithms' deterministic mode does.
func foldRanks[T any](h *hier, res, all []T, op *Op[T]) {
	n := len(res)
	x := func(r int) []T { at := h.pos(r) * n; return all[at : at+n] }
	memcopy.CopyOf(res, x(0))
	for r := 1; r < len(h.procOf); r++ {
		op.left(res, x(r))
	}
}

// hierGatherTo (Gather): the blocks reach the leader of the root's node
// or process as hierGather brings them, the root's process leader (by
// nodeDown, where another process of the node leads) and, in rank
// order, the root's recv. mine is this rank's block; all the root's recv.
func hierGatherTo(ctx context.Context, c *Coll, mine, all []byte, root int) error {
	leader, err := c.hierArrive(ctx, mine, all)
	if !leader || err != nil {
		return c.hierEnd(err)
	}
	h, g := c.hier, c.hier.g
	nb := len(mine)
	rp, rl, rt := h.place(root)
	me, mt, _ := h.myTop(c.rank)
	var lay []byte
	if lay, err = hierGather(ctx, c, callSig{call: callGather, root: root, count: nb, esize: 1}, rt); err == nil && mt == rt {
		err = c.nodeDown(ctx, lay, rp-h.tfirst[rt])
	}
	if err == nil {
		err = c.hierRelease(func() {
			if me == rp {
				out := g.slots[rl].recv
				for r := 0; r < c.size; r++ {
					memcopy.Copy(out[r*nb:(r+1)*nb], lay[h.pos(r)*nb:])
				}
			}
		})
	}
	return c.hierEnd(err)
}

// hierScatterFrom (Scatter): the root's process leader lays the root's
// send out process by process, the leader of its node takes it
// (nodeUp), sends every other node or process its part, and each node's
// leader hands its processes theirs (nodeDown); each process leader then
// copies its ranks' blocks into their recv. all is the root's send; mine
// this rank's block.
func hierScatterFrom(ctx context.Context, c *Coll, all, mine []byte, root int) error {
	leader, err := c.hierArrive(ctx, all, mine)
	if !leader || err != nil {
		return c.hierEnd(err)
	}
	h, g := c.hier, c.hier.g
	nb := len(mine)
	rp, rl, rt := h.place(root)
	me, mt, _ := h.myTop(c.rank)
	lay := c.buf(1, c.size*nb)
	if me == rp {
		src := g.slots[rl].send
		for r := 0; r < c.size; r++ {
			at := h.pos(r)
			memcopy.Copy(lay[at*nb:(at+1)*nb], src[r*nb:])
		}
	}
	if mt == rt {
		err = c.nodeUp(ctx, lay, rp-h.tfirst[rt])
	}
	blk := func(t int) []byte { return lay[h.first[h.tfirst[t]]*nb : h.first[h.tfirst[t+1]]*nb] }
	if err == nil && h.net != nil {
		err = h.netCall(ctx, callSig{call: callScatter, root: rt, count: nb, esize: 1, alg: Linear}, func(nc *Coll) error {
			if mt != rt {
				if err := nc.recv(blk(mt), rt); err != nil {
					return err
				}
				return nc.wait(ctx)
			}
			for t := 0; t < nc.size; t++ {
				if t != rt {
					if err := nc.send(blk(t), t); err != nil {
						return err
					}
				}
			}
			return nc.wait(ctx)
		})
	}
	if err == nil {
		err = c.nodeDown(ctx, blk(mt), -1)
	}
	if err == nil {
		err = c.hierRelease(func() {
			for i := range g.slots {
				memcopy.Copy(g.slots[i].recv, lay[(h.first[me]+i)*nb:])
			}
		})
	}
	return c.hierEnd(err)
}

// pos returns rank r's place in hierGather's layout (node by node,
// process by process, in rank order).
func (h *hier) pos(r int) int { return h.first[h.procOf[r]] + h.local[r] }

// place returns rank r's process, its index there and its top-level
// group.
func (h *hier) place(r int) (proc, idx, top int) {
	return h.procOf[r], h.local[r], h.topOf[h.procOf[r]]
}
