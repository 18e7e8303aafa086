package collectives

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"sync"
	"time"

	"github.com/weft-hpc/weft/endpoint"
	"github.com/weft-hpc/weft/internal/progress"
)

// A nonblocking collective is a schedule: the rounds of its algorithm
// (the receives and sends one step posts, then the local computation on
// what arrived) taken one at a time by whoever drives the handle. There
// is one implementation of each algorithm: the blocking form runs it and
// polls each round to completion in place; the nonblocking form runs the
// same code as a coroutine (iter.Pull) on a clone of the handle, whose
// wait hands control back at every round instead of polling. A driver —
// Request.Test, Request.Wait, any other collective on the handle, or the
// progress goroutine — tests the round's requests without blocking
// (endpoint.TestAll) and, once they have completed, resumes the coroutine,
// which checks what arrived, computes and posts the next round.

// maxAhead bounds how many calls a handle may start after its oldest
// outstanding nonblocking collective: a call past it first completes
// that one. Message tags carry a call's number modulo 128, and a rank
// tells a peer that is ahead from a mismatch by their distance (foreign),
// so the calls in flight between any two ranks must stay well inside
// half of that.
const maxAhead = 48

// errStopped ends the algorithm of a schedule that was abandoned.
var errStopped = errors.New("collectives: schedule stopped")

// schedule is a nonblocking collective in flight.
type schedule struct {
	h         *Coll     // the handle
	cl        *Coll     // the clone the algorithm runs on
	w         *nbWorker // the worker whose clone (and, unless direct, coroutine) runs it; nil once done
	req       Request   // the caller's request (one allocation with the schedule)
	roundErr  error     // progress failed while testing the round
	direct    bool      // ran without a coroutine: a call through process memory (nblocal.go)
	done      bool
	err       error
	tests     int           // Test calls that found it incomplete
	t0        time.Time     // the first of them to look at the clock
	nextCheck time.Duration // since t0: when Test next looks for a mismatch
}

// nbWorker runs the nonblocking calls of a handle, one call after the
// other: it holds the clone a call runs on, and a coroutine (iter.Pull)
// that runs the call's algorithm on it. A handle keeps the idle ones for
// its next calls, so that a call reuses a coroutine whose stack has
// grown to the algorithm's depth, and a clone with its scratch buffers
// and request slices. A coroutine and a clone made for each call cost
// most of an 8-byte Iallreduce's 3.5 µs between two handles
// (docs/perf/collectives.md).
type nbWorker struct {
	cl    *Coll                // the clone, reset for each call
	body  func(cl *Coll) error // the call's algorithm; nil once it returned
	err   error                // what body returned
	next  func() (bool, bool)  // resumes it; true once body returned
	stop  func()
	yield func(bool) bool
}

func newWorker() *nbWorker {
	w := &nbWorker{cl: &Coll{}}
	w.next, w.stop = iter.Pull(func(yield func(bool) bool) {
		w.yield = yield
		for {
			w.err = w.body(w.cl)
			w.body = nil
			if !yield(true) {
				return
			}
		}
	})
	return w
}

// worker returns an idle worker of handle c, its clone set for a call
// on c (c.mu held).
func (c *Coll) worker() *nbWorker {
	var w *nbWorker
	if n := len(c.workers); n > 0 {
		w = c.workers[n-1]
		c.workers[n-1] = nil
		c.workers = c.workers[:n-1]
	} else {
		w = newWorker()
	}
	cl := w.cl
	*cl = Coll{parent: c.parent, comm: c.comm, rank: c.rank, size: c.size, cfg: c.cfg, crowded: c.crowded, solo: c.solo, own: c,
		hier: c.nodeNB(), reqs: cl.reqs[:0], peer: cl.peer[:0], want: cl.want[:0], scratch: cl.scratch}
	return w
}

// round is the clone's wait: it hands control back to the driver, which
// resumes the algorithm once every request of the round has completed.
func (s *schedule) round() error {
	if s.direct {
		// A call started through process memory (direct) has no rounds;
		// one that reached a message round would be a bug, not a hang.
		return fmt.Errorf("collectives: %s: a message round in a call through process memory: %w", s.cl.call, ErrInvalid)
	}
	if !s.w.yield(false) {
		return errStopped
	}
	if err := s.roundErr; err != nil {
		s.roundErr = nil
		return err
	}
	return s.cl.finishRound()
}

// step advances s as far as it goes without waiting: every round whose
// requests have completed is finished and the next one posted. The
// handle's mu is held.
func (s *schedule) step() bool {
	moved := false
	if s.direct {
		return s.stepLocal()
	}
	for !s.done {
		if f := s.cl.cond; f != nil && !f() {
			return moved
		}
		if reqs := s.cl.reqs; len(reqs) > 0 {
			ok, err := endpoint.TestAll(reqs...)
			if !ok {
				if err == nil {
					return moved
				}
				s.roundErr = err
			}
		}
		fin, more := s.w.next()
		if fin || !more {
			s.err = s.w.err
			s.finish()
			return true
		}
		if s.cl.stalled {
			return moved // still at the same wait (nbnode.go)
		}
		moved = true
	}
	return moved
}

// finish marks s done. Its worker goes back to the handle if the call
// succeeded (a failed call's clone is kept for its error messages, and
// the worker ends); the handle's mu is held. Nothing reads the clone of
// a completed call: the handle drops it from its list before it lets
// go of mu.
func (s *schedule) finish() {
	s.done = true
	w := s.w
	if w == nil {
		return
	}
	s.w = nil
	if w.body == nil && s.err == nil && s.cl.ended == nil {
		w.err = nil
		s.h.workers = append(s.h.workers, w)
		return
	}
	w.stop()
	s.cl.scratch = [numScratch][]uint64{}
}

// end ends s with err (wrapped by the clone's fail: receives cancelled,
// the other ranks told, the handle broken) and the handle's other
// outstanding collectives with it. The handle's mu is held.
func (h *Coll) end(s *schedule, err error) error {
	if !s.done {
		err = s.cl.fail(err)
		s.cl.ended = err
		s.finish()
		s.err = err
	}
	h.killLocked()
	return s.err
}

// killLocked ends every outstanding collective of a broken handle: their
// receives are cancelled and their algorithms stopped. The failure that
// broke the handle already told the other ranks. The handle's mu is held.
func (h *Coll) killLocked() {
	if h.broken == nil {
		h.compact()
		return
	}
	for _, s := range h.ops {
		if s.done {
			continue
		}
		cl := s.cl
		cl.ended = fmt.Errorf("collectives: %s (call %d, rank %d of %d): an earlier collective on this handle failed: %w",
			cl.call, cl.seq, cl.rank, cl.size, h.broken)
		cl.abandon()
		s.finish()
		s.err = cl.ended
	}
	h.compact()
}

// compact drops the completed schedules from the handle's list.
func (h *Coll) compact() {
	k := 0
	for _, s := range h.ops {
		if !s.done {
			h.ops[k] = s
			k++
		}
	}
	clear(h.ops[k:])
	h.ops = h.ops[:k]
	h.nlive.Store(int32(k))
}

// advanceLocked steps every outstanding collective of the handle, in
// start order, and reports whether any moved. The handle's mu is held.
func (h *Coll) advanceLocked() bool {
	moved := false
	for _, s := range h.ops {
		if !s.done && s.step() {
			moved = true
		}
		if h.broken != nil {
			break
		}
	}
	h.killLocked()
	return moved
}

// tryAdvance steps the handle's outstanding collectives unless another
// goroutine (the progress goroutine) is doing so.
func (h *Coll) tryAdvance() {
	if h.mu.TryLock() {
		h.advanceLocked()
		h.mu.Unlock()
	}
}

// setBroken records the failure that left the handle's communicator in
// an unknown state; the outstanding nonblocking collectives end with it.
func (c *Coll) setBroken(err error) {
	h := c.handle()
	if c.own != nil { // a clone: h.mu is held
		h.broken = err
		return
	}
	h.mu.Lock()
	h.broken = err
	h.killLocked()
	h.mu.Unlock()
}

// completeOld completes the handle's oldest outstanding collectives while
// they are maxAhead calls or more behind the newest call (a blocking one
// that has just been numbered, or a nonblocking one about to be).
func (h *Coll) completeOld(ctx context.Context) error {
	for {
		h.mu.Lock()
		var old *schedule
		if len(h.ops) > 0 && h.seq+1-h.ops[0].cl.seq > maxAhead {
			old = h.ops[0]
		}
		h.mu.Unlock()
		if old == nil {
			return nil
		}
		if err := (&Request{s: old}).Wait(ctx); err != nil {
			return fmt.Errorf("complete nonblocking %s #%d, %d calls back: %w", old.cl.call, old.cl.seq, maxAhead, err)
		}
	}
}

// start begins a nonblocking collective: body is the blocking form,
// which runs on a clone of the handle up to its first round. An error
// found before that (a bad argument, a broken handle) is returned at
// once, as the blocking form returns it.
func (c *Coll) start(id callID, body func(cl *Coll) error) (*Request, error) {
	return c.startNB(id, false, body)
}

// startNB is start for a call that combines through process memory and
// then among the processes' leaders where the communicator spans several
// processes, if hybridOK (nbhybrid.go: a Barrier, a Bcast, an Allreduce
// of a commutative operation outside deterministic mode).
func (c *Coll) startNB(id callID, hybridOK bool, body func(cl *Coll) error) (*Request, error) {
	if c == nil || c.comm == nil || c.own != nil {
		return nil, fmt.Errorf("collectives: I%s on a nil handle: %w", lowerFirst(id.String()), ErrInvalid)
	}
	if c.nlive.Load() > 0 {
		if err := c.completeOld(context.Background()); err != nil {
			return nil, fmt.Errorf("collectives: I%s: %w", lowerFirst(id.String()), err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.worker()
	cl := w.cl
	s := &schedule{h: c, cl: cl, w: w}
	cl.nb, cl.hybridOK = s, hybridOK
	if k := localColl(id); k != 0 && cl.localNB(k) {
		// Through process memory: the body registers (or, last, runs the
		// whole call) and returns; no rounds, so no coroutine.
		s.direct = true
		if err := body(cl); err != errLocalPending {
			s.err = err
			s.finish()
		}
	} else {
		w.body = body
	}
	c.ops = append(c.ops, s)
	c.nlive.Store(int32(len(c.ops)))
	s.step()
	if len(c.ops) > 1 {
		c.advanceLocked() // the others, while the handle is driven
	} else {
		c.killLocked() // (drops s if it is done)
	}
	if s.done && s.err != nil {
		return nil, s.err
	}
	if !s.done && c.cfg.progress {
		watch(c)
	}
	s.req.s = s
	return &s.req, nil
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]|0x20) + s[1:]
}

// Request is a nonblocking collective in flight, returned by Ibarrier,
// Iallreduce and the other I-forms. It belongs to the handle that
// started it and is completed with Wait, or polled with Test, by the
// goroutine that drives the handle. Its buffers must not be touched until
// it has completed.
//
// A collective advances whenever its handle is driven: Test and Wait of
// any of the handle's requests, a later collective on the handle
// (blocking or not), and, with WithProgress, the process's progress
// goroutine. Several may be outstanding on one handle and completed in
// any order; every rank starts them in the same order.
type Request struct{ s *schedule }

// Done reports, without driving anything, whether r has completed (a
// nil request: true).
func (r *Request) Done() bool {
	if r == nil || r.s == nil {
		return true
	}
	r.s.h.mu.Lock()
	defer r.s.h.mu.Unlock()
	return r.s.done
}

// Test drives the handle's outstanding collectives once, without
// waiting, and reports whether r has completed, and with what error.
// From time to time (after a millisecond of polling, then at doubling
// intervals) it also looks for a mismatch or an abort notice from another
// rank, as Wait does; only Wait notices a rank whose process exited.
func (r *Request) Test() (bool, error) {
	if r == nil || r.s == nil {
		return false, fmt.Errorf("collectives: test of a nil request: %w", ErrInvalid)
	}
	s := r.s
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if !s.done {
		h.advanceLocked()
	}
	if s.done {
		return true, s.err
	}
	if s.tests++; s.tests%pollClock == 0 {
		if s.t0.IsZero() {
			s.t0 = time.Now()
		} else if el := time.Since(s.t0); el >= max(s.nextCheck, firstCheck) {
			s.nextCheck = el + min(el, maxCheck)
			if err := s.cl.check(); err != nil {
				return true, h.end(s, err)
			}
		}
	}
	return false, nil
}

// Wait drives the handle's outstanding collectives until r has
// completed and returns its error. It looks for mismatches, abort notices
// and exited ranks as a blocking collective does. When ctx ends first the
// collective is abandoned, as a blocking one would be: the other ranks
// are told, the handle becomes unusable, and the error wraps ctx.Err().
// Waiting again on a completed request returns the same result.
func (r *Request) Wait(ctx context.Context) error {
	if r == nil || r.s == nil {
		return fmt.Errorf("collectives: wait on a nil request: %w", ErrInvalid)
	}
	s := r.s
	h := s.h
	if p := h.prof; p != nil {
		defer func(call callID, start time.Time) { p.waitNS[call].Add(uint64(time.Since(start))) }(s.cl.call, time.Now())
	}
	done := ctx.Done()
	var t0 time.Time
	next, peerCheck := firstCheck, peerCheckAfter
	for spins := 1; ; spins++ {
		h.mu.Lock()
		if !s.done {
			h.advanceLocked()
		}
		fin := s.done
		h.mu.Unlock()
		if fin {
			return s.err
		}
		if spins%pollClock == 0 {
			var err error
			if done != nil {
				select {
				case <-done:
					err = fmt.Errorf("waiting for %s: %w", s.cl.waitingFor(), ctx.Err())
				default:
				}
			}
			if err == nil {
				if t0.IsZero() {
					t0 = time.Now()
				} else if el := time.Since(t0); el >= next {
					h.mu.Lock()
					if !s.done {
						err = s.cl.check()
						if err == nil && el >= peerCheck {
							err = s.cl.peerGone()
							if e := s.cl.local; err == nil && e != nil {
								err = e.remoteGone(s.cl.own.hier.g)
							}
							peerCheck = el + peerCheckAfter
						}
					}
					h.mu.Unlock()
					next = el + min(el, maxCheck)
				}
			}
			if err != nil {
				h.mu.Lock()
				err = h.end(s, err)
				h.mu.Unlock()
				return err
			}
		}
		s.cl.pause(spins)
	}
}

// WaitAll waits for every request in turn and returns the first error
// among them (every request is still waited for).
func WaitAll(ctx context.Context, reqs ...*Request) error {
	var first error
	for _, r := range reqs {
		if err := r.Wait(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// The progress goroutine: one per process, started by the first
// nonblocking collective of a handle made WithProgress, it drives the
// outstanding collectives of every such handle so that they advance while
// the handles' goroutines compute. It sleeps on a channel while there is
// none; while there are, it polls them, yielding the processor between
// polls and backing off to short sleeps (up to progressNap) while none
// moves.
var driver struct {
	mu      sync.Mutex
	hs      []*Coll
	wake    chan struct{}
	started bool
}

const (
	progressSpin = 32                    // idle polls that only yield to other goroutines
	progressNap  = 50 * time.Microsecond // longest sleep between idle polls
)

// watch hands h to the progress goroutine (h.mu held).
func watch(h *Coll) {
	driver.mu.Lock()
	defer driver.mu.Unlock()
	for _, o := range driver.hs {
		if o == h {
			return
		}
	}
	driver.hs = append(driver.hs, h)
	if !driver.started {
		driver.started = true
		driver.wake = make(chan struct{}, 1)
		go drive()
	}
	select {
	case driver.wake <- struct{}{}:
	default:
	}
}

// unwatch takes h from the progress goroutine.
func unwatch(h *Coll) {
	driver.mu.Lock()
	defer driver.mu.Unlock()
	for i, o := range driver.hs {
		if o == h {
			driver.hs = append(driver.hs[:i], driver.hs[i+1:]...)
			return
		}
	}
}

func drive() {
	var hs []*Coll
	idle := 0
	for {
		driver.mu.Lock()
		hs = append(hs[:0], driver.hs...)
		wake := driver.wake
		driver.mu.Unlock()
		if len(hs) == 0 {
			<-wake
			idle = 0
			continue
		}
		moved := false
		for _, h := range hs {
			if !h.mu.TryLock() {
				continue
			}
			if h.advanceLocked() {
				moved = true
			}
			if len(h.ops) == 0 {
				unwatch(h)
			}
			h.mu.Unlock()
		}
		if moved {
			idle = 0
		} else {
			idle++
		}
		switch {
		case idle < progressSpin:
			runtime.Gosched()
		case idle < progressSpin+8:
			progress.PollAll()
			time.Sleep(time.Microsecond << (idle - progressSpin))
		default:
			progress.PollAll()
			time.Sleep(progressNap)
		}
	}
}
