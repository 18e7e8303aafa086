package collectives

// HierShape reports how the hierarchy sees c's communicator: its
// processes, its top-level groups (nodes under the node level, else
// processes) and whether this rank's process shares a node segment with
// others (0, 0, false without a hierarchy).
func HierShape(c *Coll) (procs, tops int, node bool) {
	if c == nil || c.hier == nil {
		return 0, 0, false
	}
	return c.hier.procs, c.hier.tops, c.hier.ng != nil || (c.hier.chunk > 0 && c.hier.g != nil && c.hier.li != 0)
}

// NodeStreams reports whether c moves nbytes per rank through the node
// level's stream, and, on a process leader, whether with single copies
// (false on the other handles).
func NodeStreams(c *Coll, nbytes int) (stream, single bool) {
	if !c.streams(nbytes) {
		return false, false
	}
	return true, c.hier.ng != nil && c.singleCopy(false)
}

// SetNodeCMA makes the handles New makes from now on in this process
// offer (on) or refuse (off) single copies at the node level; it returns
// a function that restores the default.
func SetNodeCMA(on bool) (restore func()) {
	nodeCMA = func() bool { return on && cmaUsable() }
	return func() { nodeCMA = cmaUsable }
}

// ThroughMemory reports whether nonblocking request q runs through the
// process's memory (nblocal.go) rather than as a schedule of messages.
func ThroughMemory(q *Request) bool { return q.s.direct }

// SymmetricSteps reports how many symmetric node steps (hierexch.go) c's
// process has taken over c's node group (0 off a process leader).
func SymmetricSteps(c *Coll) uint64 {
	if c == nil || c.hier == nil || c.hier.ng == nil {
		return 0
	}
	return c.hier.ng.symSteps
}

// ExchBytes is the largest part a symmetric node step carries.
const ExchBytes = exchBytes

// ShareMin is shareMin: from it a rank's part of a release in one process
// is written by the rank itself.
const ShareMin = shareMin

// StreamSub is the bytes of a node stream's sub-slot (one chunk).
const StreamSub = streamSub

// StreamMin is the bytes per rank from which c's node level streams.
func StreamMin(c *Coll) int { return c.cfg.stream }

// SetStreamArrived makes the node's leader in this process run f between
// its arrival at a node stream and its wait for the other processes'; it
// returns a function that removes f.
func SetStreamArrived(f func()) (restore func()) {
	streamArrived = f
	return func() { streamArrived = nil }
}

// NodeSteps reports how many steps c's process has taken over c's node
// group, of every kind (0 off a process leader).
func NodeSteps(c *Coll) uint64 {
	if c == nil || c.hier == nil || c.hier.ng == nil {
		return 0
	}
	return c.hier.ng.step
}

// NodeReads reports how many single-copy steps (nodeRead) c's process
// has taken over c's node group (0 off a process leader).
func NodeReads(c *Coll) uint64 {
	if c == nil || c.hier == nil || c.hier.ng == nil {
		return 0
	}
	return c.hier.ng.reads
}

// PairReadMin and PairReadMax bound the calls that two processes of one
// rank each move by single copies; PairReadRootMin is where a Bcast, or
// a Reduce rooted at the node's leader, starts to (at the default
// collnodestream).
const (
	PairReadMin     = pairReadMin
	PairReadMax     = pairReadMax
	PairReadRootMin = pairReadRootMin
)

// SymmetricLocal reports whether c's small calls among the handles of
// its process take symmetric steps (hiersym.go).
func SymmetricLocal(c *Coll) bool {
	return c != nil && c.hier != nil && c.hier.procs == 1 && c.hier.g.sym
}

// Parks reports whether the waits of c's process group in process memory
// park their goroutines (park.go).
func Parks(c *Coll) bool {
	return c != nil && c.hier != nil && c.hier.g.park != nil
}

// ParkCalm is parkCalm: the calls after a large one that poll.
const ParkCalm = parkCalm

// WatchdogRunning reports whether the goroutine that wakes parked
// handles runs.
func WatchdogRunning() bool { return watchdog.running.Load() }

// StoreEstimates reports c's estimates (ns per byte; 0: not measured) of
// Allreduce calls of nbytes with streamed and with plain copies.
func StoreEstimates(c *Coll, nbytes int) (stream, plain float64) {
	p := c.stores[callAllreduce]
	if p == nil {
		return 0, 0
	}
	return p.Estimate(storeStream, nbytes), p.Estimate(storePlain, nbytes)
}

// NbCalls is nbCalls: the calls through process memory in flight at
// once, and how far a member that gives may run ahead of the others.
const NbCalls = nbCalls

// GiveMax is giveMax: the largest copy a member that gives makes.
const GiveMax = giveMax

// LastRuns reports whether c's small Allreduces among the handles of its
// process are run by their last member to arrive (hierArriveLast).
func LastRuns(c *Coll) bool { return c.lastRuns() }

// SetCrowded makes c judge its machine crowded (on) or not, as New does
// from the ranks and cores of its node.
func SetCrowded(c *Coll, on bool) { c.crowded = on }

// SetSpread makes c's selection take its ranks as spread over several
// nodes (on) or all on one, as New does from the communicator.
func SetSpread(c *Coll, on bool) { c.cfg.spread = on }
