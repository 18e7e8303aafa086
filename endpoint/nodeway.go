package endpoint

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// A large message to a peer in another process of the node goes one of
// two ways: the pipelined copy (nodecopy.go: the sender copies fragments
// into the pair's copy area while the receiver copies the earlier ones
// out) or the single copy (the receiver reads the sender's buffer with
// process_vm_readv). Which is faster depends on the machine, not on the
// message: on a host whose two cores share a cache the pipelined copy
// moved 1 MiB in 36–41 µs against 80–84 for the single copy, on one
// where they did not 178 µs against 84, and on another host, whose
// non-temporal stores run at half the speed of plain ones and whose
// process_vm_readv is fast, 129 µs against 63 at every placement
// (docs/perf/endpoint.md). So each link learns it from its own sends.
const (
	wayPipe   = 0 // the pipelined copy
	waySingle = 1 // the receiver's single copy
)

// wayClasses size classes of the chooser: class c holds the messages of
// 2^(15+c) up to 2^(16+c) bytes, class 0 everything below 64 KiB, class 15
// up to nodeCopyMax (1 GiB).
const wayClasses = 16

// wayProbeEvery: a send in one of every wayProbeEvery of a size class
// goes the way that is not the faster, so that a change of the
// host's placement of the cores is seen (it lasts minutes): where the
// ways differ by 2× that costs 1.5% of the class's time.
const wayProbeEvery = 64

// wayChooser is one link's estimate, per size class, of the time per byte
// of each way (0: not measured yet), from the sends themselves: a send is
// timed from its start until the receiver has the whole message (the FIN
// of a single copy, the receiver freeing the slot of a pipelined copy's
// last fragment), either seen while the sender drives its endpoint. Only the endpoint's goroutine touches it (under its guard).
type wayChooser struct {
	est   [2][wayClasses]float32 // ns per byte
	seen  [2][wayClasses]uint8   // samples of each way, counted up to 3
	sends [wayClasses]uint32
	// a pipelined send being timed: start, bytes, slot of its last
	// fragment (n 0: none)
	pipeT0   time.Time
	pipeN    int
	pipeSlot int
}

// fixedWay is the way WEFT_TUNE's nodeway sets, if it sets one.
func fixedWay() (int, bool) {
	switch tune.NodeWay {
	case "pipe":
		return wayPipe, true
	case "single":
		return waySingle, true
	}
	return 0, false
}

// wayClass is the size class of an n-byte message.
func wayClass(n int) int {
	return min(max(bits.Len(uint(n))-16, 0), wayClasses-1)
}

// pick returns the way of a send of n bytes, which is timed:
// while a way of its class has fewer than two samples, the one with fewer
// (the first sample of each, taken cold, is replaced by the second);
// then the faster, but the other in one send of every wayProbeEvery.
func (w *wayChooser) pick(n int) int {
	if way, ok := fixedWay(); ok {
		return way
	}
	c := wayClass(n)
	w.sends[c]++
	if sp, ss := w.seen[wayPipe][c], w.seen[waySingle][c]; sp < 2 || ss < 2 {
		if ss < sp {
			return waySingle
		}
		return wayPipe
	}
	p, s := w.est[wayPipe][c], w.est[waySingle][c]
	best := wayPipe
	if s < p {
		best = waySingle
	}
	if w.sends[c]%wayProbeEvery == 0 {
		return 1 - best
	}
	return best
}

// learn folds in a send of n bytes by way that took d. A faster sample
// moves the estimate halfway down, a slower one an eighth of the way up:
// a send that waited for a late receiver is slow for reasons of its own,
// and the estimates compare the ways, not the receivers. A way that is
// chosen on a sample too fast is measured again at its next send and
// climbs back within a few.
func (w *wayChooser) learn(way, n int, d time.Duration) {
	if n <= 0 || d <= 0 {
		return
	}
	s := float32(d) / float32(n)
	c := wayClass(n)
	e := &w.est[way][c]
	seen := &w.seen[way][c]
	if *seen < 3 {
		*seen++
	}
	switch {
	case *seen <= 2:
		*e = s // the first sample, or the second replacing the cold first
	case s < *e:
		*e += (s - *e) / 2
	default:
		*e += (s - *e) / 8
	}
}

// faster returns the faster way for class c, and false while either is
// measured fewer than twice.
func (w *wayChooser) faster(c int) (int, bool) {
	if w.seen[wayPipe][c] < 2 || w.seen[waySingle][c] < 2 {
		return wayPipe, false
	}
	if w.est[waySingle][c] < w.est[wayPipe][c] {
		return waySingle, true
	}
	return wayPipe, true
}

// learnWay folds a sample into l's chooser (learn) and logs a change of
// the faster way.
func (v *vci) learnWay(l *nodeLink, way, n int, d time.Duration) {
	w := &l.way
	c := wayClass(n)
	was, known := w.faster(c)
	w.learn(way, n, d)
	if now, ok := w.faster(c); ok && (!known || now != was) {
		v.log.Debug("node transport: large sends", "member", l.member, "from_bytes", 1<<(15+c), "single_copy", now == waySingle,
			"pipelined_ns_per_kib", w.est[wayPipe][c]*1024, "single_ns_per_kib", w.est[waySingle][c]*1024)
	}
}

// pipeDone is called when a timed pipelined send of n bytes that began at
// t0 has put its last fragment into slot: the sample is taken once the
// receiver frees that slot (pipeCheck).
func (w *wayChooser) pipeDone(t0 time.Time, n, slot int) {
	w.pipeT0, w.pipeN, w.pipeSlot = t0, n, slot
}

// pipeCheck takes the pending pipelined sample of l once the receiver has
// freed its last slot; before the sender refills that slot (filling) it
// is taken at once, the slot being free.
func (v *vci) pipeCheck(l *nodeLink, filling int) {
	w := &l.way
	if w.pipeN == 0 || filling >= 0 && filling != w.pipeSlot {
		return
	}
	if filling < 0 && atomic.LoadUint64(l.cpOut.flag(w.pipeSlot)) != 0 {
		return
	}
	v.learnWay(l, wayPipe, w.pipeN, time.Since(w.pipeT0))
	w.pipeN = 0
}
