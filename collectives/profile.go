package collectives

import (
	"sync/atomic"
	"time"

	"github.com/weft-hpc/weft/endpoint"
)

// profile counts a process's collectives per entry point, for the stats
// file fabrun stats reads (endpoint.StatsSection): the blocking calls
// and the time spent in them, the nonblocking (and persistent) ones
// started and the time their requests' Waits took. It exists only when
// the world counts (endpoint.WithStats, WEFT_STATS); every handle of a
// world shares one.
type profile struct {
	calls, ns, started, waitNS [numCallIDs]atomic.Uint64
}

const numCallIDs = int(callNeighborAlltoallv) + 1

// profileFor returns w's profile (made at the first handle); nil when
// w does not count.
func profileFor(w *endpoint.World) *profile {
	p, _ := endpoint.StatsSection(w, "collectives", func() *profile { return &profile{} })
	return p
}

// profileCount is one collective's line of the stats file.
type profileCount struct {
	Calls   uint64 `json:"calls"`             // blocking calls
	Nanos   uint64 `json:"ns"`                // time in them
	Started uint64 `json:"started,omitempty"` // nonblocking and persistent calls started
	WaitNS  uint64 `json:"wait_ns,omitempty"` // time in their requests' Waits
}

// Snapshot is the stats file's section (endpoint.Snapshotter).
func (p *profile) Snapshot() any {
	out := map[string]profileCount{}
	for id := range numCallIDs {
		pc := profileCount{Calls: p.calls[id].Load(), Nanos: p.ns[id].Load(), Started: p.started[id].Load(), WaitNS: p.waitNS[id].Load()}
		if pc.Calls > 0 || pc.Started > 0 {
			out[callID(id).String()] = pc
		}
	}
	return out
}

// record counts the call c ends (done or failed) once: a blocking one
// with its time, a nonblocking one (run on a clone) as started.
func (c *Coll) record() {
	if c.t0.IsZero() {
		return
	}
	p := c.handle().prof
	if c.own != nil {
		p.started[c.call].Add(1)
	} else {
		p.calls[c.call].Add(1)
		p.ns[c.call].Add(uint64(time.Since(c.t0)))
	}
	c.t0 = time.Time{}
}
