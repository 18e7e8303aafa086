package collectives

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/weft-hpc/weft/internal/memcopy"
)

// Nonblocking collectives of a communicator whose ranks all live in this
// process (endpoint handles driven by goroutines) combine through the
// process's memory, as the blocking forms do, without a leader that
// waits: every member registers its buffers for the call in an entry of
// its process group, and the member that arrives last runs the whole
// collective on everyone's buffers and marks the entry done. The others'
// schedules wait on that mark as a round (a condition instead of message
// requests), so a rank that started the call can compute meanwhile, and
// any number of calls can be in flight (each has its own entry, keyed by
// the call's number). The blocking forms keep their leader and slots:
// the two never share state, only the call numbering.
//
// A member whose result needs no other member's data (a Bcast's or
// Scatter's root, a Reduce's or Gather's other ranks) gives: it copies
// its input into the entry's stage, registers that copy, and completes
// at once, as an MPI rank whose eager sends are queued returns. Its next
// calls may run ahead of the others, up to the ring's nbCalls entries: a
// member that finds its call's place still held by an earlier call waits
// for that call's last member.

// nbLocal is one nonblocking call of a process group (the group's nb
// ring holds it until its last member arrives). Its first member makes
// it; each member writes its own slot, then counts itself arrived; the
// one that completes the count runs the call. No lock: two members that
// met on a mutex (and a map) at every call spent more time there than
// the call took (docs/perf/collectives.md).
type nbLocal struct {
	seq     uint32 // the call's number
	sig     uint64
	arrived atomic.Int32
	slots   []nbSlot     // by member index
	stage   []byte       // the givers' copies (nbGive), in box
	box     *[]byte      // stage's buffer, from stagePools
	taken   atomic.Int32 // the members that took their part of a root's copy
	state   atomic.Uint32
	err     error // why it failed: written in state nbFailing, read in nbFailed
	// remote is a hybrid call's collective among the processes' leaders,
	// in flight while state is nbWriting, and post its last step
	// (nbhybrid.go).
	remote atomic.Pointer[Request]
	post   func(slots []nbSlot)
}

// nbGive is a member's part in a call's stage, where the members whose
// result needs no other member's data copy their input and leave. Every
// member of a call gives the same size (0: the call has no stage).
type nbGive struct {
	size int // bytes
	at   int // offset of this member's copy of its send buffer; -1: it does not give
	// fromRoot: the root gives (Bcast, Scatter), and each other member
	// takes its part, at offset take, into its recv. Otherwise the other
	// members give (Reduce, Gather) and the last to arrive runs the call
	// on the copies.
	fromRoot bool
	take     int
}

// noGive: a call whose members all wait for the last.
var noGive = nbGive{at: -1}

// giveMax bounds a call's stage: above it, copying twice costs more
// than the wait it saves.
const (
	giveShift = 14
	giveMax   = 1 << giveShift
)

// stagePools keeps the stages of calls through process memory for the
// next calls, by size class (powers of two up to giveMax): a stage made
// for each call of a few KiB kept the garbage collector running and
// took a 16 KiB Ibcast between two handles from 1.1–2.8 µs to 10–14.
var stagePools [giveShift + 1]sync.Pool

// getStage returns a buffer of at least n bytes (n ≤ giveMax) for a
// stage.
func getStage(n int) *[]byte {
	k := bits.Len(uint(n - 1))
	if b, ok := stagePools[k].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 1<<k)
	return &b
}

// putStage hands e's stage back once no member reads it.
func (e *nbLocal) putStage() {
	if b := e.box; b != nil {
		e.stage, e.box = nil, nil
		stagePools[bits.Len(uint(cap(*b)-1))].Put(b)
	}
}

// givesLocal reports whether the members of clone c's process group
// that need nobody's data give and leave: where a member may be waiting
// for a core (more handles than GOMAXPROCS, or a crowded node), so that
// the others do not wait for it. Where every handle runs at once, one
// copy by the last member is faster than two through a stage: between
// two handles of one process on an Intel Xeon host an Ibcast of 8 KiB
// took 2.2–3.5 µs through a stage against 0.9–1.1 without, as a core
// takes microseconds to read what another has just written.
func (c *Coll) givesLocal() bool {
	return !c.own.hier.g.fits || c.crowded
}

// toRoot is the stage of a call whose members other than the root each
// give part bytes (Reduce, Gather), at offset rank·part; none where the
// stage would be larger than giveMax.
func toRoot(c *Coll, part, root int) nbGive {
	if c.size*part > giveMax || part == 0 || !c.givesLocal() {
		return noGive
	}
	g := nbGive{size: c.size * part, at: -1}
	if c.rank != root {
		g.at = c.rank * part
	}
	return g
}

// fromRoot is the stage of a call whose root gives size bytes (Bcast,
// Scatter), of which each other member takes part bytes at offset
// rank·part (0: every member takes the whole).
func fromRoot(c *Coll, size, part, root int) nbGive {
	if size > giveMax || size == 0 || !c.givesLocal() {
		return noGive
	}
	g := nbGive{size: size, at: -1, fromRoot: true, take: c.rank * part}
	if c.rank == root {
		g.at = 0
	}
	return g
}

// failWith moves e from open to failed with err, unless it has left the
// open state already.
func (e *nbLocal) failWith(err error) {
	if e.state.CompareAndSwap(nbOpen, nbFailing) {
		e.err = err
		e.state.Store(nbFailed)
	}
}

// failure waits out a failure being recorded and returns e's error.
func (e *nbLocal) failure() error {
	for e.state.Load() == nbFailing {
		runtime.Gosched()
	}
	return e.err
}

// nbCalls is the length of a process group's ring of calls through
// process memory (indexed by call number): more than the numbers the
// members' calls in flight can span (a member is at most maxAhead calls
// past its oldest outstanding one, which waits for the others).
const nbCalls = 4 * maxAhead

// nbSlot is one member's buffers for the call (send nil: in place).
type nbSlot struct{ send, recv []byte }

const (
	nbOpen    = iota // members still arriving
	nbWriting        // the last member runs the collective
	nbDone
	nbFailing // err being written
	nbFailed
)

// localNB reports whether c, the clone of a nonblocking call, combines
// through process memory for collective k: every rank of the
// communicator is a handle of this process and the hierarchy applies to
// k as for the blocking form.
func (c *Coll) localNB(k Collective) bool {
	if c.own == nil || c.nb == nil {
		return false
	}
	h := c.own.hier
	if h == nil || c.size < 2 || !c.hierMode(k) {
		return false
	}
	if h.procs == 1 {
		return len(h.g.slots) == c.size
	}
	return h.hybrid && c.hybridOK && hybridColl(k)
}

// runLocal runs call s of clone c through its process group: it
// registers send and recv, and the last member to arrive calls work with
// every member's buffers (indexed by comm rank) while the others wait
// for it as a round of their schedules. give is this member's part in
// the call's stage: a member that gives copies its input there and
// completes at once.
func (c *Coll) runLocal(s callSig, send, recv []byte, give nbGive, work func(slots []nbSlot)) error {
	h := c.own.hier
	at, e, err := c.joinLocal(s, give.size)
	if err != nil {
		return c.fail(err)
	}
	gave := false
	if give.size > 0 && len(e.stage) == give.size {
		if give.fromRoot {
			return c.fromRootLocal(at, e, send, recv, give)
		}
		if give.at >= 0 {
			// It gives: its copy in the stage stands for its send buffer,
			// which the call does not read after this.
			st := e.stage[give.at : give.at+len(send)]
			copy(st, send)
			send, gave = st, true
		}
	}
	e.slots[h.li] = nbSlot{send, recv}
	if int(e.arrived.Add(1)) == len(e.slots) {
		// The last member: every slot is written. Unless the call failed
		// meanwhile (a member withdrew), it runs the call.
		at.CompareAndSwap(e, nil)
		if !e.state.CompareAndSwap(nbOpen, nbWriting) {
			return c.fail(e.failure())
		}
		work(e.slots)
		e.putStage() // read by work only
		e.state.Store(nbDone)
		return c.done(nil)
	}
	if gave {
		return c.done(nil)
	}
	return c.waitLocal(e)
}

// joinLocal finds (or makes) the entry of clone c's call s in its
// process group's ring, with a stage of stage bytes, once c's slot says
// it is in a call through process memory; it returns the entry's place
// and the entry, or why the call failed.
func (c *Coll) joinLocal(s callSig, stage int) (*atomic.Pointer[nbLocal], *nbLocal, error) {
	h := c.own.hier
	g := h.g
	c.sig = s.hash()
	seq := c.seq
	// A blocking hierarchical call of the same number on a member sees
	// this one as a flat call (a mismatch), as it would the flat form.
	if err := c.settle(bg); err != nil {
		return nil, nil, err
	}
	g.slots[h.li].pub.Store(uint64(seq)<<32 | slotFlat)
	if g.park != nil { // a leader waiting for this member in a blocking call: a mismatch
		g.park.wakeOne(0)
	}
	at := &g.nb[seq%nbCalls]
	e, err := c.localEntry(at, seq, stage)
	if err != nil {
		return nil, nil, err
	}
	if e.sig != c.sig {
		e.failWith(fmt.Errorf("the ranks of this process called %s #%d with different collectives or arguments (root, count, element size or operation): %w", c.call, seq, ErrInvalid))
	}
	if st := e.state.Load(); st == nbFailing || st == nbFailed {
		return nil, nil, e.failure()
	}
	return at, e, nil
}

// fromRootLocal is runLocal for a call whose root gives (Bcast,
// Scatter): the root's copy in the stage completes the call, and every
// other member takes its part from there, at once if the copy is there
// when it arrives, else once its schedule sees it (stepLocal). No member
// writes another's buffer.
func (c *Coll) fromRootLocal(at *atomic.Pointer[nbLocal], e *nbLocal, send, recv []byte, give nbGive) error {
	if give.at >= 0 {
		copy(e.stage, send)
		if !e.state.CompareAndSwap(nbOpen, nbDone) {
			return c.fail(e.failure())
		}
		e.arrive(at)
		return c.done(nil)
	}
	e.arrive(at)
	c.take, c.takeFrom = recv, e.stage[give.take:give.take+len(recv)]
	return c.waitLocal(e)
}

// arrive counts a member of a call whose root gives; the last frees the
// call's place in the ring.
func (e *nbLocal) arrive(at *atomic.Pointer[nbLocal]) {
	if int(e.arrived.Add(1)) == len(e.slots) {
		at.CompareAndSwap(e, nil)
	}
}

// took counts a member that took its part of e's stage; the last hands
// the stage back.
func (e *nbLocal) took() {
	if int(e.taken.Add(1)) == len(e.slots)-1 {
		e.putStage()
	}
}

// waitLocal waits for call e to be done by another member: a direct
// call returns to its schedule, which watches e (stepLocal).
func (c *Coll) waitLocal(e *nbLocal) error {
	g := c.own.hier.g
	c.local = e
	if c.nb.direct {
		if e.state.Load() == nbDone {
			return c.doneLocal()
		}
		return errLocalPending
	}
	defer func() { c.local = nil }()
	for {
		switch e.state.Load() {
		case nbDone:
			return c.doneLocal()
		case nbFailed:
			return c.fail(e.err)
		}
		if g.state.Load()&3 == phFailed {
			return c.fail(g.failed())
		}
		c.cond = func() bool { return e.state.Load() >= nbDone || g.state.Load()&3 == phFailed }
		err := c.nb.round()
		c.cond = nil
		if err != nil {
			return c.fail(err)
		}
	}
}

// doneLocal completes the clone's call through process memory once it
// is done, taking the clone's part of the stage if it has one.
func (c *Coll) doneLocal() error {
	e := c.local
	c.local = nil
	if c.take != nil {
		copy(c.take, c.takeFrom)
		c.take, c.takeFrom = nil, nil
		e.took()
	}
	return c.done(nil)
}

// localEntry returns the entry of call seq at its place in the ring,
// making it if this member is the first. A place still held by an
// earlier call, which a member that gave may have left nbCalls calls
// before, is waited for: its members complete it by their own calls
// and waits, never this one's.
func (c *Coll) localEntry(at *atomic.Pointer[nbLocal], seq uint32, stage int) (*nbLocal, error) {
	g := c.own.hier.g
	for spins := 1; ; spins++ {
		e := at.Load()
		if e != nil && e.seq == seq {
			return e, nil
		}
		if e == nil || e.state.Load() == nbFailed {
			// A failed call stays in the ring for its late members until a
			// call nbCalls later takes its place.
			n := &nbLocal{seq: seq, sig: c.sig, slots: make([]nbSlot, len(g.slots))}
			if stage > 0 {
				n.box = getStage(stage)
				n.stage = (*n.box)[:stage]
			}
			if at.CompareAndSwap(e, n) {
				return n, nil
			}
			n.putStage()
			continue // another member made it first, or the earlier call ended
		}
		if int32(seq-e.seq) < 0 {
			// Not reached: a member starts a call at most maxAhead after
			// its oldest outstanding one, and waits for its place.
			return nil, fmt.Errorf("the ranks of this process are more than %d nonblocking calls apart (%s #%d meets #%d): %w", nbCalls, c.call, seq, e.seq, ErrInvalid)
		}
		if g.state.Load()&3 == phFailed {
			return nil, g.failed()
		}
		if spins > 16 {
			runtime.Gosched()
		}
	}
}

// localColl returns, for the calls whose nonblocking form goes through
// process memory whenever localNB holds (so that start runs them without
// a coroutine), their collective; 0 for the others (Alltoall: in place it
// runs flat).
func localColl(id callID) Collective {
	switch id {
	case callBarrier:
		return CollBarrier
	case callBcast:
		return CollBcast
	case callReduce:
		return CollReduce
	case callAllreduce:
		return CollAllreduce
	case callAllgather:
		return CollAllgather
	case callGather:
		return CollGather
	case callScatter:
		return CollScatter
	}
	return 0
}

// errLocalPending is runLocal's return to start on a member that is not
// the last to arrive: the call is in flight.
var errLocalPending = errors.New("collectives: call through process memory in flight")

// stepLocal is step for a call through process memory: it completes the
// schedule once the last member has run the call, or fails it.
func (s *schedule) stepLocal() bool {
	e := s.cl.local
	if s.done || e == nil {
		return false
	}
	if e.state.Load() == nbWriting {
		e.advanceRemote(s.cl.own.hier.g)
	}
	switch e.state.Load() {
	case nbDone:
		s.err = s.cl.doneLocal()
	case nbFailed:
		s.cl.local = nil
		s.err = s.cl.fail(e.err)
	default:
		h := s.cl.own.hier
		g := h.g
		if g.state.Load()&3 != phFailed {
			if s.cl.hpolls++; h.procs == 1 || s.cl.hpolls%straddleEvery != 0 {
				return false
			}
			if err := s.cl.straddled(e); err != nil {
				e.failWith(err)
				e.failRemote(g, err)
			}
			return false
		}
		s.err = s.cl.fail(g.failed())
	}
	s.finish()
	return true
}

// localReady is ready for a call through process memory: runLocal
// fixes the signature and compares it with the other members'.
func (c *Coll) localReady(context.Context, callSig) error { return nil }

// withdrawLocal is abandon's part for a clone waiting in runLocal: a
// call that not every member has joined fails for all of them (no one
// will write into this member's buffers); one whose last member is
// writing is waited for, as the writes are local and short.
func (c *Coll) withdrawLocal() {
	e := c.local
	if e == nil {
		return
	}
	c.local, c.take, c.takeFrom = nil, nil, nil
	err := fmt.Errorf("rank %d of this process abandoned %s #%d: %w", c.rank, c.call, c.seq, ErrCanceled)
	e.failWith(err)
	for e.state.Load() == nbWriting {
		if e.remote.Load() != nil {
			e.failRemote(c.own.hier.g, err) // the processes' part (nbhybrid.go) may never end
			break
		}
		runtime.Gosched()
	}
}

// The collectives' work on every member's buffers (slots by comm rank).

func localBcast(slots []nbSlot, root int) {
	src := slots[root].recv
	for r, s := range slots {
		if r != root {
			memcopy.Copy(s.recv, src)
		}
	}
}

// localReduce folds the members' contributions in rank order into acc
// (x₀ ∘ x₁ ∘ …, the order deterministic mode and non-commutative
// operations require); a member's contribution is its send, or its recv
// in place.
func localReduce[T any](slots []nbSlot, acc []T, op *Op[T]) {
	in := func(s nbSlot) []byte {
		if s.send != nil {
			return s.send
		}
		return s.recv
	}
	memcopy.CopyOf(acc, elems[T](in(slots[0])))
	for _, s := range slots[1:] {
		op.left(acc, elems[T](in(s))[:len(acc)])
	}
}

// localAllgather: member q's block (its send, or block q of its recv in
// place) into block q of every member's recv.
func localAllgather(slots []nbSlot, nb int) {
	for q, sq := range slots {
		blk := sq.send
		if blk == nil {
			blk = sq.recv[q*nb : (q+1)*nb]
		}
		for r, s := range slots {
			if r != q || sq.send != nil {
				memcopy.Copy(s.recv[q*nb:(q+1)*nb], blk)
			}
		}
	}
}

// localAlltoall: block r of member q's send into block q of member r's
// recv (no in-place form here).
func localAlltoall(slots []nbSlot, nb int) {
	for q, sq := range slots {
		for r, s := range slots {
			memcopy.Copy(s.recv[q*nb:(q+1)*nb], sq.send[r*nb:(r+1)*nb])
		}
	}
}

// localGather: member q's send into block q of the root's recv (the
// root's own block in place when its send is nil).
func localGather(slots []nbSlot, nb, root int) {
	out := slots[root].recv
	for q, s := range slots {
		if s.send != nil {
			memcopy.Copy(out[q*nb:(q+1)*nb], s.send)
		}
	}
}

// localScatter: block q of the root's send into member q's recv (the
// root's recv nil in place).
func localScatter(slots []nbSlot, nb, root int) {
	in := slots[root].send
	for q, s := range slots {
		if s.recv != nil {
			memcopy.Copy(s.recv, in[q*nb:(q+1)*nb])
		}
	}
}
