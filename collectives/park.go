package collectives

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
	"weak"
)

// Parking: in a process group of more handles than Go runs goroutines at
// once (procGroup.fits false), a handle that waits in process memory for
// another one parks its goroutine instead of polling with
// runtime.Gosched, and whoever publishes a word such waits read wakes
// it. Polling hands the P to the goroutine it waits for only by way of
// the scheduler's global queue, where every P competes for it: four
// handles on two Ps took 2.3–2.5 µs a round (every handle arrives, one
// releases the others) that way, against 0.55 with a channel receive
// that the last to arrive sends on (the woken goroutine runs next on the
// sender's P). A select over the wake channel and a context's or a
// timer's took 0.8–1.3 µs, so a parked handle receives from its own
// channel alone, and one watchdog goroutine per process, running while
// any group has a parked handle, wakes every parked handle each
// parkTick: the handle then looks at its context and makes the wait's
// periodic checks, as a polling wait does every pollClock polls. Large
// calls, and the few after one, poll instead (parkMax).

// parking is a process group's parked handles: bit i of words[i/64] is
// set while handle i is parked, or about to be, and wake[i] receives the
// token that unparks it.
type parking struct {
	words []atomic.Uint64
	wake  []chan struct{}
}

// parkMax: calls of this many bytes per rank or more, and the parkCalm
// calls after one, poll.
const parkMax = 16 << 10

// parkCalm: see parkMax.
const parkCalm = 8

// parkPolls is how many polls a wait of a parking group makes before it
// parks: a poll the awaited handle cannot satisfy while this one holds
// the P only delays it.
const parkPolls = 4

// parkChecks: a parked wait looks at its context and makes its periodic
// checks every parkChecks wake-ups (every parkChecks ticks at most).
const parkChecks = 8

// parkTick is how often the watchdog wakes the parked handles.
const parkTick = time.Millisecond

// parkIdle is how many ticks without a parked handle end the watchdog.
const parkIdle = 100

// newParking returns the parking of a group of m handles, known to the
// watchdog.
func newParking(m int) *parking {
	p := &parking{words: make([]atomic.Uint64, (m+63)/64), wake: make([]chan struct{}, m)}
	for i := range p.wake {
		p.wake[i] = make(chan struct{}, 1)
	}
	watchdog.Lock()
	watchdog.groups = append(watchdog.groups, weak.Make(p))
	watchdog.Unlock()
	return p
}

// publish stores v in w for the group: with parking, as a sequentially
// consistent store followed by wakeAll (a waiter announces itself before
// it looks at the word for the last time, so that one of the two sees
// the other), and otherwise with release ordering only (publish).
func (g *procGroup) publish(w *atomic.Uint64, v uint64) {
	if g.park == nil {
		publish(w, v)
		return
	}
	w.Store(v)
	g.park.wakeAll()
}

// publishSlot publishes member me's mark in its slot; with parking it
// wakes the leader, the only handle that waits on the members' slots,
// and where arrival (an arrival for call seq) only once every member
// has arrived: the member that stores its mark last sees every other
// member's mark, and the leader is woken once a call, not once a
// member.
func (g *procGroup) publishSlot(me int, mark uint64, arrival bool) {
	w := &g.slots[me].pub
	if g.park == nil {
		publish(w, mark)
		return
	}
	w.Store(mark)
	if arrival {
		seq := mark >> 32
		for i := 1; i < len(g.slots); i++ {
			if g.slots[i].pub.Load()>>32 != seq {
				return // a member yet to arrive wakes the leader
			}
		}
	}
	g.park.wakeOne(0)
}

// wake wakes the group's parked handles after a change made with a
// sequentially consistent operation (a compare-and-swap, an Add).
func (g *procGroup) wake() {
	if g.park != nil {
		g.park.wakeAll()
	}
}

// wakeAll unparks every handle parked, or about to park, in p, and
// reports whether there was one.
func (p *parking) wakeAll() (any bool) {
	for i := range p.words {
		w := &p.words[i]
		if w.Load() == 0 {
			continue
		}
		v := w.Swap(0)
		any = any || v != 0
		for ; v != 0; v &= v - 1 {
			select {
			case p.wake[i*64+bits.TrailingZeros64(v)] <- struct{}{}:
			default: // a token is waiting already
			}
		}
	}
	return any
}

// wakeOne unparks handle i if it is parked, or about to park.
func (p *parking) wakeOne(i int) {
	w, bit := &p.words[i/64], uint64(1)<<(i%64)
	if w.Load()&bit == 0 || w.And(^bit)&bit == 0 {
		return
	}
	select {
	case p.wake[i] <- struct{}{}:
	default:
	}
}

// sleep parks handle me until a wakeAll, unless ready, asked once the
// handle is announced, reports that the wait is over. A token left by
// a wakeAll that raced with ready makes the next sleep return at once:
// every sleep is a step of a loop that looks at its condition again.
func (p *parking) sleep(me int, ready func() bool) {
	w, bit := &p.words[me/64], uint64(1)<<(me%64)
	w.Or(bit)
	if ready() {
		w.And(^bit)
		return
	}
	if !watchdog.running.Load() {
		startWatchdog()
	}
	<-p.wake[me]
}

// watchdog is the goroutine that wakes parked handles every parkTick:
// the parkings of the groups made (weakly held), and whether it runs.
var watchdog struct {
	sync.Mutex
	groups  []weak.Pointer[parking]
	running atomic.Bool
}

// startWatchdog starts the watchdog unless it runs.
func startWatchdog() {
	watchdog.Lock()
	defer watchdog.Unlock()
	if !watchdog.running.Load() {
		watchdog.running.Store(true)
		go watchParked()
	}
}

// watchParked wakes the parked handles every parkTick and ends after
// parkIdle ticks without one. It declares itself stopped before it
// looks at the handles for the last time, and a handle announces itself
// before it looks at whether the watchdog runs: one of the two sees the
// other, so that no handle parks without a watchdog.
func watchParked() {
	idle := 0
	for {
		time.Sleep(parkTick)
		watchdog.Lock()
		if idle >= parkIdle {
			watchdog.running.Store(false)
		}
		any := false
		live := watchdog.groups[:0]
		for _, wp := range watchdog.groups {
			p := wp.Value()
			if p == nil {
				continue // its group is gone
			}
			live = append(live, wp)
			any = p.wakeAll() || any
		}
		clear(watchdog.groups[len(live):])
		watchdog.groups = live
		if any {
			idle = 0
			watchdog.running.Store(true)
		} else {
			idle++
		}
		stop := !watchdog.running.Load()
		watchdog.Unlock()
		if stop {
			return
		}
	}
}
