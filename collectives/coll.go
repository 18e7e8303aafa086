package collectives

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/choose"
	"github.com/weft-hpc/weft/internal/progress"
	"github.com/weft-hpc/weft/internal/settings"
	"github.com/weft-hpc/weft/internal/wait"
)

// Coll is a collectives handle over a communicator: every collective of
// this package takes one. New duplicates the communicator, and the
// handle's messages travel on that private duplicate, so they never match
// the user's point-to-point messages on the communicator, nor those of
// another handle over it.
//
// A handle is a rank of its communicator and, like an endpoint handle,
// is driven by one goroutine at a time: over the handles of
// endpoint.Comm.CreateEndpoints, each handle's goroutine creates its own
// Coll and calls the collectives on it. Every rank calls the same
// collectives in the same order, with matching arguments (MPI's rule);
// see docs/collectives.md for what a mismatch does.
type Coll struct {
	parent *endpoint.Comm
	comm   *endpoint.Comm // private duplicate of parent: all traffic
	rank   int
	size   int
	cfg    config

	prof *profile  // the world's counts of collectives, when it counts (profile.go)
	t0   time.Time // when the call in progress began, when counted

	seq  uint32 // calls so far
	call callID // the call in progress
	tag  int    // its message tag
	sig  uint64 // its arguments' signature

	// the round in flight
	reqs    []*endpoint.Request
	peer    []int             // per request: destination or source rank
	want    []int             // per request: bytes a receive expects; -1 for a send
	nbTopo  endpoint.Topology // the topology of the last neighbourhood call (neighbor.go)
	nbrs    neighbors         // its neighbours
	segs    []ddt.Segment     // the blocks its overlap check compares
	checked disjointCall      // the last arguments that check passed
	wblocks [2][]wblock       // Alltoallw's layouts, reused
	nbw     [2][]wblock       // NeighborAlltoallw's, for the arguments in checked

	crowded bool       // more ranks of the communicator on this machine than cores: waits yield every poll
	solo    bool       // this process holds one rank of the communicator (known from the hierarchy's set-up)
	hier    *hier      // the communicator's process groups (hier.go); nil: flat only
	watch   *procGroup // the process group whose failure ends this handle's waits
	up      *Coll      // for the leaders' handle: the handle it serves
	inHier  bool       // the call in progress is hierarchical
	polls   bool       // its waits in process memory poll rather than park (park.go)
	calmAt  uint32     // the first call after the last large one that may park again (park.go)
	broken  error      // the failure that left the communicator unknown
	// later holds abort notices of calls after the one that read them
	// (the aborting rank had finished that one): they fail the calls
	// from theirs on (on the handle, for its nonblocking operations too).
	later   []laterAbort
	freed   bool
	scratch [numScratch][]uint64

	// How the call in progress writes memory other processes or handles
	// read next, and the timings of earlier calls behind that choice
	// (stores.go).
	storeWay  int
	storeTime storeTimed
	stores    map[callID]*choose.Pair

	// Nonblocking collectives (nonblocking.go). An operation in flight
	// runs its algorithm on a clone of the handle (own points back to the
	// handle; nb is the clone's schedule state); the handle keeps the
	// outstanding operations in start order. mu guards ops, seq, broken
	// and freed against the progress goroutine, and every clone's code
	// runs with it held.
	own *Coll
	nb  *schedule
	// A member that left a call before its leader finished it (hierLeave):
	// that call's number, and the buffers it copies its contribution into.
	early     uint32
	leftEarly bool
	estage    [2][]byte
	local     *nbLocal    // the clone's call through process memory, while it waits (nblocal.go)
	hybridOK  bool        // the clone's call may combine through process memory and then among processes (nbhybrid.go)
	take      []byte      // where the clone takes its part of that call's stage, and
	takeFrom  []byte      // the part (nblocal.go)
	cond      func() bool // the clone's round when it waits for a condition, not requests
	ticket    uint32      // the call's ticket for the node level plus one (0: none; nbnode.go)
	symAt     uint32      // the last call in which this handle saw every member of its process arrive at a symmetric step (hiersym.go)
	// symLine returns member i's line of the symmetric step of call
	// symSeq: the function symStep hands its get, bound once so that a
	// step allocates nothing
	symLine func(i int) []byte
	symSeq  uint32
	hpolls  uint32 // the clone's polls of a hybrid call (nbhybrid.go: straddled)
	stalled bool   // the clone's coroutine yielded in nbSpin after polling the same condition again
	ended   error  // a clone's failure, once it has been handled
	mu      sync.Mutex
	ops     []*schedule
	nlive   atomic.Int32 // len(ops), read without mu by blocking waits
	workers []*nbWorker  // idle coroutines for the next nonblocking calls
}

// New returns a collectives handle over comm; it is collective over comm
// (it calls comm.Dup) and bounded by ctx. Options configure algorithm
// selection and the deterministic and checked modes; every rank must
// give the same. Free releases the handle.
func New(ctx context.Context, comm *endpoint.Comm, opts ...Option) (*Coll, error) {
	if comm == nil || comm.Size() == 0 {
		return nil, fmt.Errorf("collectives: New on a nil communicator: %w", ErrInvalid)
	}
	cfg, err := defaults()
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("collectives: nil option: %w", ErrInvalid)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	d, err := comm.Dup(ctx)
	if err != nil {
		return nil, fmt.Errorf("collectives: duplicate the communicator: %w", err)
	}
	_, local := d.NodeLocal()
	cfg.spread = local < d.Size()
	c := &Coll{parent: comm, comm: d, rank: d.Rank(), size: d.Size(), cfg: cfg, crowded: crowded(d), prof: profileFor(d.World())}
	if c.size > 1 && cfg.hier != HierOff {
		if c.hier, err = setupHier(ctx, c); err != nil {
			d.Free()
			return nil, err
		}
		// setupHier gives no hierarchy when every process holds one rank
		// (and no node has several processes).
		c.solo = c.hier == nil || len(c.hier.g.slots) == 1
		if c.hier != nil && c.hier.net != nil {
			c.hier.net.solo = c.solo
		}
	}
	return c, nil
}

// crowded reports whether the communicator's ranks on this machine
// outnumber the cores they share (WEFT_TUNE epwait, as endpoint's waits: auto decides
// so, spin never, yield always).
func crowded(c *endpoint.Comm) bool {
	t, _ := settings.Tune()
	switch t.EPWait {
	case "spin":
		return false
	case "yield":
		return true
	}
	_, n := c.NodeLocal()
	return wait.Crowded(n)
}

// Rank returns this handle's rank (its rank in the communicator); -1 for
// a nil handle.
func (c *Coll) Rank() int {
	if c == nil {
		return -1
	}
	return c.rank
}

// Size returns the number of ranks; 0 for a nil handle.
func (c *Coll) Size() int {
	if c == nil {
		return 0
	}
	return c.size
}

// Comm returns the communicator the handle was created over (not its
// private duplicate).
func (c *Coll) Comm() *endpoint.Comm {
	if c == nil {
		return nil
	}
	return c.parent
}

// Deterministic reports whether the handle's reductions combine in rank
// order (see the Deterministic option).
func (c *Coll) Deterministic() bool { return c != nil && c.cfg.det }

// SetAlgorithm forces collective k to use algorithm a from the next call
// on (Auto: by size again), as the WithAlgorithm option does at New. It is
// local: every rank must make the same change between the same two
// collectives.
func (c *Coll) SetAlgorithm(k Collective, a Algorithm) error {
	if c == nil {
		return fmt.Errorf("collectives: SetAlgorithm on a nil handle: %w", ErrInvalid)
	}
	return c.cfg.setAlg(k, a)
}

// Algorithm returns the algorithm collective k would use now for a
// message of nbytes (the forced one, or the choice by size).
func (c *Coll) Algorithm(k Collective, nbytes int) Algorithm {
	if c == nil || k == 0 || k >= numColl {
		return Auto
	}
	if k == CollAlltoall {
		return c.alltoallAlg(nbytes, c.size)
	}
	return c.cfg.pick(k, nbytes, c.size)
}

// Free releases the handle's private communicator. It is local and
// idempotent. If a message of a collective that no call of this rank
// matched is waiting (another rank called a collective this one did
// not, or with other arguments), Free returns an error wrapping
// ErrInvalid that says so.
//
// After a failed collective, or with such a message waiting, the handle's
// communicator may still receive messages of the failed call: Free then
// drops what has arrived but keeps the communicator's context id in use
// (it is released by World.Close), so that a late message can never match
// a communicator made later.
func (c *Coll) Free() error {
	if c == nil || c.own != nil {
		return nil
	}
	c.mu.Lock()
	if c.freed {
		c.mu.Unlock()
		return nil
	}
	if n := len(c.ops); n > 0 {
		c.mu.Unlock()
		return fmt.Errorf("collectives: free with %d nonblocking collectives outstanding (complete them with Wait first): %w", n, ErrInvalid)
	}
	c.freed = true
	for _, w := range c.workers {
		w.stop()
	}
	c.workers = nil
	c.mu.Unlock()
	unwatch(c)
	c.scratch = [numScratch][]uint64{}
	err := c.hier.free()
	keep := c.broken != nil
	if !keep {
		if ok, st, perr := c.comm.Iprobe(endpoint.AnySource, endpoint.AnyTag); perr == nil && ok {
			err = errors.Join(err, fmt.Errorf("collectives: free: a message from rank %d matched no collective of this rank (%s): %w",
				st.Source, describeTag(st.Tag, c.seq), ErrInvalid))
			keep = true
		}
	}
	if keep {
		c.drain()
		return err
	}
	if ferr := c.comm.Free(); ferr != nil {
		return errors.Join(err, fmt.Errorf("collectives: free: %w", ferr))
	}
	return err
}

// drain receives and drops the messages waiting on the private
// communicator (bounded in time).
func (c *Coll) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), abortWaitTime)
	defer cancel()
	for ctx.Err() == nil {
		ok, st, err := c.comm.Iprobe(endpoint.AnySource, endpoint.AnyTag)
		if err != nil || !ok {
			return
		}
		if _, err := c.comm.Recv(ctx, make([]byte, st.Count), st.Source, st.Tag); err != nil {
			return
		}
	}
}

// callID is a public collective function (one per entry point).
type callID uint8

const (
	callBarrier callID = iota + 1
	callBcast
	callReduce
	callAllreduce
	callGather
	callGatherv
	callScatter
	callScatterv
	callAllgather
	callAllgatherv
	callAlltoall
	callAlltoallv
	callReduceScatterBlock
	callScan
	callExscan
	callBcastTyped
	callReduceScatter
	callAlltoallw
	callGatherTyped
	callScatterTyped
	callAllgatherTyped
	callAlltoallTyped
	callReduceTyped
	callAllreduceTyped
	callGathervTyped
	callScattervTyped
	callAllgathervTyped
	callAlltoallvTyped
	callReduceScatterTyped
	callReduceScatterBlockTyped
	callScanTyped
	callExscanTyped
	callNeighborAllgather
	callNeighborAlltoall
	callNeighborAlltoallw
	callNeighborAllgatherv
	callNeighborAlltoallv
)

var callNames = map[callID]string{
	callBarrier: "Barrier", callBcast: "Bcast", callReduce: "Reduce", callAllreduce: "Allreduce",
	callGather: "Gather", callGatherv: "Gatherv", callScatter: "Scatter", callScatterv: "Scatterv",
	callAllgather: "Allgather", callAllgatherv: "Allgatherv", callAlltoall: "Alltoall",
	callAlltoallv: "Alltoallv", callReduceScatterBlock: "ReduceScatterBlock", callScan: "Scan",
	callExscan: "Exscan", callBcastTyped: "BcastTyped",
	callReduceScatter: "ReduceScatter", callAlltoallw: "Alltoallw",
	callGatherTyped: "GatherTyped", callScatterTyped: "ScatterTyped", callAllgatherTyped: "AllgatherTyped",
	callAlltoallTyped: "AlltoallTyped", callReduceTyped: "ReduceTyped", callAllreduceTyped: "AllreduceTyped",
	callGathervTyped: "GathervTyped", callScattervTyped: "ScattervTyped", callAllgathervTyped: "AllgathervTyped",
	callAlltoallvTyped: "AlltoallvTyped", callReduceScatterTyped: "ReduceScatterTyped",
	callReduceScatterBlockTyped: "ReduceScatterBlockTyped", callScanTyped: "ScanTyped", callExscanTyped: "ExscanTyped",
	callNeighborAllgather: "NeighborAllgather", callNeighborAlltoall: "NeighborAlltoall", callNeighborAlltoallw: "NeighborAlltoallw",
	callNeighborAllgatherv: "NeighborAllgatherv", callNeighborAlltoallv: "NeighborAlltoallv",
}

func (id callID) String() string { return callNames[id] }

// Message tags on the private communicator (22 bits): a flag for abort
// notices, then the call's sequence number modulo 128 and a 14-bit
// signature of its arguments. Every message of one call carries the same
// tag: between two ranks the messages of a call match in the order they
// were sent (MPI's non-overtaking rule), and a message with another tag
// from a rank this one waits on shows a mismatch (check).
const (
	sigBits   = 14
	seqBits   = 7
	sigMask   = 1<<sigBits - 1
	seqMask   = 1<<seqBits - 1
	abortTag  = 1 << (sigBits + seqBits)
	verifySig = 0 // the argument check's own messages

	abortInvalid  = 1 // the aborting rank saw a mismatch or a bad argument
	abortAbandon  = 2 // its context ended, or it failed otherwise
	abortWaitTime = 200 * time.Millisecond
	cleanupWait   = 5 * time.Second
	firstCheck    = time.Millisecond
	maxCheck      = 100 * time.Millisecond
	keepScratch   = 4 << 20 // scratch buffers larger than this are dropped after a call
)

// describeTag says, for an error message, which call a tag belongs to as
// seen from a handle that has made seq calls.
func describeTag(tag int, seq uint32) string {
	if tag&abortTag != 0 {
		return "an abort notice"
	}
	s := uint32(tag>>sigBits) & seqMask
	if s == seq&seqMask {
		return fmt.Sprintf("call %d, with other arguments or another collective", seq)
	}
	return fmt.Sprintf("call %d modulo %d", s, seqMask+1)
}

// callSig is what every rank must agree on for a call.
type callSig struct {
	call  callID
	root  int
	count int // elements, or -1 where ranks' counts may differ
	esize int
	op    uint8
	alg   Algorithm
}

// hash mixes the signature's fields into a word whose low bits (the
// marks keep 30, the tags 14) depend on every field; it runs on every
// call. It reads the fields one by one through a pointer: a copy of the
// struct would load 16 bytes at a time over the narrower stores that
// spilled it, a load the processor cannot serve from those stores, which
// then waits until every older store has reached the cache, behind the
// previous call's stores to lines that other processes poll.
func (s *callSig) hash() uint64 {
	a := uint64(s.call) | uint64(s.op)<<8 | uint64(s.alg)<<16 | uint64(s.esize)<<24
	b := uint64(int64(s.root))<<32 ^ uint64(int64(s.count))
	h := a*0x9e3779b97f4a7c15 ^ b*0xc2b2ae3d27d4eb4f
	h = (h ^ h>>32) * 0xff51afd7ed558ccd
	return h ^ h>>29
}

// enter starts a call: it refuses a nil, freed or broken handle (nothing
// is sent then) and numbers the call. Every error after enter goes
// through fail.
func (c *Coll) enter(id callID) error {
	if c == nil || c.comm == nil {
		return fmt.Errorf("collectives: %s on a nil handle: %w", id, ErrInvalid)
	}
	h := c.handle()
	if c.own == nil && h.cfg.progress {
		// mu guards the handle against the progress goroutine, which
		// drives only handles made WithProgress (a clone's caller holds
		// it already). Elsewhere the lock's atomic instruction would only
		// wait for the stores of the call before, to lines other
		// processes poll, to reach the cache (docs/perf/collectives.md).
		h.mu.Lock()
		defer h.mu.Unlock()
	}
	if h.freed {
		return fmt.Errorf("collectives: %s on a freed handle: %w", id, ErrClosed)
	}
	if h.broken != nil {
		return fmt.Errorf("collectives: %s on a handle whose earlier collective failed (%v): %w", id, h.broken, ErrClosed)
	}
	h.seq++
	c.seq = h.seq
	c.call = id
	c.ended = nil
	if h.prof != nil {
		c.t0 = time.Now() // counted at done or fail (profile.go)
	}
	return nil
}

// handle returns the handle c is, or whose nonblocking operation c runs.
func (c *Coll) handle() *Coll {
	if c.own != nil {
		return c.own
	}
	return c
}

// ready fixes the call's signature and tag and, in checked mode, agrees
// on it with every rank.
func (c *Coll) ready(ctx context.Context, s callSig) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("context ended before the call: %w", err)
	}
	if c.own == nil && c.nlive.Load() > 0 {
		if err := c.completeOld(ctx); err != nil {
			return err
		}
	}
	c.sig = s.hash()
	c.tag = int(c.seq&seqMask)<<sigBits | (int(c.sig%sigMask) + 1)
	c.storeBegin(s)
	if err := c.hierNote(ctx); err != nil {
		return err
	}
	if !c.cfg.check || c.size == 1 {
		return nil
	}
	tag := c.tag
	c.tag = int(c.seq&seqMask)<<sigBits | verifySig
	// Max of (sig, ^sig) over all ranks gives the largest and the smallest
	// signature: dissemination, as max is idempotent.
	var mine, in [2]uint64
	mine[0], mine[1] = c.sig, ^c.sig
	mb := unsafe.Slice((*byte)(unsafe.Pointer(&mine[0])), 16)
	ib := unsafe.Slice((*byte)(unsafe.Pointer(&in[0])), 16)
	for dist := 1; dist < c.size; dist <<= 1 {
		if err := c.recv(ib, (c.rank-dist+c.size)%c.size); err != nil {
			return err
		}
		if err := c.send(mb, (c.rank+dist)%c.size); err != nil {
			return err
		}
		if err := c.wait(ctx); err != nil {
			return err
		}
		mine[0], mine[1] = max(mine[0], in[0]), max(mine[1], in[1])
	}
	c.tag = tag
	if mine[0] != c.sig || ^mine[1] != c.sig {
		return &verifyErr{fmt.Errorf("ranks called %s #%d with different collectives or arguments (root, count, element size, operation or algorithm): %w", c.call, c.seq, ErrInvalid)}
	}
	return nil
}

// verifyErr is a mismatch every rank found in the argument check: the
// communicator is clean, nothing to abort.
type verifyErr struct{ error }

func (e *verifyErr) Unwrap() error { return e.error }

// peerAbort is the abort notice of another rank.
type peerAbort struct{ error }

func (e *peerAbort) Unwrap() error { return e.error }

// done ends a call: nil, or the failure (see fail).
func (c *Coll) done(err error) error {
	if err != nil {
		return c.fail(err)
	}
	if !c.t0.IsZero() {
		c.record()
	}
	if c.ticket != 0 {
		c.endTurn()
	}
	c.storeEnd()
	for i := range c.scratch {
		if cap(c.scratch[i])*8 > keepScratch {
			c.scratch[i] = nil
		}
	}
	return nil
}

// fail ends a failed call: receives still posted are cancelled (and waited
// for, so that nothing is written into the caller's buffers after the
// call returns), the other ranks get an abort notice so that their waits
// for this rank end, and the handle is marked broken (its communicator
// may hold messages of the failed call). A mismatch every rank saw in the
// argument check leaves the handle usable.
func (c *Coll) fail(err error) error {
	if !c.t0.IsZero() {
		c.record()
	}
	c.storeDrop()
	if c.ticket != 0 {
		c.endTurn()
	}
	if c.ended != nil {
		return c.ended // a nonblocking operation already ended (nonblocking.go)
	}
	err = fmt.Errorf("collectives: %s (call %d, rank %d of %d): %w", c.call, c.seq, c.rank, c.size, err)
	c.abandon()
	var ve *verifyErr
	if errors.As(err, &ve) {
		return err
	}
	var pa *peerAbort
	if !errors.As(err, &pa) {
		c.abort(abortCode(err))
	}
	c.setBroken(err)
	return err
}

// abandon cancels the receives of the round in flight and waits, bounded,
// for them to end; sends cannot be cancelled and are left to complete.
func (c *Coll) abandon() {
	c.withdrawLocal()
	for i, r := range c.reqs {
		if c.want[i] >= 0 && !r.Done() {
			_ = r.Cancel()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupWait)
	defer cancel()
	for i, r := range c.reqs {
		if c.want[i] >= 0 {
			_, _ = r.Wait(ctx)
		}
	}
	c.reqs, c.peer, c.want = c.reqs[:0], c.peer[:0], c.want[:0]
}

// abortCode is the abort notice's code for a failure.
func abortCode(err error) byte {
	if errors.Is(err, ErrInvalid) || errors.Is(err, ErrTruncated) || errors.Is(err, ErrOutOfRange) {
		return abortInvalid
	}
	return abortAbandon
}

// abort tells every other rank that this one gave up call c.seq.
func (c *Coll) abort(code byte) {
	if c.size == 1 {
		return
	}
	msg := make([]byte, 8)
	binary.LittleEndian.PutUint32(msg, c.seq)
	msg[4] = code
	rs := make([]*endpoint.Request, 0, c.size-1)
	for r := 0; r < c.size; r++ {
		if r == c.rank {
			continue
		}
		if q, err := c.comm.Isend(msg, r, abortTag); err == nil {
			rs = append(rs, q)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), abortWaitTime)
	defer cancel()
	_ = endpoint.WaitAll(ctx, rs...)
}

// send posts a send of b to rank dst in the round in flight.
func (c *Coll) send(b []byte, dst int) error {
	r, err := c.comm.Isend(b, dst, c.tag)
	if err != nil {
		return err
	}
	c.reqs, c.peer, c.want = append(c.reqs, r), append(c.peer, dst), append(c.want, -1)
	return nil
}

// recv posts a receive of exactly len(b) bytes from rank src.
func (c *Coll) recv(b []byte, src int) error {
	r, err := c.comm.Irecv(b, src, c.tag)
	if err != nil {
		return err
	}
	c.reqs, c.peer, c.want = append(c.reqs, r), append(c.peer, src), append(c.want, len(b))
	return nil
}

// sendTyped posts a send of count elements of t laid out in b to rank
// dst (endpoint's typed path: packed as it goes out, or read from its
// blocks).
func (c *Coll) sendTyped(b []byte, count int, t *ddt.Type, dst int) error {
	r, err := c.comm.IsendTyped(b, count, t, dst, c.tag)
	if err != nil {
		return err
	}
	c.reqs, c.peer, c.want = append(c.reqs, r), append(c.peer, dst), append(c.want, -1)
	return nil
}

// recvTyped posts a receive of count elements of t, n packed bytes, into
// the layout at b from rank src: exactly n bytes must come.
func (c *Coll) recvTyped(b []byte, count int, t *ddt.Type, n, src int) error {
	r, err := c.comm.IrecvTyped(b, count, t, src, c.tag)
	if err != nil {
		return err
	}
	c.reqs, c.peer, c.want = append(c.reqs, r), append(c.peer, src), append(c.want, n)
	return nil
}

// sendrecv posts a receive from src and a send to dst, and waits for both.
func (c *Coll) sendrecv(ctx context.Context, sb []byte, dst int, rb []byte, src int) error {
	if err := c.recv(rb, src); err != nil {
		return err
	}
	if err := c.send(sb, dst); err != nil {
		return err
	}
	return c.wait(ctx)
}

// wait completes the round in flight: every request, each receive with
// exactly the bytes it expects. It polls the requests itself, giving the
// processor to other goroutines between polls (the handles of one process
// are goroutines, and a poll loop that only yields to other processes
// would keep the one it waits for off its P until the runtime preempts,
// milliseconds later), and to other processes on a crowded node. From
// time to time it looks for what would keep it waiting for ever (check),
// and after a second for a peer process that exited (a bounded
// endpoint.WaitAll, which watches for that).
func (c *Coll) wait(ctx context.Context) error {
	if c.nb != nil {
		return c.nb.round()
	}
	start := 0 // c.reqs[:start] are complete
	done := ctx.Done()
	var t0 time.Time
	next, peerCheck := firstCheck, peerCheckAfter
	for spins := 1; ; spins++ {
		for start < len(c.reqs) {
			if ok, _, _ := c.reqs[start].Test(); !ok {
				break
			}
			start++
		}
		if start == len(c.reqs) {
			break
		}
		if spins%pollClock == 0 {
			if done != nil {
				select {
				case <-done:
					return fmt.Errorf("waiting for %s: %w", c.waitingFor(), ctx.Err())
				default:
				}
			}
			if t0.IsZero() {
				t0 = time.Now()
			} else if el := time.Since(t0); el >= next {
				if err := c.check(); err != nil {
					return err
				}
				next = el + min(el, maxCheck)
				if el >= peerCheck {
					if err := c.peerGone(); err != nil {
						return err
					}
					peerCheck = el + peerCheckAfter
				}
			}
		}
		c.pause(spins)
	}
	return c.finishRound()
}

// finishRound checks the completed round in flight (each receive with
// exactly the bytes it expects) and releases its requests.
func (c *Coll) finishRound() error {
	for i, r := range c.reqs {
		_, st, err := r.Test()
		if err != nil {
			return c.reqErr(i, err)
		}
		if c.want[i] >= 0 && st.Count != c.want[i] {
			return fmt.Errorf("rank %d sent %d bytes where %d were expected (counts differ between ranks): %w",
				c.peer[i], st.Count, c.want[i], ErrInvalid)
		}
	}
	for _, r := range c.reqs {
		_ = r.Release()
	}
	c.reqs, c.peer, c.want = c.reqs[:0], c.peer[:0], c.want[:0]
	return nil
}

// Wait pacing: see wait.
const (
	pollClock      = 64                     // polls between two looks at the context and the clock
	spinPolls      = 256                    // polls before an uncrowded wait starts its side work
	yieldPolls     = 16384                  // polls before an uncrowded wait starts yielding
	peerCheckAfter = 100 * time.Millisecond // waiting time between two checks for exited peers
)

var (
	crowdedPolicy = wait.Policy{Name: "collectives-crowded", YieldEvery: 1, OSYieldEvery: 2}
	spinPolicy    = wait.Policy{Name: "collectives", SpinPolls: spinPolls, YieldPolls: yieldPolls, YieldEvery: 16, OSYieldEvery: 4}
)

// pause paces the poll loop of wait after poll spins.
func (c *Coll) pause(spins int) {
	if c.crowded {
		if spins >= spinPolls {
			c.idleWork()
		}
		if c.solo { // it waits for other processes only
			wait.Solo(nil, spins)
		} else {
			crowdedPolicy.Idle(nil, spins)
		}
		return
	}
	if spins%spinPolicy.YieldEvery != 0 || !spinPolicy.Spun(spins) {
		return
	}
	c.idleWork()
	spinPolicy.Idle(nil, spins)
}

// idleWork is what a wait past its spin budget does besides polling its
// own round: the process's other endpoints and windows, and the handle's
// outstanding nonblocking collectives (which a peer this wait depends on
// may be waiting for).
func (c *Coll) idleWork() {
	progress.PollAll()
	if h := c.handle(); h.nlive.Load() > 0 && c.own == nil {
		h.tryAdvance()
	}
}

// peerGone fails the round when a peer one of its requests waits on has
// exited (endpoint.Comm.CheckPeer: processes of this node): once the
// request has had one more look, so that what the peer delivered before
// it went still counts.
func (c *Coll) peerGone() error {
	for i, r := range c.reqs {
		if r.Done() {
			continue
		}
		err := c.comm.CheckPeer(c.peer[i])
		if err == nil {
			continue
		}
		if ok, _, rerr := r.Test(); ok {
			if rerr != nil {
				return c.reqErr(i, rerr)
			}
			continue
		}
		return c.reqErr(i, err)
	}
	return nil
}

// waitingFor names, for an error, the ranks the round still waits on.
func (c *Coll) waitingFor() string {
	var rs []int
	for i, r := range c.reqs {
		if !r.Done() && len(rs) < 8 {
			rs = append(rs, c.peer[i])
		}
	}
	if len(rs) == 0 {
		return "the round to complete"
	}
	return fmt.Sprintf("ranks %v", rs)
}

func (c *Coll) reqErr(i int, err error) error {
	if c.want[i] < 0 {
		return fmt.Errorf("send to rank %d: %w", c.peer[i], err)
	}
	if errors.Is(err, ErrTruncated) {
		return fmt.Errorf("rank %d sent more than the %d bytes expected (counts differ between ranks): %w", c.peer[i], c.want[i], err)
	}
	return fmt.Errorf("receive from rank %d: %w", c.peer[i], err)
}

// check looks, while a round waits, for what would keep it waiting: an
// abort notice from any rank, a request that failed, or, from a rank a
// receive waits on, a message of another call or another collective
// (between two ranks the messages of one call come in order and carry
// the same tag, so one with another tag ahead of the one awaited means
// that the ranks disagree).
func (c *Coll) check() error {
	if err := c.hierWatch(); err != nil {
		return err
	}
	if err := c.abortNotice(); err != nil {
		return err
	}
	if err := c.laterAborts(); err != nil {
		return err
	}
	for i, r := range c.reqs {
		done, _, rerr := r.Test()
		if done {
			if rerr != nil {
				return c.reqErr(i, rerr)
			}
			continue
		}
		if c.want[i] < 0 {
			continue
		}
		ok, st, err := c.comm.Iprobe(c.peer[i], endpoint.AnyTag)
		if err != nil {
			return err
		}
		// Iprobe drove progress: the awaited message may have matched
		// the receive just before a later one was queued.
		if ok && st.Tag != c.tag && !r.Done() && c.foreign(st.Tag) {
			return fmt.Errorf("rank %d sent a message of %s where this rank is at %s #%d: %w",
				c.peer[i], describeTag(st.Tag, c.seq), c.call, c.seq, ErrInvalid)
		}
	}
	return nil
}

// foreign reports whether a message with tag, from a rank a receive of
// this call waits on and queued ahead of the one awaited, shows that the
// ranks disagree: the same call with other arguments; an earlier call
// that is not one of the handle's outstanding nonblocking collectives;
// or, while a blocking call waits, a later one (a peer moves past a
// blocking call only after sending what it owes this rank). A peer may be
// ahead of a nonblocking collective, so a later call's message is no
// mismatch then.
func (c *Coll) foreign(tag int) bool {
	d := (uint32(tag>>sigBits) - c.seq) & seqMask
	switch {
	case d == 0:
		return true
	case d < seqMask/2:
		return c.nb == nil
	}
	h := c.handle()
	if c.own == nil {
		h.mu.Lock()
		defer h.mu.Unlock()
	}
	for _, s := range h.ops {
		if !s.done && s.cl.tag == tag {
			return false
		}
	}
	return true
}

// abortNotice returns, if an abort notice has come, the error it
// stands for (nil for a later call's, which aborted records).
func (c *Coll) abortNotice() error {
	ok, st, err := c.comm.Iprobe(endpoint.AnySource, abortTag)
	if err != nil || !ok {
		return err
	}
	return c.aborted(st.Source)
}

// aborted receives rank src's abort notice and returns it as an error.
func (c *Coll) aborted(src int) error {
	var b [8]byte
	ctx, cancel := context.WithTimeout(context.Background(), abortWaitTime)
	defer cancel()
	if _, err := c.comm.Recv(ctx, b[:], src, abortTag); err != nil {
		return fmt.Errorf("abort notice from rank %d: %w", src, err)
	}
	seq := binary.LittleEndian.Uint32(b[:])
	var err error
	if b[4] == abortInvalid {
		err = &peerAbort{fmt.Errorf("rank %d gave up its call %d on a mismatch or a bad argument: %w", src, seq, ErrInvalid)}
	} else {
		err = &peerAbort{fmt.Errorf("rank %d abandoned its call %d: %w", src, seq, ErrCanceled)}
	}
	if int32(seq-c.seq) > 0 {
		// A later call: src did its part of this one (a neighbourhood
		// collective's rank that no neighbour waits for, a Bcast's root
		// gone ahead), which may complete; the calls from seq on fail.
		h := c.handle()
		h.later = append(h.later, laterAbort{seq: seq, err: err})
		return nil
	}
	return err
}

// laterAbort is an abort notice read during an earlier call.
type laterAbort struct {
	seq uint32
	err error
}

// laterAborts returns the abort notice, read during an earlier call, of
// a rank that gave up this call or an earlier one.
func (c *Coll) laterAborts() error {
	for _, a := range c.handle().later {
		if int32(a.seq-c.seq) <= 0 {
			return a.err
		}
	}
	return nil
}

// Scratch buffers: the algorithms use slots 0 to 2; typedSlot holds the
// packed data of a typed collective (typedcoll.go) while they run.
const (
	numScratch = 4
	typedSlot  = 3
)

// buf returns scratch buffer i of n bytes, 8-byte aligned, reused between
// calls (its contents are undefined).
func (c *Coll) buf(i, n int) []byte {
	w := (n + 7) / 8
	if cap(c.scratch[i]) < w {
		c.scratch[i] = make([]uint64, w)
	}
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(c.scratch[i][:w]))), n)
}
