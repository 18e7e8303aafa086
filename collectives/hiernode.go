package collectives

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/weft-hpc/weft/internal/memcopy"
	"github.com/weft-hpc/weft/internal/nodeseg"
	"github.com/weft-hpc/weft/internal/peerwatch"
)

// The node level of the hierarchy (docs/collectives.md, "Hierarchy"):
// the leaders of the processes of one node share a segment of node
// memory (internal/nodeseg, as onesided's direct-store windows and
// endpoint's rings do), created at New by the node's leader (the leader
// of its lowest-ranked process). The segment holds a control line for
// the node, one per process, an input slot of nodeSlot bytes per process
// and two output slots the node's leader writes in alternate steps. A
// collective moves through it in steps: a process leader that brings
// data writes it into its input slot, and every process leader then
// publishes the step in its control line; the node's leader waits for
// the processes whose input it reads, runs the collective among the
// nodes' leaders (h.net) if there are several nodes, writes the result
// into the step's output slot and publishes the step as done; the other
// process leaders copy the result out. Data larger than a slot goes in
// several steps (chunks), each with its own call among the nodes'
// leaders.
//
// The node's leader never waits for a process it takes nothing from
// beyond what reusing a slot needs: the output slot of step s was last
// written in step s-2, so the leader waits only until every process has
// begun step s-1 (it has then copied the output of step s-2 out). A
// process waits before it arrives at step s until the leader has
// finished step s-1 (so that its input slot is free and it runs at most
// one step ahead), which in a sequence of small calls it has mostly
// seen already. A Bcast from the node's leader's process therefore costs
// that process no wait at all, and the others one.

// nodeSlot is the data a process leader moves through the node segment
// per step.
const nodeSlot = 512 << 10

// nodeGroup is a process leader's view of its node's segment.
type nodeGroup struct {
	seg   *nodeseg.Seg
	mem   []byte
	m, ni int         // processes on the node; this one's index (0 leads)
	ranks []int       // comm rank of each process's leader
	ids   []procIdent // each process's identity, to see it exit
	step  uint64      // steps so far (every process of the node makes the same)
	// prev is the previous step's mark: on the node's leader, to check
	// an arrival at that step seen only now; on another process, the
	// mark of a step whose output it did not read and checks later (0:
	// none).
	prev uint64
	pos  uint64 // stream chunks so far (hierstream.go; the same on every process)
	// waitOn is the process a node wait waits on, plus one (0: none;
	// alive checks every process).
	waitOn int
	cma    bool   // every process of the node may read the others' memory (hierstream.go)
	reads  uint64 // single-copy steps (nodeRead) so far
	// allAt is the last step at which this process saw every other one
	// arrive (a symmetric exchange that read them all, hierexch.go).
	allAt uint64
	// symDone (the node's leader) is the last symmetric step whose end
	// the state word does not show yet (0: none; flushSym).
	symDone uint64
	// symSteps counts the symmetric steps this process has taken.
	symSteps uint64
	// inl: the step in progress brings each process's input in its
	// inline line, not its input slot, and its output in the inline
	// output line of its parity, not the output slot
	// (nodeStepMaybeInline).
	inl bool
	// tickets counts the calls that took a ticket for the node level
	// (on the goroutine that starts the handle's calls); turn is the
	// ticket whose call may run its node steps (nbnode.go).
	tickets uint32
	turn    atomic.Uint32

	// The functions a step hands its callbacks, bound once (a closure
	// per call would be an allocation per collective call), and what
	// they read: the step whose exchange halves exchOf returns, the
	// stream chunk whose parts subOf returns, the process readFrom
	// copies from (hierexch.go, hierstream.go).
	exchOf   func(i int) []byte
	exchStep uint64
	subOf    func(i int) []byte
	subPos   uint64
	readFrom func(dst []byte, at uintptr) error
	readProc int
}

// Segment layout: line 0 holds the node's state (the last step done),
// its failure word and, per parity of the step, the mark of the step
// whose output the matching output slot holds (step<<32 | signature<<2
// | slotArrived); line 1+i process i's arrival word (the same mark, for
// the last step it began); line m+1+i process i's inline line (a mark
// word and up to inlineMax bytes of input, nodeStepMaybeInline), lines 2m+1
// and 2m+2 the inline output lines of even and odd steps (the same for
// the output); the data slots follow from nodeHdr: process i's input
// slot i (i ≥ 1), the output slots 0 (even steps) and m (odd steps).
const lineBytes = 64

func nodeHdr(m int) int { return (lineBytes*(2*m+3) + 4095) &^ 4095 }

// inlineMax is the input a process brings in its inline line.
const inlineMax = lineBytes - 8

// inlMark is the mark word of process i's inline line: the mark of the
// step whose input the line holds.
func (ng *nodeGroup) inlMark(i int) *atomic.Uint64 { return ng.word(ng.m+1+i, 0) }

// outInlMark is the mark word of the inline output line of step s: the
// mark of the step whose output the line holds.
func (ng *nodeGroup) outInlMark(s uint64) *atomic.Uint64 {
	return ng.word(2*ng.m+1+int(s&1), 0)
}

// outInl returns the data of the inline output line of step s.
func (ng *nodeGroup) outInl(s uint64) []byte {
	off := (2*ng.m+1+int(s&1))*lineBytes + 8
	return ng.mem[off : off+inlineMax : off+inlineMax]
}

// input returns where process i (i ≥ 1) brings its input to the step in
// progress: its inline line's data (nodeStepMaybeInline) or its input slot.
func (ng *nodeGroup) input(i int) []byte {
	if ng.inl {
		off := (ng.m+1+i)*lineBytes + 8
		return ng.mem[off : off+inlineMax : off+inlineMax]
	}
	return ng.slot(i)
}

func (ng *nodeGroup) word(line, i int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&ng.mem[line*lineBytes+i*8]))
}

func (ng *nodeGroup) state() *atomic.Uint64        { return ng.word(0, 0) }
func (ng *nodeGroup) failure() *atomic.Uint64      { return ng.word(0, 1) }
func (ng *nodeGroup) arrival(i int) *atomic.Uint64 { return ng.word(1+i, 0) }

// outMark is the mark of the step whose result output slot parity p
// holds.
func (ng *nodeGroup) outMark(p uint64) *atomic.Uint64 { return ng.word(0, 2+int(p&1)) }

// nodeBytes is the size of the segment of a node of m processes: the
// header, the input and output slots, and every process's exchange area
// (two halves of exchBytes, hierexch.go).
func nodeBytes(m int) int { return nodeHdr(m) + (m+1)*nodeSlot + 2*m*exchBytes }

// out returns the output slot of step s.
func (ng *nodeGroup) out(s uint64) []byte {
	if s&1 == 0 {
		return ng.slot(0)
	}
	return ng.slot(ng.m)
}

// result returns where the node's leader writes the result of the step
// in progress: its output slot, or its inline output line's data
// (nodeStepMaybeInline).
func (ng *nodeGroup) result() []byte {
	if ng.inl {
		return ng.outInl(ng.step)
	}
	return ng.out(ng.step)
}

// slot returns process i's input slot (i ≥ 1), or an output slot (0, m).
func (ng *nodeGroup) slot(i int) []byte {
	off := nodeHdr(ng.m) + i*nodeSlot
	return ng.mem[off : off+nodeSlot : off+nodeSlot]
}

func (ng *nodeGroup) close() error {
	if ng == nil || ng.seg == nil {
		return nil
	}
	err := errors.Join(ng.seg.Unlink(), ng.seg.Close())
	ng.seg, ng.mem = nil, nil
	return err
}

// Failure word: failBit | at<<40 | code<<32 | rank, set once; at is the
// low 16 bits of the last symmetric step the failing process finished
// (allAt), which tells a slower process whether that step failed too.
const (
	failBit  = 1 << 63
	goneCode = 3 // besides abortInvalid and abortAbandon: a process exited
)

// markFailed fails the node group for good with err (unless it failed
// already), so that the other processes' waits end.
func (ng *nodeGroup) markFailed(err error, rank int) {
	code := uint64(abortCode(err))
	if errors.Is(err, ErrPeerGone) {
		code = goneCode
	}
	ng.failure().CompareAndSwap(0, failBit|(ng.allAt&0xffff)<<40|code<<32|uint64(uint32(rank)))
}

// failed returns the node group's failure as a peer's error (nil if
// none).
func (ng *nodeGroup) failed() error {
	v := ng.failure().Load()
	if v == 0 {
		return nil
	}
	why := ErrCanceled
	switch v >> 32 & 0xff {
	case abortInvalid:
		why = ErrInvalid
	case goneCode:
		why = ErrPeerGone
	}
	return &peerAbort{fmt.Errorf("rank %d of this node gave up the call: %w", int(uint32(v)), why)}
}

// alive returns an error wrapping ErrPeerGone if a process of the node
// has exited: during a node wait (nodeSpin) the process waited on, else
// any. A process that has done its part of the step and left is no
// reason to fail a wait on another; the one waiting on it sees the
// process gone and fails the node group, which ends every wait.
func (ng *nodeGroup) alive() error {
	for i, id := range ng.ids {
		if i == ng.ni || ng.waitOn > 0 && i != ng.waitOn-1 {
			continue
		}
		if err := id.alive(); err != nil {
			return fmt.Errorf("the process of rank %d on this node: %w", ng.ranks[i], err)
		}
	}
	return nil
}

// procIdent identifies a process of this node: pid and start time (clock
// ticks since boot), which defeats pid reuse.
type procIdent struct {
	pid   int
	start uint64
}

// selfIdent is this process's identity.
var selfIdent = sync.OnceValue(func() procIdent {
	pid := os.Getpid()
	start, _, _ := peerwatch.Stat(pid)
	return procIdent{pid, start}
})

// alive returns an error wrapping ErrPeerGone if the process has exited
// (or is a zombie, or its pid now names another process).
func (id procIdent) alive() error {
	start, state, err := peerwatch.Stat(id.pid)
	if err == nil && state != 'Z' && state != 'X' && start == id.start {
		return nil
	}
	return fmt.Errorf("process %d exited: %w", id.pid, ErrPeerGone)
}

// nodeHash names this process's node in the records New exchanges (the
// node key endpoint's node transport uses: host and boot id, or
// WEFT_NODE_ID).
func nodeHash() uint64 {
	f := fnv.New64a()
	f.Write([]byte(nodeseg.NodeKey()))
	return f.Sum64()
}

// setupNode makes the node groups (collective over c): the leader of
// each node with several processes creates a segment, every rank
// publishes the name it made (or none), the node's other process leaders
// map it, and every rank says whether that worked. If it did everywhere
// the creators unlink their files and setupNode reports true; otherwise
// (no shared memory, a process of the node that cannot see another, as
// in another pid namespace) every rank drops the node level.
func setupNode(ctx context.Context, c *Coll, h *hier, ms [][]int, nodeOf []int, ids []procIdent) (bool, error) {
	me := h.procOf[c.rank]
	var procs []int // this node's processes
	for j, nd := range nodeOf {
		if nd == nodeOf[me] {
			procs = append(procs, j)
		}
	}
	var ng *nodeGroup
	var why error
	var name []byte
	size := nodeBytes(len(procs))
	if h.li == 0 && len(procs) > 1 {
		ng = &nodeGroup{m: len(procs), ni: me - procs[0]}
		for _, j := range procs {
			ng.ranks, ng.ids = append(ng.ranks, ms[j][0]), append(ng.ids, ids[j])
			if j != me && why == nil {
				why = ids[j].alive()
			}
		}
		if why == nil && ng.ni == 0 {
			seg, err := nodeseg.Create("coll", size)
			if err != nil {
				why = err
			} else {
				ng.seg, name = seg, []byte(seg.Name())
			}
		}
	}
	names, err := c.comm.Allgather(ctx, name)
	if err != nil {
		ng.close()
		return false, fmt.Errorf("collectives: exchange node segment names: %w", err)
	}
	if ng != nil && why == nil && ng.ni != 0 {
		if nm := names[ng.ranks[0]]; len(nm) == 0 {
			why = errors.New("the node's leader made no segment")
		} else {
			ng.seg, why = nodeseg.Open(string(nm), size)
		}
	}
	ok := []byte{1}
	if why != nil {
		ok[0] = 0
	} else if nodeCMA() {
		ok[0] |= 2
	}
	sts, err := c.comm.Allgather(ctx, ok)
	if ng != nil && ng.seg != nil && ng.ni == 0 {
		_ = ng.seg.Unlink() // every process of the node has mapped it
	}
	if err != nil {
		ng.close()
		return false, fmt.Errorf("collectives: agree on the node segments: %w", err)
	}
	withCMA := true
	for _, s := range sts {
		if len(s) != 1 || s[0]&1 != 1 {
			ng.close()
			return false, nil
		}
		withCMA = withCMA && s[0]&2 != 0
	}
	if ng != nil {
		ng.cma = withCMA
		ng.mem = ng.seg.Bytes()
		h.ng = ng
	}
	return true, nil
}

// nodeStep runs one step of the node level on a process leader in which
// the node's leader reads every process's input (nodeStepFrom).
func (c *Coll) nodeStep(ctx context.Context, up func(slot []byte), lead func(ng *nodeGroup) error, down func(out []byte)) error {
	return c.nodeStepFrom(ctx, fromAll, up, lead, down)
}

// nodeStepMaybeInline is nodeStep for a step whose inputs are at most
// inlineMax bytes a process: each process brings its input in its inline
// line, next to the line's mark, and the node's leader, which waits for
// that mark, takes both in one transfer of the line where the arrival
// word and the input slot took two in turn (lead reads the inputs with
// ng.input); results come back the same way, in the inline output line
// of the step's parity (ng.result). With inline false it is nodeStep.
func (c *Coll) nodeStepMaybeInline(ctx context.Context, inline bool, from int, up func(slot []byte), lead func(ng *nodeGroup) error, down func(out []byte)) error {
	ng := c.hier.ng
	if ng == nil || !inline {
		return c.nodeStepFrom(ctx, from, up, lead, down)
	}
	ng.inl = true
	err := c.nodeStepFrom(ctx, from, up, lead, down)
	ng.inl = false
	return err
}

// fromAll and fromNone are nodeStepFrom's from for a step in which the
// node's leader reads every process's input slot or none.
const (
	fromAll  = -1
	fromNone = 0
)

// nodeStepFrom runs one step of the node level on a process leader: up
// writes this process's input into its slot (on the node's other
// processes), lead runs on the node's leader once the processes it reads
// from (every one for fromAll, none for fromNone, else the process of
// that index) have arrived with the step, and down reads the step's
// output slot (which lead fills through ng.result()) on the other
// processes once the leader is done. Without a node group only lead
// runs. up may be nil; with down nil a process does not wait for the
// leader in this step. The process of index from must pass up.
func (c *Coll) nodeStepFrom(ctx context.Context, from int, up func(slot []byte), lead func(ng *nodeGroup) error, down func(out []byte)) error {
	ng := c.hier.ng
	if ng == nil {
		return lead(nil)
	}
	ng.step++
	s := ng.step
	mark := s<<32 | c.sig<<2&sigBitsMask | slotArrived
	if ng.ni != 0 {
		// The leader has finished step s-1: this slot is free again, and
		// the output of step s-1 has its mark. After a symmetric step
		// s-1 in which this process saw every other one arrive (allAt),
		// that is known: the leader arrived at it once done with every
		// step before, the last that read this slot, and such a step
		// has no output (the state word shows its end only once the
		// leader begins a step through it, flushSym).
		if ng.allAt != s-1 {
			if err := c.nodeWait(ctx, ng, s-1); err != nil {
				return err
			}
		}
		if ng.prev != 0 {
			err := ng.checkOut(c, s-1, ng.prev)
			ng.prev = 0
			if err != nil {
				return err
			}
		}
		if up != nil {
			up(ng.input(ng.ni))
			if ng.inl {
				// The mark shares the line with the data: the node's
				// leader takes both with one transfer of the line.
				publish(ng.inlMark(ng.ni), mark)
			}
		}
		publish(ng.arrival(ng.ni), mark)
		if down == nil {
			ng.prev = mark
			return nil
		}
		if ng.inl {
			return c.nodeDownInline(ctx, ng, s, mark, down)
		}
		if err := c.nodeWait(ctx, ng, s); err != nil {
			return err
		}
		if err := ng.checkOut(c, s, mark); err != nil {
			return err
		}
		down(ng.out(s))
		return nil
	}
	ng.flushSym()
	publish(ng.arrival(0), mark) // (the leader's own arrival: for symmetric steps, hierexch.go)
	prev := ng.prev
	ng.prev = mark
	inl := ng.inl
	// After a symmetric step s-1 that saw every process arrive (allAt),
	// each has finished step s-2, the last that read this step's output
	// parity: the processes this step does not read from need no look
	// at their arrival lines, which they may be writing this moment (a
	// transfer of the line on the way to the output). A process that
	// called something else at this step finds the output's mark not
	// its own (checkOut) and fails the node.
	known := ng.allAt == s-1
	for i := 1; i < ng.m; i++ {
		a := ng.arrival(i)
		need := from == fromAll || from == i
		if !need && known {
			continue
		}
		if inl && need && ng.inlMark(i).Load() == mark {
			continue // its input is in its inline line
		}
		if v := a.Load(); v == mark || !need && v == prev {
			continue // the common cases, without a wait's set-up
		}
		if err := c.nodeSpin(ctx, ng, i, func() (bool, error) {
			if inl && need && ng.inlMark(i).Load() == mark {
				return true, nil
			}
			v := a.Load()
			switch at := v >> 32; {
			case v == mark:
				return true, nil
			case at == s&(1<<32-1):
				return false, ng.mismatch(c, i)
			case v == prev:
				return !need, nil
			case at == (s-1)&(1<<32-1) && prev != 0:
				return false, ng.mismatch(c, i)
			}
			return false, ng.failed()
		}); err != nil {
			return err
		}
	}
	if err := ng.failed(); err != nil { // a process gave up after it arrived
		return err
	}
	if err := lead(ng); err != nil {
		return err
	}
	if ng.inl {
		publish(ng.outInlMark(s), mark) // in the line of the data lead wrote
	}
	publish(ng.outMark(s), mark)
	publish(ng.state(), s)
	return nil
}

// nodeDownInline (not the node's leader) waits for the inline output of
// step s (mark) and passes its data to down: the mark shares the line
// with the data, so one transfer of the line brings both, where the
// state word and the output slot took two in turn. A leader that
// finished step s without that mark called another collective.
func (c *Coll) nodeDownInline(ctx context.Context, ng *nodeGroup, s, mark uint64, down func(out []byte)) error {
	om := ng.outInlMark(s)
	if om.Load() != mark {
		if err := c.nodeSpin(ctx, ng, 0, func() (bool, error) {
			if om.Load() == mark {
				return true, nil
			}
			if ng.state().Load() >= s {
				return false, ng.checkOut(c, s, mark)
			}
			return false, ng.failed()
		}); err != nil {
			return err
		}
	}
	down(ng.outInl(s))
	return nil
}

// mismatch is the error of the node's leader that found process i at
// another collective (or the same with other arguments).
func (ng *nodeGroup) mismatch(c *Coll, i int) error {
	return fmt.Errorf("rank %d of this node called another collective, or with other arguments, where this rank is at %s #%d: %w",
		ng.ranks[i], c.call, c.seq, ErrInvalid)
}

// checkOut (not the node's leader): the leader finished step s with the
// same call and arguments as this process (mark), or the call fails.
func (ng *nodeGroup) checkOut(c *Coll, s, mark uint64) error {
	if v := ng.outMark(s).Load(); v != mark {
		return fmt.Errorf("rank %d, the leader of this node, called another collective, or with other arguments, where this rank is at %s #%d: %w",
			ng.ranks[0], c.call, c.seq, ErrInvalid)
	}
	return nil
}

// nodeSpin is hierSpin for a node wait on process i of the node: its
// liveness checks look at that process only.
func (c *Coll) nodeSpin(ctx context.Context, ng *nodeGroup, i int, cond func() (bool, error)) error {
	ng.waitOn = i + 1
	defer func() { ng.waitOn = 0 }()
	return c.hierSpin(ctx, cond, false, true)
}

// nodeWait waits until the node's leader has finished step s.
func (c *Coll) nodeWait(ctx context.Context, ng *nodeGroup, s uint64) error {
	if ng.state().Load() >= s {
		return nil
	}
	return c.nodeSpin(ctx, ng, 0, func() (bool, error) {
		if ng.state().Load() >= s {
			return true, nil
		}
		return false, ng.failed()
	})
}

// chunks calls f with the successive parts [a, b) of n units that one
// node step moves when each unit takes per bytes of a slot (the whole
// at once without a node level); at least once, with an empty part for
// n = 0. Every process of a node makes the same calls.
func (h *hier) chunks(n, per int, f func(a, b int) error) error {
	w := n
	if h.chunk > 0 {
		w = max(1, h.chunk/max(per, 1))
	}
	for a := 0; ; a += w {
		b := min(a+w, n)
		if err := f(a, b); err != nil {
			return err
		}
		if b >= n {
			return nil
		}
	}
}

// myTop returns this process, its top-level group and its index there.
func (h *hier) myTop(rank int) (proc, top, idx int) {
	proc = h.procOf[rank]
	top = h.topOf[proc]
	return proc, top, proc - h.tfirst[top]
}

// topBarrier (process leader): every process of the node, then every
// node's leader, has entered.
func (c *Coll) topBarrier(ctx context.Context) error {
	h := c.hier
	if c.symmetric(0) && h.procs == 2 {
		// Two processes: each publishes its arrival and waits for the
		// other's, one hand-off each way at once, where through the
		// leader the other process waited for the leader's release
		// after its own arrival (docs/perf/collectives.md).
		return c.nodeExchange(ctx, func([]byte) {}, func(func(int) []byte) {})
	}
	return c.nodeStep(ctx, nil, func(*nodeGroup) error {
		if h.net == nil {
			return nil
		}
		return h.netCall(ctx, callSig{call: callBarrier, root: -1, alg: Dissemination}, func(n *Coll) error {
			for dist := 1; dist < n.size; dist <<= 1 {
				if err := n.sendrecv(ctx, nil, (n.rank+dist)%n.size, nil, (n.rank-dist+n.size)%n.size); err != nil {
					return err
				}
			}
			return nil
		})
	}, func([]byte) {})
}

// topBcast (process leader): process rp's b to every process leader's b.
func (c *Coll) topBcast(ctx context.Context, b []byte, rp int) error {
	h := c.hier
	me, mt, _ := h.myTop(c.rank)
	rt := h.topOf[rp]
	rk := rp - h.tfirst[rt]
	from := fromNone // the node's leader reads the root process's slot
	if mt == rt && rk != 0 {
		from = rk
	}
	if c.pairReadsRooted(len(b), false) {
		return c.cmaBcast(ctx, b, rk)
	}
	inline := len(b) <= inlineMax
	// The output goes to the processes of the node other than the
	// leader's and the root's: none when those are the only two.
	out := mt != rt || rk == 0 || h.ng != nil && h.ng.m > 2
	return h.chunks(len(b), 1, func(lo, hi int) error {
		part := b[lo:hi]
		return c.nodeStepMaybeInline(ctx, inline, from, onlyIf(me == rp, func(slot []byte) {
			c.shared(slot, part)
		}), func(ng *nodeGroup) error {
			if ng != nil && mt == rt && rk != 0 {
				memcopy.Copy(part, ng.input(rk))
			}
			if h.net != nil {
				alg := h.net.cfg.pick(CollBcast, len(part), h.net.size)
				if err := h.netCall(ctx, callSig{call: callBcast, root: rt, count: len(part), esize: 1, alg: alg}, func(n *Coll) error {
					return n.bcast(ctx, part, rt, alg)
				}); err != nil {
					return err
				}
			}
			if ng != nil && out {
				c.shared(ng.result(), part)
			}
			return nil
		}, onlyIf(me != rp, func(res []byte) {
			memcopy.Copy(part, res)
		}))
	})
}

// streamAllreduceMax is the most processes a node-level Allreduce
// streams with (streamAllreduce): each process folds every other's
// contribution, which with more processes reads more than the leader's
// steps move.
const streamAllreduceMax = 3

// streamsAllreduce reports whether a commutative Allreduce of nbytes
// per rank goes through the node level as one stream (streamAllreduce).
func (c *Coll) streamsAllreduce(nbytes int) bool {
	return c.streams(nbytes) && c.hier.procs <= streamAllreduceMax
}

// topReduce (process leader, commutative op): the process leaders' acc
// combined into process rp's acc, or into every one's for rp < 0.
func topReduce[T any](ctx context.Context, c *Coll, acc []T, op *Op[T], rp int) error {
	h, es := c.hier, sizeOf[T]()
	me, mt, _ := h.myTop(c.rank)
	every, rt, rk := rp < 0, -1, -1
	k, call := CollAllreduce, callAllreduce
	if !every {
		rt = h.topOf[rp]
		rk = rp - h.tfirst[rt]
		k, call = CollReduce, callReduce
	}
	if every && c.symmetric(len(acc)*es) {
		// Every process folds the parts, in the node's leader's order. One
		// other than the leader keeps its own part in private memory too:
		// reading it back from its area would fetch from memory what it
		// just streamed there.
		ng := h.ng
		var own []T
		if ng.ni != 0 {
			own = elems[T](c.buf(1, len(acc)*es))
			memcopy.CopyOf(own, acc)
		}
		return c.nodeExchange(ctx, func(area []byte) { c.shared(area, bytesOf(acc)) }, func(area func(int) []byte) {
			if ng.ni != 0 {
				memcopy.Copy(bytesOf(acc), area(0))
			}
			for i := 1; i < ng.m; i++ {
				in := own
				if i != ng.ni {
					in = elems[T](area(i))[:len(acc)]
				}
				op.left(acc, in)
			}
		})
	}
	if every && c.streamsAllreduce(len(acc)*es) {
		return streamAllreduce(ctx, c, acc, acc, op)
	}
	inline := len(acc)*es <= inlineMax
	return h.chunks(len(acc), es, func(lo, hi int) error {
		part := acc[lo:hi]
		return c.nodeStepMaybeInline(ctx, inline, fromAll, func(slot []byte) {
			c.shared(slot, bytesOf(part))
		}, func(ng *nodeGroup) error {
			if ng != nil {
				for i := 1; i < ng.m; i++ {
					op.left(part, elems[T](ng.input(i))[:len(part)])
				}
			}
			if h.net != nil {
				alg := h.net.cfg.pick(k, len(part)*es, h.net.size)
				if err := h.netCall(ctx, callSig{call: call, root: rt, count: len(part), esize: es, op: op.code, alg: alg}, func(n *Coll) error {
					if every {
						return allreduce(ctx, n, part, op, alg)
					}
					var out []T
					if mt == rt {
						out = part
					}
					return reduceTo(ctx, n, part, out, op, rt, alg)
				}); err != nil {
					return err
				}
			}
			if ng != nil && (every || mt == rt && rk != 0) {
				c.shared(ng.result(), bytesOf(part))
			}
			return nil
		}, onlyIf(every || me == rp, func(out []byte) { memcopy.Copy(bytesOf(part), out) }))
	})
}

// nodeGatherUp (process leader) brings the blocks (nb bytes per rank) of
// the node's processes, which each process leader holds at its place in
// all (hierGather's layout), to the same places in the node leader's
// all.
func (c *Coll) nodeGatherUp(ctx context.Context, all []byte, nb int) error {
	h, ng := c.hier, c.hier.ng
	if ng == nil {
		return nil
	}
	me, mt, _ := h.myTop(c.rank)
	p0 := h.tfirst[mt]
	most := 0
	for j := p0; j < h.tfirst[mt+1]; j++ {
		most = max(most, h.first[j+1]-h.first[j])
	}
	return h.chunks(nb, most, func(lo, hi int) error {
		w := hi - lo
		return c.nodeStep(ctx, func(slot []byte) {
			for i := 0; i < h.first[me+1]-h.first[me]; i++ {
				at := (h.first[me] + i) * nb
				c.shared(slot[i*w:(i+1)*w], all[at+lo:at+hi])
			}
		}, func(ng *nodeGroup) error {
			for k := 1; k < ng.m; k++ {
				j, s := p0+k, ng.slot(k)
				for i := 0; i < h.first[j+1]-h.first[j]; i++ {
					at := (h.first[j] + i) * nb
					memcopy.Copy(all[at+lo:at+hi], s[i*w:(i+1)*w])
				}
			}
			return nil
		}, nil)
	})
}

// nodeDown (process leader) copies the node leader's buf into buf on
// the node's process of index to (every process for to < 0).
func (c *Coll) nodeDown(ctx context.Context, buf []byte, to int) error {
	h, ng := c.hier, c.hier.ng
	if ng == nil || to == 0 {
		return nil
	}
	return h.chunks(len(buf), 1, func(lo, hi int) error {
		part := buf[lo:hi]
		return c.nodeStepFrom(ctx, fromNone, nil, func(ng *nodeGroup) error {
			c.shared(ng.result(), part)
			return nil
		}, onlyIf(to < 0 || to == ng.ni, func(out []byte) { memcopy.Copy(part, out) }))
	})
}

// nodeUp (process leader) copies buf of the node's process of index from
// into the node leader's buf.
func (c *Coll) nodeUp(ctx context.Context, buf []byte, from int) error {
	h, ng := c.hier, c.hier.ng
	if ng == nil || from == 0 {
		return nil
	}
	return h.chunks(len(buf), 1, func(lo, hi int) error {
		part := buf[lo:hi]
		return c.nodeStepFrom(ctx, from, onlyIf(ng.ni == from, func(slot []byte) {
			c.shared(slot, part)
		}), func(ng *nodeGroup) error {
			memcopy.Copy(part, ng.slot(from))
			return nil
		}, nil)
	})
}

// onlyIf returns f if ok, else nil (a step this process brings no input
// to, or need not wait for).
func onlyIf(ok bool, f func([]byte)) func([]byte) {
	if ok {
		return f
	}
	return nil
}
