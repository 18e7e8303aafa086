// Package wait is weft's one wait policy: how a loop that polls for
// something another process must do paces itself — spin, then yield,
// then nap — and when it is past its spin budget (the moment a blocked
// call starts checking for exited peers and polling the other layers'
// progress, internal/progress).
//
// A Policy describes the phases. Two drivers apply it:
//
//   - Waiter, for loops that pause after every unsuccessful poll and
//     measure phases in time (onesided's waits): spin for SpinFor (or
//     SpinPolls polls), yield between polls until SpinFor+YieldFor, then
//     nap between polls, the naps doubling up to NapMax. A yield that took
//     longer than Contended shows that the core is contended and moves
//     the waiter to napping at once.
//   - Policy.Idle, for loops that keep their own poll counter and pause
//     only every YieldEvery-th poll (endpoint's waits, whose hot path is a
//     counter increment): nothing for the first SpinPolls polls, then a
//     yield each time, every OSYieldEvery-th of them to other processes.
//
// Every clock read, yield and nap goes through a Sys, which tests replace
// to check the phases without sleeping.
package wait

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Policy is a wait's spin, yield and nap phases.
type Policy struct {
	Name string
	// SpinPolls ≥ 0 makes the spin phase this many polls; < 0 makes it
	// SpinFor long.
	SpinPolls int
	SpinFor   time.Duration
	// YieldFor is how long the yield phase lasts; a wait then naps, unless
	// NapMax is 0 (yield for ever).
	YieldFor time.Duration
	// NapMax caps the doubling naps (from FirstNap) of the nap phase.
	NapMax time.Duration
	// YieldEvery (Idle only) is the poll period of the pauses.
	YieldEvery int
	// YieldPolls (Idle only), when above SpinPolls, keeps the pauses of
	// the polls between SpinPolls and YieldPolls from yielding: the loop
	// is past its spin budget (it does its side work, Spun is true) but
	// still keeps the core, since a yield costs more than a wait of that
	// length (a Gosched wakes idle Ps, a sched_yield enters the kernel).
	YieldPolls int
	// OSYieldEvery: every OSYieldEvery-th yield gives the core to other
	// processes (sched_yield) rather than to other goroutines; 0: never.
	OSYieldEvery int
	// Contended (Waiter only): a yield that took longer than this moves
	// the waiter to the nap phase; 0: never.
	Contended time.Duration
	// GoschedEvery (Waiter only) bounds the time a spinning waiter goes
	// without runtime.Gosched (a goroutine that spins inside cgo calls for
	// 10 ms has its P retaken by the runtime over and over); 0: never.
	GoschedEvery time.Duration
}

// FirstNap is the first nap of the nap phase.
const FirstNap = 10 * time.Microsecond

// Sys is what a wait does to the world: read a monotonic clock, yield to
// goroutines, yield to processes, nap. The zero Sys is the real one.
type Sys struct {
	Now     func() time.Duration // monotonic time
	Gosched func()
	OSYield func()
	Nap     func(time.Duration)
}

var epoch = time.Now()

func (s *Sys) now() time.Duration {
	if s != nil && s.Now != nil {
		return s.Now()
	}
	return time.Since(epoch)
}

func (s *Sys) gosched() {
	if s != nil && s.Gosched != nil {
		s.Gosched()
		return
	}
	runtime.Gosched()
}

func (s *Sys) osYield() {
	if s != nil && s.OSYield != nil {
		s.OSYield()
		return
	}
	syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
}

// nap sleeps with nanosleep, not time.Sleep: Go's timers round short
// sleeps up to about a millisecond on some kernels, and a napping rank of
// a manual-progress provider stalls every peer that needs its progress.
func (s *Sys) nap(d time.Duration) {
	if s != nil && s.Nap != nil {
		s.Nap(d)
		return
	}
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil)
}

// Spun reports whether a counting loop at poll spins is past the spin
// budget.
func (p *Policy) Spun(spins int) bool { return spins >= p.SpinPolls }

// Idle is the pause of a counting loop at poll spins (counted from 1),
// called every YieldEvery-th poll: nothing during the spin phase (and up
// to YieldPolls), then a yield to other goroutines, or every
// OSYieldEvery-th time to other processes. It reports whether it yielded.
func (p *Policy) Idle(s *Sys, spins int) bool {
	if spins < p.SpinPolls || spins < p.YieldPolls {
		return false
	}
	if p.OSYieldEvery > 0 && spins%(max(p.YieldEvery, 1)*p.OSYieldEvery) == 0 {
		s.osYield()
		return true
	}
	s.gosched()
	return true
}

// SoloGosched is how often Solo yields to the process's goroutines.
const SoloGosched = 64

// Solo is the pause, at poll spins, of a counting loop on a crowded node
// whose wait needs other processes only (its process holds no other
// busy endpoint, or rank of the communicator): a yield to other
// processes on every poll, and to this process's goroutines every
// SoloGosched-th. runtime.Gosched also wakes an idle P of the Go runtime,
// whose thread then spins looking for work on another core and takes it
// from the ranks there: with 4 processes on 2 cores, yielding to
// goroutines every other poll made a collectives Barrier 14–20 µs
// against 5.3–8.5, and a 2-sender message rate 0.8–4.2 M msg/s against
// 5.2–9.3 M (docs/perf/collectives.md, docs/perf/endpoint.md).
func Solo(s *Sys, spins int) {
	if spins%SoloGosched == 0 {
		s.gosched()
		return
	}
	s.osYield()
}

// Phase is where a Waiter is.
type Phase uint8

// The phases of a wait.
const (
	Spin Phase = iota
	Yield
	Nap
)

// Waiter paces one polling loop with a Policy. Call Pause after each
// unsuccessful poll; the zero Waiter is not usable (set P).
type Waiter struct {
	P     *Policy
	Sys   *Sys // nil: the real one
	n     int
	phase Phase
	start time.Duration
	nap   time.Duration
	gosch time.Duration
}

// Polls is the number of Pause calls so far.
func (w *Waiter) Polls() int { return w.n }

// Phase is the waiter's current phase.
func (w *Waiter) Phase() Phase { return w.phase }

// Spinning reports whether the waiter is still in its spin phase.
func (w *Waiter) Spinning() bool { return w.phase == Spin }

// Elapsed is the time since the first Pause.
func (w *Waiter) Elapsed() time.Duration {
	if w.n == 0 {
		return 0
	}
	return w.Sys.now() - w.start
}

// Pause paces the loop after an unsuccessful poll. It reports whether the
// caller should run its slow checks now (a context, a deadline, exited
// peers, other layers' progress): every 64th poll while spinning, every
// poll after that.
func (w *Waiter) Pause() bool {
	w.n++
	if w.n == 1 {
		w.start = w.Sys.now()
	}
	p := w.P
	switch w.phase {
	case Spin:
		if w.n&15 != 0 {
			return false
		}
		el := w.Sys.now() - w.start
		if p.GoschedEvery > 0 && el-w.gosch >= p.GoschedEvery {
			w.Sys.gosched()
			w.gosch = el
		}
		if p.SpinPolls >= 0 && w.n < p.SpinPolls || p.SpinPolls < 0 && el < p.SpinFor {
			return w.n&63 == 0
		}
		w.phase = Yield
		return true
	case Yield:
		if p.NapMax > 0 && w.Sys.now()-w.start >= p.SpinFor+p.YieldFor {
			w.phase, w.nap = Nap, FirstNap
			return true
		}
		t0 := w.Sys.now()
		if p.OSYieldEvery > 0 && w.n%p.OSYieldEvery == p.OSYieldEvery-1 {
			w.Sys.osYield()
		} else {
			w.Sys.gosched()
		}
		if p.NapMax > 0 && p.Contended > 0 && w.Sys.now()-t0 > p.Contended {
			// Something else ran meanwhile: the core is contended, and
			// polling only delays whoever we are waiting for.
			w.phase, w.nap = Nap, FirstNap
		}
		return true
	default:
		w.Sys.nap(min(w.nap, p.NapMax))
		w.nap = min(2*w.nap, p.NapMax)
		if w.Sys.now()-w.start < p.SpinFor+p.YieldFor {
			// Still inside the yield budget: if the core has become
			// free (a yield returns at once), poll again.
			t0 := w.Sys.now()
			w.Sys.osYield()
			if p.Contended <= 0 || w.Sys.now()-t0 <= p.Contended {
				w.phase = Yield
			}
		}
		return true
	}
}

// Crowded reports whether n busy ranks on this machine outnumber the CPUs
// they share (NodeCPUs): their waits must then give the core away at
// once rather than spin.
func Crowded(n int) bool { return n > NodeCPUs() }

// NodeCPUs is the number of CPUs the ranks on this machine share: what
// the launcher says (WEFT_NODE_CPUS, which fabrun's local launcher sets,
// since it may bind each rank to a share of them; Slurm's
// SLURM_CPUS_ON_NODE), else the CPUs this process may use.
func NodeCPUs() int { return nodeCPUs() }

var nodeCPUs = sync.OnceValue(func() int { return nodeCPUsFrom(os.Getenv, runtime.NumCPU()) })

// nodeCPUsFrom is NodeCPUs for an environment and the CPUs this process
// may use.
func nodeCPUsFrom(getenv func(string) string, mine int) int {
	for _, name := range []string{"WEFT_NODE_CPUS", "SLURM_CPUS_ON_NODE"} {
		if n, err := strconv.Atoi(getenv(name)); err == nil && n > 0 {
			return max(n, mine)
		}
	}
	return mine
}
