package endpoint

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/fabric"
	"github.com/weft-hpc/weft/internal/peerwatch"
	"github.com/weft-hpc/weft/internal/progress"
	"github.com/weft-hpc/weft/internal/wait"
)

// Status describes a completed receive (or a probed message).
type Status struct {
	Source   int  // rank of the sender in the communicator
	Tag      int  // the message's tag
	Count    int  // bytes received (for a probe: bytes in the message)
	Canceled bool // the receive was cancelled before it matched
}

type reqKind uint8

const (
	kSendEager reqKind = iota + 1 // send of user data; done on its completion
	kSendRdv                      // rendezvous header sent; done on the FIN
	kRecv                         // user receive
)

type reqState uint8

const (
	stPosted  reqState = iota // receive posted (in v.posted) or send in flight
	stReading                 // rendezvous read in flight
	stDone                    // logically complete (a fabric op or FIN may still be pending)
)

// Request is an operation in flight, returned by Isend and Irecv. It belongs
// to the endpoint (communicator handle) that started it: Wait, Test and Cancel
// must be called by the goroutine that drives that endpoint (any goroutine in
// shared mode). A request is complete once Wait returns or Test reports true;
// after that its buffer may be reused.
type Request struct {
	v        *vci
	c        *Comm
	kind     reqKind
	state    reqState
	done     bool  // logically complete and nothing references it any more
	listed   bool  // in v.posted (an unmatched receive)
	released bool  // handed back by Release; may be reused
	slot     int32 // index+1 in v.slots; 0 = none
	err      error
	st       Status

	buf          []byte
	want, ignore uint64   // receive match bits
	qprev, qnext *Request // neighbours in v.posted while listed
	qrank        int      // the peer: a send's destination, a receive's source (or AnySource)

	// What only sends and rendezvous receives need, allocated for them
	// alone: an eager receive (the message-rate path) stays small.
	*reqExt
}

// reqExt is the part of a Request that sends and rendezvous receives use.
type reqExt struct {
	pin     runtime.Pinner
	pinned  bool
	pending int // fabric operations that still reference the slot
	mr      *fabric.MR

	seq       uint64 // rendezvous sequence (send side)
	finNeeded bool   // receive side still owes the sender a FIN
	finSeq    uint64
	finStatus uint64
	finDest   fabric.Addr

	// a send as handed to the provider (kept while it waits in v.sendq)
	qinject bool
	qdata   []byte
	qtag    uint64
	qdest   fabric.Addr
	qdesc   fabric.Desc
	qaux    uint32    // a node ring cell's aux word (sigWord)
	queued  time.Time // when it was queued

	typed  *typedRecv // a typed receive unpacking as the data arrives (r.buf nil; typed.go)
	unpack *typedRecv // a typed receive's unpack from r.buf, done when it completes (typed.go)
	link   *nodeLink  // a send over the node transport (node.go)
	staged bool       // buf is a staging copy (node.go), recycled when done
	timed  time.Time  // a node rendezvous send timed for its link's wayChooser: its start
	lkey   uint64     // key of a same-process rendezvous buffer in localBufs
	iov    []uint64   // a gather send's block table (address, length pairs), pinned

	// libfabric typed paths (fabtyped.go)
	mrs       []*fabric.MR // registrations of a zero-copy send's or receive's buffers
	rd        *rdvReads    // a rendezvous receive's reads
	pipe      *pipeSend    // a pipelined send's state
	segIdx    int          // segment buffer index+1 an eager typed send is sent from
	piping    bool         // a pipelined receive taking segments
	pipeGot   int          // bytes of it arrived
	pipeTrunc bool         // the message is longer than the receive
	land      *landRecv    // a pipelined GPU receive's landing chunks (gputyped.go)
	cts       bool         // the control message owed is a CTS, not a FIN
	sigLayout *typedRecv   // a contiguous typed receive's layout, for the signature check

	// layout holds a typed receive's layout (typed or sigLayout points
	// here): kept with the extension, which a released receive hands to
	// the next one, so a typed receive allocates nothing in steady state.
	layout typedRecv
	// hdr holds a node rendezvous send's header (qdata points here),
	// kept with the extension for the same reason (the node rings copy
	// it in Go; no C call sees it).
	hdr [rdvExtSize]byte
	// fhdr is the buffer of a libfabric rendezvous send's header, kept
	// for reuse (reset): an allocation of its own, since a cgo call may
	// not be handed memory holding Go pointers, as the extension does.
	fhdr []byte
	// rdMem is what rd points to during a libfabric rendezvous read; its
	// slices keep their capacity across reuses (reset).
	rdMem rdvReads
	// pipeMem is what pipe points to during a pipelined libfabric send.
	pipeMem pipeSend
	// pieces and segs are a libfabric zero-copy message's blocks (slices
	// of the user's buffers) and the scratch that lists them; tbl is its
	// block table. They keep their capacity across reuses (reset), and
	// mrs keeps its closed handles there for RegisterInto (regKeep), so
	// that a repeated typed transfer of the same shape allocates nothing
	// and its table's registration is a hit of the MR cache.
	pieces [][]byte
	segs   []ddt.Segment
	tbl    []uint64
}

// reset clears x for another operation. The slices of its rendezvous
// read plan and zero-copy block lists keep their capacity (the elements
// in use cleared, so that they hold no user memory), so that a transfer
// of the same shape allocates nothing; a list longer than maxKeptPlan is
// let go, so that neither the memory a request keeps nor the clearing
// grows with the largest message it once served.
func (x *reqExt) reset() {
	rd := &x.rdMem
	ops := rd.ops[:rd.used]
	for i := range ops {
		iov := ops[i].iov[:cap(ops[i].iov)]
		clear(iov)
		ops[i] = rdvRead{iov: iov[:0]}
	}
	clear(rd.local)
	clear(x.pieces)
	keep := reqExt{
		fhdr:   x.fhdr,
		pieces: kept(x.pieces),
		segs:   kept(x.segs),
		tbl:    kept(x.tbl),
		mrs:    x.mrs[:0], // closed by unpinAll: reused by regKeep
	}
	keep.rdMem = rdvReads{ops: kept(rd.ops), local: kept(rd.local), tbl: kept(rd.tbl)}
	*x = keep
}

// maxKeptPlan bounds the entries of a list a request's extension keeps
// for reuse (reset).
const maxKeptPlan = 4096

// kept is s emptied for reuse, or nil when its capacity is past
// maxKeptPlan.
func kept[T any](s []T) []T {
	if cap(s) > maxKeptPlan {
		return nil
	}
	return s[:0]
}

// regKeep registers b for access (the MR cache serves repeats) and adds
// the handle to r's mrs, re-arming a closed handle an earlier use of the
// extension left there (fabric.Domain.RegisterInto) rather than
// allocating one. Caller holds the lock.
func (v *vci) regKeep(x *reqExt, b []byte, access fabric.Access) (*fabric.MR, error) {
	if k := len(x.mrs); k < cap(x.mrs) {
		if m := x.mrs[:k+1][k]; m != nil && v.dom.RegisterInto(m, b, access) == nil {
			x.mrs = x.mrs[:k+1]
			return m, nil
		}
	}
	m, err := v.dom.Register(b, access)
	if err != nil {
		return nil, err
	}
	x.mrs = append(x.mrs, m)
	return m, nil
}

// ext returns r's extension, allocating it on first use.
func (r *Request) ext() *reqExt {
	if r.reqExt == nil {
		r.reqExt = &reqExt{}
	}
	return r.reqExt
}

// newSend returns a posted send request of kind on c, of buf to rank
// dest: a released request, whose extension it keeps (cleared) for
// reuse, or a new one. Caller holds the lock. Blocking Send and Recv
// hand their requests back, so a loop of them allocates nothing per
// message: on a virtual machine the first touch of the fresh memory a
// growing heap takes from the kernel stalled a 64 KiB send for tens of
// microseconds now and then.
func (v *vci) newSend(c *Comm, kind reqKind, buf []byte, dest int) *Request {
	r := v.takeFree()
	if r == nil {
		r = &Request{}
	} else {
		r.wipe()
	}
	r.v, r.c, r.kind, r.state, r.buf, r.qrank = v, c, kind, stPosted, buf, dest
	return r
}

// takeFree takes a released request for reuse (nil: none). Caller holds
// the lock.
func (v *vci) takeFree() *Request {
	n := len(v.freeReqs)
	if n == 0 {
		return nil
	}
	r := v.freeReqs[n-1]
	v.freeReqs[n-1] = nil
	v.freeReqs = v.freeReqs[:n-1]
	return r
}

// wipe zeroes r for another operation, keeping its extension, if it has
// one, cleared for the next operation that needs one.
func (r *Request) wipe() {
	x := r.reqExt
	*r = Request{}
	if x != nil {
		x.reset()
		r.reqExt = x
	}
}

// completedRequest is returned by Isend for messages sent with inject: they
// are complete when Isend returns.
var completedRequest = &Request{done: true, state: stDone}

// Done reports, without driving progress, whether the request has completed
// (a nil request has nothing in flight: true).
func (r *Request) Done() bool {
	if r == nil {
		return true // nothing in flight
	}
	if r.v != nil {
		// Also for a private endpoint: a call blocked elsewhere in the
		// process may be driving its progress (internal/progress).
		r.v.lock()
		defer r.v.unlock()
	}
	return r.done
}

// Test drives progress once on the request's endpoint and reports whether
// the request has completed, with its status and error.
func (r *Request) Test() (bool, Status, error) {
	if r == nil {
		return false, Status{}, errNilRequest("test")
	}
	v := r.v
	if v == nil {
		return r.testResult()
	}
	v.lock()
	defer v.unlock()
	if !r.done {
		if err := v.progress(); err != nil {
			return false, Status{}, err
		}
	}
	return r.testResult()
}

func (r *Request) testResult() (bool, Status, error) {
	if !r.done {
		return false, Status{}, nil
	}
	return true, r.st, r.err
}

// Wait drives progress until the request completes or ctx ends. When ctx
// ends first the request stays in flight (its buffer stays in use) and the
// error wraps ctx.Err(); Cancel it or Wait again.
func (r *Request) Wait(ctx context.Context) (Status, error) {
	if r == nil {
		return Status{}, errNilRequest("wait")
	}
	v := r.v
	if v == nil {
		return r.st, r.err
	}
	done := ctx.Done()
	var pace peerwatch.Pacer
	crowded, solo := v.crowded, v.solo
	for spins := 1; ; spins++ {
		v.lock()
		fin := r.done
		var err error
		if !fin {
			err = v.progress()
			fin = r.done
		}
		v.unlock()
		if err != nil {
			return Status{}, err
		}
		if fin {
			return r.st, r.err
		}
		if spins%spinYield == 0 {
			if done != nil {
				select {
				case <-done:
					return Status{}, fmt.Errorf("endpoint: wait on %s%s: %w", r.describe(), r.stuck(), ctx.Err())
				default:
				}
			}
			if spins >= spinFree && pace.Due() {
				if err := r.goneErr(); err != nil {
					return Status{}, err
				}
			}
			idle(spins, crowded, solo)
		} else if crowded {
			idle(spins, crowded, solo)
		}
	}
}

// peerErr returns an error wrapping ErrPeerGone when the process of the
// one rank r waits for (its destination, or a receive's specific source)
// has exited. A receive from AnySource depends on no rank in particular.
func (r *Request) peerErr() error {
	c := r.c
	if c == nil || r.qrank < 0 || r.qrank >= len(c.world) {
		return nil
	}
	if err := c.w.watch.Check(int(c.world[r.qrank])); err != nil {
		dir := "to"
		if r.kind == kRecv {
			dir = "from"
		}
		return fmt.Errorf("endpoint: %s %s rank %d: %w", r.describe(), dir, r.qrank, err)
	}
	return nil
}

// goneErr is peerErr for a request a wait has seen incomplete: when its
// peer has exited it drives progress once more (what the peer delivered
// before it went still counts) and returns the error only if r is still
// not complete. Called without the endpoint's lock, only from a wait that
// has been blocked for a while (never on the hot path).
func (r *Request) goneErr() error {
	err := r.peerErr()
	if err == nil {
		return nil
	}
	v := r.v
	v.lock()
	if !r.done {
		_ = v.progress()
	}
	if !r.done && r.reqExt != nil && r.piping {
		// The sender of a pipelined message is gone mid-message: its
		// other segments will not come.
		r.piping, r.finNeeded = false, false
		v.finish(r, err)
	}
	fin := r.done
	v.unlock()
	if fin {
		return nil
	}
	return err
}

// idle gives the processor away while a wait makes no progress, with the
// endpoint wait policy (waitPolicy): the first spinFree polls only spin;
// past that spin budget it also drives the progress of the process's
// other endpoints and windows (internal/progress), which the peer being
// waited for may need; from yieldFrom polls on (a yield costs a futex
// wake-up when other Ps are idle, far more than a short wait) every
// spinYield-th poll yields to other goroutines, and every
// osYieldEvery-th of those yields to other processes (sched_yield), so
// that busy-polling endpoints share oversubscribed cores with the peers
// they wait for.
//
// On a crowded node (more endpoints of a communicator on this machine
// than cores, crowded) spinning only keeps the peer being waited for off
// the core: every empty poll then gives the core to other processes
// (sched_yield) or to the process's other goroutines, in turn, as Open
// MPI yields on oversubscribed nodes; callers call idle on every poll then.
// solo: every endpoint waited on is the only one of its node group in
// this process, so what the wait needs comes from other processes
// (wait.Solo paces it).
func idle(spins int, crowded, solo bool) {
	if crowded {
		if spins >= spinFree {
			progress.PollAll()
		}
		if solo {
			wait.Solo(nil, spins)
		} else {
			crowdedPolicy.Idle(nil, spins)
		}
		return
	}
	if !waitPolicy.Spun(spins) {
		return
	}
	progress.PollAll()
	waitPolicy.Idle(nil, spins)
}

// crowdedPolicy yields on every poll, alternately to the goroutines of
// this process (endpoints of one process are each other's peers: a wait
// that only gave the core to other processes would keep its P until the
// runtime preempted it, milliseconds later) and to other processes.
var crowdedPolicy = wait.Policy{Name: "endpoint-crowded", YieldEvery: 1, OSYieldEvery: 2}

// allSolo reports whether every request of reqs is on an endpoint that is
// the only one of its node group in its process.
func allSolo(reqs []*Request) bool {
	for _, r := range reqs {
		if r != nil && r.v != nil && !r.v.solo {
			return false
		}
	}
	return true
}

// anyCrowded reports whether a request of reqs is on a crowded endpoint.
func anyCrowded(reqs []*Request) bool {
	for _, r := range reqs {
		if r != nil && r.v != nil && r.v.crowded {
			return true
		}
	}
	return false
}

func errNilRequest(op string) error {
	return fmt.Errorf("endpoint: %s on a nil request: %w", op, ErrInvalid)
}

func (r *Request) describe() string {
	switch r.kind {
	case kSendEager, kSendRdv:
		return "send"
	}
	return "receive"
}

// stuck describes, for the error of a wait that ended unmet, what the
// endpoint holds for a receive: its source and tag, what is at the head
// of the node ring from that source (a message is there that did not
// match, or none arrived), the unexpected messages and the posted
// receives. It takes the endpoint's lock.
func (r *Request) stuck() string {
	if r.kind != kRecv {
		return ""
	}
	v := r.v
	v.lock()
	defer v.unlock()
	src := "any rank"
	if r.qrank >= 0 {
		src = fmt.Sprintf("rank %d", r.qrank)
	}
	tag := "any tag"
	if r.ignore&(tagMask<<tagShift) == 0 {
		tag = fmt.Sprintf("tag %d", tagUser(r.want))
	}
	ring := ""
	if r.c != nil && r.qrank >= 0 {
		if l := r.c.link(r.qrank); l != nil && l.in != nil {
			if t, n, ok, _ := l.in.Peek(); ok {
				ring = fmt.Sprintf("; that rank's node ring holds %d bytes from rank %d, tag %d, at its head", n, tagSource(t), tagUser(t))
			} else {
				ring = "; that rank's node ring is empty"
			}
		}
	}
	posted := 0
	for q := v.posted.head; q != nil; q = q.qnext {
		posted++
	}
	return fmt.Sprintf(" (from %s, %s%s; %d unexpected messages, %d receives posted with this one)", src, tag, ring, len(v.unexpected), posted)
}

// maxFreeReqs bounds the released requests an endpoint keeps for reuse.
const maxFreeReqs = 1024

// Release hands a completed request back to its endpoint, which may reuse
// it for a later operation, as MPI_Wait frees an MPI request: programs
// that post many receives (a message-rate loop) then allocate nothing per
// message. After Release the request must not be used at all, not even
// for Done or Test: it may already stand for another operation. Releasing
// a request that has not completed returns an error wrapping ErrInvalid
// and leaves it in flight; releasing it twice returns ErrInvalid too.
// Releasing nil, or the shared request Isend returns for a send complete
// at once, does nothing.
func (r *Request) Release() error {
	if r == nil || r.v == nil {
		return nil
	}
	v := r.v
	v.lock()
	defer v.unlock()
	if err := r.releasable(); err != nil {
		return err
	}
	v.keepReleased(r)
	return nil
}

// recycle hands back the request of a blocking call that has waited for
// it, if it completed (a request a cancelled wait left in flight is left
// alone): the caller never sees it, so it is reused at once (newSend).
func (r *Request) recycle() {
	v := r.v
	if v == nil {
		return
	}
	v.lock()
	if r.done && !r.released {
		v.keepReleased(r)
	}
	v.unlock()
}

// releasable reports why r may not be released (nil if it may). Caller
// holds the lock.
func (r *Request) releasable() error {
	switch {
	case r.released:
		return fmt.Errorf("endpoint: request released twice: %w", ErrInvalid)
	case !r.done:
		return fmt.Errorf("endpoint: release of a %s still in flight: %w", r.describe(), ErrInvalid)
	}
	return nil
}

// keepReleased marks completed request r released and keeps it for reuse.
// Caller holds the lock.
func (v *vci) keepReleased(r *Request) {
	r.released = true
	if len(v.freeReqs) < maxFreeReqs && !v.isClosed() {
		r.buf, r.err, r.c = nil, nil, nil // drop references until reused
		v.freeReqs = append(v.freeReqs, r)
	}
}

// ReleaseAll releases every request of reqs, as Release does each, taking
// each endpoint's lock once for a run of its requests: the form for a
// window of completed requests (MPI_Waitall frees them all). It checks
// every request before it releases any: if one is still in flight or
// was released already it returns an error wrapping ErrInvalid and
// releases none. nil requests, and the shared request Isend returns for
// a send complete at once, are skipped. A request listed twice is
// released once, and ReleaseAll then returns an error wrapping
// ErrInvalid.
func ReleaseAll(reqs ...*Request) error {
	twice := false
	for pass := 0; pass < 2; pass++ {
		var held *vci
		for _, r := range reqs {
			if r == nil || r.v == nil {
				continue
			}
			if r.v != held {
				if held != nil {
					held.unlock()
				}
				held = r.v
				held.lock()
			}
			if pass == 1 {
				if r.released { // listed before
					twice = true
				} else {
					held.keepReleased(r)
				}
				continue
			}
			if err := r.releasable(); err != nil {
				held.unlock()
				return err
			}
		}
		if held != nil {
			held.unlock()
		}
	}
	if twice {
		return fmt.Errorf("endpoint: release all: a request listed twice (released once): %w", ErrInvalid)
	}
	return nil
}

// Cancel asks for a receive that has not matched yet to be removed. The
// request still has to be completed with Wait or Test: it then reports
// Status.Canceled and ErrCanceled, or completes normally if a message matched
// first. Sends cannot be cancelled (ErrNotSupported).
func (r *Request) Cancel() error {
	if r == nil {
		return errNilRequest("cancel")
	}
	if r.v == nil {
		if r.st.Source == ProcNull {
			return nil // a receive from ProcNull: complete, nothing to cancel
		}
		return fmt.Errorf("endpoint: cancel of a completed send: %w", ErrNotSupported)
	}
	v := r.v
	v.lock()
	defer v.unlock()
	return v.cancel(r)
}

// TestAll drives progress once on every endpoint its requests belong to
// (each at most once) and reports whether all of them have completed
// (MPI_Testall); when they have, err is the first error among them in
// slice order. It never waits, so a loop can poll it between pieces of
// other work. nil requests count as complete.
func TestAll(reqs ...*Request) (bool, error) {
	var prog [8]*vci
	np, all := 0, true
	for _, r := range reqs {
		if r == nil || r.v == nil {
			continue
		}
		v := r.v
		v.lock()
		if !r.done && !progressed(prog[:np], v) {
			if err := v.progress(); err != nil {
				v.unlock()
				return false, err
			}
			if np < len(prog) {
				prog[np] = v
				np++
			}
		}
		all = all && r.done
		v.unlock()
	}
	if !all {
		return false, nil
	}
	for _, r := range reqs {
		if r == nil {
			continue
		}
		if _, _, err := r.testResult(); err != nil {
			return true, err
		}
	}
	return true, nil
}

// WaitAll waits for every request and returns the first error among them
// in slice order (or an error wrapping ctx.Err() if ctx ends first). It
// drives progress on every endpoint its requests belong to, in turn, so one
// goroutine may wait at once on sends from one of its endpoints and
// receives on another endpoint it also drives (each endpoint is progressed
// at most once per sweep over the requests). nil requests are skipped.
func WaitAll(ctx context.Context, reqs ...*Request) error {
	done := ctx.Done()
	start := 0 // reqs[:start] are complete
	var prog [8]*vci
	var pace peerwatch.Pacer
	crowded, solo := anyCrowded(reqs), allSolo(reqs)
	for spins := 1; ; spins++ {
		np, live := 0, false
		var held *vci // a run of requests on one endpoint takes its lock once
		for i := start; i < len(reqs); i++ {
			r := reqs[i]
			if r == nil || r.v == nil { // nil, or a send complete at Isend
				if i == start {
					start++
				}
				continue
			}
			if v := r.v; v != held {
				if held != nil {
					held.unlock()
				}
				v.lock()
				held = v
			}
			if !r.done && !progressed(prog[:np], held) {
				if err := held.progress(); err != nil {
					held.unlock()
					return err
				}
				if np < len(prog) {
					prog[np] = held
					np++
				}
			}
			if !r.done {
				live = true
			} else if i == start {
				start++
			}
		}
		if held != nil {
			held.unlock()
		}
		if !live {
			break
		}
		if spins%spinYield == 0 {
			if done != nil {
				select {
				case <-done:
					return fmt.Errorf("endpoint: wait all: %s: %w", pending(reqs), ctx.Err())
				default:
				}
			}
			if spins >= spinFree && pace.Due() {
				for _, r := range reqs[start:] {
					if r == nil || r.v == nil {
						continue
					}
					if err := r.goneErr(); err != nil {
						return fmt.Errorf("endpoint: wait all: %w", err)
					}
				}
			}
			idle(spins, crowded, solo)
		} else if crowded {
			idle(spins, crowded, solo)
		}
	}
	for _, r := range reqs {
		if r == nil {
			continue
		}
		if _, _, err := r.testResult(); err != nil { // complete: no lock needed past this point
			return err
		}
	}
	return nil
}

// pending describes the requests of reqs that have not completed, for
// the error of a WaitAll that ended unmet: how many, and what the first
// one waits for (stuck).
func pending(reqs []*Request) string {
	n := 0
	var first *Request
	for _, r := range reqs {
		if r == nil || r.v == nil {
			continue
		}
		r.v.lock()
		done := r.done
		r.v.unlock()
		if !done {
			if n == 0 {
				first = r
			}
			n++
		}
	}
	if first == nil {
		return "every request completed"
	}
	return fmt.Sprintf("%d of %d requests pending, the first a %s%s", n, len(reqs), first.describe(), first.stuck())
}

func progressed(vs []*vci, v *vci) bool {
	for _, p := range vs {
		if p == v {
			return true
		}
	}
	return false
}

// WaitAny waits until one of the non-nil, not yet reported requests
// completes and returns its index, status and error. Completed requests are
// reported once: WaitAny sets reqs[i] to nil before returning i. With no
// non-nil request it returns -1.
func WaitAny(ctx context.Context, reqs []*Request) (int, Status, error) {
	i, st, rerr := -1, Status{}, error(nil)
	err := waitSweeps(ctx, "wait any", reqs, func() bool {
		i, st, rerr = TestAny(reqs)
		return i >= 0
	})
	if err != nil {
		return -1, Status{}, err
	}
	return i, st, rerr
}

// TestAny drives progress and returns the index, status and error of the
// first non-nil request of reqs that has completed (MPI_Testany), setting
// reqs[i] to nil so that it is reported once; -1 when none has, or none is
// left. It never waits.
func TestAny(reqs []*Request) (int, Status, error) {
	for i, r := range reqs {
		if r == nil {
			continue
		}
		if ok, st, err := r.Test(); ok {
			reqs[i] = nil
			return i, st, err
		}
	}
	return -1, Status{}, nil
}

// Completion is one request that WaitSome or TestSome found complete: its
// index in the slice, its status and its own error.
type Completion struct {
	Index  int
	Status Status
	Err    error
}

// WaitSome waits until at least one of the non-nil requests of reqs has
// completed, then appends every completed one to done (MPI_Waitsome),
// setting its reqs entry to nil so that it is reported once, and returns
// done. With no non-nil request it returns done unchanged at once. Its
// error is the wait's (ctx ended, every awaited peer gone); each
// request's own error is in its Completion. Passing the previous result
// as done[:0] lets a loop complete requests without allocating.
func WaitSome(ctx context.Context, reqs []*Request, done []Completion) ([]Completion, error) {
	n := len(done)
	err := waitSweeps(ctx, "wait some", reqs, func() bool {
		done = TestSome(reqs, done)
		return len(done) > n
	})
	return done, err
}

// TestSome drives progress once and appends every non-nil request of reqs
// that has completed to done (MPI_Testsome), setting its reqs entry to nil;
// it never waits.
func TestSome(reqs []*Request, done []Completion) []Completion {
	for i, r := range reqs {
		if r == nil {
			continue
		}
		if ok, st, err := r.Test(); ok {
			reqs[i] = nil
			done = append(done, Completion{Index: i, Status: st, Err: err})
		}
	}
	return done
}

// waitSweeps calls sweep, which tests reqs and reports whether it found
// what the caller waits for, until it does or no non-nil request is left
// (nil error either way), pacing itself as every wait does; it fails when
// ctx ends or every request left waits on a peer that has gone. what
// names the caller in errors.
func waitSweeps(ctx context.Context, what string, reqs []*Request, sweep func() bool) error {
	done := ctx.Done()
	var pace peerwatch.Pacer
	crowded, solo := anyCrowded(reqs), allSolo(reqs)
	for spins := 1; ; spins++ {
		if sweep() || !anyLive(reqs) {
			return nil
		}
		if spins%spinYield == 0 {
			if done != nil {
				select {
				case <-done:
					return fmt.Errorf("endpoint: %s: %w", what, ctx.Err())
				default:
				}
			}
			if spins >= spinFree && pace.Due() {
				// Only when every request waits on an exited peer can
				// none of them complete.
				var gone error
				for _, r := range reqs {
					if r == nil {
						continue
					}
					if gone = r.goneErr(); gone == nil {
						break
					}
				}
				if gone != nil {
					return fmt.Errorf("endpoint: %s: %w", what, gone)
				}
			}
			idle(spins, crowded, solo)
		} else if crowded {
			idle(spins, crowded, solo)
		}
	}
}

// anyLive reports whether reqs has a non-nil request.
func anyLive(reqs []*Request) bool {
	for _, r := range reqs {
		if r != nil {
			return true
		}
	}
	return false
}

// waitTimeout waits with the endpoint's internal timeout (for calls that
// take no context).
func (r *Request) waitTimeout(d time.Duration) (Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return r.Wait(ctx)
}
