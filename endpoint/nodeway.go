package endpoint

import (
	"sync/atomic"
	"time"

	"github.com/weft-hpc/weft/internal/choose"
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
// (docs/perf/endpoint.md). So each link learns it from its own sends
// (internal/choose).
const (
	wayPipe   = 0 // the pipelined copy
	waySingle = 1 // the receiver's single copy
)

// wayChooser is one link's choice between the two ways: its estimates
// (choose.Pair) come from the sends themselves, each timed from its start
// until the receiver has the whole message (the FIN of a single copy, the
// receiver freeing the slot of a pipelined copy's last fragment), either
// seen while the sender drives its endpoint. Only the endpoint's
// goroutine touches it (under its guard).
type wayChooser struct {
	choose.Pair
	// a pipelined send being timed: start, bytes, slot of its last
	// fragment (n 0: none)
	pipeT0   time.Time
	pipeN    int
	pipeSlot int
	// the send being timed is typed (its sample goes to the link's fill
	// chooser, nodecopy.go), its fragments streamed
	pipeTyped, pipeStream bool
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

// pick returns the way of a send of n bytes starting at now, which is
// timed.
func (w *wayChooser) pick(n int, now time.Time) int {
	if way, ok := fixedWay(); ok {
		return way
	}
	return w.Pick(n, now)
}

// learnWay folds a sample into l's chooser and logs a change of the
// faster way.
func (v *vci) learnWay(l *nodeLink, way, n int, d time.Duration) {
	w := &l.way
	if now, changed := w.LearnFaster(way, n, d); changed {
		v.log.Debug("node transport: large sends", "member", l.member, "size_class", choose.Class(n), "bytes", n, "single_copy", now == waySingle,
			"pipelined_ns_per_kib", w.Estimate(wayPipe, n)*1024, "single_ns_per_kib", w.Estimate(waySingle, n)*1024)
	}
}

// pipeDone is called when timed pipelined send o has put its last
// fragment into slot: the sample is taken once the receiver frees that
// slot (pipeCheck).
func (w *wayChooser) pipeDone(o *copyOut, slot int) {
	w.pipeT0, w.pipeN, w.pipeSlot = o.t0, o.n, slot
	w.pipeTyped, w.pipeStream = o.u != nil, o.stream
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
	d := time.Since(w.pipeT0)
	if w.pipeTyped {
		v.learnFill(l, w.pipeStream, w.pipeN, d)
	} else {
		v.learnWay(l, wayPipe, w.pipeN, d)
	}
	w.pipeN = 0
}

// learnFill folds a typed pipelined send's sample into l's fill chooser
// and logs a change of the faster way.
func (v *vci) learnFill(l *nodeLink, stream bool, n int, d time.Duration) {
	f := &l.fill
	way := fillPlain
	if stream {
		way = fillStream
	}
	if now, changed := f.LearnFaster(way, n, d); changed {
		v.log.Debug("node transport: typed fragments", "member", l.member, "size_class", choose.Class(n), "bytes", n, "stream", now == fillStream,
			"plain_ns_per_kib", f.Estimate(fillPlain, n)*1024, "stream_ns_per_kib", f.Estimate(fillStream, n)*1024)
	}
}
