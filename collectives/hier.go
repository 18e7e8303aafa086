package collectives

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/memcopy"
)

// The hierarchy (docs/collectives.md, "Hierarchy"): the ranks of a
// communicator that are endpoint handles of one process form a process
// group. Its lowest rank is the group's leader. The other members of a
// group take part in the hierarchical collectives through the process's
// memory only: each publishes its buffers in a slot of a structure the
// group's handles share and waits; the leader waits for every member's
// slot, combines straight from their buffers, runs the collective at the
// levels above (the processes of its node through a node segment,
// hiernode.go, and the nodes' leaders with this package's point-to-point
// algorithms over a communicator of them) and writes the result into the
// members' buffers before it releases them. No member sends a message.

// Hierarchy says when the collectives take the hierarchical path.
type Hierarchy uint8

// Hierarchy modes (WithHierarchy; WEFT_TUNE collhier).
const (
	// HierAuto: hierarchical where the communicator has several ranks in
	// one process or several processes on one node, for the collectives
	// whose algorithm is Auto.
	HierAuto Hierarchy = iota
	// HierOn: hierarchical where the communicator has several ranks in
	// one process or several processes on one node, whatever the
	// algorithm; a forced algorithm then runs among the nodes' leaders.
	HierOn
	// HierOff: never; every rank runs the flat algorithms.
	HierOff
	numHier
)

var hierNames = [numHier]string{"auto", "on", "off"}

// String returns the mode's name, as WEFT_TUNE's collhier key takes it.
func (h Hierarchy) String() string {
	if h >= numHier {
		return fmt.Sprintf("Hierarchy(%d)", int(h))
	}
	return hierNames[h]
}

// ParseHierarchy returns the mode named s (auto, on or off).
func ParseHierarchy(s string) (Hierarchy, error) {
	for h := HierAuto; h < numHier; h++ {
		if hierNames[h] == s {
			return h, nil
		}
	}
	return HierAuto, fmt.Errorf("collectives: hierarchy %q (auto, on, off): %w", s, ErrInvalid)
}

// WithHierarchy sets when Barrier, Bcast, Reduce, Allreduce, Allgather,
// Gather, Scatter (and Alltoall, where every rank is in one process), and
// their typed forms, combine the ranks of one process through its memory
// and the processes of one node through a node segment, and when
// Gatherv, Scatterv and Allgatherv (typed or not) combine the ranks of
// one process (HierAuto, the default, or WEFT_TUNE collhier; see
// docs/collectives.md). HierOff also skips the exchanges New makes to
// find the process and node groups.
func WithHierarchy(h Hierarchy) Option {
	return func(c *config) error {
		if h >= numHier {
			return fmt.Errorf("collectives: %v: %w", h, ErrInvalid)
		}
		c.hier = h
		return nil
	}
}

// Hierarchical reports whether collective k takes the hierarchical path on
// this handle (the communicator has a process with several of its ranks
// or a node with several of its processes, k has a hierarchical form and
// the mode and algorithm allow it; Alltoall has one where every rank is
// in this process). Reductions in rank order (deterministic mode,
// non-commutative operations) over several processes whose p·n bytes
// exceed hierOrderedMax run flat, and so do, with a node level, large
// Allgathers, Gathers and Scatters (hierFits), except that Allgather
// and Alltoall of at least collnodestream bytes per block over more
// than two processes of one node, or two of one rank each with single
// copies, take the node level's stream (hierStreams), and an Alltoall whose send buffers fit a symmetric
// step between the processes of one node takes one (symAlltoall), which
// this size-blind report leaves out. Allgatherv
// (and Gatherv, Scatterv, which have no algorithm to choose) take the
// process level only, where a process holds several ranks (hierv.go);
// large Allgathervs across processes run flat.
func (c *Coll) Hierarchical(k Collective) bool {
	if k == CollAllgatherv {
		return c != nil && c.hierV(k)
	}
	return c != nil && c.hierFor(k, 0)
}

// hierOrderedMax bounds the p·n bytes a leader gathers for a reduction
// in rank order across processes (each leader folds every contribution).
const hierOrderedMax = 8 << 20

// hierFor reports whether collective k takes the hierarchical path for a
// reduction in rank order of p·n = ordered bytes across processes (0:
// not such a reduction).
func (c *Coll) hierFor(k Collective, ordered int) bool {
	if c.hier == nil {
		return false
	}
	switch k {
	case CollBarrier, CollBcast, CollReduce, CollAllreduce, CollAllgather, CollGather, CollScatter:
	case CollAlltoall: // every rank in this process: block copies only
		if c.hier.procs > 1 {
			return false
		}
	default:
		return false
	}
	if ordered > hierOrderedMax && c.hier.procs > 1 {
		return false
	}
	return c.hierMode(k)
}

// hierMode reports whether the handle's hierarchy setting lets
// collective k take a hierarchical path: on, or automatic with k's
// algorithm left to the selection.
func (c *Coll) hierMode(k Collective) bool {
	switch c.cfg.hier {
	case HierOn:
		return true
	case HierAuto:
		return c.cfg.alg[k] == Auto
	}
	return false
}

// hierFits is hierFor for Allgather, Gather and Scatter moving nbytes
// (the whole result; one rank's block): with a node level they move
// every block through the node segment two or three times in steps, so
// from the size at which the flat algorithms go straight to their peers
// (collallgatherlarge, collgatherlarge) they run flat.
func (c *Coll) hierFits(k Collective, nbytes int) bool {
	return c.hierFor(k, 0) && (c.hier.chunk == 0 || nbytes < c.cfg.large[k])
}

// hierStreams reports whether Allgather or Alltoall with nb bytes per
// block takes the node level's stream (hierstream.go): the hierarchy's
// mode allows it and the communicator's processes share one node, more
// than two of them, or two holding one rank each that read each other's
// buffers in one copy (pairReads; through the slots two exchange as fast
// flat, with less waiting on each other; flat, each large message's
// rendezvous costs a hand-off more than the single-copy step). Every
// handle gives the same answer: a member of a process with several ranks
// has no node group and says no, as its leader does.
func (c *Coll) hierStreams(k Collective, nb int) bool {
	return (c.pairReads(nb) || c.streams(nb) && c.hier.procs > 2) && c.hierMode(k)
}

// orderedBytes is, for a reduction of nbytes per rank, the bytes a
// leader gathers when the reduction keeps rank order (deterministic mode
// or a non-commutative operation; 0 otherwise).
func (c *Coll) orderedBytes(commutative bool, nbytes int) int {
	if c.cfg.det || !commutative {
		return c.size * nbytes
	}
	return 0
}

// hier is a handle's place in the hierarchy. Processes are numbered
// node by node (nodes in the order of their lowest rank, then the
// processes of a node in the order of their lowest rank), and the
// gathered layout of hierGather follows that order: process j's ranks
// from first[j] on, in rank order.
type hier struct {
	g      *procGroup
	li     int   // this handle's index in g (0: the leader)
	procs  int   // processes of the communicator
	procOf []int // comm rank → its process
	local  []int // comm rank → its index in its process group
	first  []int // process → offset of its first rank in process order (len procs+1)
	// The top level: one leader per node (node level) or per process.
	tops   int        // nodes (node level) or processes
	topOf  []int      // process → its top-level group
	tfirst []int      // top-level group → its first process (len tops+1)
	ng     *nodeGroup // node level, on a process leader whose node has several processes
	chunk  int        // bytes per member a node step moves (0: no node level, whole calls)
	net    *Coll      // several top-level groups: the collectives among their leaders
	// hybrid: several processes, one of several handles at least, so
	// that nonblocking calls combine through process memory and then
	// among the processes' leaders (nbhybrid.go); pnet, on a process's
	// leader, is the collectives among them.
	hybrid bool
	pnet   *Coll
}

// procGroup is what the handles of one process share for one
// communicator: a slot per member and the call's state.
type procGroup struct {
	ranks []int // comm ranks, ascending; ranks[0] leads
	slots []groupSlot
	sym   bool // small calls may take symmetric steps (hiersym.go)
	// fits: no more handles than GOMAXPROCS when the group was made; park,
	// where they are more: waits in process memory park the handle's
	// goroutine (park.go).
	fits bool
	park *parking
	// state is seq<<2 | phase: the last call whose release began
	// (phWriting: the leader writes into the members' buffers) or ended
	// (phDone), or phFailed for good.
	state   atomic.Uint64
	failure atomic.Pointer[groupFailure]
	joined  int // members that found the group (registry lock)
	// out[p] is the mark (seq<<32 | signature<<2 | slotArrived) of the
	// last call of parity p whose release the leader finished: a member
	// checks that the leader ran the call it ran.
	out [2]atomic.Uint64
	// stage[p] holds the result of a staged Bcast (hierBcastStaged) of
	// parity p, which the members copy out themselves; the leader
	// allocates it at its first use, before the release that publishes it.
	stage [2][]byte
	// nb holds the nonblocking calls through process memory that not
	// every member has joined yet, at their call number modulo nbCalls
	// (nblocal.go).
	nb [nbCalls]atomic.Pointer[nbLocal]
	// pnet is the leader's collectives among the processes' leaders,
	// which the member that runs a hybrid nonblocking call drives, any
	// member holding pmu (nbhybrid.go).
	pnet *Coll
	pmu  sync.Mutex
	// share is the release in progress that every member writes its own
	// part of (hierReleaseShared), published before the release begins;
	// shareLeft counts the members yet to finish their part.
	share     atomic.Pointer[shareWork]
	shareLeft atomic.Int32
	// shareBuf[p] is the shareWork of the calls of parity p: a member
	// reads a call's before it arrives at the next, so the leader's call
	// two on may rewrite it
	shareBuf [2]shareWork
	// arrivals[p] counts the members arrived at the call of parity p that
	// its last member runs (hierArriveLast); that member resets it.
	arrivals [2]atomic.Int32
}

// shareWork is a shared release of call seq: slot i's result is
// written by g.shareWrite(w, i), the collective's copies (kind) of
// blocks of nb bytes.
type shareWork struct {
	seq  uint32
	kind shareKind
	nb   int
}

// shareKind is what a shared release writes.
type shareKind uint8

const (
	shareAllgather shareKind = iota // every other member's block (allgatherInto)
	shareAlltoall                   // every member's block for it (alltoallInto)
)

// shareWrite writes member i's part of shared release w.
func (g *procGroup) shareWrite(w *shareWork, i int) {
	switch w.kind {
	case shareAllgather:
		g.allgatherInto(i, w.nb)
	case shareAlltoall:
		g.alltoallInto(i, w.nb)
	}
}

// groupSlot is one member's publication for the call in progress: its
// buffers, valid once pub holds the call's number with slotArrived.
type groupSlot struct {
	pub        atomic.Uint64 // seq<<32 | signature<<2 | flags
	send, recv []byte
	vblock     func(r int) []byte // a v-collective's rank blocks of the whole (hierv.go)
	_          [64]byte           // apart from the lines the others poll
	sym        [2]symLine         // the symmetric steps' lines, by parity of the call (hiersym.go)
	_          [64]byte
	// flatNB[seq%nbCalls] holds seq once the member runs nonblocking call
	// seq flat where its process's other members may combine it through
	// process memory (noteFlat, nbhybrid.go); apart from the lines the
	// others poll.
	flatNB [nbCalls]atomic.Uint32
	_      [64]byte
}

const (
	phDone    = 0
	phWriting = 1
	phFailed  = 2

	slotArrived = 1         // the member's buffers for call seq are published
	slotFlat    = 2         // the member is in a flat collective as call seq
	sigBitsMask = 1<<32 - 4 // bits 2..31: the call's signature (its low 30 bits)
)

// groupFailure is why a process group gave up: the error of the member
// that failed first.
type groupFailure struct {
	err  error
	rank int
	seq  uint32 // the call it gave up
}

// procToken names this process in the records New exchanges.
var procToken = sync.OnceValue(func() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return uint64(time.Now().UnixNano())<<16 ^ uint64(syscall.Getpid())
	}
	return binary.LittleEndian.Uint64(b[:])
})

// registry holds the process groups whose members are still joining, by
// the nonce of the communicator's rank 0.
var registry struct {
	sync.Mutex
	m map[uint64]*procGroup
}

// setupHier finds the process groups of c's communicator: every rank
// publishes its process token, a nonce (rank 0's names the groups of
// this New), its node and its process identity. Where some node has
// several processes, their leaders map a node segment (setupNode); where
// several processes or nodes remain, their leaders get a communicator of
// their own (a Split of c's private communicator). Collective over c.
func setupHier(ctx context.Context, c *Coll) (*hier, error) {
	var rec [recBytes]byte
	binary.LittleEndian.PutUint64(rec[:], procToken())
	if _, err := rand.Read(rec[8:16]); err != nil {
		return nil, fmt.Errorf("collectives: random nonce: %w", err)
	}
	binary.LittleEndian.PutUint64(rec[16:], nodeHash())
	self := selfIdent()
	binary.LittleEndian.PutUint64(rec[24:], uint64(self.pid))
	binary.LittleEndian.PutUint64(rec[32:], self.start)
	all, err := c.comm.Allgather(ctx, rec[:])
	if err != nil {
		return nil, fmt.Errorf("collectives: exchange process identities: %w", err)
	}
	p := c.size
	tokens := map[uint64]int{} // process token → process index (by lowest rank)
	var members [][]int
	var procNode []int // process → node (by lowest rank)
	var idents []procIdent
	nodes := map[uint64]int{}
	for r, b := range all {
		if len(b) != len(rec) {
			return nil, fmt.Errorf("collectives: process record of rank %d is %d bytes: %w", r, len(b), ErrInvalid)
		}
		t := binary.LittleEndian.Uint64(b)
		j, ok := tokens[t]
		if !ok {
			j = len(members)
			tokens[t] = j
			members = append(members, nil)
			nh := binary.LittleEndian.Uint64(b[16:])
			nd, ok := nodes[nh]
			if !ok {
				nd = len(nodes)
				nodes[nh] = nd
			}
			procNode = append(procNode, nd)
			idents = append(idents, procIdent{int(binary.LittleEndian.Uint64(b[24:])), binary.LittleEndian.Uint64(b[32:])})
		}
		members[j] = append(members[j], r)
	}
	// Node by node: a stable sort of the processes by node.
	order := make([]int, 0, len(members)) // new process index → old
	for nd := 0; nd < len(nodes); nd++ {
		for j := range members {
			if procNode[j] == nd {
				order = append(order, j)
			}
		}
	}
	h := &hier{procs: len(members), procOf: make([]int, p), local: make([]int, p), first: make([]int, len(members)+1)}
	most := 0
	ms := make([][]int, h.procs)
	nodeOf := make([]int, h.procs)
	ids := make([]procIdent, h.procs)
	nodeProcs := make([]int, len(nodes))
	for j, old := range order {
		ms[j], nodeOf[j], ids[j] = members[old], procNode[old], idents[old]
		nodeProcs[nodeOf[j]]++
		for i, r := range ms[j] {
			h.procOf[r], h.local[r] = j, i
		}
		most = max(most, len(ms[j]))
		h.first[j+1] = h.first[j] + len(ms[j])
	}
	me := h.procOf[c.rank]
	h.li = h.local[c.rank]
	nodeLevel := false
	for _, n := range nodeProcs {
		nodeLevel = nodeLevel || n > 1
	}
	if nodeLevel {
		if nodeLevel, err = setupNode(ctx, c, h, ms, nodeOf, ids); err != nil {
			return nil, err
		}
	}
	if most < 2 && !nodeLevel {
		return nil, nil // one rank per process, one process per node: nothing to combine in memory
	}
	if nodeLevel {
		h.tops, h.topOf, h.chunk = len(nodes), nodeOf, nodeSlot
	} else {
		h.tops, h.topOf = h.procs, make([]int, h.procs)
		for j := range h.topOf {
			h.topOf[j] = j
		}
	}
	h.tfirst = make([]int, h.tops+1)
	for j := h.procs - 1; j >= 0; j-- {
		h.tfirst[h.topOf[j]] = j
	}
	h.tfirst[h.tops] = h.procs
	if h.tops > 1 {
		color := endpoint.Undefined
		if h.li == 0 && h.tfirst[h.topOf[me]] == me {
			color = 0
		}
		lc, err := c.comm.Split(ctx, color, h.topOf[me])
		if err != nil {
			h.free()
			return nil, fmt.Errorf("collectives: communicator of the leaders: %w", err)
		}
		if lc != nil {
			cfg := c.cfg
			cfg.hier, cfg.check = HierOff, false
			h.net = &Coll{parent: lc, comm: lc, rank: lc.Rank(), size: lc.Size(), cfg: cfg, crowded: c.crowded, up: c}
		}
	}
	if h.procs > 1 && most >= 2 {
		color := endpoint.Undefined
		if h.li == 0 {
			color = 0
		}
		pc, err := c.comm.Split(ctx, color, me)
		if err != nil {
			h.free()
			return nil, fmt.Errorf("collectives: communicator of the processes' leaders: %w", err)
		}
		if pc != nil {
			cfg := c.cfg
			cfg.hier, cfg.check, cfg.progress = HierOff, false, false
			h.pnet = &Coll{parent: pc, comm: pc, rank: pc.Rank(), size: pc.Size(), cfg: cfg, crowded: c.crowded}
		}
		h.hybrid = true
	}
	ranks := ms[me]
	if len(ranks) == 1 {
		h.g = &procGroup{ranks: ranks, slots: make([]groupSlot, 1), pnet: h.pnet}
		if h.pnet != nil {
			h.pnet.watch = h.g
		}
		return h, nil
	}
	key := binary.LittleEndian.Uint64(all[0][8:])
	registry.Lock()
	if registry.m == nil {
		registry.m = map[uint64]*procGroup{}
	}
	g := registry.m[key]
	if g == nil {
		g = &procGroup{ranks: ranks, slots: make([]groupSlot, len(ranks)), sym: symFits(len(ranks)), fits: len(ranks) <= runtime.GOMAXPROCS(0)}
		if !g.fits {
			g.park = newParking(len(ranks))
		}
		registry.m[key] = g
	}
	g.joined++
	if g.joined == len(ranks) {
		delete(registry.m, key)
	}
	registry.Unlock()
	h.g = g
	c.watch = g
	if h.net != nil {
		h.net.watch = g
	}
	if h.pnet != nil {
		g.pnet, h.pnet.watch = h.pnet, g // before the leader's first call, which every other call waits for
	}
	return h, nil
}

// recBytes is the size of the record every rank publishes at New:
// process token, nonce, node, pid and process start time.
const recBytes = 40

// free releases the leaders' communicator and the node segment.
func (h *hier) free() error {
	if h == nil {
		return nil
	}
	var err error
	if h.ng != nil {
		err = h.ng.close()
	}
	if h.net != nil {
		err = errors.Join(err, h.net.Free())
	}
	if h.pnet != nil {
		err = errors.Join(err, h.pnet.Free())
	}
	return err
}

// note tells the group that this member is in a flat collective as call
// seq (a leader waiting for it in a hierarchical call then sees the
// mismatch).
func (c *Coll) hierNote(ctx context.Context) error {
	if c.hier != nil && !c.inHier && len(c.hier.g.slots) > 1 {
		if err := c.settle(ctx); err != nil {
			return err
		}
		c.hier.g.publishSlot(c.hier.li, uint64(c.seq)<<32|slotFlat, false)
	}
	return nil
}

// hierLeave is a member's whole part in a hierarchical call in which it
// only contributes (a Reduce's rank that is not the root) with at most
// leaveMax bytes: it copies send into a buffer of its own (one per parity
// of the call), publishes that as its buffer and returns without waiting
// for the leader, as an eager send would. Its next publication waits
// until the leader has finished this call (settle), which also keeps the
// buffer of this parity until the leader has read it.
func (c *Coll) hierLeave(ctx context.Context, send []byte) error {
	if err := c.settle(ctx); err != nil {
		return err
	}
	h := c.hier
	seq := c.seq
	st := c.estage[seq&1]
	if cap(st) < len(send) {
		st = make([]byte, len(send), max(len(send), 64))
	}
	st = st[:len(send)]
	memcopy.Copy(st, send)
	c.estage[seq&1] = st
	sl := &h.g.slots[h.li]
	sl.send, sl.recv = st, nil
	h.g.publishSlot(h.li, uint64(seq)<<32|c.sig<<2&sigBitsMask|slotArrived, true)
	c.early, c.leftEarly = seq, true
	return nil
}

// hierWatch is check's look at the process group: a failed group ends
// the wait (leaders wait on the network for members that gave up; members
// in a flat call for ranks of their process that are in a hierarchical
// one).
func (c *Coll) hierWatch() error {
	if g := c.watch; g != nil && g.state.Load()&3 == phFailed {
		return g.failed()
	}
	if c.up != nil {
		if ng := c.up.hier.ng; ng != nil {
			if err := ng.failed(); err != nil {
				return err
			}
		}
		return c.up.outerProbe()
	}
	return nil
}

// failed returns the group's failure as a peer's error (the rank that
// failed first has reported it to the other ranks).
func (g *procGroup) failed() error {
	for {
		if f := g.failure.Load(); f != nil {
			why := ErrCanceled
			switch {
			case abortCode(f.err) == abortInvalid:
				why = ErrInvalid
			case errors.Is(f.err, ErrPeerGone):
				why = ErrPeerGone
			}
			return &peerAbort{fmt.Errorf("rank %d of this process gave up the call (%v): %w", f.rank, f.err, why)}
		}
		runtime.Gosched() // set just after the state by the rank that failed it
	}
}

// markFailed fails the group for good with err (unless it failed
// already).
func (g *procGroup) markFailed(err error, rank int, seq uint32) {
	for {
		v := g.state.Load()
		if v&3 == phFailed {
			return
		}
		if g.state.CompareAndSwap(v, v&^3|phFailed) {
			g.failure.CompareAndSwap(nil, &groupFailure{err: err, rank: rank, seq: seq})
			g.wake()
			return
		}
	}
}

// begin starts the leader's release of call seq (the members' buffers
// are then written): it fails if the group failed (a member gave up).
// The members that wait for the release's end are not woken (a shared
// release wakes them: they write their parts).
func (g *procGroup) begin(seq uint32) error {
	for {
		v := g.state.Load()
		if v&3 == phFailed {
			return g.failed()
		}
		if g.state.CompareAndSwap(v, uint64(seq)<<2|phWriting) {
			return nil
		}
	}
}

// hierSlot puts this handle's buffers for the call in its slot, once the
// call it left early (if any) is done, and returns the call's mark
// (seq<<32 | signature<<2 | slotArrived), not yet published.
func (c *Coll) hierSlot(ctx context.Context, send, recv []byte) (uint64, error) {
	if err := c.settle(ctx); err != nil {
		return 0, err
	}
	s := &c.hier.g.slots[c.hier.li]
	s.send, s.recv = send, recv
	return uint64(c.seq)<<32 | c.sig<<2&sigBitsMask | slotArrived, nil
}

// hierArrive starts a hierarchical call on this handle: its buffers go in
// its slot. A member then waits for the leader's release and returns
// (leader false) with the call complete or failed; the leader waits for
// every member's slot and returns leader true.
func (c *Coll) hierArrive(ctx context.Context, send, recv []byte) (leader bool, err error) {
	h := c.hier
	g := h.g
	mark, err := c.hierSlot(ctx, send, recv)
	if err != nil {
		return false, err
	}
	if len(g.slots) == 1 {
		return true, nil
	}
	seq := c.seq
	g.publishSlot(h.li, mark, true)
	if h.li != 0 {
		return false, c.hierWaitDone(ctx, g, mark)
	}
	// One wait for every member, in order (a parked leader then wakes
	// once for each member it finds missing, not for each member).
	i := 1
	if err := c.hierSpin(ctx, func() (bool, error) {
		for ; i < len(g.slots); i++ {
			v := g.slots[i].pub.Load()
			switch at := uint32(v >> 32); {
			case at == seq && v&slotArrived != 0 && v&sigBitsMask == c.sig<<2&sigBitsMask:
				continue
			case at == seq || at > seq:
				return false, fmt.Errorf("rank %d of this process called another collective, or with other arguments (call %d), where this rank is at %s #%d: %w",
					g.ranks[i], at, c.call, seq, ErrInvalid)
			}
			if g.state.Load()&3 == phFailed {
				return false, g.failed()
			}
			return false, nil
		}
		return true, nil
	}, false, false); err != nil {
		return true, err
	}
	return true, nil
}

// lastRuns reports whether an Allreduce in progress may be run by its
// last member to arrive (hierArriveLast) rather than by the leader:
// among the handles of one process, where they outnumber GOMAXPROCS and
// the call's waits park. A leader woken by the last member, then waking
// the members, hands the cores over twice a call; the last member
// running the call hands them over once: OSU's 8-byte Allreduce over 4
// handles on 2 Ps took 1.43 µs against 1.77. The other calls keep their
// leader: a Barrier run this way took 1.2–1.4 µs against 1.5–1.7, but
// the leader then often waited for a core at the next call, and a
// staged Bcast after it, whose members wait for the leader, went from
// 0.13 to 0.8–0.9 µs (docs/perf/collectives.md). The answer is the same
// on every member: the group's and the call sequence's.
func (c *Coll) lastRuns() bool {
	h := c.hier
	return h.procs == 1 && h.g.park != nil && !c.polls && len(h.g.slots) > 1
}

// hierArriveLast is hierArrive for a call that its last member runs
// (lastRuns): every member publishes its buffers in its slot and counts
// itself in; the one that completes the count checks every member's
// mark and returns true, to run the call and its release
// (hierRelease); the others wait for that release and return false.
func (c *Coll) hierArriveLast(ctx context.Context, send, recv []byte) (last bool, err error) {
	h := c.hier
	g := h.g
	mark, err := c.hierSlot(ctx, send, recv)
	if err != nil {
		return false, err
	}
	seq := c.seq
	g.slots[h.li].pub.Store(mark)
	count := &g.arrivals[seq&1]
	if int(count.Add(1)) != len(g.slots) {
		return false, c.hierWaitLast(ctx, g, mark)
	}
	count.Store(0) // (the call of parity seq&1 after this one begins after its release)
	for i := range g.slots {
		if v := g.slots[i].pub.Load(); v != mark {
			return true, g.memberMismatch(c, i)
		}
	}
	return true, nil
}

// hierWaitLast (a member that did not arrive last) waits for the release
// of the call of mark by its last member. A member that called another
// collective here, or the same with other arguments, never completes the
// count: its mark shows it.
func (c *Coll) hierWaitLast(ctx context.Context, g *procGroup, mark uint64) error {
	seq := uint32(mark >> 32)
	err := c.hierSpin(ctx, func() (bool, error) {
		v := g.state.Load()
		if d := int32(uint32(v>>2) - seq); v&3 != phFailed && (d > 0 || d == 0 && v&3 == phDone) {
			return true, nil
		}
		if v&3 == phFailed {
			return false, g.failed()
		}
		for i := range g.slots {
			if w := g.slots[i].pub.Load(); uint32(w>>32) == seq && w != mark {
				return false, g.memberMismatch(c, i)
			}
		}
		return false, nil
	}, true, false)
	if err == nil && g.out[seq&1].Load() != mark {
		// Released by a leader that ran another call (a staged Bcast).
		return fmt.Errorf("another rank of this process ran another collective, or with other arguments, where this rank is at %s #%d: %w", c.call, seq, ErrInvalid)
	}
	return err
}

// waitLeader (member) waits until the leader has finished the release of
// call seq or of a later one; in a shared release of call seq it writes
// its own part meanwhile.
func (c *Coll) waitLeader(ctx context.Context, g *procGroup, seq uint32) error {
	done := func(v uint64) bool {
		d := int32(uint32(v>>2) - seq)
		return v&3 != phFailed && (d > 0 || d == 0 && v&3 == phDone)
	}
	if done(g.state.Load()) {
		return nil
	}
	wrote := false
	return c.hierSpin(ctx, func() (bool, error) {
		v := g.state.Load()
		switch {
		case done(v):
			return true, nil
		case v&3 == phFailed:
			return false, g.failed()
		case !wrote && v == uint64(seq)<<2|phWriting:
			if w := g.share.Load(); w != nil && w.seq == seq {
				g.shareWrite(w, c.hier.li)
				wrote = true
				g.shareLeft.Add(-1)
			}
		}
		return false, nil
	}, true, false)
}

// settle (member) waits, before the member publishes another call in its
// slot, until the leader has finished the call the member left early
// (hierLeave): until then the leader may still read that call's mark and
// buffer.
func (c *Coll) settle(ctx context.Context) error {
	h := c.handle()
	if !h.leftEarly {
		return nil
	}
	h.leftEarly = false
	return h.waitLeader(ctx, h.hier.g, h.early) // h: a clone has no hier
}

// hierWaitDone (member) waits until the leader has finished the
// release of the call of mark (its seq<<32 | signature<<2 |
// slotArrived), or of a later one (a staged Bcast's leader does not wait
// for the members), and checks that the leader ran the same call.
func (c *Coll) hierWaitDone(ctx context.Context, g *procGroup, mark uint64) error {
	seq := uint32(mark >> 32)
	if err := c.waitLeader(ctx, g, seq); err != nil {
		return err
	}
	if v := g.out[seq&1].Load(); v != mark {
		return fmt.Errorf("rank %d, the leader of this process, called another collective, or with other arguments, where this rank is at %s #%d: %w",
			g.ranks[0], c.call, seq, ErrInvalid)
	}
	return nil
}

// hierRelease (leader) writes the result into the members' buffers with
// write, then lets them return.
func (c *Coll) hierRelease(write func()) error {
	g := c.hier.g
	if len(g.slots) == 1 {
		write()
		return nil
	}
	if err := g.begin(c.seq); err != nil {
		return err
	}
	write()
	g.done(c.seq, uint64(c.seq)<<32|c.sig<<2&sigBitsMask|slotArrived)
	return nil
}

// done ends the leader's release of call seq, whose mark the members
// check (hierWaitDone): it lets them return.
func (g *procGroup) done(seq uint32, mark uint64) {
	publish(&g.out[seq&1], mark)
	g.publish(&g.state, uint64(seq)<<2|phDone)
}

// hierReleaseShared (leader) is hierRelease with the writing shared:
// every member, the leader too, writes its own slot's part of the
// collective's copies (kind, blocks of nb bytes; shareWrite) while it
// waits, so that the members' results (their own receive
// buffers, from what every slot published) are written in parallel. The
// leader lets the members return once every part is written.
func (c *Coll) hierReleaseShared(kind shareKind, nb int) error {
	g := c.hier.g
	w := &g.shareBuf[c.seq&1]
	*w = shareWork{seq: c.seq, kind: kind, nb: nb}
	if len(g.slots) == 1 {
		g.shareWrite(w, 0)
		return nil
	}
	g.shareLeft.Store(int32(len(g.slots) - 1))
	g.share.Store(w)
	defer g.share.Store(nil)
	if err := g.begin(c.seq); err != nil {
		return err
	}
	g.wake() // the parked members write their parts
	g.shareWrite(w, 0)
	// The members cannot withdraw once the release has begun: their
	// parts take one copy each.
	for g.shareLeft.Load() != 0 {
		if g.state.Load()&3 == phFailed {
			return g.failed()
		}
		runtime.Gosched()
	}
	g.done(c.seq, uint64(c.seq)<<32|c.sig<<2&sigBitsMask|slotArrived)
	return nil
}

// hierEnd ends a hierarchical call on this handle: a failure fails the
// group (so that its other members, and a leader waiting on the network,
// stop) and then the call, as every failure does.
func (c *Coll) hierEnd(err error) error {
	c.inHier, c.polls = false, false
	if err == nil {
		return c.done(nil)
	}
	h := c.hier
	if len(h.g.slots) > 1 {
		h.g.markFailed(err, c.rank, c.seq)
	}
	if h.ng != nil {
		h.ng.markFailed(err, c.rank)
	}
	if n := h.net; n != nil && h.li == 0 && n.broken == nil {
		// Failed outside the leaders' call: the other leaders may be
		// waiting there for this one.
		n.abandon()
		n.abort(abortCode(err))
		n.broken = err
	}
	return c.fail(err)
}

// hierSpin polls cond until it holds or fails. Between polls it yields
// to the other goroutines (the members and the leader of a group are
// goroutines of this process), and to other processes now and then on a
// crowded node; it checks the context and, from time to time, the
// private communicator: a message of this call from any rank shows that
// the rank runs a flat collective here (a mismatch), and an abort notice
// that a rank gave up. A member whose context ends withdraws from the
// call unless the leader has started writing its result. A wait on
// other processes (node, at the node level) paces itself as a message
// wait does (pause: on a crowded node it yields to processes at once).
func (c *Coll) hierSpin(ctx context.Context, cond func() (bool, error), member, node bool) error {
	if c.own != nil && !c.nb.direct {
		return c.nbSpin(cond) // a nonblocking call across processes (nbnode.go)
	}
	done := ctx.Done()
	g := c.hier.g
	var t0 time.Time
	next := firstCheck
	osYield := c.crowded && c.hier.procs > 1
	var park *parking
	if !node && !c.polls {
		park = g.park
	}
	ready := func() bool {
		ok, err := cond()
		return ok || err != nil
	}
	sleeps := 0
	for spins := 1; ; spins++ {
		ok, err := cond()
		if err != nil {
			var pa *peerAbort
			if errors.As(err, &pa) {
				if cerr := ctxEnded(ctx); cerr != nil {
					// This rank's own context ended too: that is its reason.
					return fmt.Errorf("%w (%v)", cerr, err)
				}
			}
			return err
		}
		if ok {
			return nil
		}
		slept := park != nil && spins >= parkPolls
		if slept {
			park.sleep(c.hier.li, ready)
			sleeps++
		}
		if slept && sleeps%parkChecks == 0 || spins%pollClock == 0 {
			select {
			case <-done:
				if !member {
					return fmt.Errorf("waiting for the ranks of this process: %w", ctx.Err())
				}
				if g.withdraw(c.seq, c.rank, ctx.Err()) {
					return fmt.Errorf("waiting for the leader of this process: %w", ctx.Err())
				}
				done = nil // the leader is writing: the call completes
			default:
			}
			if t0.IsZero() {
				t0 = time.Now()
			} else if el := time.Since(t0); el >= next {
				if err := c.hierCheck(); err != nil {
					// A peer that has done its part may have left (and
					// exited) while this rank was descheduled: the wait
					// fails only if it is still unmet.
					if ok, _ := cond(); ok {
						return nil
					}
					return err
				}
				next = el + min(el, maxCheck)
			}
		}
		if node {
			c.pause(spins)
		} else if !slept && spins >= hierSpinPolls && (spins%fitYieldEvery == 0 || !g.fits || c.crowded) {
			if osYield && spins%16 == 0 {
				syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
			} else {
				runtime.Gosched()
			}
		}
	}
}

// ctxEnded is ctx's error, or context.DeadlineExceeded once its
// deadline has passed though its timer has not fired yet (ranks that
// share a deadline then all report it, whichever gives up first).
func ctxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// hierSpinPolls is how many polls a group wait spins before it yields.
const hierSpinPolls = 32

// fitYieldEvery is how often past hierSpinPolls a group wait yields
// where every handle of the group has a P of its own (procGroup.fits) on
// an uncrowded machine: the member it waits for is running, and a Gosched
// that finds nothing else to run still costs 100–200 ns, which a wait
// of one cache line's crossing (250–500 ns between the cores of a VM)
// then pays on top.
const fitYieldEvery = 256

// withdraw fails the group for call seq on behalf of a member whose
// context ended, unless the leader has begun writing its result; it
// reports whether the member may leave.
func (g *procGroup) withdraw(seq uint32, rank int, err error) bool {
	for {
		v := g.state.Load()
		switch {
		case v&3 == phFailed:
			return true
		case int32(uint32(v>>2)-seq) >= 0: // the leader writes, or is done
			return false
		}
		if g.state.CompareAndSwap(v, v&^3|phFailed) {
			g.failure.CompareAndSwap(nil, &groupFailure{err: err, rank: rank, seq: seq})
			g.wake()
			return true
		}
	}
}

// hierCheck looks, during a hierarchical call, at the private
// communicator (outerProbe) and, on a leader, at the leaders'.
func (c *Coll) hierCheck() error {
	if err := c.outerProbe(); err != nil {
		return err
	}
	if ng := c.hier.ng; ng != nil {
		if err := ng.alive(); err != nil {
			return err
		}
	}
	if c.hier.net != nil && c.hier.li == 0 {
		return c.hier.net.check()
	}
	return nil
}

// outerProbe looks at the private communicator during a hierarchical
// call, in which no message travels on it: an abort notice, or a message
// of this call's number (another rank runs a flat collective as this
// call), ends the call.
func (c *Coll) outerProbe() error {
	if err := c.laterAborts(); err != nil {
		return err
	}
	ok, st, err := c.comm.Iprobe(endpoint.AnySource, endpoint.AnyTag)
	if err != nil || !ok {
		return err
	}
	if st.Tag&abortTag != 0 {
		return c.aborted(st.Source)
	}
	// The v-collectives' process leaders exchange messages of the call
	// itself (hierv.go); a rank running the call flat has another
	// signature.
	if uint32(st.Tag>>sigBits)&seqMask == c.seq&seqMask && st.Tag != c.tag {
		return fmt.Errorf("rank %d sent a message of a flat collective where this rank is at hierarchical %s #%d: %w",
			st.Source, c.call, c.seq, ErrInvalid)
	}
	return nil
}

// netCall runs body as one call of the leaders' collectives handle, with
// signature s (the root a process number).
func (h *hier) netCall(ctx context.Context, s callSig, body func(n *Coll) error) error {
	n := h.net
	if err := n.enter(s.call); err != nil {
		return err
	}
	if err := n.ready(ctx, s); err != nil {
		return n.fail(err)
	}
	return n.done(body(n))
}
