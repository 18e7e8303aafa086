package onesided

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/weft-hpc/weft/internal/peerwatch"
	"github.com/weft-hpc/weft/internal/progress"
	"github.com/weft-hpc/weft/internal/settings"
	"github.com/weft-hpc/weft/internal/wait"
)

// The wait policy. Every loop that waits for something another rank (or
// the provider) must do — a signal, the window barrier, a flush, a free
// scratch slot — paces itself with a waiter, in three phases measured in
// time from the start of the wait:
//
//  1. spin: poll as fast as possible for spinFor. A reply that comes
//     within microseconds, as in a ping-pong between ranks with a core
//     each, is seen at once and no scheduler is involved.
//  2. yield: keep polling, but give the processor away between polls,
//     alternately to other goroutines (runtime.Gosched) and to other
//     processes on this core (sched_yield), until the wait has lasted
//     spinFor + yieldFor. When nobody else wants the core a yield returns
//     at once and a poll still comes every microsecond or so (passive
//     targets of manual-progress providers keep serving RMA). A yield
//     that took longer than 20 µs means something else needed the core
//     (ranks outnumber cores, other jobs): the waiter then goes straight
//     to the sleep phase, where it no longer competes with them; after
//     each nap it tries one yield and, while the yield budget lasts, goes
//     back to yielding if that one returned at once.
//  3. sleep: poll between nanosleeps that double from 10 µs up to
//     sleepMax (0 = never sleep, stay in the yield phase). Long idle waits
//     then cost next to no CPU. nanosleep rather than time.Sleep: Go's
//     timers rounded even 10 µs sleeps up to ~1 ms on the development
//     machine, and a sleeping rank stalls every peer whose RMA it must
//     progress on manual-progress providers.
//
// A window picks one of two policies when it is created
// (WEFT_ONESIDED_WAIT=auto, the default): "spin" when the ranks of its
// group on this machine (hostname and boot id, whatever WEFT_NODE_ID says)
// are no more than the cores this process may run on, "yield" otherwise
// (like Open MPI's yield_when_idle on oversubscribed nodes, where spinning
// only delays the rank being waited for).
//
//	policy  spin phase  yield phase  sleeps up to
//	spin    50 µs       100 ms       200 µs
//	yield   2 µs        1 ms         200 µs
//
// WEFT_TUNE's osspinfor, osyieldfor and osnapmax (durations) override the
// phases of either policy; osspin (a count, "1e9" accepted) makes the spin phase a
// number of polls instead of a time, as it always meant (1e9 = spin for
// ever; on the libfabric path one "poll" of a signal wait is one
// CQ.WaitWord call of up to 32 checks).
//
// Context cancellation is checked every 64 polls while spinning and at
// every poll after that; a waiter with a limit fails with ErrTimeout once
// the wait has lasted that long.
//
// A spin phase longer than spinGosched (osspin, a long osspinfor) calls runtime.Gosched at least that often: a
// goroutine that spins in cgo calls for more than 10 ms without being
// rescheduled has its P retaken by the Go runtime's sysmon over and over
// (every 20–200 µs), each time handing the thread off, which doubled
// ping-pong latencies on a 2-CPU machine.
type waitPolicy = wait.Policy

var (
	spinPolicy = waitPolicy{Name: "spin", SpinPolls: -1, SpinFor: 50 * time.Microsecond, YieldFor: 100 * time.Millisecond,
		NapMax: 200 * time.Microsecond, OSYieldEvery: 2, Contended: contended, GoschedEvery: spinGosched}
	yieldPolicy = waitPolicy{Name: "yield", SpinPolls: -1, SpinFor: 2 * time.Microsecond, YieldFor: time.Millisecond,
		NapMax: 200 * time.Microsecond, OSYieldEvery: 2, Contended: contended, GoschedEvery: spinGosched}
)

// tune is WEFT_TUNE, parsed once (a bad value leaves the defaults here and
// fails window creation through resolveOptions).
var tune, _ = settings.Tune()

// withTune applies WEFT_TUNE's osspin, osspinfor, osyieldfor and osnapmax.
func withTune(p waitPolicy) waitPolicy {
	if tune.OSSpin != settings.Auto {
		p.SpinPolls = int(min(tune.OSSpin, math.MaxInt32))
	}
	if tune.OSSpinFor != settings.Auto {
		p.SpinFor = tune.OSSpinFor
	}
	if tune.OSYieldFor != settings.Auto {
		p.YieldFor = tune.OSYieldFor
	}
	if tune.OSNapMax != settings.Auto {
		p.NapMax = tune.OSNapMax
	}
	return p
}

// choosePolicy returns the wait policy name ("auto", "spin" or "yield";
// WEFT_ONESIDED_WAIT, WithWaitPolicy) for a window with localRanks ranks on
// this machine.
func choosePolicy(name string, localRanks int) (waitPolicy, error) {
	switch name {
	case "", "auto":
		if wait.Crowded(localRanks) {
			return withTune(yieldPolicy), nil
		}
		return withTune(spinPolicy), nil
	case "spin":
		return withTune(spinPolicy), nil
	case "yield":
		return withTune(yieldPolicy), nil
	default:
		return waitPolicy{}, fmt.Errorf("wait policy %q: want auto, spin or yield: %w", name, ErrInvalid)
	}
}

// defaultPolicy paces waits outside a window's own (none today; kept so a
// zero waiter is usable).
var defaultPolicy = withTune(spinPolicy)

// contended: a yield that took longer than this gave the processor to
// someone else (another rank, another job), so the waiter goes to sleep.
const contended = 20 * time.Microsecond

// spinGosched bounds the time a spinning waiter goes without
// runtime.Gosched.
const spinGosched = 500 * time.Microsecond

// waiter paces one polling loop with the window's wait.Policy (the zero
// value uses defaultPolicy) and adds the checks of a blocked window wait.
// Call pause after each unsuccessful poll.
type waiter struct {
	wt    wait.Waiter
	limit time.Duration // > 0: fail with ErrTimeout after this long
	// peers, when not nil, are the window's ranks in this process: the
	// wait fails once one of them has left without synchronising.
	peers *procPeers
	// watch, when not nil, tells whether a rank's process has exited
	// (internal/peerwatch); target is the rank the wait depends on, or -1
	// for every rank of the window. It is asked every peerwatch.Interval
	// once the spin phase is over.
	watch     *peerwatch.Watch
	target    int
	nextWatch time.Duration // elapsed time of the next check; 0: not scheduled
	gone      error         // exited rank seen: reported at the next check
	// stop, when not nil, ends the wait with ErrClosed once set (Free
	// of the window from another goroutine).
	stop *atomic.Bool
}

// newWaiter returns a waiter with w's policy that fails after limit (0:
// never) and when a rank of w in this process has gone (procpeers.go).
func (w *Window) newWaiter(limit time.Duration) waiter {
	return waiter{wt: wait.Waiter{P: &w.wait}, limit: limit, peers: w.procPeers, watch: w.watch, target: -1}
}

// spinning reports whether the waiter is still in its spin phase (callers
// that poll inside one cgo call may then poll many times per pause).
func (w *waiter) spinning() bool { return w.wt.Spinning() }

func (w *waiter) check(ctx context.Context, elapsed time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if w.limit > 0 && elapsed > w.limit {
		return fmt.Errorf("onesided: operation %w after %v (WEFT_ONESIDED_TIMEOUT, WithTimeout)", ErrTimeout, w.limit)
	}
	if w.peers != nil {
		if err := w.peers.goneErr(); err != nil {
			return err
		}
	}
	if w.gone != nil {
		return w.gone
	}
	if w.watch != nil && !w.wt.Spinning() {
		switch {
		case w.nextWatch == 0:
			w.nextWatch = elapsed + peerwatch.Interval
		case elapsed >= w.nextWatch:
			w.nextWatch = elapsed + peerwatch.Interval
			var err error
			if w.target >= 0 {
				err = w.watch.Check(w.target)
			} else {
				err = w.watch.CheckAll()
			}
			// Report it at the next pause: the caller polls once more
			// first, so what the rank delivered before it went counts.
			w.gone = err
		}
	}
	return nil
}

// pause is called after each unsuccessful poll; it returns ctx's error,
// ErrTimeout or ErrPeerGone when the wait must stop. Past the spin phase
// it also drives the progress of this process's other endpoints and
// windows (internal/progress), which the rank being waited for may need.
func (w *waiter) pause(ctx context.Context) error {
	if w.stop != nil && w.stop.Load() {
		return fmt.Errorf("window freed while waiting: %w", ErrClosed)
	}
	if w.wt.P == nil {
		w.wt.P = &defaultPolicy
	}
	if !w.wt.Pause() {
		return nil
	}
	if !w.wt.Spinning() {
		progress.PollAll()
	}
	return w.check(ctx, w.wt.Elapsed())
}
