package fabric

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/weft-hpc/weft/internal/settings"
)

// A goroutine that busy-polls a CQ calls into C over and over and, between
// the calls, never goes through the Go scheduler. After 10 ms on the same
// scheduling slice the runtime's monitor thread (sysmon) marks it for
// preemption; the mark cannot act on a goroutine that is inside C, so
// sysmon takes its P away instead, and keeps doing so at every one of its
// ticks (20 µs and up) for as long as the slice goes on: each time a thread
// is woken to run the P, finds nothing and sleeps again, and the poller
// leaves C without its P and must get one back. On a 2-vCPU machine this
// doubled the 8-byte shm ping-pong latency. A poller that yields at least
// once per millisecond starts a new slice each time and is never retaken.
//
// pollYield is that yield, shared by every CQ polling entry point (CQ.Read,
// CQ.ReadSpin, CQ.WaitWord, CQ.ReadSignals, CQ.WaitWordSignals,
// Endpoint.PostAndRead). It counts calls and
// looks at the clock once every pollCheckEvery calls, so the hot path pays
// one atomic add per call.
type pollYield struct {
	calls atomic.Uint32
	last  atomic.Int64 // monoNanos of the last yield
	every int64        // the interval in nanoseconds (WithPollYield); 0: off
	hook  func()       // the yield; nil: runtime.Gosched (tests count yields)
}

// pollCheckEvery is how many polls pass between two looks at the clock. A
// poll spins at most a few hundred microseconds in C (1024 empty reads are
// about 35 µs here), so 64 polls stay well inside the runtime's 10 ms.
const pollCheckEvery = 64

// pollYieldNanos is the process-wide default poll-yield interval, read when
// a domain is opened (defaultDomainConfig); 0 turns yielding off. From
// WEFT_TUNE's pollyield (a Go duration, default 1ms; 0 disables), or
// SetPollYield.
var pollYieldNanos atomic.Int64

func init() {
	t, _ := settings.Tune() // a bad WEFT_TUNE leaves the default; GetInfo reports it
	pollYieldNanos.Store(int64(t.PollYield))
}

// DefaultPollYield is the initial default interval of SetPollYield.
const DefaultPollYield = time.Millisecond

// SetPollYield sets the process-wide default of how often a goroutine that
// keeps polling completion queues (CQ.Read, CQ.ReadSpin, CQ.WaitWord,
// CQ.ReadSignals, CQ.WaitWordSignals, Endpoint.PostAndRead) yields the
// processor with runtime.Gosched, and returns the previous default.
// The yield keeps the Go runtime from taking the processor away from a
// poller that spends nearly all its time inside libfabric, which costs
// thread switches on every later poll (see the package documentation,
// "Polling"). d ≤ 0 turns it off. The default is DefaultPollYield, or the
// pollyield knob of WEFT_TUNE (a Go duration; 0 turns it off). Intervals
// well under the runtime's 10 ms preemption slice work; the cost is one
// Gosched per interval. It applies to domains opened from now on that do
// not set their own (WithPollYield); the CQs of a domain keep the interval
// the domain was opened with.
func SetPollYield(d time.Duration) time.Duration {
	return time.Duration(pollYieldNanos.Swap(int64(max(d, 0))))
}

// monoEpoch anchors monoNanos.
var monoEpoch = time.Now()

// monoNanos is monotonic nanoseconds since monoEpoch.
func monoNanos() int64 { return int64(time.Since(monoEpoch)) }

// tick counts one poll and yields when the interval has passed since the
// last yield of this object's pollers.
func (y *pollYield) tick() {
	if y.calls.Add(1)%pollCheckEvery == 0 {
		y.check()
	}
}

// check is tick's slow path, kept out of line so tick inlines.
//
//go:noinline
func (y *pollYield) check() {
	every := y.every
	if every <= 0 {
		return
	}
	now := monoNanos()
	if now-y.last.Load() < every {
		return
	}
	y.last.Store(now)
	if y.hook != nil {
		y.hook()
		return
	}
	runtime.Gosched()
}
